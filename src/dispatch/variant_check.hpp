// The checks of a problem's variant arguments (softcap, alibi_slopes and their batch stride, sinks), shared by
// check(AttentionProblem) and check(DecodeProblem): one message per issue, naming the field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace flashjit::dispatch {

std::vector<std::string> variant_issues(float softcap, const float* alibi_slopes, std::int64_t alibi_slopes_batch_stride,
                                        const float* sinks);

}  // namespace flashjit::dispatch
