// The C ABI's enum values as C++ values (struct_size.hpp): flashjit_dtype, flashjit_mask, flashjit_alignment.
#include <fmt/format.h>

#include "capi/struct_size.hpp"

namespace flashjit::capi {

Result<DType> dtype_of(int v) {
  switch (v) {
    case FLASHJIT_DTYPE_BF16: return DType::bf16;
    case FLASHJIT_DTYPE_FP16: return DType::fp16;
    default:
      return Error(ErrorCode::invalid_argument,
                   fmt::format("dtype {} is not a flashjit_dtype (0 bf16, 1 fp16)", v));
  }
}

Result<MaskKind> mask_of(int v) {
  switch (v) {
    case FLASHJIT_MASK_NONE: return MaskKind::none;
    case FLASHJIT_MASK_CAUSAL: return MaskKind::causal;
    case FLASHJIT_MASK_SLIDING_WINDOW: return MaskKind::sliding_window;
    case FLASHJIT_MASK_CHUNKED: return MaskKind::chunked;
    case FLASHJIT_MASK_CHUNKED_CAUSAL: return MaskKind::chunked_causal;
    default:
      return Error(ErrorCode::invalid_argument,
                   fmt::format("mask {} is not a flashjit_mask (0 none, 1 causal, 2 sliding window, 3 chunked, "
                               "4 chunked causal)",
                               v));
  }
}

Result<Alignment> alignment_of(int v) {
  switch (v) {
    case FLASHJIT_ALIGN_BOTTOM_RIGHT: return Alignment::bottom_right;
    case FLASHJIT_ALIGN_TOP_LEFT: return Alignment::top_left;
    default:
      return Error(ErrorCode::invalid_argument,
                   fmt::format("alignment {} is not a flashjit_alignment (0 bottom-right, 1 top-left)", v));
  }
}

}  // namespace flashjit::capi
