// Candidate configs for a problem: the cross product of a CandidateSpace (with each algorithm's defaults
// for the fields it leaves empty), pruned by validate() before anything is compiled, and by ptxas's report
// (spills, stack) after.
#pragma once

#include <vector>

#include "dispatch/problem_shape.hpp"
#include "flashjit/config.hpp"
#include "flashjit/runtime.hpp"
#include "tune/sweep.hpp"

namespace flashjit::tune {

// How much of each algorithm's default space to take.
enum class Density {
  full,     // fa3: warpgroups {1,2,3}, block_n 64..256 step 16, stages {2,3}; fa2: warps {4,8}, 16 or 32
            // rows per warp, block_n {32,64,128}, stages {2,3}
  reduced,  // fa3: block_n step 32, stages {2}; fa2: block_n {32,64}, stages {2} (autotune --quick)
};

struct Candidates {
  std::vector<KernelConfig> valid;    // distinct, in enumeration order
  std::vector<KernelConfig> invalid;  // pruned by validate()
  bool capped = false;                // more than kMaxCandidates configs (sweep.hpp): the rest were not looked at
};

// The candidates for a problem on `arch`. Algorithms: the space's, else the one the dispatcher picks for
// the problem. Every candidate takes dtype, head dim, mask and the variants from the problem.
Candidates enumerate(const dispatch::ProblemShape& shape, const CandidateSpace& space, const Arch& arch,
                     Density density = Density::full);

// The reference kernel of a problem (what the autotuner checks the candidates against): its dtype, head dim,
// mask and variants.
KernelConfig reference_config(const dispatch::ProblemShape& shape, const Arch& arch);

// Whether ptxas's report disqualifies a kernel: spills (stores or loads) or a stack frame.
bool spills(const PtxasStats& ptxas);

}  // namespace flashjit::tune
