// From a problem and a config to kernel arguments, grid and a cuLaunchKernelEx on the caller's stream.
#pragma once

#include <cuda.h>

#include "attention/params.cuh"
#include "flashjit/config.hpp"
#include "flashjit/problem.hpp"
#include "launch/launch_kernel.hpp"

namespace flashjit::launch {

AttentionParams make_params(const AttentionProblem& problem);
// The snippets' auxiliary arguments as the kernels' params hold them (prefill and decode).
ModAuxParams aux_params(const ModAux& aux);

// The launch grid; a persistent config gets min(work tiles, `sms`) CTAs.
Grid grid_for(const KernelConfig& config, const AttentionProblem& problem, int sms);

// Launches `function` (compiled from `config`) on a device of `sms` multiprocessors.
Status launch(CUfunction function, const KernelConfig& config, const AttentionProblem& problem, int sms);

}  // namespace flashjit::launch
