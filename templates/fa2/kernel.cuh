// FA2 forward kernel (sm_80+): mma.sync m16n8k16, ldmatrix, a cp.async K/V pipeline of kStages tiles,
// online softmax in registers. One CTA computes kBM query rows of one (batch, head); each warp owns
// kBM / kWarps rows (one or two 16-row m-tiles) and loops over the key tiles its mask allows.
//
// Status (H200, 2026-11-29, bench/NOTES.md): 4 warps x 32 rows, 64-key tiles, 383 TFLOP/s at llama3 S 8192
// non-causal, 1.08-1.14x flash-attn's FA2 in the same process (S 4096-16384). What got it there: K/V loads
// with per-thread addresses fixed per tile (no per-copy division and 64-bit multiplies), one register per
// ldmatrix operand instead of four (the 64-key tile fits 255 registers without spills), and the lazy O
// rescale (update_lazy: the O multiply runs only on tiles where a row max moves by more than 2^8). Tried
// and reverted: a rolled Q·Kᵀ k-loop (loses the ldmatrix/mma interleave). On sm_90 the dispatcher picks FA3.
//
// Varlen (kVarlen): blockIdx.z is the sequence; its rows and lengths come from cu_seqlens (SeqInfo), m-blocks
// past its length exit at once, and loads stop at its last key (cp.async zero fill), so no row of another
// sequence is read.
//
// Paged (kPageSize > 0): K/V rows are found through the sequence's page-table row (SmemTile::load_async_paged),
// its key count is seqused_k's.
//
// Block-sparse (kBlockSparse, attention/key_tiles.cuh): the key tiles are those of the key blocks the CTA's query
// block lists; full blocks skip the mask_mod.
//
// seqused_k (kSequsedK): contiguous keys of which the sequence uses its first seqused_k[b] (SeqInfo); loads stop
// there (cp.async zero fill), so no padding row is read.
#pragma once

#include "attention/key_tiles.cuh"
#include "attention/mask.cuh"
#include "attention/params.cuh"
#include "attention/seqlen.cuh"
#include "attention/softmax.cuh"
#include "attention/variant.cuh"
#include "common/types.cuh"
#include "fa2/smem_tile.cuh"
#include "ptx/ldmatrix.cuh"
#include "ptx/mma.cuh"

namespace flashjit::fa2 {

// kHeadDim: Q's and K's head dim, kHeadDimV: V's and O's (multiples of 8 up to 256). An odd multiple of 8
// is padded to 16 for the mma k-steps: Q's and K's padding chunk is zeroed in shared memory, V's reaches only
// O columns that are never stored.
template <class T, int kHeadDim, int kHeadDimV, int kBM, int kBN, int kStages, int kWarps, MaskKind kMask,
          bool kVarlen = false, int kPageSize = 0, class V = NoVariant, bool kBlockSparse = false,
          bool kSequsedK = false>
struct Kernel {
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kRowsPerWarp = kBM / kWarps;
  static constexpr int kMT = kRowsPerWarp / 16;            // m-tiles per warp
  static constexpr int kNT = kBN / 8;                      // n-tiles of S
  static constexpr int kDT = (kHeadDimV + 15) / 16 * 2;    // n-tiles of O (pairs of them per ldmatrix)
  static constexpr int kKS = (kHeadDim + 15) / 16;         // k-steps of Q·Kᵀ
  // Q fragments stay in registers when they fit beside the accumulators; else ldmatrix per k-step.
  static constexpr bool kQInRegisters = kMT == 1 && kHeadDim <= 128;

  using QTile = SmemTile<kBM, kHeadDim>;
  using KTile = SmemTile<kBN, kHeadDim>;
  using VTile = SmemTile<kBN, kHeadDimV>;
  using OTile = SmemTile<kBM, kHeadDimV>;  // staged where Q was
  static constexpr int kQBytes = QTile::kBytes > OTile::kBytes ? QTile::kBytes : OTile::kBytes;
  static constexpr int kSmemBytes = kQBytes + kStages * (KTile::kBytes + VTile::kBytes);

  static_assert(kRowsPerWarp == 16 || kRowsPerWarp == 32, "16 or 32 rows per warp");
  static_assert(kHeadDim % 8 == 0 && kHeadDimV % 8 == 0 && kBN % 16 == 0,
                "head dims are multiples of 8, block_n of 16");
  static_assert(kStages >= 2, "the pipeline needs two stages");

  static __device__ void run(const AttentionParams& p) {
    extern __shared__ __align__(128) unsigned char smem[];
    const unsigned s_q = ptx::smem_addr(smem);
    const unsigned s_k = s_q + kQBytes;
    const unsigned s_v = s_k + kStages * KTile::kBytes;

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int num_m_blocks = gridDim.x;
    // Heavy tiles first when work grows with the row (causal).
    const int m_block = Mask<kMask>::kWorkGrowsWithRow ? num_m_blocks - 1 - blockIdx.x : blockIdx.x;
    const int head = blockIdx.y, batch = blockIdx.z;
    const int kv_head = head / p.group;
    const int m0 = m_block * kBM;
    const SeqInfo<kVarlen, kPageSize, kSequsedK> seq(p, batch);
    if constexpr (kVarlen) {
      if (m0 >= seq.seqlen_q) return;  // this sequence is shorter than the m-block's start
    }
    const int seqlen_k = seq.seqlen_k;
    const int rows_valid = min(kBM, seq.seqlen_q - m0);

    const auto* q = static_cast<const unsigned short*>(p.q) + seq.q_offset(p, batch) + head * p.q_head + m0 * p.q_seq;
    const auto* k = static_cast<const unsigned short*>(p.k) + kv_head * p.k_head;
    const auto* v = static_cast<const unsigned short*>(p.v) + kv_head * p.v_head;
    if constexpr (kPageSize == 0) k += seq.k_offset(p, batch), v += seq.v_offset(p, batch);

    const Mask<kMask> mask(p, seq.causal_offset(p), seqlen_k);
    const V variant(p, batch, head, seq.causal_offset(p), seq.seqlen_q, seqlen_k);
    const auto tiles = [&] {
      if constexpr (kBlockSparse) {
        return BlockTiles(p, batch, head, m0 / p.bm_q_block, kBN, seqlen_k);
      } else {
        int key_lo, key_hi;
        mask.key_range(m0, m0 + rows_valid, key_lo, key_hi);
        const int tile_begin = key_lo / kBN;
        return KeyRun{tile_begin, key_hi > key_lo ? (key_hi + kBN - 1) / kBN - tile_begin : 0};
      }
    }();
    const int num_tiles = tiles.count;

    auto load_kv = [&](int tile, int stage) {
      const int n0 = tiles.tile(tile) * kBN;
      const int valid = min(kBN, seqlen_k - n0);
      if constexpr (kPageSize > 0) {
        const int* table = SeqInfo<kVarlen, kPageSize>::page_row(p, batch);
        KTile::template load_async_paged<kThreads, kPageSize>(s_k + stage * KTile::kBytes, k, p.k_batch, p.k_seq,
                                                              table, p.num_pages, n0, valid, tid);
        VTile::template load_async_paged<kThreads, kPageSize>(s_v + stage * VTile::kBytes, v, p.v_batch, p.v_seq,
                                                              table, p.num_pages, n0, valid, tid);
      } else {
        KTile::template load_async<kThreads>(s_k + stage * KTile::kBytes, k + n0 * p.k_seq, p.k_seq, valid, tid);
        VTile::template load_async<kThreads>(s_v + stage * VTile::kBytes, v + n0 * p.v_seq, p.v_seq, valid, tid);
      }
    };

    // Odd multiples of 8: the padding chunk of Q and of every K stage is zero (visible after the main loop's
    // first barrier).
    QTile::template zero_padding<kThreads>(smem, tid);
#pragma unroll
    for (int s = 0; s < kStages; ++s)
      KTile::template zero_padding<kThreads>(smem + kQBytes + s * KTile::kBytes, tid);

    // Prologue: Q and the first kStages - 1 K/V tiles in flight (one commit group per tile).
    QTile::template load_async<kThreads>(s_q, q, p.q_seq, rows_valid, tid);
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      if (s < num_tiles) load_kv(s, s);
      ptx::cp_async_commit();
    }

    float o[kMT][kDT][4];
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int d = 0; d < kDT; ++d)
#pragma unroll
        for (int c = 0; c < 4; ++c) o[mt][d][c] = 0.f;
    OnlineSoftmax<2 * kMT> softmax;
    softmax.init();

    const int warp_row0 = warp * kRowsPerWarp;  // within the CTA tile
    const int q_row0 = m0 + warp_row0;
    unsigned q_frag[kQInRegisters ? kKS : 1][4];
    // ldmatrix lanes: Q as A operand (rows lane % 16, chunk lane / 16); K as B operand (keys
    // (lane / 16) * 8 + lane % 8, chunk (lane / 8) % 2); V transposed (keys ((lane / 8) % 2) * 8 + lane % 8,
    // chunk lane / 16).
    const typename QTile::Fragments q_ld(warp_row0 + lane % 16, lane / 16);
    const typename KTile::Fragments k_ld((lane / 16) * 8 + lane % 8, (lane / 8) % 2);
    const typename VTile::Fragments v_ld(((lane / 8) % 2) * 8 + lane % 8, lane / 16);

    for (int it = 0; it < num_tiles; ++it) {
      ptx::cp_async_wait<kStages - 2>();
      __syncthreads();  // tile `it` is visible to all; everyone is done with the stage refilled below
      if (it + kStages - 1 < num_tiles) load_kv(it + kStages - 1, (it + kStages - 1) % kStages);
      ptx::cp_async_commit();

      if constexpr (kQInRegisters) {
        if (it == 0) {
#pragma unroll
          for (int ks = 0; ks < kKS; ++ks)
            ptx::ldmatrix_x4(q_frag[ks], q_ld.at(s_q, 0, ks));
        }
      }

      const int stage = it % kStages;
      const unsigned k_tile = s_k + stage * KTile::kBytes;
      const unsigned v_tile = s_v + stage * VTile::kBytes;

      // S = Q·Kᵀ
      float s[kMT][kNT][4];
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
          for (int c = 0; c < 4; ++c) s[mt][nt][c] = 0.f;
#pragma unroll
      for (int ks = 0; ks < kKS; ++ks) {
        unsigned a[kMT][4];
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          if constexpr (kQInRegisters) {
#pragma unroll
            for (int c = 0; c < 4; ++c) a[mt][c] = q_frag[ks][c];
          } else {
            ptx::ldmatrix_x4(a[mt], q_ld.at(s_q, mt, ks));
          }
        }
#pragma unroll
        for (int j = 0; j < kNT / 2; ++j) {
          unsigned b[4];
          ptx::ldmatrix_x4(b, k_ld.at(k_tile, j, ks));
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt) {
            ptx::mma_16816<T>(s[mt][2 * j], a[mt], b[0], b[1]);
            ptx::mma_16816<T>(s[mt][2 * j + 1], a[mt], b[2], b[3]);
          }
        }
      }

      // The variant's scores (softcap, ALiBi, the bias, score_mod), then per-element masking (and mask_mod) only on
      // tiles the mask (or the end of the keys) cuts, or on every tile with a mask_mod (but those a block mask calls
      // full).
      const int n0 = tiles.tile(it) * kBN;
      const bool full = tiles.full(it);
      if constexpr (V::kTransformsScores) {
        const int k0 = n0 + 2 * (lane % 4);  // this thread's first key of the tile (Variant::distance_base)
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int row = q_row0 + mt * 16 + lane / 4 + h * 8;
            const float base = variant.distance_base(row, k0);
#pragma unroll
            for (int nt = 0; nt < kNT; ++nt) {
              const typename V::BiasPair bias = variant.bias_pair(row, k0 + nt * 8);
#pragma unroll
              for (int c = 2 * h; c < 2 * h + 2; ++c) {
                const int d = nt * 8 + c % 2;
                s[mt][nt][c] =
                    variant.score(s[mt][nt][c], row, k0 + d, base, static_cast<float>(d), V::bias_value(bias, c % 2));
              }
            }
          }
      }
      const bool mod = V::kMasks && !full;
      if (mod || n0 + kBN > seqlen_k || !mask.tile_all_visible(q_row0, q_row0 + kRowsPerWarp, n0, n0 + kBN)) {
        // As fa3's consumer: a mask_mod on a tile of keys that all exist runs branch-free.
        const bool guarded = !(V::kMasks && mod && n0 + kBN <= seqlen_k);
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
          for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
            for (int c = 0; c < 4; ++c) {
              const int row = q_row0 + mt * 16 + lane / 4 + (c / 2) * 8;
              const int key = n0 + nt * 8 + 2 * (lane % 4) + c % 2;
              if (guarded ? key >= seqlen_k || !mask.visible(row, key) || (mod && !variant.visible(row, key))
                          : !(mask.visible(row, key) & variant.visible(row, key)))
                s[mt][nt][c] = neg_infinity();
            }
      }

      // O is rescaled only on the tiles where a row's max moves by more than the lazy threshold.
      float rescale[2 * kMT];
      if (softmax.update_lazy(s, V::unit_log2(p), rescale)) {
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
          for (int d = 0; d < kDT; ++d) {
            o[mt][d][0] *= rescale[2 * mt];
            o[mt][d][1] *= rescale[2 * mt];
            o[mt][d][2] *= rescale[2 * mt + 1];
            o[mt][d][3] *= rescale[2 * mt + 1];
          }
      }

      // O += P·V, P converted in registers from C fragments to A fragments (16 keys per k-step).
#pragma unroll
      for (int kk = 0; kk < kNT / 2; ++kk) {
        unsigned a[kMT][4];
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          a[mt][0] = pack2<T>(s[mt][2 * kk][0], s[mt][2 * kk][1]);
          a[mt][1] = pack2<T>(s[mt][2 * kk][2], s[mt][2 * kk][3]);
          a[mt][2] = pack2<T>(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
          a[mt][3] = pack2<T>(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
        }
#pragma unroll
        for (int e = 0; e < kDT / 2; ++e) {
          unsigned b[4];
          ptx::ldmatrix_x4_trans(b, v_ld.at(v_tile, kk, e));
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt) {
            ptx::mma_16816<T>(o[mt][2 * e], a[mt], b[0], b[1]);
            ptx::mma_16816<T>(o[mt][2 * e + 1], a[mt], b[2], b[3]);
          }
        }
      }
    }
    ptx::cp_async_wait<0>();

    // Epilogue: O / l as T, staged through shared memory (the Q tile) for 16-byte global stores.
    // Varlen: the sequence's offsets are read again here rather than kept in registers through the main loop
    // (the 32-row variants have none to spare).
    const auto out_seq = SeqInfo<kVarlen, kPageSize, kSequsedK>::reread(p, batch);
    const int rows_out = kVarlen ? min(kBM, out_seq.seqlen_q - m0) : rows_valid;
    float inv_sum[2 * kMT], lse[2 * kMT];
    softmax.finalize(V::unit(p), inv_sum, lse);
#pragma unroll
    for (int r = 0; r < 2 * kMT; ++r) V::apply_sink(p.sinks, head, lse[r], inv_sum[r]);
    __syncthreads();  // all warps are done with Q (when read from shared memory) before it is overwritten
    unsigned char* s_o = smem;
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int d = 0; d < kDT; ++d)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = warp_row0 + mt * 16 + lane / 4 + h * 8;
          const unsigned off = OTile::offset(row, d) + 4 * (lane % 4);
          *reinterpret_cast<unsigned*>(s_o + off) =
              pack2<T>(o[mt][d][2 * h] * inv_sum[2 * mt + h], o[mt][d][2 * h + 1] * inv_sum[2 * mt + h]);
        }
    if (p.lse != nullptr && lane % 4 == 0) {
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = q_row0 + mt * 16 + lane / 4 + h * 8;
          if (row < out_seq.seqlen_q) p.lse[out_seq.lse_index(p, batch, head, row)] = lse[2 * mt + h];
        }
    }
    __syncthreads();
    auto* out = static_cast<unsigned short*>(p.o) + out_seq.o_offset(p, batch) + head * p.o_head + m0 * p.o_seq;
    OTile::template store<kThreads>(out, p.o_seq, smem, rows_out, tid);
  }
};

}  // namespace flashjit::fa2
