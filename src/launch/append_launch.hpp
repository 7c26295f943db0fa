// From an append problem to the append kernel's arguments, grid and launch on the caller's stream.
#pragma once

#include <cuda.h>

#include "append/params.cuh"
#include "flashjit/append.hpp"

namespace flashjit::launch {

AppendParams make_append_params(const AppendProblem& problem);

// `pdl` (runtime::Settings::pdl): programmatic dependent launch where the kernel's arch has it (sm_90+): the
// append may start while the kernel before it on the stream finishes (it waits for it in-kernel), and a fused
// decode behind it the same way.
Status launch_append(CUfunction append, const AppendKernelConfig& config, const AppendProblem& problem, bool pdl);

}  // namespace flashjit::launch
