#include "launch/append_launch.hpp"

#include <fmt/format.h>

#include "cuda/driver.hpp"
#include "dispatch/append_plan.hpp"
#include "launch/launch_kernel.hpp"

namespace flashjit::launch {

AppendParams make_append_params(const AppendProblem& p) {
  const Strides k = resolved_new_strides(p, p.k_strides), v = resolved_new_strides(p, p.v_strides),
                kc = resolved_cache_strides(p, p.k_cache_strides), vc = resolved_cache_strides(p, p.v_cache_strides);
  AppendParams a{};
  a.k = p.k, a.v = p.v, a.k_cache = p.k_cache, a.v_cache = p.v_cache;
  a.cu_seqlens = p.cu_seqlens, a.cache_seqlens = p.cache_seqlens, a.seqlens_out = p.seqlens_out;
  if (p.layout == KvLayout::paged)
    a.page_table = p.page_table, a.page_indptr = p.page_indptr, a.last_page_len = p.csr() ? p.last_page_len : nullptr;
  a.k_batch = p.ragged() ? 0 : k.batch, a.k_seq = k.seq, a.k_head = k.head;
  a.v_batch = p.ragged() ? 0 : v.batch, a.v_seq = v.seq, a.v_head = v.head;
  a.kc_batch = kc.batch, a.kc_seq = kc.seq, a.kc_head = kc.head;
  a.vc_batch = vc.batch, a.vc_seq = vc.seq, a.vc_head = vc.head;
  a.heads_kv = p.heads_kv, a.new_len = p.new_len, a.capacity = append_capacity(p);
  if (p.layout == KvLayout::paged) a.num_pages = p.num_pages, a.page_table_stride = p.max_pages_per_seq;
  return a;
}

Status launch_append(CUfunction append, const AppendKernelConfig& config, const AppendProblem& p, bool pdl) {
  // The page size is compiled into the kernel: one of another page size would write wrong rows.
  const int page_size = p.layout == KvLayout::paged ? p.page_size : 0;
  if (config.layout != p.layout || config.page_size != page_size || config.head_dim != p.head_dim ||
      config.dtype != p.dtype)
    return Error(ErrorCode::invalid_argument,
                 fmt::format("append kernel {} does not match the problem's {} d{} {} cache{}", readable_name(config),
                             to_string(p.dtype), p.head_dim, to_string(p.layout),
                             page_size > 0 ? fmt::format(" of {}-token pages", page_size) : ""));
  auto api = cuda::api();
  if (!api.ok()) return api.error();
  AppendParams params = make_append_params(p);
  void* args[] = {&params};
  Geometry g;
  g.grid = {dispatch::append_blocks(config, p), static_cast<unsigned>(p.batch), 2};
  g.threads = threads_per_cta(config);
  g.after_previous = config.arch.sm >= 90 && pdl;
  return launch_kernel(**api, append, g, static_cast<CUstream>(p.stream), args, "cuLaunchKernelEx(append)");
}

}  // namespace flashjit::launch
