// Attention variants: what a kernel does to the scores and the softmax besides the mask (mask.cuh). Each is
// compiled in only when on; the constants are run-time fields of the params, so one kernel serves every cap,
// every slope table and every sink table. Every kernel kind (reference, FA2, FA3, decode) takes the same one.
//
// Units: a kernel computes raw scores s = q·k. The softmax sees scores in a unit of its own: raw scores with
// the unit softmax_scale (a natural logit is s * softmax_scale), or, with softcap, t = tanh(s * softmax_scale /
// cap) with the unit cap (the logit is cap * t); the kernel passes unit() and unit_log2() to the softmax in
// place of softmax_scale and scale_log2, so softcap costs a multiply and a tanh per score and nothing more.
//   softcap: x <- cap * tanh(x / cap) on the natural logit x (Gemma 2), before ALiBi and the mask;
//   alibi:   x <- x - slope * |a - k| for query row aligned to key a (bottom-right: a = i + seqlen_k - seqlen_q)
//            and key k (flash-attn's alibi_slopes), the slope in the softmax's unit;
//   sinks:   one logit per query head in each row's denominator and none in the numerator (gpt-oss);
//            apply_sink() adds it to a row's final state.
#pragma once

#include "attention/params.cuh"
#include "common/math.cuh"

namespace flashjit {

__device__ __forceinline__ float tanh_approx(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

template <bool kSoftcap, bool kAlibi, bool kSinks>
struct Variant {
  static constexpr bool kHasSoftcap = kSoftcap, kHasAlibi = kAlibi, kHasSinks = kSinks;
  // Whether scores change per element (then the kernel calls score() on every one).
  static constexpr bool kTransformsScores = kSoftcap || kAlibi;

  float cap_in;  // softcap: raw score -> tanh argument (softmax_scale / cap)
  float slope;   // alibi: the slope in the softmax's unit

  // unit: the softmax's unit (unit()); softcap_in and the slope (natural units) as the params hold them.
  __device__ Variant(float unit, float softcap_in, float alibi_slope) {
    if constexpr (kSoftcap) cap_in = softcap_in;
    if constexpr (kAlibi) slope = alibi_slope / unit;
  }
  // The variant of (batch entry, query head) of a prefill kernel.
  __device__ Variant(const AttentionParams& p, int batch, int head)
      : Variant(unit(p), p.softcap_in, kAlibi ? p.alibi_slopes[batch * p.alibi_batch + head] : 0.f) {}

  // The softmax's unit in natural logits and in log2 units, from a kernel's params (AttentionParams,
  // DecodeParams: softmax_scale, scale_log2, softcap).
  template <class Params>
  static __device__ __forceinline__ float unit(const Params& p) {
    return kSoftcap ? p.softcap : p.softmax_scale;
  }
  template <class Params>
  static __device__ __forceinline__ float unit_log2(const Params& p) {
    return kSoftcap ? p.softcap * kLog2e : p.scale_log2;
  }

  // The score the softmax sees for raw score s of the query row aligned to key a, and key k.
  __device__ __forceinline__ float score(float s, int a, int k) const {
    if constexpr (kSoftcap) s = tanh_approx(s * cap_in);
    if constexpr (kAlibi) s = fmaf(-slope, fabsf(static_cast<float>(a - k)), s);
    return s;
  }

  // A row's sink (sinks[head], natural units) joins its softmax once its state is final: given the row's LSE
  // over its keys (-inf: none), `lse` becomes log(e^lse + e^sink) and `o_factor` the factor its normalized O
  // is multiplied by, e^{lse_keys - lse} (O over no key stays 0; its LSE is the sink's). Without sinks, nothing.
  // Wherever the splits of a row merge (split kernel, combine, cluster), it is applied after the merge, once.
  static __device__ __forceinline__ void apply_sink(const float* sinks, int head, float& lse, float& o_factor) {
    if constexpr (kSinks) {
      const float sink = sinks[head];
      if (lse == neg_infinity()) {
        lse = sink;
        return;
      }
      const float top = fmaxf(lse, sink);
      if (top == neg_infinity()) return;
      const float joined = top + logf(expf(lse - top) + expf(sink - top));
      o_factor *= expf(lse - joined);
      lse = joined;
    }
  }
};

using NoVariant = Variant<false, false, false>;

}  // namespace flashjit
