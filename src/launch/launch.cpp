#include "launch/launch.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include <fmt/format.h>

#include "cuda/driver.hpp"
#include "fa3/tensor_maps.cuh"

namespace flashjit::launch {

static_assert(sizeof(AttentionParams) == 5 * 8 + 12 * 8 + 6 * 4 + 2 * 4 + 4 * 4 + 2 * 4 + 2 * 8,
              "AttentionParams layout changed: check the device side");
static_assert(offsetof(AttentionParams, total_q) == 5 * 8 + 12 * 8 + 48 &&
                  offsetof(AttentionParams, cu_seqlens_q) == 5 * 8 + 12 * 8 + 56,
              "AttentionParams field offsets changed: check the device side");

AttentionParams make_params(const AttentionProblem& p) {
  const Strides q = resolved_q_strides(p), k = resolved_kv_strides(p, p.k_strides),
                v = resolved_kv_strides(p, p.v_strides), o = resolved_o_strides(p);
  const float scale = p.softmax_scale.value_or(1.0f / std::sqrt(static_cast<float>(p.head_dim)));
  AttentionParams a{};
  a.q = p.q, a.k = p.k, a.v = p.v, a.o = p.o, a.lse = p.lse;
  a.cu_seqlens_q = p.cu_seqlens_q, a.cu_seqlens_k = p.cu_seqlens_k;
  a.total_q = p.total_q, a.total_k = p.total_k;
  a.q_batch = q.batch, a.q_seq = q.seq, a.q_head = q.head;
  a.k_batch = k.batch, a.k_seq = k.seq, a.k_head = k.head;
  a.v_batch = v.batch, a.v_seq = v.seq, a.v_head = v.head;
  a.o_batch = o.batch, a.o_seq = o.seq, a.o_head = o.head;
  a.batch = p.batch, a.seqlen_q = p.seqlen_q, a.seqlen_k = p.seqlen_k;
  a.heads_q = p.heads_q, a.heads_kv = p.heads_kv, a.group = p.heads_q / p.heads_kv;
  a.softmax_scale = scale;
  a.scale_log2 = scale * kLog2e;
  a.causal_offset = p.seqlen_k - p.seqlen_q;  // varlen kernels use each sequence's own lengths instead
  a.window_left = p.window_left, a.window_right = p.window_right;
  if (p.mask == MaskKind::causal) a.window_left = -1, a.window_right = 0;
  a.chunk_size = p.chunk_size;
  return a;
}

Grid grid_for(const KernelConfig& c, const AttentionProblem& p, int sms) {
  Grid g;
  const long long m_blocks = (p.seqlen_q + c.block_m - 1) / c.block_m;
  if (c.scheduler == Scheduler::persistent) {
    g.x = static_cast<unsigned>(std::min<long long>(m_blocks * p.heads_q * p.batch, std::max(sms, 1)));
    return g;
  }
  g.x = static_cast<unsigned>(m_blocks);
  g.y = static_cast<unsigned>(p.heads_q);
  g.z = static_cast<unsigned>(p.batch);
  return g;
}

static_assert(sizeof(TensorMap) == sizeof(CUtensorMap) && alignof(TensorMap) == alignof(CUtensorMap),
              "TensorMap must mirror CUtensorMap");

// A 4-D TMA view (head_dim, sequence, head, batch) of a BSHD tensor, boxes of 64 x `rows` elements with
// 128-byte swizzling (the layout the FA3 templates and their wgmma descriptors expect).
static Status encode_bshd(const cuda::Api& api, TensorMap& map, const char* name, const void* ptr, DType dtype,
                          int head_dim, int seqlen, int heads, int batch, const Strides& strides, int rows) {
  const cuuint64_t dims[4] = {cuuint64_t(head_dim), cuuint64_t(seqlen), cuuint64_t(heads), cuuint64_t(batch)};
  const cuuint64_t byte_strides[3] = {cuuint64_t(strides.seq) * 2, cuuint64_t(strides.head) * 2,
                                      cuuint64_t(strides.batch) * 2};
  const cuuint32_t box[4] = {64, cuuint32_t(rows), 1, 1};
  const cuuint32_t element_strides[4] = {1, 1, 1, 1};
  CUresult r = api.cuTensorMapEncodeTiled(
      reinterpret_cast<CUtensorMap*>(&map),
      dtype == DType::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4,
      const_cast<void*>(ptr), dims, byte_strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return cuda::check(r, "cuTensorMapEncodeTiled")
        .error()
        .with(fmt::format("TMA cannot describe tensor {} (strides must be multiples of 16 bytes below 2^40)", name));
  return {};
}

// A 3-D TMA view (head_dim, row, head) of a packed varlen tensor [total, heads, head_dim]; rows past `total`
// read as zeros. Same boxes and swizzling as encode_bshd.
static Status encode_packed(const cuda::Api& api, TensorMap& map, const char* name, const void* ptr, DType dtype,
                            int head_dim, int total, int heads, const Strides& strides, int rows) {
  const cuuint64_t dims[3] = {cuuint64_t(head_dim), cuuint64_t(total), cuuint64_t(heads)};
  const cuuint64_t byte_strides[2] = {cuuint64_t(strides.seq) * 2, cuuint64_t(strides.head) * 2};
  const cuuint32_t box[3] = {64, cuuint32_t(rows), 1};
  const cuuint32_t element_strides[3] = {1, 1, 1};
  CUresult r = api.cuTensorMapEncodeTiled(
      reinterpret_cast<CUtensorMap*>(&map),
      dtype == DType::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 3,
      const_cast<void*>(ptr), dims, byte_strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return cuda::check(r, "cuTensorMapEncodeTiled")
        .error()
        .with(fmt::format("TMA cannot describe varlen tensor {} (strides must be multiples of 16 bytes below 2^40)",
                          name));
  return {};
}

Status launch(CUfunction function, const KernelConfig& config, const AttentionProblem& problem, int sms) {
  if (config.varlen != problem.varlen())
    return Error(ErrorCode::invalid_argument,
                 fmt::format("kernel {} is {}varlen but the problem is {}varlen", readable_name(config),
                             config.varlen ? "" : "not ", problem.varlen() ? "" : "not "));
  auto api = cuda::api();
  if (!api.ok()) return api.error();
  AttentionParams params = make_params(problem);
  fa3::TensorMaps maps{};
  if (config.algorithm == Algorithm::fa3) {
    const cuda::Api& a = **api;
    const Strides q = resolved_q_strides(problem), k = resolved_kv_strides(problem, problem.k_strides),
                  v = resolved_kv_strides(problem, problem.v_strides);
    if (config.varlen) {
      FLASHJIT_TRY(encode_packed(a, maps.q, "q", problem.q, problem.dtype, problem.head_dim, problem.total_q,
                                 problem.heads_q, q, config.block_m));
      FLASHJIT_TRY(encode_packed(a, maps.k, "k", problem.k, problem.dtype, problem.head_dim, problem.total_k,
                                 problem.heads_kv, k, config.block_n));
      FLASHJIT_TRY(encode_packed(a, maps.v, "v", problem.v, problem.dtype, problem.head_dim, problem.total_k,
                                 problem.heads_kv, v, config.block_n));
    } else {
      FLASHJIT_TRY(encode_bshd(a, maps.q, "q", problem.q, problem.dtype, problem.head_dim, problem.seqlen_q,
                               problem.heads_q, problem.batch, q, config.block_m));
      FLASHJIT_TRY(encode_bshd(a, maps.k, "k", problem.k, problem.dtype, problem.head_dim, problem.seqlen_k,
                               problem.heads_kv, problem.batch, k, config.block_n));
      FLASHJIT_TRY(encode_bshd(a, maps.v, "v", problem.v, problem.dtype, problem.head_dim, problem.seqlen_k,
                               problem.heads_kv, problem.batch, v, config.block_n));
    }
  }
  Geometry g;
  g.grid = grid_for(config, problem, sms);
  g.threads = threads_per_cta(config);
  g.smem = shared_memory_bytes(config);
  void* args[] = {&params, &maps};  // kernels without a second parameter ignore the extra pointer
  return launch_kernel(**api, function, g, static_cast<CUstream>(problem.stream), args, "cuLaunchKernelEx");
}

}  // namespace flashjit::launch
