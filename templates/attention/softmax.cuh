// Online softmax over rows held in mma C fragments. A thread holds, per 16-row m-tile, two rows (g and
// g + 8, g = lane / 4) and two adjacent columns per 8-column n-tile; the 4 threads of a quad share a row.
// Phases: update() takes a tile of raw scores, moves the running max, turns the scores into probabilities
// (exp2 with the scale folded into one FMA) and returns the factor O must be rescaled by; finalize() gives
// 1/l and the log-sum-exp. Rows that see no key keep max = -inf and finish with O = 0, LSE = -inf.
#pragma once

#include "common/math.cuh"

namespace flashjit {

template <int kRows>  // rows per thread (2 per m-tile)
struct OnlineSoftmax {
  float row_max[kRows];  // raw-score units
  float row_sum[kRows];  // this thread's partial sum; reduced over the quad in finalize()

  __device__ void init() {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      row_max[r] = neg_infinity();
      row_sum[r] = 0.f;
    }
  }

  // s: a tile of raw scores as C fragments, [m-tile][n-tile][4] (masked ones are -inf); row r = 2 * mt + h
  // owns elements 2h and 2h + 1 of each n-tile. Overwrites the scores with probabilities and writes into
  // rescale[r] the factor the row's O accumulator must be multiplied by.
  template <int kMT, int kNT>
  __device__ void update(float (&s)[kMT][kNT][4], float scale_log2, float (&rescale)[kRows]) {
    static_assert(kRows == 2 * kMT, "two rows per m-tile");
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = 2 * mt + h;
        const float m = tile_max(s, mt, h, row_max[r]);
        const float m_scaled = scaled(m, scale_log2);
        rescale[r] = exp2_approx(row_max[r] * scale_log2 - m_scaled);
        row_max[r] = m;
        row_sum[r] = row_sum[r] * rescale[r] + exponentiate(s, mt, h, scale_log2, m_scaled);
      }
    }
  }

  // Like update(), but lazy: a row keeps exponentiating against its previous max unless some row of the
  // warp would see a max larger by more than kLazyLog2 (log2 units), so the O rescale is skipped on most
  // tiles. Probabilities then reach at most 2^kLazyLog2 (fine for fp32 sums and for 16-bit P) and stay
  // exact: l and O share the stale max, which finalize() uses. Returns whether O must be rescaled (the
  // same answer for the whole warp); rescale[] is set only then.
  static constexpr float kLazyLog2 = 8.f;
  template <int kMT, int kNT>
  __device__ bool update_lazy(float (&s)[kMT][kNT][4], float scale_log2, float (&rescale)[kRows]) {
    return lazy<false>(s, scale_log2, rescale, nullptr);
  }
  // The same for scores s + offset[r]: this thread's elements of row r stand for s + offset[r] (an offset per
  // thread and row, e.g. a term of ALiBi that is constant along the thread's part of a row). The offset joins
  // the row's max before the quad's reduction and the exponent's bias, so it costs nothing per score.
  template <int kMT, int kNT>
  __device__ bool update_lazy(float (&s)[kMT][kNT][4], float scale_log2, float (&rescale)[kRows],
                              const float (&offset)[kRows]) {
    return lazy<true>(s, scale_log2, rescale, offset);
  }

 private:
  template <bool kOffset, int kMT, int kNT>
  __device__ __forceinline__ bool lazy(float (&s)[kMT][kNT][4], float scale_log2, float (&rescale)[kRows],
                                       const float* offset) {
    static_assert(kRows == 2 * kMT, "two rows per m-tile");
    float m_new[kRows];
    bool move = false;
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = 2 * mt + h;
        if constexpr (kOffset)
          m_new[r] = quad_max(fmaxf(row_max[r], thread_max(s, mt, h, neg_infinity()) + offset[r]));
        else m_new[r] = tile_max(s, mt, h, row_max[r]);
        // -inf - -inf is NaN: a row with no visible key yet does not move.
        move |= (m_new[r] - row_max[r]) * scale_log2 > kLazyLog2;
      }
    move = __any_sync(0xffffffffu, move);
    if (move) {
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const float m_scaled = scaled(m_new[r], scale_log2);
        rescale[r] = exp2_approx(row_max[r] * scale_log2 - m_scaled);
        row_max[r] = m_new[r];
        row_sum[r] *= rescale[r];
      }
    }
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = 2 * mt + h;
        float bias = scaled(row_max[r], scale_log2);
        if constexpr (kOffset) bias -= offset[r] * scale_log2;
        row_sum[r] += exponentiate(s, mt, h, scale_log2, bias);
      }
    return move;
  }

 public:
  // inv_sum[r] = 1 / l (0 for empty rows); lse[r] = natural log-sum-exp of the scaled scores.
  __device__ void finalize(float softmax_scale, float (&inv_sum)[kRows], float (&lse)[kRows]) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      float l = quad_sum(row_sum[r]);
      bool empty = !(l > 0.f);
      inv_sum[r] = empty ? 0.f : 1.f / l;
      lse[r] = empty ? neg_infinity() : row_max[r] * softmax_scale + log_approx(l);
    }
  }

 private:
  // The max of `m` and this thread's elements of row (mt, h) of the tile.
  template <int kMT, int kNT>
  static __device__ __forceinline__ float thread_max(const float (&s)[kMT][kNT][4], int mt, int h, float m) {
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) m = fmaxf(m, fmaxf(s[mt][nt][2 * h], s[mt][nt][2 * h + 1]));
    return m;
  }

  // The max of `m` and row (mt, h) of the tile, over the quad that shares the row.
  template <int kMT, int kNT>
  static __device__ __forceinline__ float tile_max(const float (&s)[kMT][kNT][4], int mt, int h, float m) {
    return quad_max(thread_max(s, mt, h, m));
  }

  // A row max in exp2 units; with no visible key yet it is -inf, and 0 is subtracted instead so that
  // exp2 gives 0, not NaN.
  static __device__ __forceinline__ float scaled(float m, float scale_log2) {
    return m == neg_infinity() ? 0.f : m * scale_log2;
  }

  // Row (mt, h) of the tile becomes exp2(s · scale_log2 - m_scaled); returns this thread's part of its sum.
  template <int kMT, int kNT>
  static __device__ __forceinline__ float exponentiate(float (&s)[kMT][kNT][4], int mt, int h, float scale_log2,
                                                       float m_scaled) {
    float sum = 0.f;
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float p = exp2_approx(fmaf(s[mt][nt][2 * h + e], scale_log2, -m_scaled));
        s[mt][nt][2 * h + e] = p;
        sum += p;
      }
    return sum;
  }
};

}  // namespace flashjit
