// Checks of an AppendProblem that need no device.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "dispatch/arg_checks.hpp"
#include "flashjit/append.hpp"

namespace flashjit {

using dispatch::aligned;
using dispatch::is_power_of_two;

Strides resolved_new_strides(const AppendProblem& p, const Strides& s) {
  if (!p.ragged()) return contiguous_bshd(s, p.new_len, p.heads_kv, p.head_dim);
  Strides out = contiguous_bshd(s, 1, p.heads_kv, p.head_dim);
  out.batch = s.batch;  // ragged: rows are addressed by cu_seqlens alone (check() wants 0)
  return out;
}

Strides resolved_cache_strides(const AppendProblem& p, const Strides& s) {
  const int rows = p.layout == KvLayout::paged ? p.page_size : p.cache_seqlen;
  return contiguous_bshd(s, rows, p.heads_kv, p.head_dim);
}

int append_capacity(const AppendProblem& p) {
  if (p.layout == KvLayout::contiguous) return p.cache_seqlen;
  const std::int64_t c = static_cast<std::int64_t>(p.max_pages_per_seq) * p.page_size;
  return static_cast<int>(std::min<std::int64_t>(c, std::numeric_limits<int>::max()));
}

Status check(const AppendProblem& p) {
  std::vector<std::string> issues;
  auto add = [&](std::string s) { issues.push_back(std::move(s)); };
  if (p.batch < 1 || p.batch > 65535) add(fmt::format("batch must be in [1, 65535] (grid limit), got {}", p.batch));
  if (p.heads_kv < 1) add(fmt::format("heads_kv must be >= 1, got {}", p.heads_kv));
  if (p.head_dim < 8 || p.head_dim > kMaxAppendHeadDim || p.head_dim % 8 != 0)
    add(fmt::format("head_dim must be a multiple of 8 in [8, {}], got {}", kMaxAppendHeadDim, p.head_dim));
  if (p.new_len < 1) add(fmt::format("new_len must be >= 1 (new tokens per sequence, or their bound), got {}", p.new_len));
  else if (p.heads_kv >= 1 && p.head_dim >= 8 &&
           static_cast<std::int64_t>(p.new_len) * p.heads_kv * (p.head_dim / 8) > kMaxAppendVectorsPerSequence)
    add(fmt::format("new_len * heads_kv * head_dim / 8 = {} exceeds 2^30 (16-byte vectors of one sequence's new rows)",
                    static_cast<std::int64_t>(p.new_len) * p.heads_kv * (p.head_dim / 8)));
  if (p.ragged()) {
    if (!aligned(p.cu_seqlens, 4)) add("cu_seqlens must be 4-byte aligned");
    if (p.total_new < 1) add(fmt::format("total_new must be >= 1 (rows of the ragged k and v), got {}", p.total_new));
    if (p.k_strides.batch != 0 || p.v_strides.batch != 0)
      add(fmt::format("ragged k and v are [total_new, Hkv, D]: their batch strides must be 0, got {} and {}",
                      p.k_strides.batch, p.v_strides.batch));
  } else if (p.total_new != 0) {
    add(fmt::format("total_new ({}) is for ragged rows (cu_seqlens); dense rows take 0", p.total_new));
  }
  // The lengths: cache_seqlens, or with a CSR page table (page_indptr) cache_seqlens or last_page_len.
  if (p.csr()) {
    if ((p.cache_seqlens == nullptr) == (p.last_page_len == nullptr))
      add("a CSR page table (page_indptr) needs exactly one of cache_seqlens (the lengths before the append) and "
          "last_page_len (the tokens of each sequence's last page after it)");
    if (!aligned(p.page_indptr, 4)) add("page_indptr must be 4-byte aligned");
    if (p.last_page_len != nullptr && !aligned(p.last_page_len, 4)) add("last_page_len must be 4-byte aligned");
  } else {
    if (p.last_page_len != nullptr)
      add("last_page_len is for CSR page tables: set page_indptr too, or give cache_seqlens");
    if (p.cache_seqlens == nullptr) add("cache_seqlens is a null pointer (int32 [batch] on the device)");
  }
  if (p.cache_seqlens != nullptr && !aligned(p.cache_seqlens, 4)) add("cache_seqlens must be 4-byte aligned");
  if (p.seqlens_out != nullptr && !aligned(p.seqlens_out, 4)) add("seqlens_out must be 4-byte aligned");
  if (p.seqlens_out != nullptr && p.seqlens_out == p.cache_seqlens)
    add("seqlens_out is cache_seqlens: every CTA of a sequence reads its length while one writes the new one; "
        "give another buffer");
  if (p.seqlens_out != nullptr && p.seqlens_out == p.last_page_len)
    add("seqlens_out is last_page_len: every CTA of a sequence reads it while one writes the new length; give "
        "another buffer");

  const bool paged = p.layout == KvLayout::paged;
  if (p.layout != KvLayout::contiguous && !paged) {
    add(fmt::format("layout must be contiguous (0) or paged (1), got {}", static_cast<int>(p.layout)));
  } else if (!paged) {
    if (p.cache_seqlen < 1) add(fmt::format("cache_seqlen must be >= 1 (the contiguous cache's capacity), got {}",
                                            p.cache_seqlen));
    if (p.page_table != nullptr) add("page_table is set but layout is contiguous (use KvLayout::paged)");
    if (p.csr() || p.last_page_len != nullptr)
      add("page_indptr and last_page_len are for a paged cache's CSR page table, but layout is contiguous");
  } else {
    if (!is_power_of_two(p.page_size) || p.page_size > kMaxAppendPageSize)
      add(fmt::format("page_size must be a power of two in [1, {}], got {}", kMaxAppendPageSize, p.page_size));
    if (p.num_pages < 1) add(fmt::format("num_pages must be >= 1, got {}", p.num_pages));
    if (p.max_pages_per_seq < 1) add(fmt::format("max_pages_per_seq must be >= 1, got {}", p.max_pages_per_seq));
    if (p.page_table == nullptr)
      add(p.csr() ? "page_table is a null pointer (the CSR table's page indices, int32 on the device)"
                  : "page_table is a null pointer (int32 [batch, max_pages_per_seq] on the device)");
    else if (!aligned(p.page_table, 4)) add("page_table must be 4-byte aligned");
  }

  struct Tensor { const char* name; const void* ptr; Strides strides; };
  const char* new_dims[3] = {"batch", "token", "head"};
  const char* cache_dims[3] = {paged ? "page" : "batch", paged ? "token" : "sequence", "head"};
  const Tensor tensors[] = {{"k", p.k, resolved_new_strides(p, p.k_strides)},
                            {"v", p.v, resolved_new_strides(p, p.v_strides)},
                            {"k_cache", p.k_cache, resolved_cache_strides(p, p.k_cache_strides)},
                            {"v_cache", p.v_cache, resolved_cache_strides(p, p.v_cache_strides)}};
  for (int t = 0; t < 4; ++t) {
    const Tensor& x = tensors[t];
    if (x.ptr == nullptr) {
      add(fmt::format("{} is a null pointer", x.name));
      continue;
    }
    if (!aligned(x.ptr, 16)) add(fmt::format("{} ({}) must be 16-byte aligned", x.name, fmt::ptr(x.ptr)));
    const std::int64_t s[] = {x.strides.batch, x.strides.seq, x.strides.head};
    for (int i = 0; i < 3; ++i) {
      if (i == 0 && t < 2 && p.ragged()) continue;  // checked above
      if (s[i] <= 0 || s[i] % 8 != 0)
        add(fmt::format("{} {} stride must be a positive multiple of 8 elements (16 bytes), got {}", x.name,
                        (t < 2 ? new_dims : cache_dims)[i], s[i]));
    }
  }
  if (p.k_cache != nullptr && p.k_cache == p.v_cache)
    add("k_cache and v_cache are one tensor: the keys and values would overwrite each other");
  if (issues.empty()) return {};
  std::string msg = fmt::format("invalid append problem ({} cache{}{}):", to_string(p.layout),
                                p.csr() ? ", CSR page table" : "", p.ragged() ? ", ragged" : "");
  for (const auto& i : issues) msg += "\n  " + i;
  return Error(ErrorCode::invalid_argument, msg);
}

}  // namespace flashjit
