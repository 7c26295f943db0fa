#include "launch/launch.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include <fmt/format.h>

#include "config/limits.hpp"
#include "cuda/driver.hpp"
#include "fa3/tensor_maps.cuh"
#include "launch/bias_map.hpp"

namespace flashjit::launch {

static_assert(sizeof(AttentionParams) == 5 * 8 + 12 * 8 + 6 * 4 + 2 * 4 + 4 * 4 + 2 * 4 + 2 * 8 + 2 * 4 + 3 * 8 + 160 + 8 +
                                              2 * 8 + 2 * 4 + 2 * 8 + 4 * 8 + 2 * 8 + 4 * 4 + 8 + 4 * 8 + 2 * 4 +
                                              2 * 8 + 2 * 4,
              "AttentionParams layout changed: check the device side");
static_assert(offsetof(AttentionParams, total_q) == 5 * 8 + 12 * 8 + 48 &&
                  offsetof(AttentionParams, cu_seqlens_q) == 5 * 8 + 12 * 8 + 56 &&
                  offsetof(AttentionParams, softcap) == 5 * 8 + 12 * 8 + 72 &&
                  offsetof(AttentionParams, sinks) == 5 * 8 + 12 * 8 + 96 &&
                  offsetof(AttentionParams, bias) == 5 * 8 + 12 * 8 + 376,
              "AttentionParams field offsets changed: check the device side");

static_assert(sizeof(ModAuxParams) == sizeof(ModAux) && ModAux::kPointers == ModAuxParams::kPointers &&
                  ModAux::kScalars == ModAuxParams::kScalars && ModAux::kIntegers == ModAuxParams::kIntegers,
              "ModAux must mirror ModAuxParams");

ModAuxParams aux_params(const ModAux& aux) {
  ModAuxParams out{};
  for (int i = 0; i < ModAux::kPointers; ++i) out.pointers[i] = aux.pointers[i];
  for (int i = 0; i < ModAux::kScalars; ++i) out.scalars[i] = aux.scalars[i];
  for (int i = 0; i < ModAux::kIntegers; ++i) out.integers[i] = aux.integers[i];
  return out;
}

AttentionParams make_params(const AttentionProblem& p) {
  const Strides q = resolved_q_strides(p), k = resolved_kv_strides(p, p.k_strides),
                v = resolved_v_strides(p), o = resolved_o_strides(p);
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
  const bool top_left = p.alignment == Alignment::top_left;
  a.causal_offset = top_left ? 0 : p.seqlen_k - p.seqlen_q;  // varlen kernels: each sequence's own lengths
  a.top_left = top_left ? 1 : 0;
  a.window_left = p.window_left, a.window_right = p.window_right;
  if (p.mask == MaskKind::causal) a.window_left = -1, a.window_right = 0;
  a.chunk_size = p.chunk_size;
  if (p.softcap > 0.f) a.softcap = p.softcap, a.softcap_in = scale / p.softcap;
  a.alibi_slopes = p.alibi_slopes, a.alibi_batch = p.alibi_slopes_batch_stride;
  a.sinks = p.sinks;
  a.rel_bias = p.rel_bias, a.rel_head = p.rel_bias_head_stride;
  a.rel_extent = p.rel_bias_extent, a.rel_offset = p.rel_bias_offset;
  a.aux = aux_params(p.aux);
  set_bias(a, p.bias, p.bias_type, p.bias_strides);
  a.seqused_k = p.seqused_k;  // paged kernels' key counts, or contiguous keys' (seqused_k kernels)
  if (p.paged()) {
    a.page_table = p.page_table;
    a.page_table_stride = p.max_pages_per_seq, a.num_pages = p.num_pages;
    a.page_indptr = p.page_indptr, a.last_page_len = p.last_page_len;
  }
  if (const BlockMask& m = p.block_mask; m.active()) {
    a.bm_kv_num = m.kv_num_blocks, a.bm_kv_indices = m.kv_indices;
    a.bm_full_num = m.full_kv_num_blocks, a.bm_full_indices = m.full_kv_indices;
    a.bm_batch = m.batch_stride, a.bm_head = m.head_stride;
    a.bm_q_block = m.q_block, a.bm_kv_block = m.kv_block, a.bm_num_kv_blocks = m.num_kv_blocks;
  }
  return a;
}

Grid grid_for(const KernelConfig& c, const AttentionProblem& p, int sms) {
  Grid g;
  // Packed GQA (templates/fa3/rows.cuh): a tile holds block_m / group positions of a KV head's query heads.
  const bool pack = c.algorithm == Algorithm::fa3 && c.pack_gqa && p.heads_kv > 0;
  const int group = pack ? p.heads_q / p.heads_kv : 1;
  const long long positions = std::max(c.block_m / group, 1), heads = pack ? p.heads_kv : p.heads_q;
  const long long m_blocks = (p.seqlen_q + positions - 1) / positions;
  if (c.scheduler == Scheduler::persistent) {
    g.x = static_cast<unsigned>(std::min<long long>(m_blocks * heads * p.batch, std::max(sms, 1)));
    return g;
  }
  g.x = static_cast<unsigned>(m_blocks);
  g.y = static_cast<unsigned>(heads);
  g.z = static_cast<unsigned>(p.batch);
  return g;
}

static_assert(sizeof(TensorMap) == sizeof(CUtensorMap) && alignof(TensorMap) == alignof(CUtensorMap),
              "TensorMap must mirror CUtensorMap");

// The column blocks of an FA3 tile row of `dim` elements (templates/fa3/columns.cuh): (first column, width)
// of each 64-, 32- and 16-column block, rows padded to 16.
struct ColumnBlock {
  int col, width, map;  // map: index into TensorMaps::q/k/v (0: 64 wide, 1: 32, 2: 16)
};
static std::vector<ColumnBlock> column_blocks(int dim) {
  const int padded = (dim + 15) / 16 * 16;
  std::vector<ColumnBlock> out;
  int col = 0;
  for (; col + 64 <= padded; col += 64) out.push_back({col, 64, 0});
  if (padded - col >= 32) out.push_back({col, 32, 1}), col += 32;
  if (padded - col == 16) out.push_back({col, 16, 2});
  return out;
}

static CUtensorMapSwizzle swizzle_for(int width) {
  return width == 64 ? CU_TENSOR_MAP_SWIZZLE_128B : width == 32 ? CU_TENSOR_MAP_SWIZZLE_64B : CU_TENSOR_MAP_SWIZZLE_32B;
}

// TMA views of one tensor, one per column-block width its tiles use: 4-D (head_dim, sequence, head, batch)
// of a BSHD tensor, or for `packed` (varlen) 3-D (head_dim, row, head) of [total, heads, head_dim] whose rows
// past `total` read as zeros. Boxes of `width` x `rows` elements; columns past head_dim read as zeros too.
// group > 0 (packed GQA's Q, templates/fa3/rows.cuh): the heads split into (head in group, KV head), the
// first after the columns: 5-D (head_dim, group, sequence, KV head, batch) or 4-D varlen, boxes of
// width x group x rows / group.
struct TensorView {
  const char* name;
  const void* ptr;
  int head_dim, seqlen, heads, batch;
  Strides strides;
  bool packed;
  int group = 0;
};
static Status encode(const cuda::Api& api, TensorMap (&maps)[3], const TensorView& t, DType dtype, int rows) {
  const bool split = t.group > 0;
  const int rank = (t.packed ? 3 : 4) + (split ? 1 : 0);
  cuuint64_t dims[5], byte_strides[4];
  cuuint32_t box[5], element_strides[5] = {1, 1, 1, 1, 1};
  int n = 0;
  dims[n++] = cuuint64_t(t.head_dim);
  if (split) dims[n++] = cuuint64_t(t.group);
  dims[n++] = cuuint64_t(t.seqlen);
  dims[n++] = cuuint64_t(split ? t.heads / t.group : t.heads);
  if (!t.packed) dims[n++] = cuuint64_t(t.batch);
  n = 0;
  if (split) byte_strides[n++] = cuuint64_t(t.strides.head) * 2;
  byte_strides[n++] = cuuint64_t(t.strides.seq) * 2;
  byte_strides[n++] = cuuint64_t(t.strides.head) * (split ? t.group : 1) * 2;
  if (!t.packed) byte_strides[n++] = cuuint64_t(t.strides.batch) * 2;
  for (const ColumnBlock& b : column_blocks(t.head_dim)) {
    if (b.col > 0 && b.map == 0) continue;  // one map serves every 64-column block
    n = 0;
    box[n++] = cuuint32_t(b.width);
    if (split) box[n++] = cuuint32_t(t.group);
    box[n++] = cuuint32_t(split ? rows / t.group : rows);
    while (n < rank) box[n++] = 1;
    CUresult r = api.cuTensorMapEncodeTiled(
        reinterpret_cast<CUtensorMap*>(&maps[b.map]),
        dtype == DType::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, rank,
        const_cast<void*>(t.ptr), dims, byte_strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
        swizzle_for(b.width), CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS)
      return cuda::check(r, "cuTensorMapEncodeTiled")
          .error()
          .with(fmt::format("TMA cannot describe {}tensor {} (strides must be multiples of 16 bytes below 2^40)",
                            t.packed ? "varlen " : "", t.name));
  }
  return {};
}

Status launch(CUfunction function, const KernelConfig& config, const AttentionProblem& problem, int sms) {
  if (config.varlen != problem.varlen())
    return Error(ErrorCode::invalid_argument,
                 fmt::format("kernel {} is {}varlen but the problem is {}varlen", readable_name(config),
                             config.varlen ? "" : "not ", problem.varlen() ? "" : "not "));
  if (config.page_size != (problem.paged() ? problem.page_size : 0))
    return Error(ErrorCode::invalid_argument,
                 fmt::format("kernel {} reads {} but the problem's keys are {}", readable_name(config),
                             config.page_size > 0 ? fmt::format("pages of {} tokens", config.page_size) : "contiguous keys",
                             problem.paged() ? fmt::format("in pages of {} tokens", problem.page_size) : "contiguous"));
  if (const std::string why = config::pack_gqa_mismatch(config, problem.heads_q, problem.heads_kv); !why.empty())
    return Error(ErrorCode::invalid_argument, fmt::format("kernel {}: {}", readable_name(config), why));
  const BlockMask& bm = problem.block_mask;
  if (const std::string why = config::block_mask_mismatch(config, bm.active() ? bm.q_block : 0, bm.kv_block);
      !why.empty())
    return Error(ErrorCode::invalid_argument, fmt::format("kernel {}: {}", readable_name(config), why));
  auto api = cuda::api();
  if (!api.ok()) return api.error();
  AttentionParams params = make_params(problem);
  fa3::TensorMaps maps{};
  if (config.algorithm == Algorithm::fa3) {
    const cuda::Api& a = **api;
    const bool packed = config.varlen, paged = problem.paged();
    const bool kv_packed = packed && !paged;  // paged: 4-D views of the pools (token, head, page)
    const int dv = value_head_dim(problem);
    const int seq_q = packed ? problem.total_q : problem.seqlen_q;
    const int seq_k = paged ? problem.page_size : packed ? problem.total_k : problem.seqlen_k;
    const int kv_batch = paged ? problem.num_pages : problem.batch;
    TensorView q{"q", problem.q, problem.head_dim, seq_q, problem.heads_q, problem.batch,
                       resolved_q_strides(problem), packed};
    const TensorView k{"k", problem.k, problem.head_dim, seq_k, problem.heads_kv, kv_batch,
                       resolved_kv_strides(problem, problem.k_strides), kv_packed};
    const TensorView v{"v", problem.v, dv, seq_k, problem.heads_kv, kv_batch, resolved_v_strides(problem), kv_packed};
    if (config.pack_gqa) q.group = problem.heads_q / problem.heads_kv;
    // Paged: boxes of one page when pages are smaller than a key tile (templates/fa3/producer.cuh).
    const int kv_rows = paged ? std::min(config.block_n, problem.page_size) : config.block_n;
    FLASHJIT_TRY(encode(a, maps.q, q, problem.dtype, config.block_m));
    FLASHJIT_TRY(encode(a, maps.k, k, problem.dtype, kv_rows));
    FLASHJIT_TRY(encode(a, maps.v, v, problem.dtype, kv_rows));
    if (config.bias_tma) FLASHJIT_TRY(encode_bias_map(a, maps.bias, config, problem));
  }
  Geometry g;
  g.grid = grid_for(config, problem, sms);
  g.threads = threads_per_cta(config);
  g.smem = shared_memory_bytes(config);
  void* args[] = {&params, &maps};  // kernels without a second parameter ignore the extra pointer
  return launch_kernel(**api, function, g, static_cast<CUstream>(problem.stream), args, "cuLaunchKernelEx");
}

}  // namespace flashjit::launch
