#include "dispatch/block_mask_check.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <utility>

namespace flashjit::dispatch {

namespace {

constexpr std::int64_t kMaxEntries = std::int64_t{1} << 40;

std::int64_t blocks_of(int n, int block) { return (static_cast<std::int64_t>(n) + block - 1) / block; }

}  // namespace

std::vector<std::string> block_mask_issues(const AttentionProblem& p) {
  std::vector<std::string> out;
  const BlockMask& m = p.block_mask;
  if (!m.active()) {
    if (m.kv_indices != nullptr || m.full_kv_num_blocks != nullptr || m.full_kv_indices != nullptr)
      out.push_back("block_mask: kv_indices or full_kv_* is set but kv_num_blocks is null (null: no block mask)");
    return out;
  }
  if (p.varlen() || p.paged())
    out.push_back("block_mask is for dense batches: not with cu_seqlens_q / cu_seqlens_k or a page_table");
  const std::pair<const int*, const char*> arrays[] = {{m.kv_num_blocks, "kv_num_blocks"},
                                                       {m.kv_indices, "kv_indices"},
                                                       {m.full_kv_num_blocks, "full_kv_num_blocks"},
                                                       {m.full_kv_indices, "full_kv_indices"}};
  for (const auto& [ptr, name] : arrays)
    if (ptr != nullptr && reinterpret_cast<std::uintptr_t>(ptr) % 4 != 0)
      out.push_back(fmt::format("block_mask.{} ({}) must be 4-byte aligned (int32)", name, fmt::ptr(ptr)));
  if (m.kv_indices == nullptr) out.push_back("block_mask.kv_indices is a null pointer (kv_num_blocks is set)");
  if ((m.full_kv_num_blocks == nullptr) != (m.full_kv_indices == nullptr))
    out.push_back("block_mask.full_kv_num_blocks and full_kv_indices go together: set both or neither");
  bool sizes = true;
  for (const auto& [value, name] : {std::pair{m.q_block, "q_block"}, std::pair{m.kv_block, "kv_block"}})
    if (value < 16 || value > kMaxBlockMaskBlock || value % 16 != 0) {
      sizes = false;
      out.push_back(fmt::format("block_mask.{} must be a multiple of 16 in [16, {}], got {}", name,
                                kMaxBlockMaskBlock, value));
    }
  if (sizes) {
    if (m.num_q_blocks < blocks_of(p.seqlen_q, m.q_block))
      out.push_back(fmt::format("block_mask.num_q_blocks ({}) must cover seqlen_q: at least ceil({} / {}) = {}",
                                m.num_q_blocks, p.seqlen_q, m.q_block, blocks_of(p.seqlen_q, m.q_block)));
    if (m.num_kv_blocks < std::max<std::int64_t>(blocks_of(p.seqlen_k, m.kv_block), 1))
      out.push_back(fmt::format("block_mask.num_kv_blocks ({}) must cover seqlen_k: at least ceil({} / {}) = {}",
                                m.num_kv_blocks, p.seqlen_k, m.kv_block,
                                std::max<std::int64_t>(blocks_of(p.seqlen_k, m.kv_block), 1)));
  }
  if (m.batch_stride < 0 || m.head_stride < 0)
    out.push_back(fmt::format("block_mask strides must be >= 0 (0 broadcasts), got batch {} and head {}",
                              m.batch_stride, m.head_stride));
  else if (m.num_q_blocks > 0 && m.num_kv_blocks > 0) {
    // The last count's index, and the last index entry's, in 128-bit arithmetic.
    const __int128 last = static_cast<__int128>(std::max(p.batch - 1, 0)) * m.batch_stride +
                          static_cast<__int128>(std::max(p.heads_q - 1, 0)) * m.head_stride + m.num_q_blocks;
    if (last * m.num_kv_blocks > kMaxEntries)
      out.push_back("block_mask strides and sizes put its last index entry past 2^40 entries");
  }
  return out;
}

}  // namespace flashjit::dispatch
