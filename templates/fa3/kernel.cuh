// FA3 forward kernel (sm_90a): one producer warpgroup (TMA, registers given away with setmaxnreg) and
// kConsumers consumer warpgroups of 64 query rows each (wgmma, softmax in registers). One CTA per
// (m-block, head, batch), heavy m-blocks first under a causal mask, or persistent CTAs striding over the
// work tiles (fa3/scheduler.cuh).
//
// Status (H200, 2026-11-29, bench/NOTES.md): llama3 D128 0.95-1.04x cuDNN non-causal, 1.05-1.40x causal
// from S 1024 in the same process. The ping-pong between consumer warpgroups gave +29% over the
// intra-warpgroup overlap alone; persistent CTAs (d128 default) stream the next work tile's loads under the
// epilogue. Not yet: a TMA store of O.
//
// Varlen (kVarlen): the batch index of a work tile is a sequence (SeqInfo: offsets and lengths from
// cu_seqlens); work tiles whose m-block starts past the sequence's length are skipped by producer and
// consumers alike (a grid CTA then does nothing), so `local` and the stage ring stay in step.
//
// Packed GQA (kPackGqa, fa3/rows.cuh): a work tile is (m-block, KV head, batch), its rows the group's query
// heads at kBM / group positions; masks, lengths and the scheduler count positions.
//
// Paged (kPageSize > 0): K and V come from page pools through each sequence's page-table row (fa3/producer.cuh),
// its key count from seqused_k (SeqInfo); queries fixed-length or varlen.
//
// Block-sparse (kBlockSparse, attention/key_tiles.cuh): a work tile's key tiles are those of the key blocks its
// query block lists (the tile lies within one query block and each key tile within one key block), producer and
// consumers walking the same list; full blocks skip the mask_mod.
//
// Staged bias (kBiasTma, fa3/bias_tile.cuh): the bias tensor's tile of each key tile comes through TMA with K.
//
// seqused_k (kSequsedK): contiguous keys of which the sequence uses its first seqused_k[b] (SeqInfo); the
// producer warp copies a key tile's V past them without its padding rows (fa3/producer.cuh).
#pragma once

#include "fa3/bias_tile.cuh"

#include "attention/key_tiles.cuh"
#include "attention/mask.cuh"
#include "attention/params.cuh"
#include "attention/seqlen.cuh"
#include "attention/variant.cuh"
#include "fa3/consumer.cuh"
#include "fa3/epilogue.cuh"
#include "fa3/producer.cuh"
#include "fa3/rows.cuh"
#include "fa3/scheduler.cuh"
#include "fa3/shared_storage.cuh"
#include "fa3/tensor_maps.cuh"
#include "ptx/cp_async.cuh"
#include "ptx/mbarrier.cuh"
#include "ptx/regs.cuh"

namespace flashjit::fa3 {

// Registers per thread of the producer and of each consumer warpgroup (setmaxnreg; they add up to at most 64K).
// A producer that gathers pages with cp.async (Producer::kGather) addresses every row itself: with two
// consumer warpgroups it takes 8 registers of theirs (ptxas spilled 4-8 bytes in it at 24). So does the warp of a
// seqused_k kernel, which copies the V tiles that run past a sequence's keys (Producer::copy_v_tail; ptxas
// spilled 44-76 bytes in it at 24 with the persistent scheduler).
template <int kConsumers, bool kGather = false> struct RegisterSplit;
template <bool kGather> struct RegisterSplit<1, kGather> { static constexpr int kProducer = 56, kConsumer = 256; };
template <> struct RegisterSplit<2, false> { static constexpr int kProducer = 24, kConsumer = 240; };
template <> struct RegisterSplit<2, true> { static constexpr int kProducer = 40, kConsumer = 232; };
template <bool kGather> struct RegisterSplit<3, kGather> { static constexpr int kProducer = 32, kConsumer = 160; };

// kHeadDim: Q's and K's head dim, kHeadDimV: V's and O's (each a multiple of 8 up to 256; fa3/columns.cuh).
template <class T, int kHeadDim, int kHeadDimV, int kBN, int kStages, int kConsumers, MaskKind kMask,
          bool kPersistent, bool kVarlen = false, bool kPackGqa = false, int kPageSize = 0, class V = NoVariant,
          bool kBlockSparse = false, bool kBiasTma = false, bool kSequsedK = false>
struct Kernel {
  static constexpr int kBM = 64 * kConsumers;
  static constexpr int kThreads = 128 * (kConsumers + 1);
  using BiasT = StagedBias<kBiasTma, V::Bias::type(), kBM, kBN>;
  // Two Q buffers for persistent CTAs when they fit in 227 KB (d64, d128; not d256): see shared_storage.cuh.
  // src/config/prefill.cpp (shared_memory_bytes) applies the same rule.
  static constexpr int kQBuffers =
      kPersistent && SharedStorage<kHeadDim, kHeadDimV, kBM, kBN, kStages, 2, BiasT::bytes()>::kAllocBytes <= 227 * 1024
          ? 2
          : 1;
  using Storage = SharedStorage<kHeadDim, kHeadDimV, kBM, kBN, kStages, kQBuffers, BiasT::bytes()>;
  static constexpr int kSmemBytes = Storage::kAllocBytes;
  using ConsumerT = Consumer<T, Storage, kBM, kBN, kStages, kMask, V, kPackGqa, BiasT>;
  using Scheduler = TileScheduler<kPersistent, Mask<kMask>::kWorkGrowsWithRow>;
  using Seq = SeqInfo<kVarlen, kPageSize, kSequsedK>;
  using ProducerT = Producer<Storage, kBM, kBN, kStages, kVarlen, kPackGqa, kPageSize, BiasT, kSequsedK>;
  using RowsT = Rows<kPackGqa, kBM>;

  // Whether the work tile has rows: varlen m-blocks past their sequence's length are skipped.
  static __device__ bool has_rows(const Seq& seq, const RowsT& rows, int m_block) {
    if constexpr (kVarlen) return m_block * rows.positions() < seq.seqlen_q;
    return true;
  }

  using Tiles = typename KeyTiles<kBlockSparse>::type;
  // The key tiles of work tile t: those the rows of its m-block may see, or those its block mask lists.
  static __device__ Tiles key_tiles(const AttentionParams& p, const Seq& seq, const RowsT& rows, const WorkTile& t) {
    const int m0 = t.m_block * rows.positions();
    if constexpr (kBlockSparse) {
      return Tiles(p, t.batch, t.head, m0 / p.bm_q_block, kBN, seq.seqlen_k);
    } else {
      int key_lo, key_hi;
      Mask<kMask>(p, seq.causal_offset(p), seq.seqlen_k)
          .key_range(m0, min(m0 + rows.positions(), seq.seqlen_q), key_lo, key_hi);
      const int tile_begin = key_lo / kBN;
      return Tiles{tile_begin, key_hi > key_lo ? (key_hi + kBN - 1) / kBN - tile_begin : 0};
    }
  }

  static __device__ void run(const AttentionParams& p, const TensorMaps& maps) {
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    const unsigned raw = ptx::smem_addr(smem_raw);
    const unsigned aligned = (raw + 1023u) & ~1023u;
    const Storage smem{aligned};
    unsigned char* smem_ptr = smem_raw + (aligned - raw);

    if (threadIdx.x == 0) {
      for (int b = 0; b < kQBuffers; ++b) {
        ptx::mbarrier_init(smem.q_full(b), 1);
        ptx::mbarrier_init(smem.q_empty(b), kConsumers);
      }
      for (int s = 0; s < kStages; ++s) {
        ptx::mbarrier_init(smem.k_full(s), ProducerT::kFullArrivals);
        ptx::mbarrier_init(smem.v_full(s), ProducerT::kFullArrivals);
        ptx::mbarrier_init(smem.k_empty(s), kConsumers * ConsumerT::k_releases());
        ptx::mbarrier_init(smem.v_empty(s), kConsumers);
      }
      ptx::mbarrier_init_fence();
    }
    __syncthreads();

    const int wg = threadIdx.x / 128;
    const RowsT rows(p);
    if (wg == 0) {
      ptx::setmaxnreg_dec<RegisterSplit<kConsumers, ProducerT::kGather || kSequsedK>::kProducer>();
      if (threadIdx.x >= (ProducerT::kGather ? 128 : ProducerT::kWarpLoads || kSequsedK ? 32 : 1)) return;
      ProducerT::prefetch_descriptors(maps);
      int ring = 0, local = 0;
      for (Scheduler sched(p, rows.positions(), rows.tile_heads(p)); sched.valid(); sched.advance()) {
        const WorkTile t = sched.tile();
        const Seq seq(p, t.batch);
        if (!has_rows(seq, rows, t.m_block)) continue;
        const Tiles tiles = key_tiles(p, seq, rows, t);
        const int* table = kPageSize > 0 ? Seq::page_row(p, t.batch) : nullptr;
        ProducerT::load_tile(smem, maps, p, local, t.m_block * rows.positions(), t.head, rows.kv_head(p, t.head),
                             t.batch, tiles, ring, seq.q_start, seq.k_start, table, seq.seqlen_k);
        ring += tiles.count;
        ++local;
      }
    } else {
      ptx::setmaxnreg_inc<RegisterSplit<kConsumers, ProducerT::kGather || kSequsedK>::kConsumer>();
      ConsumerT c;
      c.wg = wg - 1;
      c.consumers = kConsumers;
      c.lane = threadIdx.x % 32;
      int ring = 0, local = 0;
      for (Scheduler sched(p, rows.positions(), rows.tile_heads(p)); sched.valid(); sched.advance()) {
        const WorkTile t = sched.tile();
        const Seq seq(p, t.batch);
        if (!has_rows(seq, rows, t.m_block)) continue;
        const Tiles tiles = key_tiles(p, seq, rows, t);
        const int m0 = t.m_block * rows.positions();  // the tile's first position
        const int r = 64 * c.wg + 16 * ((threadIdx.x / 32) % 4) + c.lane / 4;  // this thread's first tile row
        c.row0 = m0 + rows.position(r);
        if constexpr (kPackGqa) {
          c.packed_row1 = m0 + rows.position(r + 8);
          rows.span(64 * c.wg, 64 * c.wg + 64, c.packed_first, c.packed_end);
          c.packed_first += m0, c.packed_end += m0;
        }
        const int head = rows.first_query_head(t.head);  // the variant's head (packed: the group's first)
        c.mainloop(smem, p, seq.causal_offset(p), seq.seqlen_k, tiles, local, ring, t.batch, head, seq.seqlen_q);
        Epilogue<T, Storage, kBM, V, kPackGqa>::run(c, smem_ptr + Storage::q_offset(c.qbuf), smem.q_empty(c.qbuf), p,
                                                    m0, head, t.batch, seq, rows);
        ring += tiles.count;
        ++local;
      }
    }
  }
};

}  // namespace flashjit::fa3
