// The checks of a problem's variant arguments (softcap, alibi_slopes and their batch stride, sinks, bias), shared by
// check(AttentionProblem) and check(DecodeProblem): one message per issue, naming the field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "flashjit/config.hpp"

#include "flashjit/problem.hpp"

namespace flashjit::dispatch {

std::vector<std::string> variant_issues(float softcap, const float* alibi_slopes, std::int64_t alibi_slopes_batch_stride,
                                        const float* sinks, const char* score_mod, const char* mask_mod);

// The checks of a bias tensor (AttentionProblem::bias, DecodeProblem::bias) of extents [batch, heads, rows, keys]:
// its pointer and type together, alignment to one entry, strides >= 0, and its last entry within reach.
std::vector<std::string> bias_issues(const void* bias, BiasType type, const BiasStrides& strides, std::int64_t batch,
                                     std::int64_t heads, std::int64_t rows, std::int64_t keys);
// The checks of a relative-logits table (AttentionProblem::rel_bias) of `heads` rows: its pointer (4-byte aligned)
// beside an extent in [1, 2^30], the head stride in [0, 2^40] elements, the offset within [-2^30, 2^30]; none of
// them set without a table.
std::vector<std::string> rel_bias_issues(const float* rel_bias, std::int64_t head_stride, int extent, int offset,
                                         std::int64_t heads);

// The bias type a problem's kernel compiles in (none without a bias tensor).
inline BiasType bias_of(const void* bias, BiasType type) { return bias != nullptr ? type : BiasType::none; }

// The checks of a mask's constants (window sizes, chunk size) for the masks that use them, shared by
// check(AttentionProblem) and check(BlockMaskProblem).
std::vector<std::string> mask_constant_issues(MaskKind mask, int window_left, int window_right, int chunk_size);

// A snippet's text (empty for null).
inline std::string snippet_text(const char* s) { return s != nullptr ? std::string(s) : std::string(); }

}  // namespace flashjit::dispatch
