// FA3 consumer warpgroup: 64 query rows. Per key tile i it issues S_i = Q·K_iᵀ (SS wgmma) and, behind it,
// O += P_{i-1}·V_{i-1} (RS wgmma, P in registers), then runs the softmax of S_i while P·V is still on the
// tensor cores. Between warpgroups, a ping-pong on named barriers lets one warpgroup issue its GEMMs while
// the other runs its softmax: warpgroup w waits for its turn before issuing and hands the turn to w + 1
// after. K of a stage is released once S is done, V once P·V is.
// kPackGqa (fa3/rows.cuh): the thread's two rows are positions row0 and packed_row1 (not row0 + 8), and the
// warpgroup's rows span positions [packed_first, packed_end).
// A staged bias (Bias: fa3/bias_tile.cuh, bytes() > 0) is read from the K stage's bias tile while S runs. Its reads
// are each warp's own, so each warp releases K itself (after a __syncwarp, so its lanes' reads are done): the K
// barriers then count four arrivals per warpgroup (k_releases()), one otherwise.
#pragma once

#include "fa3/bias_tile.cuh"

#include "attention/key_tiles.cuh"
#include "attention/mask.cuh"
#include "attention/params.cuh"
#include "attention/softmax.cuh"
#include "attention/variant.cuh"
#include "common/types.cuh"
#include "ptx/mbarrier.cuh"
#include "ptx/regs.cuh"
#include "ptx/wgmma.cuh"

namespace flashjit::fa3 {

template <class T, class Storage, int kBM, int kBN, int kStages, MaskKind kMask, class V = NoVariant,
          bool kPackGqa = false, class Bias = NoStagedBias>
struct Consumer {
  using QK = typename Storage::QK;
  using VO = typename Storage::VO;
  static constexpr bool kBf16 = MmaName<T>::is_bf16;
  static constexpr int kKS = QK::kKSteps;  // k-steps of Q·Kᵀ
  static constexpr int kPK = kBN / 16;     // k-steps of P·V
  static constexpr int kOT = VO::kPadded / 8;  // 8-column n-tiles of O
  // Arrivals on a K stage's empty barrier per warpgroup (functions: NVRTC makes static constexpr members globals).
  static constexpr bool staged_bias() { return Bias::bytes() > 0; }
  static constexpr int k_releases() { return staged_bias() ? 4 : 1; }
  static_assert(!staged_bias() || V::kHasBias, "a staged bias needs a bias variant");

  float s[1][kBN / 8][4];       // scores, then probabilities (fp32)
  float o[kOT][4];              // output accumulator
  unsigned pf[kPK][4];          // P as A fragments
  OnlineSoftmax<2> softmax;
  // Bias kernels: the entries of the thread's key pairs of a tile, [n-tile][row], loaded by load_bias() while
  // Q·Kᵀ runs on the tensor cores and added by softmax_step().
  typename V::BiasPair bias[V::kHasBias ? kBN / 8 : 1][2];

  int wg;        // consumer index: rows [64 * wg, 64 * wg + 64) of the CTA tile
  int consumers; // consumer warpgroups in the CTA
  int row0;      // query position of this thread's first row (the second: row1())
  int lane;
  int qbuf = 0;  // Q buffer of the current work tile
  int packed_row1, packed_first, packed_end;  // kPackGqa only: set by the kernel per work tile

  // Query position of the thread's second row.
  __device__ int row1() const {
    if constexpr (kPackGqa) return packed_row1;
    return row0 + 8;
  }
  // Query positions [first, end) of the warpgroup's 64 rows (end may pass the sequence's length).
  __device__ void wg_span(int& first, int& end) const {
    if constexpr (kPackGqa) {
      first = packed_first, end = packed_end;
    } else {
      first = row0 - lane / 4 - 16 * ((threadIdx.x / 32) % 4);
      end = first + 64;
    }
  }

  // K-major operands (Q, K): k-step ks reads 16 columns of one column block (fa3/columns.cuh).
  static __device__ __forceinline__ unsigned long long k_major(unsigned tile, int rows, int row, int ks) {
    int block, width, within;
    QK::locate(rows, 16 * ks, block, width, within);
    const unsigned mode = width == 128 ? 1 : width == 64 ? 2 : 3;
    return ptx::smem_descriptor(tile + block + row * width + within, 16, 8 * width, mode);
  }
  __device__ unsigned long long q_desc(const Storage& smem, int ks) const {
    return k_major(smem.q(qbuf), kBM, wg * 64, ks);
  }
  __device__ unsigned long long k_desc(const Storage& smem, int stage, int ks) const {
    return k_major(smem.k(stage), kBN, 0, ks);
  }

  __device__ void issue_qk(const Storage& smem, int stage) {
    ptx::fence_registers(s[0]);
    ptx::wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kKS; ++ks)
      ptx::WgmmaSS<kBN>::template run<kBf16>(s[0], q_desc(smem, ks), k_desc(smem, stage, ks), ks > 0 ? 1 : 0);
    ptx::wgmma_commit();
    ptx::fence_registers(s[0]);
  }

  // The n-tiles [first, first + N / 8) of O as an accumulator of an N-column wgmma.
  template <int N>
  __device__ __forceinline__ float (&o_part(int first))[N / 8][4] {
    return *reinterpret_cast<float(*)[N / 8][4]>(&o[first][0]);
  }

  // O += P·V: V is the MN-major B operand, one wgmma per column group (the 64-column blocks together, whose
  // stride is the leading offset; then the 32- and the 16-column block, each its own swizzle).
  __device__ void issue_pv(const Storage& smem, int stage) {
    ptx::fence_registers(o);
    ptx::wgmma_fence();
    const unsigned v = smem.v(stage);
#pragma unroll
    for (int kk = 0; kk < kPK; ++kk) {
      if constexpr (VO::kWide > 0)
        ptx::WgmmaRS<64 * VO::kWide>::template run<kBf16>(
            o_part<64 * VO::kWide>(0), pf[kk], ptx::smem_descriptor(v + kk * 16 * 128, kBN * 128, 1024, 1));
      if constexpr (VO::kHas32)
        ptx::WgmmaRS<32>::template run<kBf16>(
            o_part<32>(VO::kCol32 / 8), pf[kk],
            ptx::smem_descriptor(v + VO::offset32(kBN) + kk * 16 * 64, kBN * 64, 512, 2));
      if constexpr (VO::kHas16)
        ptx::WgmmaRS<16>::template run<kBf16>(
            o_part<16>(VO::kCol16 / 8), pf[kk],
            ptx::smem_descriptor(v + VO::offset16(kBN) + kk * 16 * 32, kBN * 32, 256, 3));
    }
    ptx::wgmma_commit();
    ptx::fence_registers(o);
  }

  __device__ void pack_p() {
#pragma unroll
    for (int kk = 0; kk < kPK; ++kk) {
      pf[kk][0] = pack2<T>(s[0][2 * kk][0], s[0][2 * kk][1]);
      pf[kk][1] = pack2<T>(s[0][2 * kk][2], s[0][2 * kk][3]);
      pf[kk][2] = pack2<T>(s[0][2 * kk + 1][0], s[0][2 * kk + 1][1]);
      pf[kk][3] = pack2<T>(s[0][2 * kk + 1][2], s[0][2 * kk + 1][3]);
    }
  }

  // The bias entries of the key tile at n0 in ring stage `stage` (a bias kernel's; nothing otherwise): issued
  // before the wait for S, so that their latency hides under the GEMM. From the stage's bias tile when staged.
  __device__ __forceinline__ void load_bias(const V& variant, int n0, const Storage& smem, int stage) {
    if constexpr (staged_bias()) {
      const unsigned tile = smem.bias(stage);
      const unsigned at = Bias::row_offset(64 * wg + 16 * ((threadIdx.x / 32) % 4) + lane / 4, lane);
#pragma unroll
      for (int j = 0; j < kBN / 8; ++j) {
        bias[j][0] = Bias::pair(tile, at, j);
        bias[j][1] = Bias::pair(tile + 1024, at, j);  // the thread's second row, 8 on
      }
    } else if constexpr (V::kHasBias) {
      const int k0 = n0 + 2 * (lane % 4), r1 = row1();
#pragma unroll
      for (int j = 0; j < kBN / 8; ++j) {
        bias[j][0] = variant.bias_pair(row0, k0 + 8 * j);
        bias[j][1] = variant.bias_pair(r1, k0 + 8 * j);
      }
    }
  }
  // Entry c of n-tile j's fragment: its row's pair, column c % 2 (0 without a bias).
  __device__ __forceinline__ float bias_at(int j, int c) const {
    if constexpr (V::kHasBias) return V::bias_value(bias[j][c / 2], c % 2);
    return 0.f;
  }

  // The variant's scores (softcap, ALiBi, the bias load_bias() read, score_mod), then the mask and mask_mod (per
  // element only where the tile is cut, or on every tile with a mask_mod but those a block mask calls full), then
  // the online softmax in the variant's unit.
  __device__ void softmax_step(const Mask<kMask>& mask, const V& variant, int n0, int seqlen_k, float unit_log2,
                               float (&rescale)[2], bool full) {
    // ALiBi under causal masks (every visible key at or before the row's aligned key): a term per score and one
    // per row (Variant::score_causal, alibi_row_term), the row's in the softmax's offsets. H200, llama3 causal
    // S 8192, 128-row tiles: −12% -> −9.8% against the plain kernel (bench/NOTES.md, 2026-12-02). Not on three
    // warpgroups (160 registers): with softcap + sinks at d96 ptxas spilled 12 bytes.
    constexpr bool kAlibiRowTerm = V::kHasAlibi && !V::kHasScoreMod && !V::has_rel_bias() && kBM <= 128 &&
                                   (kMask == MaskKind::causal || kMask == MaskKind::chunked_causal);
    float row_term[2];
    if constexpr (kAlibiRowTerm) {
      const int k0 = n0 + 2 * (lane % 4);  // this thread's first key of the tile
      row_term[0] = variant.alibi_row_term(variant.distance_base(row0, k0));
      row_term[1] = variant.alibi_row_term(variant.distance_base(row1(), k0));
#pragma unroll
      for (int j = 0; j < kBN / 8; ++j)
#pragma unroll
        for (int c = 0; c < 4; ++c)
          s[0][j][c] = variant.score_causal(s[0][j][c], static_cast<float>(8 * j + c % 2), bias_at(j, c));
    } else if constexpr (V::kTransformsScores) {
      const int k0 = n0 + 2 * (lane % 4);  // this thread's first key of the tile
      const float base[2] = {variant.distance_base(row0, k0), variant.distance_base(row1(), k0)};
#pragma unroll
      for (int j = 0; j < kBN / 8; ++j)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const int d = 8 * j + c % 2, row = c / 2 ? row1() : row0;
          s[0][j][c] = variant.score(s[0][j][c], row, k0 + d, base[c / 2], static_cast<float>(d), bias_at(j, c));
        }
    }
    int wg_first, wg_end;
    wg_span(wg_first, wg_end);
    const bool mod = V::kMasks && !full;
    if (mod || n0 + kBN > seqlen_k || !mask.tile_all_visible(wg_first, wg_end, n0, n0 + kBN)) {
      // A mask_mod on a tile of keys that all exist runs branch-free: its loads unconditional, where the
      // short-circuit below makes ptxas branch around each (SASS, a document mask_mod: 480 BRA, 144 BSSY; H200,
      // llama3 causal S 16384: 47 TFLOP/s); only the tile past the last key guards each pair by the key count.
      if (V::kMasks && mod && n0 + kBN <= seqlen_k) {
#pragma unroll
        for (int j = 0; j < kBN / 8; ++j)
#pragma unroll
          for (int c = 0; c < 4; ++c) {
            const int row = c / 2 ? row1() : row0, key = n0 + 8 * j + 2 * (lane % 4) + c % 2;
            if (!(mask.visible(row, key) & variant.visible(row, key))) s[0][j][c] = neg_infinity();
          }
      } else {
#pragma unroll
        for (int j = 0; j < kBN / 8; ++j)
#pragma unroll
          for (int c = 0; c < 4; ++c) {
            const int row = c / 2 ? row1() : row0, key = n0 + 8 * j + 2 * (lane % 4) + c % 2;
            if (key >= seqlen_k || !mask.visible(row, key) || (mod && !variant.visible(row, key)))
              s[0][j][c] = neg_infinity();
          }
      }
    }
    if constexpr (kAlibiRowTerm) moved = softmax.update_lazy(s, unit_log2, rescale, row_term);
    else moved = softmax.update_lazy(s, unit_log2, rescale);
  }
  bool moved = true;  // whether the last softmax_step moved a row max of this warp (O needs rescaling)

  // Ping-pong turns: barrier kTurnBarrier + w is "warpgroup w may issue"; 256 threads = its 128 syncing
  // plus the 128 of the warpgroup before it arriving.
  static constexpr int kTurnBarrier = 4;
  __device__ void wait_turn() const {
    if (consumers > 1) ptx::named_barrier_sync(kTurnBarrier + wg, 256);
  }
  __device__ void pass_turn(bool last_phase) const {
    // The last warpgroup skips its final hand-over so every barrier ends with as many arrivals as syncs.
    if (consumers > 1 && !(last_phase && wg == consumers - 1))
      ptx::named_barrier_arrive(kTurnBarrier + (wg + 1) % consumers, 256);
  }

  __device__ void rescale_o(const float (&rescale)[2]) {
#pragma unroll
    for (int j = 0; j < kOT; ++j) {
      o[j][0] *= rescale[0];
      o[j][1] *= rescale[0];
      o[j][2] *= rescale[1];
      o[j][3] *= rescale[1];
    }
  }

  // This warpgroup is done with the K (and staged bias) tile of `stage`: its leader releases it, or with a staged
  // bias each warp once its lanes' reads are done.
  __device__ __forceinline__ void release_k(const Storage& smem, int stage) const {
    if constexpr (staged_bias()) {
      __syncwarp();
      if (lane == 0) ptx::mbarrier_arrive(smem.k_empty(stage));
    } else if (threadIdx.x % 128 == 0) {
      ptx::mbarrier_arrive(smem.k_empty(stage));
    }
  }

  // A key tile of the work tile that none of this warpgroup's rows may see: wait until it is loaded (so that
  // the release below cannot count toward the stage's previous phase), take the turn without issuing, and
  // release both halves of the stage.
  __device__ void pass_tile(const Storage& smem, int r, bool last_turn) const {
    const int stage = r % kStages;
    const unsigned parity = (r / kStages) & 1;
    ptx::mbarrier_wait(smem.k_full(stage), parity);
    ptx::mbarrier_wait(smem.v_full(stage), parity);
    wait_turn();
    pass_turn(last_turn);
    release_k(smem, stage);
    if (threadIdx.x % 128 == 0) ptx::mbarrier_arrive(smem.v_empty(stage));
  }

  // The key tiles tiles.tile(first) .. tiles.tile(first + count - 1) (count >= 1) that this warpgroup computes,
  // the first at ring index `ring`: count + 1 turns, the last handed over with last_turn. Each tile's index is read
  // at the top of its step, before the waits (a block mask's list is in global memory).
  template <class Tiles>
  __device__ void run_tiles(const Storage& smem, const Mask<kMask>& mask, const V& variant, float unit_log2,
                            int seqlen_k, const Tiles& tiles, int first_tile, int count, int ring, bool last_turn) {
    const bool leader = threadIdx.x % 128 == 0;
    float rescale[2];
    const int tile0 = tiles.tile(first_tile);
    const bool full0 = tiles.full(first_tile);
    const int first = ring % kStages;
    ptx::mbarrier_wait(smem.k_full(first), (ring / kStages) & 1);
    wait_turn();
    issue_qk(smem, first);
    pass_turn(false);
    load_bias(variant, tile0 * kBN, smem, first);
    ptx::wgmma_wait<0>();
    ptx::fence_registers(s[0]);
    release_k(smem, first);
    softmax_step(mask, variant, tile0 * kBN, seqlen_k, unit_log2, rescale, full0);

    for (int i = 1; i < count; ++i) {
      const int r = ring + i, stage = r % kStages, prev = (r - 1) % kStages;
      const int tile = tiles.tile(first_tile + i);
      const bool full = tiles.full(first_tile + i);
      pack_p();  // frees the score registers for S_i
      ptx::mbarrier_wait(smem.k_full(stage), (r / kStages) & 1);
      ptx::mbarrier_wait(smem.v_full(prev), ((r - 1) / kStages) & 1);
      wait_turn();
      issue_qk(smem, stage);
      issue_pv(smem, prev);
      pass_turn(false);
      load_bias(variant, tile * kBN, smem, stage);
      ptx::wgmma_wait<1>();  // S_i is ready; P_{i-1}·V_{i-1} may still run
      ptx::fence_registers(s[0]);
      release_k(smem, stage);
      softmax_step(mask, variant, tile * kBN, seqlen_k, unit_log2, rescale, full);
      ptx::wgmma_wait<0>();
      ptx::fence_registers(o);
      if (leader) ptx::mbarrier_arrive(smem.v_empty(prev));
      if (moved) rescale_o(rescale);
    }
    const int r_last = ring + count - 1, last = r_last % kStages;
    pack_p();
    ptx::mbarrier_wait(smem.v_full(last), (r_last / kStages) & 1);
    wait_turn();
    issue_pv(smem, last);
    pass_turn(last_turn);
    ptx::wgmma_wait<0>();
    ptx::fence_registers(o);
    if (leader) ptx::mbarrier_arrive(smem.v_empty(last));
  }

  // One work tile: `local` counts the CTA's work tiles (Q buffer phase), `ring` is the running index of its
  // first K/V tile in the stage ring. causal_offset and seqlen_k are the sequence's (SeqInfo); batch, head
  // and seqlen_q pick the variant's constants.
  //
  // The work tile's key tiles are those any of its rows may see; with kPerWarpgroupTiles this warpgroup
  // computes only the ones its own 64 rows may see, [a, b), and passes through the others (pass_tile). Every
  // warpgroup takes num_tiles + 1 turns of the ping-pong whatever it computes, so the turns stay paired. Taken
  // for sliding windows on three warpgroups up to d64, where it was measured to pay: H200, window 128, d64
  // H64/8 S 8192, 192-row tiles on 64-key tiles (5 per work tile, 3 per warpgroup) 61 -> 65-67 TFLOP/s. Not
  // with two warpgroups (128-row tiles on 64-key tiles, 3 of 4 per warpgroup: 58 either way; 128-key tiles at
  // d128, windows 512 and 4096: 0.95-0.96x the plain loop, within the noise but not better), nor with causal
  // or chunked masks (at most one tile of a long row skipped; the extra loops cost the register-tight kernels
  // spills: ptxas, persistent, d96 three warpgroups 52 bytes, d256 140).
  // Not with a block mask, whose tiles are not a run of the key range.
  static constexpr bool kPerWarpgroupTiles =
      kMask == MaskKind::sliding_window && kBM >= 192 && QK::kPadded <= 64 && VO::kPadded <= 64;
  template <class Tiles>
  __device__ void mainloop(const Storage& smem, const AttentionParams& p, int causal_offset, int seqlen_k,
                           const Tiles& tiles, int local, int ring, int batch, int head, int seqlen_q) {
    const int num_tiles = tiles.count;
#pragma unroll
    for (int j = 0; j < kOT; ++j)
#pragma unroll
      for (int c = 0; c < 4; ++c) o[j][c] = 0.f;
    softmax.init();
    qbuf = local % Storage::kQBuffers;
    // Also before an early return: the epilogue stages O in this Q buffer.
    ptx::mbarrier_wait(smem.q_full(qbuf), (local / Storage::kQBuffers) & 1);
    if (num_tiles == 0) return;
    const Mask<kMask> mask(p, causal_offset, seqlen_k);
    const V variant(p, batch, head, causal_offset, seqlen_q, seqlen_k);
    const float unit_log2 = V::unit_log2(p);

    if constexpr (!kPerWarpgroupTiles || IsBlockTiles<Tiles>::value) {
      if (consumers > 1 && wg == consumers - 1) ptx::named_barrier_arrive(kTurnBarrier, 256);
      run_tiles(smem, mask, variant, unit_log2, seqlen_k, tiles, 0, num_tiles, ring, true);
      return;
    } else {
      int a = 0, b = 0;  // the tiles this warpgroup computes (none: a == b)
      int wg_row0, wg_row1;
      wg_span(wg_row0, wg_row1);
      wg_row1 = min(wg_row1, seqlen_q);
      if (wg_row0 < wg_row1) {
        int lo, hi;
        mask.key_range(wg_row0, wg_row1, lo, hi);
        if (hi > lo) {
          a = max(0, lo / kBN - tiles.begin);
          b = min(num_tiles, (hi + kBN - 1) / kBN - tiles.begin);
          if (b < a) b = a;
        }
      }

      if (consumers > 1 && wg == consumers - 1) ptx::named_barrier_arrive(kTurnBarrier, 256);  // opens the first turn
      if (a == b) {  // no tile to compute: one turn of its own, then one per tile
        wait_turn();
        pass_turn(false);
        for (int i = 0; i < num_tiles; ++i) pass_tile(smem, ring + i, i == num_tiles - 1);
        return;
      }
      for (int i = 0; i < a; ++i) pass_tile(smem, ring + i, false);
      run_tiles(smem, mask, variant, unit_log2, seqlen_k, tiles, a, b - a, ring + a, b == num_tiles);
      for (int i = b; i < num_tiles; ++i) pass_tile(smem, ring + i, i == num_tiles - 1);
    }
  }
};

}  // namespace flashjit::fa3
