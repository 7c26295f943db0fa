// The attention variants of a DecodeProblem (softcap, alibi_slopes, alibi_slopes_batch_stride, sinks, named as in
// AttentionProblem), for the layers that fill a DecodeProblem from their own inputs: the C ABI, sweeps, the CLI.
// The decode kernels' variants land apart from those layers: while DecodeProblem lacks the fields, a decode that
// asks for a variant is refused (unsupported), and once it has them they are set, with no change here or in the
// callers. A DecodeProblem with some of the four fields but not all is a compile error (rename them here).
#pragma once

#include <cstdint>
#include <string>

#include "flashjit/decode.hpp"
#include "flashjit/error.hpp"

namespace flashjit {

struct DecodeVariants {
  float softcap = 0.f;
  const float* alibi_slopes = nullptr;
  std::int64_t alibi_slopes_batch_stride = 0;
  const float* sinks = nullptr;

  bool any() const {
    return softcap != 0.f || alibi_slopes != nullptr || alibi_slopes_batch_stride != 0 || sinks != nullptr;
  }
};

template <class P>
concept HasVariantFields = requires(P& p) {
  p.softcap = 0.f;
  p.alibi_slopes = static_cast<const float*>(nullptr);
  p.alibi_slopes_batch_stride = std::int64_t{0};
  p.sinks = static_cast<const float*>(nullptr);
};

template <class P>
concept HasAnyVariantField =
    requires(P& p) { p.softcap; } || requires(P& p) { p.alibi_slopes; } || requires(P& p) { p.sinks; };

static_assert(HasVariantFields<AttentionProblem>, "AttentionProblem's variant fields were renamed: follow them here");
static_assert(HasVariantFields<DecodeProblem> == HasAnyVariantField<DecodeProblem>,
              "DecodeProblem has some of the variant fields but not all four under AttentionProblem's names "
              "(softcap, alibi_slopes, alibi_slopes_batch_stride, sinks): follow its names in config/variant_fields.hpp");

// Whether this build's DecodeProblem carries the variants (its kernels take them).
inline constexpr bool kDecodeHasVariants = HasVariantFields<DecodeProblem>;

// Sets the variants on a decode problem; unsupported when the build's decode has none and one is asked for.
template <class P = DecodeProblem>
Status set_variants(P& p, const DecodeVariants& v) {
  if constexpr (HasVariantFields<P>) {
    p.softcap = v.softcap;
    p.alibi_slopes = v.alibi_slopes;
    p.alibi_slopes_batch_stride = v.alibi_slopes_batch_stride;
    p.sinks = v.sinks;
    return {};
  } else {
    if (!v.any()) return {};
    std::string asked = v.softcap != 0.f ? "softcap" : "";
    if (v.alibi_slopes != nullptr || v.alibi_slopes_batch_stride != 0) asked += asked.empty() ? "alibi_slopes" : ", alibi_slopes";
    if (v.sinks != nullptr) asked += asked.empty() ? "sinks" : ", sinks";
    return Error(ErrorCode::unsupported,
                 "decode with " + asked +
                     ": this build's decode kernels have no variants yet (softcap, ALiBi and sinks are in the prefill "
                     "kernels: attention and varlen)");
  }
}

// The variants a decode problem has (none when the build's decode has no variant fields).
template <class P = DecodeProblem>
DecodeVariants variants_of(const P& p) {
  if constexpr (HasVariantFields<P>) {
    return DecodeVariants{p.softcap, p.alibi_slopes, p.alibi_slopes_batch_stride, p.sinks};
  } else {
    return {};
  }
}

}  // namespace flashjit
