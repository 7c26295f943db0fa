// How many split-KV decode kernels one SM holds, as the decode planner's time model counts them; how many append
// kernels one SM must hold (their __launch_bounds__).
#pragma once

#include "flashjit/config.hpp"

namespace flashjit {

// As many as shared memory allows, at most what the kernel family's registers per thread allow (192 without
// column groups at head dims of 128 and more, else 168; the NVRTC compile test checks the planner's kernels
// against them).
int ctas_per_sm(const DecodeKernelConfig& c);

// An SM's threads / (threads per CTA x vectors), at least 1: enough CTAs that the SM has one thread's 16 bytes in
// flight per thread it holds (2048 on sm_80, sm_90, sm_100; 1536 on sm_86, sm_89, sm_12x), which caps the one- and
// two-vector kernels' registers (32 and 64 per thread: the one-vector ones reached 36 without the cap).
int min_ctas_per_sm(const AppendKernelConfig& c);

}  // namespace flashjit
