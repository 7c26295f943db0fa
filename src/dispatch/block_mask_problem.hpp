// The kernel that makes a block mask (Runtime::make_block_mask); check() and the shape live in
// flashjit/block_mask.hpp.
#pragma once

#include "flashjit/block_mask.hpp"

namespace flashjit::dispatch {

// The block_mask kernel of the problem's mask and mask_mod on `arch`: 8 warps (a key block per warp at a time).
BlockMaskKernelConfig block_mask_kernel(const BlockMaskProblem& problem, const Arch& arch);

}  // namespace flashjit::dispatch
