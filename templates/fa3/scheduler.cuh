// FA3 tile schedulers: which (m-block, head, batch) work tiles a CTA processes, in order.
// Grid: one tile per CTA from the 3-D grid (m-blocks along x, heavy ones first when work grows with the
// row). Persistent: gridDim.x CTAs stride over all tiles, m-block fastest, so the CTAs running at once
// share one head's K/V in L2 and a CTA's next K/V loads overlap its epilogue.
#pragma once

#include "attention/params.cuh"

namespace flashjit::fa3 {

struct WorkTile {
  int m_block, head, batch;
};

template <bool kPersistent, bool kHeavyFirst>
struct TileScheduler {
  int next, stride, total, m_blocks, heads;

  __device__ TileScheduler(const AttentionParams& p, int block_m) : heads(p.heads_q) {
    if constexpr (kPersistent) {
      m_blocks = (p.seqlen_q + block_m - 1) / block_m;
      total = m_blocks * p.heads_q * p.batch;
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
    if constexpr (kPersistent) {
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
