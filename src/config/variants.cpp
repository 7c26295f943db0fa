#include "config/variants.hpp"

#include <fmt/format.h>

#include "common/hash.hpp"

namespace flashjit::config {

std::string variant_tag(bool softcap, bool alibi, bool sinks, const std::string& score_mod, const std::string& mask_mod,
                        BiasType bias, bool rel_bias) {
  std::string tag = std::string(softcap ? "_softcap" : "") + (alibi ? "_alibi" : "") + (sinks ? "_sinks" : "");
  if (!score_mod.empty()) tag += "_smod" + sha256_hex(score_mod).substr(0, 8);
  if (!mask_mod.empty()) tag += "_mmod" + sha256_hex(mask_mod).substr(0, 8);
  if (bias != BiasType::none) tag += std::string("_bias") + to_string(bias);
  if (rel_bias) tag += "_relbias";
  return tag;
}

void validate_snippets(const std::string& score_mod, const std::string& mask_mod, std::vector<ConfigIssue>& out) {
  const std::pair<const char*, const std::string*> snippets[] = {{"score_mod", &score_mod}, {"mask_mod", &mask_mod}};
  for (const auto& [field, text] : snippets) {
    if (text->size() > kMaxSnippetBytes)
      out.push_back({field, fmt::format("the snippet has {} bytes; at most {}", text->size(), kMaxSnippetBytes)});
    if (text->find('\0') != std::string::npos) out.push_back({field, "the snippet holds a NUL byte"});
  }
}

}  // namespace flashjit::config
