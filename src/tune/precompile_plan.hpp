// What `flashjit precompile` compiles for a sweep: for each problem and arch the config the dispatcher picks,
// by its heuristics and with each GPU's tuned tables for that arch (so that FLASHJIT_JIT=0 finds whatever a
// device of that arch picks), or with all_candidates the whole candidate space after validate() pruning.
#pragma once

#include <vector>

#include "flashjit/config.hpp"
#include "tune/sweep.hpp"
#include "tune/tuned_table.hpp"

namespace flashjit::tune {

struct PrecompilePlan {
  std::vector<KernelConfig> configs;  // distinct, in sweep order
  int invalid = 0;                    // candidates pruned by validate() (all_candidates)
};

PrecompilePlan precompile_plan(const Sweep& sweep, const std::vector<Arch>& archs, const TunedTables& tables,
                               bool all_candidates);

}  // namespace flashjit::tune
