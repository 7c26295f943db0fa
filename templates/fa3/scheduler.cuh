// FA3 tile schedulers: which (m-block, head, batch) work tiles a CTA processes, in order.
// Grid: one tile per CTA from the 3-D grid (m-blocks along x, heavy ones first when work grows with the
// row). Persistent: gridDim.x CTAs stride over all tiles (a CTA's next K/V loads overlap its epilogue).
// Equal tiles (no causal-like mask): m-block fastest, so the CTAs running at once share one head's K/V in
// L2. Tiles whose work grows with the row: rounds of gridDim.x tiles, heaviest m-blocks first over every
// head, the CTA order reversed on odd rounds (snake), so each CTA's total work is about the same. Striding
// over m-blocks instead hands a CTA the m-blocks i, i + G, i + 2G, ... mod M: when G is a multiple of M
// (S 1536: 12 m-blocks, 132 CTAs) one CTA gets only the heaviest (H200: 293 against 457 TFLOP/s at S 2048).
// Modelled (work of a tile = its m-block + 1), the busiest CTA against the mean: 1.90 -> 1.11 at S 1536,
// 1.57 -> 1.003 for 16 heads at S 16384, 1.38 -> 1.03 at S 1024.
#pragma once

#include "attention/params.cuh"

namespace flashjit::fa3 {

struct WorkTile {
  int m_block, head, batch;
};

template <bool kPersistent, bool kHeavyFirst>
struct TileScheduler {
  int next, stride, total, m_blocks, heads;

  // positions: query positions per work tile; heads: the tiles' heads (query heads, or KV heads when the
  // tile packs a group's query heads: fa3/rows.cuh).
  __device__ TileScheduler(const AttentionParams& p, int positions, int heads_) : heads(heads_) {
    if constexpr (kPersistent) {
      m_blocks = (p.seqlen_q + positions - 1) / positions;
      total = m_blocks * heads * p.batch;
      next = blockIdx.x;
      stride = gridDim.x;
    } else {
      m_blocks = gridDim.x;
      total = 1;
      next = 0;
      stride = 1;
    }
  }

  __device__ bool valid() const { return next < total; }
  __device__ void advance() { next += stride; }

  __device__ WorkTile tile() const {
    int m, head, batch;
    if constexpr (kPersistent && kHeavyFirst) {
      const int round = next / stride, pos = next - round * stride;
      const int size = min(stride, total - round * stride);  // the last round may be partial
      const int idx = round * stride + ((round & 1) ? size - 1 - pos : pos);
      const int per_m = total / m_blocks;  // heads x batch tiles share an m-block
      const int rest = idx % per_m;
      return {m_blocks - 1 - idx / per_m, rest % heads, rest / heads};
    } else if constexpr (kPersistent) {
      m = next % m_blocks;
      head = (next / m_blocks) % heads;
      batch = next / m_blocks / heads;
    } else {
      m = blockIdx.x, head = blockIdx.y, batch = blockIdx.z;
    }
    return {kHeavyFirst ? m_blocks - 1 - m : m, head, batch};
  }
};

}  // namespace flashjit::fa3
