#include "config/variants.hpp"

#include <cstdint>

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

std::string bias_tma_layout_issue(const void* bias, BiasType type, const BiasStrides& s) {
  const int entry = bias_element_bytes(type);
  if (bias == nullptr || entry == 0) return "there is no bias tensor";
  if (s.k != 1) return fmt::format("its keys are not contiguous (k stride {})", s.k);
  if (s.q == 0) return "its rows are broadcast (q stride 0)";
  if (reinterpret_cast<std::uintptr_t>(bias) % 16 != 0) return "its base is not 16-byte aligned";
  const std::pair<const char*, std::int64_t> strides[] = {{"q", s.q}, {"head", s.head}, {"batch", s.batch}};
  for (const auto& [name, stride] : strides)
    if (stride < 0 || stride * entry % 16 != 0 || stride * entry >= (std::int64_t{1} << 40))
      return fmt::format("its {} stride ({} entries of {} bytes) is not a multiple of 16 bytes below 2^40", name, stride,
                         entry);
  return {};
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
