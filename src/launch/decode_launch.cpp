#include "launch/decode_launch.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "cuda/driver.hpp"
#include "launch/launch.hpp"
#include "launch/launch_kernel.hpp"

namespace flashjit::launch {
namespace {

static_assert(DecodeParams::kMaxClusterSplits == kMaxDecodeClusterSplits, "the kernel's cluster bound is the API's");

// Decode and merge kernels are launched with programmatic dependent launch on sm_90: each may start (launch,
// setup) while the kernel before it on the stream finishes, and waits for it in-kernel before its first
// global access; each lets the kernel behind it start the same way.
bool pdl_for(const Arch& arch, bool pdl) { return arch.sm >= 90 && pdl; }

Geometry geometry(Grid grid, int threads, int smem, bool after_previous, unsigned cluster_x = 0) {
  Geometry g;
  g.grid = grid, g.threads = threads, g.smem = smem, g.after_previous = after_previous, g.cluster_x = cluster_x;
  return g;
}

float scale_of(const DecodeProblem& p) {
  return p.softmax_scale.value_or(1.0f / std::sqrt(static_cast<float>(p.head_dim)));
}

}  // namespace

DecodeParams make_decode_params(const DecodeProblem& p, const dispatch::DecodePlan& plan, void* workspace) {
  const Strides q = resolved_q_strides(p), o = resolved_o_strides(p), k = resolved_cache_strides(p, p.k_strides),
                v = resolved_cache_strides(p, p.v_strides);
  DecodeParams d{};
  d.q = p.q, d.o = p.o, d.lse = p.lse, d.k = p.k_cache, d.v = p.v_cache;
  d.seqlens_k = p.seqlens_k;
  d.page_table = p.layout == KvLayout::paged ? p.page_table : nullptr;
  if (p.layout == KvLayout::paged) d.page_indptr = p.page_indptr, d.last_page_len = p.last_page_len;
  if (plan.splits.num_splits > 1 && !plan.split.cluster_merge) {
    d.ws_o = static_cast<float*>(workspace);
    d.ws_lse = reinterpret_cast<float*>(static_cast<unsigned char*>(workspace) + plan.lse_offset);
  }
  d.q_batch = q.batch, d.q_seq = q.seq, d.q_head = q.head;
  d.o_batch = o.batch, d.o_seq = o.seq, d.o_head = o.head;
  d.k_batch = k.batch, d.k_seq = k.seq, d.k_head = k.head;
  d.v_batch = v.batch, d.v_seq = v.seq, d.v_head = v.head;
  d.batch = p.batch, d.q_len = p.q_len, d.heads_q = p.heads_q, d.heads_kv = p.heads_kv;
  d.group = p.heads_q / p.heads_kv;
  d.max_seqlen_k = p.max_seqlen_k;
  if (p.layout == KvLayout::paged) {
    d.max_pages_per_seq = p.max_pages_per_seq;
    d.num_pages = p.num_pages;
  }
  d.num_splits = plan.splits.num_splits, d.keys_per_split = plan.splits.keys_per_split;
  d.window_left = p.window_left;
  d.chunk_size = p.chunk_size;
  d.softmax_scale = scale_of(p);
  d.scale_log2 = d.softmax_scale * kLog2e;
  if (p.softcap > 0.f) d.softcap = p.softcap, d.softcap_in = d.softmax_scale / p.softcap;
  d.alibi_slopes = p.alibi_slopes, d.alibi_batch = p.alibi_slopes_batch_stride;
  d.sinks = p.sinks;
  d.aux = aux_params(p.aux);
  set_bias(d, p.bias, p.bias_type, p.bias_strides);
  return d;
}

CombineParams make_split_combine_params(const DecodeProblem& p, const dispatch::DecodePlan& plan, void* workspace) {
  CombineParams c{};
  const long long rows = 1LL * p.batch * p.q_len * p.heads_q;  // of one split
  auto* ws_o = static_cast<float*>(workspace);
  auto* ws_lse = reinterpret_cast<float*>(static_cast<unsigned char*>(workspace) + plan.lse_offset);
  c.num_states = plan.splits.num_splits;
  c.o_in[0] = ws_o, c.lse_in[0] = ws_lse;  // state i at i * o_state, i * lse_state elements further
  c.o_state = rows * p.head_dim, c.lse_state = rows;
  const Strides o = resolved_o_strides(p);
  c.o = p.o, c.lse = p.lse;
  c.in_head = p.head_dim, c.in_seq = 1LL * p.heads_q * p.head_dim, c.in_batch = p.q_len * c.in_seq;
  c.o_batch = o.batch, c.o_seq = o.seq, c.o_head = o.head;
  c.batch = p.batch, c.seqlen = p.q_len, c.heads = p.heads_q;
  c.sinks = p.sinks;
  return c;
}

CombineParams make_merge_params(const MergeProblem& p) {
  CombineParams c{};
  c.num_states = p.num_states;
  for (int i = 0; i < p.num_states; ++i) c.o_in[i] = p.o_in[i], c.lse_in[i] = p.lse_in[i];
  const Strides in = contiguous_bshd(p.in_strides, p.seqlen, p.heads, p.head_dim);
  const Strides o = contiguous_bshd(p.o_strides, p.seqlen, p.heads, p.head_dim);
  c.o = p.o, c.lse = p.lse;
  c.in_batch = in.batch, c.in_seq = in.seq, c.in_head = in.head;
  c.o_batch = o.batch, c.o_seq = o.seq, c.o_head = o.head;
  c.batch = p.batch, c.seqlen = p.seqlen, c.heads = p.heads;
  return c;
}

unsigned combine_blocks(const CombineKernelConfig& config, long long rows) {
  return static_cast<unsigned>((rows + config.warps - 1) / config.warps);
}

Status launch_decode(CUfunction split, CUfunction combine, const DecodeProblem& p, const dispatch::DecodePlan& plan,
                     void* workspace, bool pdl) {
  // The page size is compiled into the split kernel: a kernel of another page size would read wrong rows.
  const int page_size = p.layout == KvLayout::paged ? p.page_size : 0;
  if (plan.split.layout != p.layout || plan.split.page_size != page_size)
    return Error(ErrorCode::invalid_argument,
                 fmt::format("decode kernel {} does not match the problem's {} cache{}", readable_name(plan.split),
                             to_string(p.layout), page_size > 0 ? fmt::format(" of {}-token pages", page_size) : ""));
  // The kernel's addressing relies on splits of whole tiles and pages, and on its mask.
  const int granule = plan.granule;
  if (granule < 1 || granule % plan.split.block_n != 0 || (page_size > 0 && granule % page_size != 0) ||
      plan.split.mask != mask_of(p) || plan.splits.keys_per_split < 1 ||
      plan.splits.keys_per_split % granule != 0)
    return Error(ErrorCode::invalid_argument,
                 fmt::format("decode plan for kernel {} is inconsistent: {} keys per split (a multiple of {} needed), "
                             "problem mask {}", readable_name(plan.split), plan.splits.keys_per_split, granule,
                             to_string(mask_of(p))));
  if (plan.split.cluster_merge && plan.splits.num_splits > DecodeParams::kMaxClusterSplits)
    return Error(ErrorCode::invalid_argument,
                 fmt::format("decode plan for kernel {} is inconsistent: {} splits, at most {} in one cluster",
                             readable_name(plan.split), plan.splits.num_splits, DecodeParams::kMaxClusterSplits));
  auto api = cuda::api();
  if (!api.ok()) return api.error();
  const auto stream = static_cast<CUstream>(p.stream);
  DecodeParams params = make_decode_params(p, plan, workspace);
  // A cluster-merge kernel's splits of one (sequence, KV head) form one cluster; it writes O and LSE itself.
  const bool cluster = plan.split.cluster_merge && plan.splits.num_splits > 1;
  void* split_args[] = {&params};
  const Grid split_grid{static_cast<unsigned>(plan.splits.num_splits), static_cast<unsigned>(p.heads_kv),
                        static_cast<unsigned>(p.batch)};
  FLASHJIT_TRY(launch_kernel(**api, split,
                             geometry(split_grid, threads_per_cta(plan.split), shared_memory_bytes(plan.split),
                                      pdl_for(plan.split.arch, pdl),
                                      cluster ? static_cast<unsigned>(plan.splits.num_splits) : 0),
                             stream, split_args,
                             cluster ? "cuLaunchKernelEx(split-KV decode, clusters)" : "cuLaunchKernelEx(split-KV decode)"));
  if (plan.splits.num_splits == 1 || cluster) return {};
  CombineParams cp = make_split_combine_params(p, plan, workspace);
  void* combine_args[] = {&cp};
  const long long rows = 1LL * p.batch * p.q_len * p.heads_q;
  return launch_kernel(**api, combine,
                       geometry({combine_blocks(plan.combine, rows), 1, 1}, threads_per_cta(plan.combine), 0,
                                pdl_for(plan.combine.arch, pdl)),
                       stream, combine_args, "cuLaunchKernelEx(decode combine)");
}

Status launch_merge(CUfunction combine, const CombineKernelConfig& config, const MergeProblem& p, bool pdl) {
  auto api = cuda::api();
  if (!api.ok()) return api.error();
  CombineParams cp = make_merge_params(p);
  void* args[] = {&cp};
  const long long rows = 1LL * p.batch * p.seqlen * p.heads;
  return launch_kernel(**api, combine,
                       geometry({combine_blocks(config, rows), 1, 1}, threads_per_cta(config), 0, pdl_for(config.arch, pdl)),
                       static_cast<CUstream>(p.stream), args, "cuLaunchKernelEx(merge)");
}

}  // namespace flashjit::launch
