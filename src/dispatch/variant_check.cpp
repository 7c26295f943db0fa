#include "dispatch/variant_check.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <utility>

#include "config/variants.hpp"

namespace flashjit::dispatch {

std::vector<std::string> variant_issues(float softcap, const float* alibi_slopes, std::int64_t alibi_slopes_batch_stride,
                                        const float* sinks, const char* score_mod, const char* mask_mod) {
  std::vector<std::string> out;
  for (const auto& [name, text] : {std::pair{"score_mod", score_mod}, std::pair{"mask_mod", mask_mod}}) {
    if (text == nullptr) continue;
    const std::size_t n = strnlen(text, config::kMaxSnippetBytes + 1);
    if (n == 0) out.push_back(fmt::format("{} is empty (null for none)", name));
    if (n > config::kMaxSnippetBytes)
      out.push_back(fmt::format("{} is longer than {} bytes", name, config::kMaxSnippetBytes));
  }
  if (!(softcap >= 0.f && std::isfinite(softcap)))
    out.push_back(fmt::format("softcap must be 0 (off) or positive and finite, got {}", softcap));
  if (alibi_slopes != nullptr && reinterpret_cast<std::uintptr_t>(alibi_slopes) % 4 != 0)
    out.push_back("alibi_slopes must be 4-byte aligned");
  if (alibi_slopes == nullptr && alibi_slopes_batch_stride != 0)
    out.push_back(fmt::format("alibi_slopes_batch_stride ({}) is set but alibi_slopes is null", alibi_slopes_batch_stride));
  if (alibi_slopes_batch_stride < 0 || alibi_slopes_batch_stride > (std::int64_t{1} << 40))
    out.push_back(fmt::format("alibi_slopes_batch_stride must be in [0, 2^40] elements, got {}", alibi_slopes_batch_stride));
  if (sinks != nullptr && reinterpret_cast<std::uintptr_t>(sinks) % 4 != 0) out.push_back("sinks must be 4-byte aligned");
  return out;
}

}  // namespace flashjit::dispatch
