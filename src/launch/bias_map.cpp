#include "launch/bias_map.hpp"

#include <fmt/format.h>

#include "config/variants.hpp"

namespace flashjit::launch {
namespace {

CUtensorMapDataType tma_type(BiasType t) {
  switch (t) {
    case BiasType::fp32: return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
    case BiasType::bf16: return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    case BiasType::fp16: return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    default: return CU_TENSOR_MAP_DATA_TYPE_UINT8;
  }
}

}  // namespace

Status encode_bias_map(const cuda::Api& api, TensorMap& map, const KernelConfig& c, const AttentionProblem& p) {
  const BiasStrides& s = p.bias_strides;
  if (const std::string why = config::bias_tma_layout_issue(p.bias, p.bias_type, s); !why.empty())
    return Error(ErrorCode::invalid_argument,
                 fmt::format("kernel {} stages the bias through TMA, but {}", readable_name(c), why));
  const auto entry = static_cast<cuuint64_t>(config::bias_element_bytes(p.bias_type));
  const cuuint64_t row = static_cast<cuuint64_t>(s.q) * entry;
  // A broadcast dimension (stride 0) has one index; its stride is never stepped, but must be valid for TMA.
  cuuint64_t dims[4] = {cuuint64_t(p.seqlen_k), cuuint64_t(p.seqlen_q), cuuint64_t(s.head != 0 ? p.heads_q : 1),
                        cuuint64_t(s.batch != 0 ? p.batch : 1)};
  cuuint64_t strides[3] = {row, s.head != 0 ? cuuint64_t(s.head) * entry : row,
                           s.batch != 0 ? cuuint64_t(s.batch) * entry : row};
  cuuint32_t box[4] = {cuuint32_t(128 / entry), cuuint32_t(c.block_m), 1, 1};
  cuuint32_t element_strides[4] = {1, 1, 1, 1};
  const CUresult r = api.cuTensorMapEncodeTiled(
      reinterpret_cast<CUtensorMap*>(&map), tma_type(p.bias_type), 4, const_cast<void*>(p.bias), dims, strides, box,
      element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return cuda::check(r, "cuTensorMapEncodeTiled").error().with(fmt::format("TMA cannot describe the bias tensor of {}", readable_name(c)));
  return {};
}

}  // namespace flashjit::launch
