#include "dispatch/variant_check.hpp"

#include <fmt/format.h>

#include <algorithm>
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

std::vector<std::string> bias_issues(const void* bias, BiasType type, const BiasStrides& strides, std::int64_t batch,
                                     std::int64_t heads, std::int64_t rows, std::int64_t keys) {
  std::vector<std::string> out;
  const int bytes = config::bias_element_bytes(type);
  if (type != BiasType::none && bytes == 0) {
    out.push_back(fmt::format("bias_type {} is not a BiasType (none, fp32, bf16, fp16, bool)", static_cast<int>(type)));
    return out;
  }
  if (bias == nullptr) {
    if (type != BiasType::none) out.push_back(fmt::format("bias_type is {} but bias is null", to_string(type)));
    return out;
  }
  if (type == BiasType::none) {
    out.push_back("bias is set but bias_type is none: give its element type (fp32, bf16, fp16 or bool)");
    return out;
  }
  if (reinterpret_cast<std::uintptr_t>(bias) % bytes != 0)
    out.push_back(fmt::format("bias ({}) must be aligned to its {}-byte entries", fmt::ptr(bias), bytes));
  const std::pair<std::int64_t, const char*> dims[] = {
      {strides.batch, "batch"}, {strides.head, "head"}, {strides.q, "q"}, {strides.k, "k"}};
  const std::int64_t extents[] = {batch, heads, rows, keys};
  __int128 last = 0;
  for (int i = 0; i < 4; ++i) {
    const auto [stride, name] = dims[i];
    if (stride < 0) out.push_back(fmt::format("bias_strides.{} must be >= 0 elements (0 broadcasts), got {}", name, stride));
    else last += static_cast<__int128>(std::max<std::int64_t>(extents[i] - 1, 0)) * stride;
  }
  if ((last + 1) * bytes > (static_cast<__int128>(1) << 48))
    out.push_back(fmt::format("bias_strides ({}, {}, {}, {}) put its last entry more than 2^48 bytes past bias",
                              strides.batch, strides.head, strides.q, strides.k));
  return out;
}

std::vector<std::string> rel_bias_issues(const float* rel_bias, std::int64_t head_stride, int extent, int offset,
                                         std::int64_t heads) {
  std::vector<std::string> out;
  constexpr int kLimit = 1 << 30;
  if (rel_bias == nullptr) {
    if (head_stride != 0 || extent != 0 || offset != 0)
      out.push_back(fmt::format("rel_bias_head_stride, rel_bias_extent and rel_bias_offset ({}, {}, {}) are set but "
                                "rel_bias is null",
                                head_stride, extent, offset));
    return out;
  }
  if (reinterpret_cast<std::uintptr_t>(rel_bias) % 4 != 0)
    out.push_back(fmt::format("rel_bias ({}) must be 4-byte aligned (fp32)", fmt::ptr(rel_bias)));
  if (extent < 1 || extent > kLimit)
    out.push_back(fmt::format("rel_bias_extent (entries per head of rel_bias) must be in [1, 2^30], got {}", extent));
  if (head_stride < 0 || head_stride > (std::int64_t{1} << 40))
    out.push_back(fmt::format("rel_bias_head_stride must be in [0, 2^40] elements (0: one row for every head), got {}",
                              head_stride));
  else if (extent >= 1 && (static_cast<__int128>(heads - 1) * head_stride + extent) * 4 > (static_cast<__int128>(1) << 48))
    out.push_back("rel_bias_head_stride puts the last head's row more than 2^48 bytes past rel_bias");
  if (offset < -kLimit || offset > kLimit)
    out.push_back(fmt::format("rel_bias_offset must be in [-2^30, 2^30], got {}", offset));
  return out;
}

std::vector<std::string> mask_constant_issues(MaskKind mask, int window_left, int window_right, int chunk_size) {
  std::vector<std::string> out;
  switch (mask) {
    case MaskKind::sliding_window:
      if (window_left < -1 || window_right < -1)
        out.push_back(fmt::format("window sizes must be >= 0 or -1 (unbounded), got ({}, {})", window_left, window_right));
      break;
    case MaskKind::chunked:
    case MaskKind::chunked_causal:
      if (chunk_size < 1) out.push_back(fmt::format("chunk_size must be >= 1 for a chunked mask, got {}", chunk_size));
      break;
    default: break;
  }
  return out;
}

}  // namespace flashjit::dispatch
