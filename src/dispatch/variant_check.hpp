// The checks of a problem's variant arguments (softcap, alibi_slopes and their batch stride, sinks), shared by
// check(AttentionProblem) and check(DecodeProblem): one message per issue, naming the field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace flashjit::dispatch {

std::vector<std::string> variant_issues(float softcap, const float* alibi_slopes, std::int64_t alibi_slopes_batch_stride,
                                        const float* sinks, const char* score_mod, const char* mask_mod);

// A snippet's text (empty for null).
inline std::string snippet_text(const char* s) { return s != nullptr ? std::string(s) : std::string(); }

}  // namespace flashjit::dispatch
