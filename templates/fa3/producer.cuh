// FA3 producer warpgroup: one elected thread issues every TMA load (Q once, then K and V tiles into a ring
// of stages), each completing on its "full" barrier. K and V have their own "empty" barriers: consumers
// release K as soon as S = Q·Kᵀ is done and V after P·V, so the next K load starts a softmax earlier.
// Varlen (kVarlen): 3-D views (head_dim, row, head) of the packed tensors, rows offset by the sequence's
// first row; a tile may run into the next sequence's rows (masked as keys, never stored as outputs) or past
// the last row (zero-filled).
// Packed GQA (kPackGqa): Q's views have one more dimension, the head within the KV head's group, after the
// columns (fa3/rows.cuh); a Q box is (columns, group, positions) at the work tile's KV head.
#pragma once

#include "fa3/shared_storage.cuh"
#include "fa3/tensor_maps.cuh"
#include "ptx/mbarrier.cuh"
#include "ptx/tma.cuh"

namespace flashjit::fa3 {

template <class Storage, int kBM, int kBN, int kStages, bool kVarlen = false, bool kPackGqa = false>
struct Producer {
  using QK = typename Storage::QK;
  using VO = typename Storage::VO;

  // One box of one column block x rows starting at `row` (of batch entry `batch`; varlen: of the packed tensor).
  // kPackedQ: a box of the packed-GQA views of Q (head: the KV head).
  template <bool kPackedQ = false>
  static __device__ __forceinline__ void load_box(unsigned dst, const TensorMap* map, unsigned bar, int col, int row,
                                                  int head, int batch) {
    if constexpr (kPackedQ && kVarlen) {
      ptx::tma_load_4d(dst, map, bar, col, 0, row, head);
    } else if constexpr (kPackedQ) {
      ptx::tma_load_5d(dst, map, bar, col, 0, row, head, batch);
    } else if constexpr (kVarlen) {
      ptx::tma_load_3d(dst, map, bar, col, row, head);
    } else {
      ptx::tma_load_4d(dst, map, bar, col, row, head, batch);
    }
  }

  // Every column block of a tile of `rows` rows at `dst`, from the maps of one tensor (fa3/tensor_maps.cuh).
  template <class Cols, bool kPackedQ = false>
  static __device__ __forceinline__ void load_tile_boxes(unsigned dst, const TensorMap (&maps)[3], int rows,
                                                         unsigned bar, int row, int head, int batch) {
#pragma unroll
    for (int cb = 0; cb < Cols::kWide; ++cb)
      load_box<kPackedQ>(dst + cb * rows * 128, &maps[0], bar, cb * 64, row, head, batch);
    if constexpr (Cols::kHas32)
      load_box<kPackedQ>(dst + Cols::offset32(rows), &maps[1], bar, Cols::kCol32, row, head, batch);
    if constexpr (Cols::kHas16)
      load_box<kPackedQ>(dst + Cols::offset16(rows), &maps[2], bar, Cols::kCol16, row, head, batch);
  }

  template <class Cols>
  static __device__ void prefetch(const TensorMap (&maps)[3]) {
    if constexpr (Cols::kWide > 0) ptx::tma_prefetch_descriptor(&maps[0]);
    if constexpr (Cols::kHas32) ptx::tma_prefetch_descriptor(&maps[1]);
    if constexpr (Cols::kHas16) ptx::tma_prefetch_descriptor(&maps[2]);
  }
  static __device__ void prefetch_descriptors(const TensorMaps& maps) {
    prefetch<QK>(maps.q);
    prefetch<QK>(maps.k);
    prefetch<VO>(maps.v);
  }

  // Loads the Q tile of the CTA's `local`-th work tile (after the consumers released the previous one) and
  // its K/V tiles into the ring, whose running index starts at `ring` (it continues across work tiles).
  // q_start / k_start: the sequence's first rows in the packed tensors (varlen; 0 otherwise). m0 is the tile's
  // first position; head its query head (packed GQA: its KV head, the same as kv_head).
  static __device__ void load_tile(const Storage& smem, const TensorMaps& maps, int local, int m0, int head,
                                   int kv_head, int batch, int tile_begin, int num_tiles, int ring, int q_start,
                                   int k_start) {
    auto load_kv = [&](int i) {
      const int r = ring + i, stage = r % kStages;
      // The first pass through the ring finds every stage free (parity trick: wait on the phase before).
      const unsigned free_parity = ((r / kStages) & 1) ^ 1;
      const int n0 = k_start + (tile_begin + i) * kBN;
      ptx::mbarrier_wait(smem.k_empty(stage), free_parity);
      ptx::mbarrier_arrive_expect_tx(smem.k_full(stage), Storage::kKBytes);
      load_tile_boxes<QK>(smem.k(stage), maps.k, kBN, smem.k_full(stage), n0, kv_head, batch);
      ptx::mbarrier_wait(smem.v_empty(stage), free_parity);
      ptx::mbarrier_arrive_expect_tx(smem.v_full(stage), Storage::kVBytes);
      load_tile_boxes<VO>(smem.v(stage), maps.v, kBN, smem.v_full(stage), n0, kv_head, batch);
    };
    // Q's buffer frees only when the epilogue of the work tile that last used it (which stages O there) is
    // done. With one buffer that is the previous tile, whose epilogue runs after its last GEMMs released the
    // ring's stages: so the first K/V tiles of this work tile go out before the wait for Q and stream under
    // that epilogue. With two buffers it is the tile before that, long finished: Q goes first.
    const int buf = local % Storage::kQBuffers, use = local / Storage::kQBuffers;
    const int early = Storage::kQBuffers == 1 && local > 0 ? (num_tiles < kStages ? num_tiles : kStages) : 0;
    for (int i = 0; i < early; ++i) load_kv(i);
    if (use > 0) ptx::mbarrier_wait(smem.q_empty(buf), (use - 1) & 1);
    ptx::mbarrier_arrive_expect_tx(smem.q_full(buf), Storage::kQBytes);
    load_tile_boxes<QK, kPackGqa>(smem.q(buf), maps.q, kBM, smem.q_full(buf), q_start + m0, head, batch);
    for (int i = early; i < num_tiles; ++i) load_kv(i);
  }
};

}  // namespace flashjit::fa3
