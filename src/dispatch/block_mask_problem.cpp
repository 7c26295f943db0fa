// BlockMaskProblem (flashjit/block_mask.hpp): its checks, its outputs' shape and view, and the kernel that makes it.
#include "dispatch/block_mask_problem.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "dispatch/variant_check.hpp"

namespace flashjit {

namespace {

// The kernel keeps one byte per key block in shared memory (templates/block_mask/kernel.cuh).
constexpr int kMaxKvBlocks = 48 * 1024;

}  // namespace

BlockMaskShape block_mask_shape(const BlockMaskProblem& p) {
  BlockMaskShape s;
  if (p.q_block > 0) s.num_q_blocks = static_cast<int>((static_cast<std::int64_t>(p.seqlen_q) + p.q_block - 1) / p.q_block);
  if (p.kv_block > 0)
    s.num_kv_blocks = static_cast<int>((static_cast<std::int64_t>(p.seqlen_k) + p.kv_block - 1) / p.kv_block);
  return s;
}

BlockMask block_mask_of(const BlockMaskProblem& p) {
  const BlockMaskShape s = block_mask_shape(p);
  BlockMask m;
  m.kv_num_blocks = p.kv_num_blocks, m.kv_indices = p.kv_indices;
  m.full_kv_num_blocks = p.full_kv_num_blocks, m.full_kv_indices = p.full_kv_indices;
  m.q_block = p.q_block, m.kv_block = p.kv_block;
  m.num_q_blocks = s.num_q_blocks, m.num_kv_blocks = std::max(s.num_kv_blocks, 1);
  m.head_stride = p.heads > 1 ? s.num_q_blocks : 0;
  m.batch_stride = p.batch > 1 ? static_cast<std::int64_t>(p.heads) * s.num_q_blocks : 0;
  return m;
}

Status check(const BlockMaskProblem& p) {
  std::vector<std::string> issues;
  auto add = [&](std::string s) { issues.push_back(std::move(s)); };
  if (p.batch < 1 || p.batch > 65535) add(fmt::format("batch must be in [1, 65535], got {}", p.batch));
  if (p.heads < 1 || p.heads > 65535) add(fmt::format("heads must be in [1, 65535], got {}", p.heads));
  if (p.seqlen_q < 1 || p.seqlen_k < 1)
    add(fmt::format("seqlen_q and seqlen_k must be >= 1, got {} and {}", p.seqlen_q, p.seqlen_k));
  for (const auto& [value, name] : {std::pair{p.q_block, "q_block"}, std::pair{p.kv_block, "kv_block"}})
    if (value < 16 || value > kMaxBlockMaskBlock || value % 16 != 0)
      add(fmt::format("{} must be a multiple of 16 in [16, {}], got {}", name, kMaxBlockMaskBlock, value));
  if (issues.empty()) {
    const BlockMaskShape s = block_mask_shape(p);
    if (s.num_kv_blocks > kMaxKvBlocks)
      add(fmt::format("seqlen_k / kv_block gives {} key blocks; at most {} (a larger kv_block)", s.num_kv_blocks,
                      kMaxKvBlocks));
    if (s.num_q_blocks > 65535 * 4)
      add(fmt::format("seqlen_q / q_block gives {} query blocks; at most {}", s.num_q_blocks, 65535 * 4));
    const __int128 entries = static_cast<__int128>(p.batch) * p.heads * s.num_q_blocks * s.num_kv_blocks;
    if (entries > (static_cast<__int128>(1) << 40)) add("the block mask has more than 2^40 index entries");
  }
  const std::pair<int*, const char*> outputs[] = {{p.kv_num_blocks, "kv_num_blocks"},
                                                  {p.kv_indices, "kv_indices"},
                                                  {p.full_kv_num_blocks, "full_kv_num_blocks"},
                                                  {p.full_kv_indices, "full_kv_indices"}};
  for (int i = 0; i < 4; ++i) {
    const auto [ptr, name] = outputs[i];
    if (ptr == nullptr && i < 2) add(fmt::format("{} is a null pointer (an output)", name));
    if (ptr != nullptr && reinterpret_cast<std::uintptr_t>(ptr) % 4 != 0)
      add(fmt::format("{} ({}) must be 4-byte aligned (int32)", name, fmt::ptr(ptr)));
  }
  if ((p.full_kv_num_blocks == nullptr) != (p.full_kv_indices == nullptr))
    add("full_kv_num_blocks and full_kv_indices go together: set both or neither");
  for (auto& issue : dispatch::variant_issues(0.f, nullptr, 0, nullptr, nullptr, p.mask_mod)) add(std::move(issue));
  if (p.alignment != Alignment::bottom_right && p.alignment != Alignment::top_left)
    add(fmt::format("alignment must be bottom_right (0) or top_left (1), got {}", static_cast<int>(p.alignment)));
  if (p.mask == MaskKind::none && p.mask_mod == nullptr)
    add("a block mask needs a mask_mod or a mask (none of either lists every block full)");
  if (static_cast<int>(p.mask) < 0 || static_cast<int>(p.mask) > static_cast<int>(MaskKind::chunked_causal))
    add(fmt::format("mask must be one of MaskKind's values, got {}", static_cast<int>(p.mask)));
  for (auto& issue : dispatch::mask_constant_issues(p.mask, p.window_left, p.window_right, p.chunk_size))
    add(std::move(issue));
  if (issues.empty()) return {};
  std::string msg = "invalid block mask problem:";
  for (const auto& i : issues) msg += "\n  " + i;
  return Error(ErrorCode::invalid_argument, msg);
}

namespace dispatch {

BlockMaskKernelConfig block_mask_kernel(const BlockMaskProblem& p, const Arch& arch) {
  BlockMaskKernelConfig c;
  c.arch = arch;
  c.mask = p.mask;
  c.mask_mod = snippet_text(p.mask_mod);
  c.warps = 8;
  return c;
}

}  // namespace dispatch

}  // namespace flashjit
