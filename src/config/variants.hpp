// What the prefill and decode configs share about their variants (softcap, alibi, sinks, score_mod, mask_mod, bias):
// the readable-name tag and the checks of the snippets' text.
#pragma once

#include <string>
#include <vector>

#include "flashjit/config.hpp"
#include "flashjit/problem.hpp"

namespace flashjit::config {

// Longest snippet text a config takes (bytes).
inline constexpr std::size_t kMaxSnippetBytes = 64 * 1024;

// "_softcap_alibi_sinks_smod1a2b3c4d_mmod5e6f7a8b_biasbf16_relbias" for those compiled in, in declaration order (a
// snippet by the first 8 hex digits of its text's SHA-256); empty without any.
std::string variant_tag(bool softcap, bool alibi, bool sinks, const std::string& score_mod, const std::string& mask_mod,
                        BiasType bias = BiasType::none, bool rel_bias = false);

// Bytes of one entry of a bias tensor of that type (0 for none).
inline int bias_element_bytes(BiasType b) {
  switch (b) {
    case BiasType::fp32: return 4;
    case BiasType::bf16:
    case BiasType::fp16: return 2;
    case BiasType::boolean: return 1;
    default: return 0;
  }
}

// Why a bias tensor's tiles cannot be staged by TMA (KernelConfig::bias_tma; empty when they can): each row's
// entries contiguous (k stride 1) and rows not broadcast (q stride not 0), every stride a non-negative multiple of
// 16 bytes below 2^40, and the base 16-byte aligned.
std::string bias_tma_layout_issue(const void* bias, BiasType type, const BiasStrides& strides);

// Issues of the snippets' text (its length; no NUL byte, which would end the source NVRTC sees).
void validate_snippets(const std::string& score_mod, const std::string& mask_mod, std::vector<ConfigIssue>& out);

}  // namespace flashjit::config
