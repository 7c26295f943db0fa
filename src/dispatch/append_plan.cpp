#include "dispatch/append_plan.hpp"

#include <algorithm>

namespace flashjit::dispatch {
namespace {

// Threads one SM holds (2048 on sm_80 to sm_100; sm_86 / sm_89 / sm_12x hold 1536, for which this only means
// that the longer vectors start a little later).
constexpr std::int64_t kThreadsPerSm = 2048;

}  // namespace

std::int64_t append_vectors(const AppendProblem& p) {
  return 2 * static_cast<std::int64_t>(p.batch) * p.new_len * p.heads_kv * (p.head_dim / 8);
}

AppendKernelConfig append_kernel_config(DType dtype, int head_dim, KvLayout layout, int page_size, const Arch& arch,
                                        std::int64_t vectors, int sms) {
  AppendKernelConfig c;
  c.arch = arch, c.dtype = dtype, c.head_dim = head_dim, c.layout = layout;
  c.page_size = layout == KvLayout::paged ? page_size : 0;
  // Four warps: CTAs small enough that a sequence of one new token (Hkv * D / 8 vectors per K or V, 128 for
  // llama3's 8 x 128) fills about one CTA, and sixteen of them fill an SM.
  c.warps = kAppendWarps;
  // Vectors per thread: a copy reaches HBM bandwidth with about 64 KB in flight per SM. With work for every
  // thread of the GPU twice over or more, two loads per thread before the first store at full occupancy (32
  // registers) give that: measured on the H200 (bench/results/2026-12-03-session26), 0.97-1.04 of cudaMemcpy's
  // bandwidth, where four per thread (68 registers, 7 CTAs of 4 warps) reach 0.79-0.89 and eight 0.57-0.66.
  // Below that, one vector per thread spreads a small append over the most SMs (it is bound by latency).
  const std::int64_t wave = std::max(sms, 1) * kThreadsPerSm;
  c.vectors = vectors >= 2 * wave ? 2 : 1;
  return c;
}

AppendKernelConfig append_kernel(const AppendProblem& p, const Arch& arch, int sms) {
  return append_kernel_config(p.dtype, p.head_dim, p.layout, p.page_size, arch, append_vectors(p), sms);
}

std::vector<AppendKernelConfig> append_prepare_kernels(DType dtype, int head_dim, KvLayout layout, int page_size,
                                                       const Arch& arch) {
  std::vector<AppendKernelConfig> out;
  for (int vectors : {1, 2}) {
    AppendKernelConfig c = append_kernel_config(dtype, head_dim, layout, page_size, arch, 0, 1);
    c.vectors = vectors;
    out.push_back(c);
  }
  return out;
}

unsigned append_blocks(const AppendKernelConfig& c, const AppendProblem& p) {
  const std::int64_t per_sequence = static_cast<std::int64_t>(p.new_len) * p.heads_kv * (p.head_dim / 8);
  const std::int64_t per_cta = 32 * c.warps * c.vectors;
  return static_cast<unsigned>(std::max<std::int64_t>((per_sequence + per_cta - 1) / per_cta, 1));
}

AppendProblem append_of(const DecodeProblem& d, int* seqlens_out) {
  AppendProblem a;
  a.dtype = d.dtype, a.batch = d.batch, a.heads_kv = d.heads_kv, a.head_dim = d.head_dim;
  a.k = d.k_new, a.v = d.v_new, a.k_strides = d.k_new_strides, a.v_strides = d.v_new_strides;
  a.new_len = d.new_len;
  a.cache_seqlens = d.seqlens_k, a.seqlens_out = seqlens_out;
  a.layout = d.layout;
  // The decode's cache pointers are const (it only reads them); the fused call writes the new rows into them.
  a.k_cache = const_cast<void*>(d.k_cache), a.v_cache = const_cast<void*>(d.v_cache);
  a.k_cache_strides = resolved_cache_strides(d, d.k_strides), a.v_cache_strides = resolved_cache_strides(d, d.v_strides);
  if (d.layout == KvLayout::contiguous) {
    a.cache_seqlen = d.cache_seqlen > 0 ? d.cache_seqlen : d.max_seqlen_k;
  } else {
    a.page_table = d.page_table, a.num_pages = d.num_pages, a.page_size = d.page_size;
    a.max_pages_per_seq = d.max_pages_per_seq;
    // A CSR table: with last_page_len (seqlens_k null) the lengths after the append, as the decode reads them.
    a.page_indptr = d.page_indptr, a.last_page_len = d.last_page_len;
  }
  a.check_pages = d.check_pages;
  a.stream = d.stream;
  return a;
}

std::size_t fused_lengths_bytes(const DecodeProblem& p) {
  if (p.new_len <= 0 || p.seqlens_out != nullptr || p.last_page_len != nullptr) return 0;
  return (static_cast<std::size_t>(std::max(p.batch, 1)) * sizeof(int) + 255) / 256 * 256;
}

}  // namespace flashjit::dispatch
