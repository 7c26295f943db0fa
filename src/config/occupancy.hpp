// How many split-KV decode kernels one SM holds, as the decode planner's time model counts them.
#pragma once

#include "flashjit/config.hpp"

namespace flashjit {

// As many as shared memory allows, at most what the kernel family's registers per thread allow (192 without
// column groups at head dims of 128 and more, else 168; the NVRTC compile test checks the planner's kernels
// against them).
int ctas_per_sm(const DecodeKernelConfig& c);

}  // namespace flashjit
