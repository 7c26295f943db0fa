// Mask policies. The kind is a compile-time parameter; the constants (window sizes, chunk size) are run-time
// fields of AttentionParams. Query row i is aligned to key a = i + causal_offset (bottom-right alignment).
// Each policy answers three questions: which keys can a block of rows see at all (tiles outside are never
// loaded), is a whole tile visible (then no per-element work), and is one (row, key) pair visible.
#pragma once

#include "attention/params.cuh"

namespace flashjit {

enum class MaskKind { none = 0, causal = 1, sliding_window = 2, chunked = 3, chunked_causal = 4 };

__device__ __forceinline__ int floor_div(int a, int b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

template <MaskKind K>
struct Mask {
  int offset, left, right, chunk, seqlen_k;

  __device__ explicit Mask(const AttentionParams& p)
      : offset(p.causal_offset), left(p.window_left), right(p.window_right), chunk(p.chunk_size),
        seqlen_k(p.seqlen_k) {}
  // One sequence's mask (varlen: its own lengths; SeqInfo gives both values).
  __device__ Mask(const AttentionParams& p, int causal_offset, int seqlen_k_)
      : offset(causal_offset), left(p.window_left), right(p.window_right), chunk(p.chunk_size),
        seqlen_k(seqlen_k_) {}
  // From the values themselves (decode: its own parameters, query rows counted from its first new token).
  __device__ Mask(int causal_offset, int window_left, int window_right, int chunk_size, int seqlen_k_)
      : offset(causal_offset), left(window_left), right(window_right), chunk(chunk_size), seqlen_k(seqlen_k_) {}

  // Keys [lo, hi) that any of the rows [q0, q1) may see, clamped to [0, seqlen_k); hi <= lo when none.
  __device__ void key_range(int q0, int q1, int& lo, int& hi) const {
    int a0 = q0 + offset, a1 = q1 - 1 + offset;
    lo = 0;
    hi = seqlen_k;
    if constexpr (K == MaskKind::causal) {
      hi = min(hi, a1 + 1);
    } else if constexpr (K == MaskKind::sliding_window) {
      if (left >= 0) lo = max(lo, a0 - left);
      if (right >= 0) hi = min(hi, a1 + right + 1);
    } else if constexpr (K == MaskKind::chunked || K == MaskKind::chunked_causal) {
      lo = max(lo, floor_div(a0, chunk) * chunk);
      hi = min(hi, K == MaskKind::chunked ? (floor_div(a1, chunk) + 1) * chunk : a1 + 1);
    }
  }

  // The first key row q may see: keys below it are hidden whatever else holds (a window's or a chunk's start;
  // 0 for the masks without one). Not clamped to the keys that exist. Decode, causal by construction, asks
  // only this of the policy.
  __device__ int first_key(int q) const {
    int a = q + offset;
    if constexpr (K == MaskKind::sliding_window) {
      return left >= 0 ? a - left : 0;
    } else if constexpr (K == MaskKind::chunked || K == MaskKind::chunked_causal) {
      return floor_div(a, chunk) * chunk;
    } else {
      return 0;
    }
  }

  // True when every pair of rows [q0, q1) x keys [k0, k1) is visible (the seqlen_k bound aside).
  __device__ bool tile_all_visible(int q0, int q1, int k0, int k1) const {
    int a0 = q0 + offset, a1 = q1 - 1 + offset;
    if constexpr (K == MaskKind::none) {
      return true;
    } else if constexpr (K == MaskKind::causal) {
      return k1 - 1 <= a0;
    } else if constexpr (K == MaskKind::sliding_window) {
      return (left < 0 || k0 >= a1 - left) && (right < 0 || k1 - 1 <= a0 + right);
    } else {
      int c = floor_div(a0, chunk);
      bool same = c == floor_div(a1, chunk) && c == floor_div(k0, chunk) && c == floor_div(k1 - 1, chunk);
      if constexpr (K == MaskKind::chunked_causal) return same && k1 - 1 <= a0;
      return same;
    }
  }

  __device__ bool visible(int q, int k) const {
    int a = q + offset;
    if constexpr (K == MaskKind::none) {
      return true;
    } else if constexpr (K == MaskKind::causal) {
      return k <= a;
    } else if constexpr (K == MaskKind::sliding_window) {
      return (left < 0 || k >= a - left) && (right < 0 || k <= a + right);
    } else {
      bool same = floor_div(a, chunk) == floor_div(k, chunk);
      if constexpr (K == MaskKind::chunked_causal) return same && k <= a;
      return same;
    }
  }

  // Work grows with the row index (so heavy tiles should be scheduled first).
  static constexpr bool kWorkGrowsWithRow = K == MaskKind::causal;
};

}  // namespace flashjit
