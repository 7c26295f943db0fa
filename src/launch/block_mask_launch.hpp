// From a block-mask problem to the block-mask kernel's arguments, grid and launch on the caller's stream.
#pragma once

#include <cuda.h>

#include "block_mask/params.cuh"
#include "flashjit/block_mask.hpp"

namespace flashjit::launch {

BlockMaskParams make_block_mask_params(const BlockMaskProblem& problem);

Status launch_block_mask(CUfunction kernel, const BlockMaskKernelConfig& config, const BlockMaskProblem& problem);

}  // namespace flashjit::launch
