// Checks of a DecodeProblem that need no device.
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "dispatch/arg_checks.hpp"
#include "dispatch/decode_heuristics.hpp"
#include "dispatch/variant_check.hpp"
#include "flashjit/decode.hpp"

namespace flashjit {

using dispatch::aligned;
using dispatch::is_power_of_two;

const char* to_string(SplitMerge merge) {
  switch (merge) {
    case SplitMerge::automatic: return "automatic";
    case SplitMerge::combine_kernel: return "combine_kernel";
    case SplitMerge::cluster: return "cluster";
  }
  return "unknown";
}

Strides resolved_q_strides(const DecodeProblem& p) { return contiguous_bshd(p.q_strides, p.q_len, p.heads_q, p.head_dim); }
Strides resolved_o_strides(const DecodeProblem& p) { return contiguous_bshd(p.o_strides, p.q_len, p.heads_q, p.head_dim); }
Strides resolved_cache_strides(const DecodeProblem& p, const Strides& s) {
  const int rows = p.layout == KvLayout::paged ? p.page_size : (p.cache_seqlen > 0 ? p.cache_seqlen : p.max_seqlen_k);
  return contiguous_bshd(s, rows, p.heads_kv, p.head_dim);
}

MaskKind mask_of(const DecodeProblem& p) {
  if (p.window_left >= 0) return MaskKind::sliding_window;
  if (p.chunk_size > 0) return MaskKind::chunked_causal;
  return MaskKind::causal;
}

Status check(const DecodeProblem& p) {
  std::vector<std::string> issues;
  auto add = [&](std::string s) { issues.push_back(std::move(s)); };
  if (p.batch < 1 || p.batch > 65535) add(fmt::format("batch must be in [1, 65535], got {}", p.batch));
  if (p.q_len < 1 || p.q_len > kMaxDecodeQueryLen)
    add(fmt::format("q_len must be in [1, {}] (new tokens per sequence), got {}", kMaxDecodeQueryLen, p.q_len));
  if (p.heads_q < 1 || p.heads_kv < 1) {
    add(fmt::format("heads_q and heads_kv must be >= 1, got {} and {}", p.heads_q, p.heads_kv));
  } else if (p.heads_q % p.heads_kv != 0) {
    add(fmt::format("heads_q ({}) must be a multiple of heads_kv ({})", p.heads_q, p.heads_kv));
  } else if (p.heads_kv > 65535) {
    add(fmt::format("heads_kv must be <= 65535 (grid limit), got {}", p.heads_kv));
  } else if (p.q_len >= 1 && p.q_len <= kMaxDecodeQueryLen && (p.heads_q / p.heads_kv) * p.q_len > kMaxDecodeRows) {
    add(fmt::format("group * q_len = {} * {} query rows share one KV head's CTA; at most {} are supported",
                    p.heads_q / p.heads_kv, p.q_len, kMaxDecodeRows));
  }
  if (p.head_dim < 16 || p.head_dim > 256 || p.head_dim % 16 != 0)
    add(fmt::format("head_dim must be a multiple of 16 in [16, 256], got {}", p.head_dim));
  if (p.max_seqlen_k < 1 || p.max_seqlen_k > kMaxDecodeSeqlen)
    add(fmt::format("max_seqlen_k must be in [1, 2^30] (a bound on seqlens_k), got {}", p.max_seqlen_k));
  // The key counts: seqlens_k, or with a CSR page table (page_indptr) seqlens_k or last_page_len.
  const bool csr = p.page_indptr != nullptr;
  if (csr) {
    if ((p.seqlens_k == nullptr) == (p.last_page_len == nullptr))
      add("a CSR page table (page_indptr) needs exactly one of seqlens_k (key counts) and last_page_len (tokens of "
          "each sequence's last page)");
    if (!aligned(p.page_indptr, 4)) add("page_indptr must be 4-byte aligned");
    if (p.last_page_len != nullptr && !aligned(p.last_page_len, 4)) add("last_page_len must be 4-byte aligned");
  } else {
    if (p.last_page_len != nullptr) add("last_page_len is for CSR page tables: set page_indptr too, or give seqlens_k");
    if (p.seqlens_k == nullptr) add("seqlens_k is a null pointer (int32 [batch] on the device)");
  }
  if (p.seqlens_k != nullptr && !aligned(p.seqlens_k, 4)) add("seqlens_k must be 4-byte aligned");

  if (p.layout == KvLayout::contiguous) {
    if (p.cache_seqlen < 0) add(fmt::format("cache_seqlen must be >= 0 (0: max_seqlen_k), got {}", p.cache_seqlen));
    else if (p.cache_seqlen > 0 && p.max_seqlen_k > p.cache_seqlen)
      add(fmt::format("max_seqlen_k ({}) exceeds the contiguous cache's cache_seqlen ({})", p.max_seqlen_k,
                      p.cache_seqlen));
    if (p.page_table != nullptr) add("page_table is set but layout is contiguous (use KvLayout::paged)");
    if (csr || p.last_page_len != nullptr)
      add("page_indptr and last_page_len are for a paged cache's CSR page table, but layout is contiguous");
  } else {
    // Powers of two make key -> (page, token) a shift and a mask; 256 is the largest page the kernels are
    // tested with (a page is read a row at a time, so size 1 is a plain gather).
    if (!is_power_of_two(p.page_size) || p.page_size > kMaxDecodePageSize)
      add(fmt::format("page_size must be a power of two in [1, {}], got {}", kMaxDecodePageSize, p.page_size));
    if (p.num_pages < 1) add(fmt::format("num_pages must be >= 1, got {}", p.num_pages));
    if (p.max_pages_per_seq < 1) add(fmt::format("max_pages_per_seq must be >= 1, got {}", p.max_pages_per_seq));
    else if (is_power_of_two(p.page_size) &&
             static_cast<std::int64_t>(p.max_pages_per_seq) * p.page_size < p.max_seqlen_k)
      add(fmt::format("max_seqlen_k ({}) exceeds what the page table holds (max_pages_per_seq {} x page_size {})",
                      p.max_seqlen_k, p.max_pages_per_seq, p.page_size));
    if (p.page_table == nullptr)
      add(csr ? "page_table is a null pointer (the CSR table's page indices, int32 on the device)"
              : "page_table is a null pointer (int32 [batch, max_pages_per_seq] on the device)");
    else if (!aligned(p.page_table, 4)) add("page_table must be 4-byte aligned");
  }

  struct Tensor { const char* name; const void* ptr; Strides strides; bool page_major; };
  const bool paged = p.layout == KvLayout::paged;
  const Tensor tensors[] = {{"q", p.q, resolved_q_strides(p), false},
                            {"o", p.o, resolved_o_strides(p), false},
                            {"k_cache", p.k_cache, resolved_cache_strides(p, p.k_strides), paged},
                            {"v_cache", p.v_cache, resolved_cache_strides(p, p.v_strides), paged}};
  for (const auto& t : tensors) {
    if (t.ptr == nullptr) {
      add(fmt::format("{} is a null pointer", t.name));
      continue;
    }
    if (!aligned(t.ptr, 16)) add(fmt::format("{} ({}) must be 16-byte aligned", t.name, fmt::ptr(t.ptr)));
    const std::int64_t s[] = {t.strides.batch, t.strides.seq, t.strides.head};
    const char* names[] = {t.page_major ? "page" : "batch", t.page_major ? "token" : "sequence", "head"};
    for (int i = 0; i < 3; ++i)
      if (s[i] <= 0 || s[i] % 8 != 0)
        add(fmt::format("{} {} stride must be a positive multiple of 8 elements (16 bytes), got {}", t.name,
                        names[i], s[i]));
  }
  if (p.lse != nullptr && !aligned(p.lse, 4)) add("lse must be 4-byte aligned");
  if (p.workspace != nullptr && !aligned(p.workspace, 16))
    add(fmt::format("workspace ({}) must be 16-byte aligned", fmt::ptr(p.workspace)));
  if (p.workspace == nullptr && p.workspace_bytes != 0)
    add(fmt::format("workspace is a null pointer but workspace_bytes is {}", p.workspace_bytes));
  if (p.window_left < -1) add(fmt::format("window_left must be >= 0 or -1 (no window), got {}", p.window_left));
  if (p.chunk_size < 0) add(fmt::format("chunk_size must be > 0 or 0 (no chunks), got {}", p.chunk_size));
  if (p.chunk_size > 0 && p.window_left >= 0)
    add(fmt::format("chunk_size {} and window_left {}: a decode takes a sliding window or chunks, not both",
                    p.chunk_size, p.window_left));
  if (p.softmax_scale && !(*p.softmax_scale > 0.f && std::isfinite(*p.softmax_scale)))
    add(fmt::format("softmax_scale must be positive and finite, got {}", *p.softmax_scale));
  for (auto& issue : dispatch::variant_issues(p.softcap, p.alibi_slopes, p.alibi_slopes_batch_stride, p.sinks,
                                                        p.score_mod, p.mask_mod))
    add(std::move(issue));
  for (auto& issue :
       dispatch::bias_issues(p.bias, p.bias_type, p.bias_strides, p.batch, p.heads_q, p.q_len, p.max_seqlen_k))
    add(std::move(issue));
  if (p.num_splits < 0 || p.num_splits > dispatch::kMaxDecodeSplits)
    add(fmt::format("num_splits must be 0 (planned) or in [1, {}], got {}", dispatch::kMaxDecodeSplits, p.num_splits));
  const int merge = static_cast<int>(p.split_merge);
  if (merge < static_cast<int>(SplitMerge::automatic) || merge > static_cast<int>(SplitMerge::cluster))
    add(fmt::format("split_merge must be automatic (0), combine_kernel (1) or cluster (2), got {}", merge));
  else if (p.split_merge == SplitMerge::cluster && p.num_splits > kMaxDecodeClusterSplits)
    add(fmt::format("split_merge cluster takes at most {} splits (one thread-block cluster), but num_splits is {}",
                    kMaxDecodeClusterSplits, p.num_splits));
  if (p.new_len < 0) add(fmt::format("new_len must be >= 0 (0: no fused append), got {}", p.new_len));
  else if (p.new_len == 0 && (p.k_new != nullptr || p.v_new != nullptr || p.seqlens_out != nullptr))
    add("k_new, v_new or seqlens_out is set but new_len is 0 (the new tokens per sequence to append)");
  if (issues.empty()) return {};
  std::string msg = fmt::format("invalid decode problem ({} cache):", to_string(p.layout));
  for (const auto& i : issues) msg += "\n  " + i;
  return Error(ErrorCode::invalid_argument, msg);
}

Status check(const MergeProblem& p) {
  std::vector<std::string> issues;
  auto add = [&](std::string s) { issues.push_back(std::move(s)); };
  if (p.batch < 1) add(fmt::format("batch must be >= 1, got {}", p.batch));
  if (p.seqlen < 1) add(fmt::format("seqlen must be >= 1, got {}", p.seqlen));
  if (p.heads < 1) add(fmt::format("heads must be >= 1, got {}", p.heads));
  if (p.head_dim < 8 || p.head_dim > 256 || p.head_dim % 8 != 0)
    add(fmt::format("head_dim must be a multiple of 8 in [8, 256], got {}", p.head_dim));
  if (p.num_states < 1 || p.num_states > kMaxMergeStates)
    add(fmt::format("num_states must be in [1, {}], got {}", kMaxMergeStates, p.num_states));
  const bool shape_ok = issues.empty();
  const Strides in = contiguous_bshd(p.in_strides, shape_ok ? p.seqlen : 1, shape_ok ? p.heads : 1, p.head_dim);
  const Strides out = contiguous_bshd(p.o_strides, shape_ok ? p.seqlen : 1, shape_ok ? p.heads : 1, p.head_dim);
  for (int i = 0; shape_ok && i < p.num_states; ++i) {
    if (p.o_in[i] == nullptr) add(fmt::format("o_in[{}] is a null pointer", i));
    else if (!aligned(p.o_in[i], 2)) add(fmt::format("o_in[{}] must be 2-byte aligned", i));
    if (p.lse_in[i] == nullptr) add(fmt::format("lse_in[{}] is a null pointer", i));
    else if (!aligned(p.lse_in[i], 4)) add(fmt::format("lse_in[{}] must be 4-byte aligned", i));
    if (p.o_in[i] != nullptr && p.o_in[i] == p.o)
      add(fmt::format("o aliases o_in[{}]: the merge reads every input row while writing the output", i));
  }
  if (p.o == nullptr) add("o is a null pointer");
  else if (!aligned(p.o, 2)) add("o must be 2-byte aligned");
  if (p.lse != nullptr && !aligned(p.lse, 4)) add("lse must be 4-byte aligned");
  const std::int64_t in_s[] = {in.batch, in.seq, in.head}, out_s[] = {out.batch, out.seq, out.head};
  const char* names[] = {"batch", "sequence", "head"};
  for (int i = 0; i < 3; ++i) {
    if (in_s[i] <= 0) add(fmt::format("in_strides {} stride must be positive, got {}", names[i], in_s[i]));
    if (out_s[i] <= 0) add(fmt::format("o_strides {} stride must be positive, got {}", names[i], out_s[i]));
  }
  if (issues.empty()) return {};
  std::string msg = "invalid merge problem:";
  for (const auto& i : issues) msg += "\n  " + i;
  return Error(ErrorCode::invalid_argument, msg);
}

}  // namespace flashjit
