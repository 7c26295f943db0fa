// The checks of a prefill problem's block mask (AttentionProblem::block_mask): one message per issue, naming the
// field. Nothing to check without one, but stray fields.
#pragma once

#include <string>
#include <vector>

#include "flashjit/problem.hpp"

namespace flashjit::dispatch {

std::vector<std::string> block_mask_issues(const AttentionProblem& p);

}  // namespace flashjit::dispatch
