// What the prefill and decode configs share about their variants (softcap, alibi, sinks, score_mod, mask_mod):
// the readable-name tag and the checks of the snippets' text.
#pragma once

#include <string>
#include <vector>

#include "flashjit/config.hpp"

namespace flashjit::config {

// Longest snippet text a config takes (bytes).
inline constexpr std::size_t kMaxSnippetBytes = 64 * 1024;

// "_softcap_alibi_sinks_smod1a2b3c4d_mmod5e6f7a8b" for those compiled in, in declaration order (a snippet by the
// first 8 hex digits of its text's SHA-256); empty without any.
std::string variant_tag(bool softcap, bool alibi, bool sinks, const std::string& score_mod, const std::string& mask_mod);

// Issues of the snippets' text (its length; no NUL byte, which would end the source NVRTC sees).
void validate_snippets(const std::string& score_mod, const std::string& mask_mod, std::vector<ConfigIssue>& out);

}  // namespace flashjit::config
