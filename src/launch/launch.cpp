#include "launch/launch.hpp"

#include <cmath>

#include "cuda/driver.hpp"

namespace flashjit::launch {

static_assert(sizeof(AttentionParams) == 5 * 8 + 12 * 8 + 6 * 4 + 2 * 4 + 4 * 4,
              "AttentionParams layout changed: check the device side");

AttentionParams make_params(const AttentionProblem& p) {
  const Strides q = resolved_q_strides(p), k = resolved_kv_strides(p, p.k_strides),
                v = resolved_kv_strides(p, p.v_strides), o = resolved_o_strides(p);
  const float scale = p.softmax_scale.value_or(1.0f / std::sqrt(static_cast<float>(p.head_dim)));
  AttentionParams a{};
  a.q = p.q, a.k = p.k, a.v = p.v, a.o = p.o, a.lse = p.lse;
  a.q_batch = q.batch, a.q_seq = q.seq, a.q_head = q.head;
  a.k_batch = k.batch, a.k_seq = k.seq, a.k_head = k.head;
  a.v_batch = v.batch, a.v_seq = v.seq, a.v_head = v.head;
  a.o_batch = o.batch, a.o_seq = o.seq, a.o_head = o.head;
  a.batch = p.batch, a.seqlen_q = p.seqlen_q, a.seqlen_k = p.seqlen_k;
  a.heads_q = p.heads_q, a.heads_kv = p.heads_kv, a.group = p.heads_q / p.heads_kv;
  a.softmax_scale = scale;
  a.scale_log2 = scale * 1.4426950408889634f;
  a.causal_offset = p.seqlen_k - p.seqlen_q;
  a.window_left = p.window_left, a.window_right = p.window_right;
  if (p.mask == MaskKind::causal) a.window_left = -1, a.window_right = 0;
  a.chunk_size = p.chunk_size;
  return a;
}

Grid grid_for(const KernelConfig& c, const AttentionProblem& p) {
  Grid g;
  g.x = static_cast<unsigned>((p.seqlen_q + c.block_m - 1) / c.block_m);
  g.y = static_cast<unsigned>(p.heads_q);
  g.z = static_cast<unsigned>(p.batch);
  return g;
}

Status launch(CUfunction function, const KernelConfig& config, const AttentionProblem& problem) {
  auto api = cuda::api();
  if (!api.ok()) return api.error();
  AttentionParams params = make_params(problem);
  Grid g = grid_for(config, problem);
  CUlaunchConfig lc{};
  lc.gridDimX = g.x, lc.gridDimY = g.y, lc.gridDimZ = g.z;
  lc.blockDimX = static_cast<unsigned>(threads_per_cta(config)), lc.blockDimY = 1, lc.blockDimZ = 1;
  lc.sharedMemBytes = static_cast<unsigned>(shared_memory_bytes(config));
  lc.hStream = static_cast<CUstream>(problem.stream);
  void* args[] = {&params};
  return cuda::check((*api)->cuLaunchKernelEx(&lc, function, args, nullptr), "cuLaunchKernelEx");
}

}  // namespace flashjit::launch
