// From a decode (or merge) problem and its plan to kernel arguments, grids and launches on the caller's
// stream: the split kernel (in clusters of its splits for a cluster-merge kernel), then the combine kernel
// when the keys were split and the split kernel does not merge them itself.
#pragma once

#include <cuda.h>

#include "decode/params.cuh"
#include "dispatch/plans.hpp"
#include "flashjit/decode.hpp"

namespace flashjit::launch {

// `workspace` holds plan.workspace_bytes (ignored when the plan has one split or merges in a cluster).
DecodeParams make_decode_params(const DecodeProblem& problem, const dispatch::DecodePlan& plan, void* workspace);
// The combine pass over the split partials in `workspace`.
CombineParams make_split_combine_params(const DecodeProblem& problem, const dispatch::DecodePlan& plan,
                                        void* workspace);
CombineParams make_merge_params(const MergeProblem& problem);

// CTAs of the combine kernel: one warp per output row.
unsigned combine_blocks(const CombineKernelConfig& config, long long rows);

// `pdl` (runtime::Settings::pdl): programmatic dependent launch where the kernel's arch has it (sm_90+); false:
// plain launches.
Status launch_decode(CUfunction split, CUfunction combine, const DecodeProblem& problem,
                     const dispatch::DecodePlan& plan, void* workspace, bool pdl);
Status launch_merge(CUfunction combine, const CombineKernelConfig& config, const MergeProblem& problem, bool pdl);

}  // namespace flashjit::launch
