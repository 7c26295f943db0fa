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
//   rel_bias: x <- x + table[h, clamp(a - k + offset, 0, extent - 1)], a relative-logits table per query head
//            (RelBias, natural units) indexed by the distance of key k from the row's aligned key a, beside ALiBi;
//   bias:    x <- x + bias[b, h, q, k], an entry of a tensor (attention/bias.cuh), after ALiBi and before score_mod
//            (which sees the sum), in natural units: score() adds entry / unit. Kernels read the entries of a
//            thread's key pairs with bias_pair() (FA3 before waiting for Q·Kᵀ) and pass each entry, as
//            bias_value(), to score();
//   sinks:   one logit per query head in each row's denominator and none in the numerator (gpt-oss);
//            apply_sink() adds it to a row's final state.
// Order: softcap, ALiBi, rel_bias, bias, score_mod, then the masks and mask_mod.
#pragma once

#include "attention/bias.cuh"
#include "attention/mod.cuh"
#include "attention/params.cuh"
#include "common/math.cuh"

namespace flashjit {

__device__ __forceinline__ float tanh_approx(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Where a Variant applies: its batch entry and query head, the offset of the key a query row is aligned to
// (row + offset; bottom-right: seqlen_k - seqlen_q), and the snippets' context (lengths, auxiliary arguments).
struct VariantSite {
  int batch, head, offset;
  ModContext ctx;
};

// A relative-logits table's row for one query head (AttentionParams::rel_bias): query row q, aligned to key
// a = q + causal_offset, and key k read entry clamp(a - k + rel_offset, 0, last) = clamp(q + shift - k, 0, last)
// with shift = causal_offset + rel_offset. Read through the read-only cache: a row is small and every score of a
// tile reads it.
struct RelBias {
  const float* row = nullptr;
  int shift = 0, last = 0;

  static __device__ RelBias of(const AttentionParams& p, int head, int causal_offset) {
    return {p.rel_bias + head * p.rel_head, causal_offset + p.rel_offset, p.rel_extent - 1};
  }
  __device__ __forceinline__ float at(int q, int k) const { return __ldg(row + min(max(q + shift - k, 0), last)); }
};

// ScoreMod / MaskMod: NoMod, or the generated wrappers of a call's snippets (attention/mod.cuh), which have
// `static constexpr bool kOn = true` and a static apply() with the snippet's signature.
template <bool kSoftcap, bool kAlibi, bool kSinks, class ScoreMod = NoMod, class MaskMod = NoMod,
          BiasType kBias = BiasType::none, bool kRelBias = false>
struct Variant {
  static constexpr bool kHasSoftcap = kSoftcap, kHasAlibi = kAlibi, kHasSinks = kSinks;
  static constexpr bool kHasScoreMod = ScoreMod::kOn, kHasMaskMod = MaskMod::kOn;
  static constexpr bool kHasBias = kBias != BiasType::none;
  // Whether a relative-logits table is compiled in (a function, not one more static member: NVRTC emits a global
  // for each, which would move every kernel's global memory).
  static __device__ constexpr bool has_rel_bias() { return kRelBias; }
  // Whether scores change per element (then the kernel calls score() on every one), and whether pairs the
  // built-in mask shows may be hidden (then it asks visible() of every pair, on every tile).
  static constexpr bool kTransformsScores = kSoftcap || kAlibi || kHasScoreMod || kHasBias || kRelBias;
  static constexpr bool kMasks = kHasMaskMod;
  using Bias = BiasView<kBias>;
  using BiasPair = typename Bias::Two;  // the entries of two adjacent keys of a row

  float cap_in;    // softcap: raw score -> tanh argument (softmax_scale / cap)
  float slope;     // alibi: the slope in the softmax's unit
  float unit_;     // score_mod: the softmax's unit in natural logits
  float bias_in;   // bias, rel_bias: natural units -> the softmax's (1 / unit)
  VariantSite at;  // alibi (offset) and the snippets
  Bias bias;       // bias: the (batch entry, query head)'s entries
  RelBias rel;     // rel_bias: the query head's table row

  // unit: the softmax's unit (unit()); softcap_in and the slope (natural units) as the params hold them.
  __device__ Variant(float unit, float softcap_in, float alibi_slope, const VariantSite& site, const Bias& bias_view = {},
                     const RelBias& rel_row = {})
      : at(site), bias(bias_view), rel(rel_row) {
    if constexpr (kSoftcap) cap_in = softcap_in;
    if constexpr (kAlibi) slope = alibi_slope / unit;
    if constexpr (kHasScoreMod) unit_ = unit;
    if constexpr (kHasBias || kRelBias) bias_in = 1.f / unit;
  }
  // The variant of a prefill kernel's (batch entry, query head), for a sequence of seqlen_q queries and
  // seqlen_k keys whose query row i is aligned to key i + causal_offset.
  __device__ Variant(const AttentionParams& p, int batch, int head, int causal_offset, int seqlen_q, int seqlen_k)
      : Variant(unit(p), p.softcap_in, kAlibi ? p.alibi_slopes[batch * p.alibi_batch + head] : 0.f,
                VariantSite{batch, head, causal_offset, ModContext{seqlen_q, seqlen_k, &p.aux}},
                Bias::of(p, batch, head, seqlen_q, seqlen_k), kRelBias ? RelBias::of(p, head, causal_offset) : RelBias{}) {}

  // The bias entries of keys k, k + 1 (k even) of row q (zero bits outside the sequence), and entry e of them in
  // natural units: what score() takes as `bias`.
  __device__ __forceinline__ BiasPair bias_pair(int q, int k) const { return bias.pair(q, k); }
  static __device__ __forceinline__ float bias_value(const BiasPair& b, int e) { return Bias::value(b, e); }

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

  // The score the softmax sees for raw score s of query row q and key k (the bias entry read here).
  __device__ __forceinline__ float score(float s, int q, int k) const {
    if constexpr (kSoftcap) s = tanh_approx(s * cap_in);
    if constexpr (kAlibi) s = fmaf(-slope, fabsf(static_cast<float>(q + at.offset - k)), s);
    if constexpr (kRelBias) s = fmaf(rel.at(q, k), bias_in, s);
    if constexpr (kHasBias) s = fmaf(bias.entry(q, k), bias_in, s);
    if constexpr (kHasScoreMod) s = ScoreMod::apply(s * unit_, at.batch, at.head, q, k, at.ctx) / unit_;
    return s;
  }

  // ALiBi's distances of a row from a run of keys, in float: distance_base(q, k0) = q + offset - k0, and key
  // k0 + d is then |base - d| away (score(s, q, k, base, d) below). An unrolled loop over a tile's fragment has d a
  // constant: one FADD per score instead of the integer difference and its I2F (the I2F shares its pipe with the
  // softmax's MUFU.EX2). Exact, the same floats as score(s, q, k), while |q + offset - k0| + d < 2^24.
  __device__ __forceinline__ float distance_base(int q, int k0) const {
    return kAlibi ? static_cast<float>(q + at.offset - k0) : 0.f;
  }
  // `b`: the pair's bias entry (bias_value; ignored without a bias).
  __device__ __forceinline__ float score(float s, int q, int k, float base, float d, float b = 0.f) const {
    if constexpr (kSoftcap) s = tanh_approx(s * cap_in);
    if constexpr (kAlibi) s = fmaf(-slope, fabsf(base - d), s);
    if constexpr (kRelBias) s = fmaf(rel.at(q, k), bias_in, s);
    if constexpr (kHasBias) s = fmaf(b, bias_in, s);
    if constexpr (kHasScoreMod) s = ScoreMod::apply(s * unit_, at.batch, at.head, q, k, at.ctx) / unit_;
    return s;
  }

  // ALiBi where no visible key lies past a row's aligned key (causal masks: |a - k| = a - k), split into a term
  // per score and one per row: -slope (a - k) = -slope (a - k0) + slope d for key k = k0 + d. score_causal()
  // gives the score with the first (d a constant of an unrolled loop: one FFMA), alibi_row_term(base) the
  // second for base = distance_base(q, k0), for the softmax to add per row (OnlineSoftmax::update_lazy's
  // offsets). Not with a score_mod, which must see the whole score, nor a rel_bias, which reads its row per key.
  // (The kernels test kHasAlibi && !kHasScoreMod && !has_rel_bias() locally: NVRTC emits a global for every static
  // constexpr member.)
  __device__ __forceinline__ float score_causal(float s, float d, float b = 0.f) const {
    if constexpr (kSoftcap) s = tanh_approx(s * cap_in);
    if constexpr (kAlibi) s = fmaf(slope, d, s);
    if constexpr (kHasBias) s = fmaf(b, bias_in, s);
    return s;
  }
  __device__ __forceinline__ float alibi_row_term(float base) const { return kAlibi ? -slope * base : 0.f; }

  // Whether the snippet lets query row q see key k (the built-in mask aside); true without one.
  __device__ __forceinline__ bool visible(int q, int k) const {
    if constexpr (kHasMaskMod) return MaskMod::apply(at.batch, at.head, q, k, at.ctx);
    return true;
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
