// FA3 producer warpgroup: one elected thread issues every TMA load (Q once, then K and V tiles into a ring
// of stages), each completing on its "full" barrier. K and V have their own "empty" barriers: consumers
// release K as soon as S = Q·Kᵀ is done and V after P·V, so the next K load starts a softmax earlier.
#pragma once

#include "fa3/shared_storage.cuh"
#include "fa3/tensor_maps.cuh"
#include "ptx/mbarrier.cuh"
#include "ptx/tma.cuh"

namespace flashjit::fa3 {

template <class Storage, int kHeadDim, int kBM, int kBN, int kStages>
struct Producer {
  static __device__ void prefetch_descriptors(const TensorMaps& maps) {
    ptx::tma_prefetch_descriptor(&maps.q);
    ptx::tma_prefetch_descriptor(&maps.k);
    ptx::tma_prefetch_descriptor(&maps.v);
  }

  // Loads the Q tile of the CTA's `local`-th work tile (after the consumers released the previous one) and
  // its K/V tiles into the ring, whose running index starts at `ring` (it continues across work tiles).
  static __device__ void load_tile(const Storage& smem, const TensorMaps& maps, int local, int m0, int head,
                                   int kv_head, int batch, int tile_begin, int num_tiles, int ring) {
    if (local > 0) ptx::mbarrier_wait(smem.q_empty(), (local - 1) & 1);
    ptx::mbarrier_arrive_expect_tx(smem.q_full(), Storage::kQBytes);
#pragma unroll
    for (int cb = 0; cb < kHeadDim / 64; ++cb)
      ptx::tma_load_4d(smem.q() + cb * kBM * 128, &maps.q, smem.q_full(), cb * 64, m0, head, batch);

    for (int i = 0; i < num_tiles; ++i) {
      const int r = ring + i, stage = r % kStages;
      // The first pass through the ring finds every stage free (parity trick: wait on the phase before).
      const unsigned free_parity = ((r / kStages) & 1) ^ 1;
      const int n0 = (tile_begin + i) * kBN;
      ptx::mbarrier_wait(smem.k_empty(stage), free_parity);
      ptx::mbarrier_arrive_expect_tx(smem.k_full(stage), Storage::kKVBytes);
#pragma unroll
      for (int cb = 0; cb < kHeadDim / 64; ++cb)
        ptx::tma_load_4d(smem.k(stage) + cb * kBN * 128, &maps.k, smem.k_full(stage), cb * 64, n0, kv_head, batch);
      ptx::mbarrier_wait(smem.v_empty(stage), free_parity);
      ptx::mbarrier_arrive_expect_tx(smem.v_full(stage), Storage::kKVBytes);
#pragma unroll
      for (int cb = 0; cb < kHeadDim / 64; ++cb)
        ptx::tma_load_4d(smem.v(stage) + cb * kBN * 128, &maps.v, smem.v_full(stage), cb * 64, n0, kv_head, batch);
    }
  }
};

}  // namespace flashjit::fa3
