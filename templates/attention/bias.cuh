// Additive bias tensors (issue 26; AttentionProblem::bias): one entry per (batch, query head, query row, key),
// added to the natural logit after softcap and ALiBi and before score_mod (attention/variant.cuh). Entries are
// fp32, bf16 or fp16 values, or bools (one byte: false hides the pair, -inf; true adds 0). Strides are free and
// may be 0 (broadcast); varlen and paged kernels index rows and keys by position within their sequence.
//
// A thread of an mma C fragment holds two adjacent keys of a row (2j, 2j + 1), so entries are read in pairs:
// one aligned load of both when the params allow it (bias_pairs: contiguous keys, every row on an even entry),
// else one load per key. Nothing outside [0, rows) x [0, keys) of the sequence is read: a pair there reads as
// zero bits (bools: hidden), and every such pair is masked or never stored by the kernels.
#pragma once

#include "common/math.cuh"

namespace flashjit {

enum class BiasType { none, fp32, bf16, fp16, boolean };

// One entry's storage (One), two adjacent entries' (Two, aligned for one load), and an entry as a float.
template <BiasType kType> struct BiasEntries;
template <> struct BiasEntries<BiasType::fp32> {
  using One = float;
  using Two = float2;
  static __device__ __forceinline__ Two make(One lo, One hi) { return make_float2(lo, hi); }
  static __device__ __forceinline__ float value(const Two& t, int e) { return e ? t.y : t.x; }
};
template <> struct BiasEntries<BiasType::bf16> {
  using One = unsigned short;
  using Two = unsigned;  // entry 0 in the low half
  static __device__ __forceinline__ Two make(One lo, One hi) { return lo | static_cast<unsigned>(hi) << 16; }
  static __device__ __forceinline__ float value(Two t, int e) {
    return __uint_as_float(e ? t & 0xffff0000u : t << 16);
  }
};
template <> struct BiasEntries<BiasType::fp16> {
  using One = unsigned short;
  using Two = unsigned;
  static __device__ __forceinline__ Two make(One lo, One hi) { return lo | static_cast<unsigned>(hi) << 16; }
  static __device__ __forceinline__ float value(Two t, int e) {
    const unsigned short bits = static_cast<unsigned short>(e ? t >> 16 : t);
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(bits));
    return f;
  }
};
template <> struct BiasEntries<BiasType::boolean> {
  using One = unsigned char;
  using Two = unsigned short;
  static __device__ __forceinline__ Two make(One lo, One hi) {
    return static_cast<unsigned short>(lo | static_cast<unsigned>(hi) << 8);
  }
  static __device__ __forceinline__ float value(Two t, int e) {
    return ((e ? t >> 8 : t) & 0xffu) != 0 ? 0.f : neg_infinity();
  }
};

// The bias entries of one (batch entry, query head): a plane [rows, keys] at element strides (q_stride, k_stride).
template <BiasType kType>
struct BiasView {
  using E = BiasEntries<kType>;
  using One = typename E::One;
  using Two = typename E::Two;
  const One* plane;
  long long q_stride, k_stride;
  int rows, keys;  // the sequence's lengths
  bool pairs;      // params' bias_pairs
  // The entries' type (a function: NVRTC emits a global for each static constexpr data member a kernel names).
  static constexpr BiasType type() { return kType; }

  // The plane of (batch, head) of a kernel's params (AttentionParams, DecodeParams: bias and its strides), for a
  // sequence of `rows` query rows and `keys` keys.
  template <class Params>
  static __device__ __forceinline__ BiasView of(const Params& p, int batch, int head, int rows, int keys) {
    return BiasView{static_cast<const One*>(p.bias) + batch * p.bias_batch + head * p.bias_head, p.bias_q, p.bias_k,
                    rows, keys, p.bias_pairs != 0};
  }

  // The entries of keys k and k + 1 (k even) of row q.
  __device__ __forceinline__ Two pair(int q, int k) const {
    const One zero = 0;
    if (q >= rows || k >= keys) return E::make(zero, zero);
    const One* row = plane + q * q_stride;
    if (pairs && k + 1 < keys) return __ldg(reinterpret_cast<const Two*>(row + k));
    return E::make(__ldg(row + k * k_stride), k + 1 < keys ? __ldg(row + (k + 1) * k_stride) : zero);
  }
  // The entry of key k of row q as a float (natural units; bools 0 or -inf).
  __device__ __forceinline__ float entry(int q, int k) const {
    const One zero = 0;
    return E::value(E::make(q < rows && k < keys ? __ldg(plane + q * q_stride + k * k_stride) : zero, zero), 0);
  }
  static __device__ __forceinline__ float value(const Two& t, int e) { return E::value(t, e); }
};

// No bias: nothing to read.
template <>
struct BiasView<BiasType::none> {
  struct Two {};
  static constexpr BiasType type() { return BiasType::none; }
  template <class Params>
  static __device__ __forceinline__ BiasView of(const Params&, int, int, int, int) { return {}; }
  __device__ __forceinline__ Two pair(int, int) const { return {}; }
  __device__ __forceinline__ float entry(int, int) const { return 0.f; }
  static __device__ __forceinline__ float value(const Two&, int) { return 0.f; }
};

}  // namespace flashjit
