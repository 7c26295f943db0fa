// FA3 producer warpgroup: one elected thread issues every TMA load (Q once, then K and V tiles into a ring
// of stages), each completing on its "full" barrier. K and V have their own "empty" barriers: consumers
// release K as soon as S = Q·Kᵀ is done and V after P·V, so the next K load starts a softmax earlier.
// Varlen (kVarlen): 3-D views (head_dim, row, head) of the packed tensors, rows offset by the sequence's
// first row; a tile may run into the next sequence's rows (masked as keys, never stored as outputs) or past
// the last row (zero-filled).
// Packed GQA (kPackGqa): Q's views have one more dimension, the head within the KV head's group, after the
// columns (fa3/rows.cuh); a Q box is (columns, group, positions) at the work tile's KV head.
// Paged (kPageSize > 0): K's and V's views are 4-D (columns, token, head, page) of the page pools, boxes of
// min(kBN, kPageSize) tokens. Pages of a whole key tile or more: one box per column block at the tile's page
// (one page-table entry per tile). Smaller pages: kBN / kPageSize boxes per column block, one per page, issued
// by the lanes of the producer warp (kWarpLoads), each reading its own entries; box j lands at token row
// j * kPageSize of the tile, a multiple of 128 bytes of every column block (src/config/prefill.cpp requires
// it), where the address-based swizzle gives the layout of one whole-tile box. A page past the sequence's
// keys, or outside the pool, is a box out of the view's bounds: TMA fills it with zeros (and counts its bytes).
// Pages of fewer than kGatherBelow tokens (kGather): boxes that small are slow to issue (one TMA per page and
// column block), so all 128 producer threads gather K and V rows with cp.async instead: each lane of warp w
// looks up the page of one row of the tile (row 4 * lane + w), the warp's lanes then copy the 16-byte chunks of
// its rows back to back (coalesced), each to its swizzled place (Columns::swizzled, the layout a box writes),
// zero-filling rows past the keys or outside the pool and the padding columns. Each thread then arrives on the
// tile's full barrier with cp.async.mbarrier.arrive.noinc, which fires once its copies have landed: the
// barrier counts one arrival per producer thread and, like a box's bytes, completes only when the tile is in.
// A staged bias (Bias: fa3/bias_tile.cuh, bytes() > 0): the leader loads each key tile's bias boxes for the work
// tile's rows on the K tile's full barrier, whose expected bytes then count both.
// seqused_k (kSequsedK): contiguous keys of which the sequence uses its first seqused_k[b]; the rows past them in
// a key tile are padding of any value. K's are masked (a select: NaN scores never count), but P·V would spread a
// NaN or infinite V row even at P = 0, so the tile that runs past the keys takes its V from the producer warp
// instead of a box (copy_v_tail), those rows zero-filled. The warp's other loads are lane 0's TMA as usual.
#pragma once

#include "fa3/bias_tile.cuh"
#include "fa3/shared_storage.cuh"
#include "fa3/tensor_maps.cuh"
#include "attention/params.cuh"
#include "ptx/cp_async.cuh"
#include "ptx/mbarrier.cuh"
#include "ptx/tma.cuh"

namespace flashjit::fa3 {

template <class Storage, int kBM, int kBN, int kStages, bool kVarlen = false, bool kPackGqa = false,
          int kPageSize = 0, class Bias = NoStagedBias, bool kSequsedK = false>
struct Producer {
  using QK = typename Storage::QK;
  using VO = typename Storage::VO;
  static constexpr bool kPaged = kPageSize > 0;
  static constexpr int kGatherBelow = 16;
  // All 128 producer threads gather pages of fewer than kGatherBelow tokens with cp.async.
  static constexpr bool kGather = kPaged && kPageSize < kGatherBelow;
  static constexpr int kGatherThreads = 128;
  // The lanes of the producer warp issue the boxes of pages smaller than a key tile; otherwise one thread.
  static constexpr bool kWarpLoads = kPaged && !kGather && kPageSize < kBN;
  // Threads that arrive on a K or V full barrier per phase.
  static constexpr int kFullArrivals = kGather ? kGatherThreads : 1;
  static_assert(!kGather || (kBN <= 128 && kBN % 4 == 0 && kStages >= 2),
                "gathered pages: a lane per row of a warp's quarter of the tile, and two stages");
  static constexpr int kBoxRows = kPaged && kPageSize < kBN ? kPageSize : kBN;  // K/V box tokens
  static_assert(!kGather || Bias::bytes() == 0, "a staged bias arms the K barrier with its bytes: not with gathers");
  static_assert(!kPackGqa || Bias::bytes() == 0, "a bias tile's rows are one query head's");
  enum class View { q, q_packed, kv };

  // One box of one column block x rows starting at `row` (of batch entry `batch`, or of page `batch` for paged
  // K/V; varlen: of the packed tensor). q_packed: a box of the packed-GQA views of Q (head: the KV head).
  template <View kView>
  static __device__ __forceinline__ void load_box(unsigned dst, const TensorMap* map, unsigned bar, int col, int row,
                                                  int head, int batch) {
    if constexpr (kView == View::q_packed && kVarlen) {
      ptx::tma_load_4d(dst, map, bar, col, 0, row, head);
    } else if constexpr (kView == View::q_packed) {
      ptx::tma_load_5d(dst, map, bar, col, 0, row, head, batch);
    } else if constexpr (kVarlen && !(kView == View::kv && kPaged)) {
      ptx::tma_load_3d(dst, map, bar, col, row, head);
    } else {
      ptx::tma_load_4d(dst, map, bar, col, row, head, batch);
    }
  }

  // Every column block of a tile of `rows` rows at `dst`, from the maps of one tensor (fa3/tensor_maps.cuh):
  // the boxes' rows start at row `first` of the tile (0, or a page's first token in a tile of smaller pages).
  template <class Cols, View kView>
  static __device__ __forceinline__ void load_tile_boxes(unsigned dst, const TensorMap (&maps)[3], int rows, int first,
                                                         unsigned bar, int row, int head, int batch) {
#pragma unroll
    for (int cb = 0; cb < Cols::kWide; ++cb)
      load_box<kView>(dst + cb * rows * 128 + first * 128, &maps[0], bar, cb * 64, row, head, batch);
    if constexpr (Cols::kHas32)
      load_box<kView>(dst + Cols::offset32(rows) + first * 64, &maps[1], bar, Cols::kCol32, row, head, batch);
    if constexpr (Cols::kHas16)
      load_box<kView>(dst + Cols::offset16(rows) + first * 32, &maps[2], bar, Cols::kCol16, row, head, batch);
  }

  // The pages of key tile [key0, key0 + kBN) of a sequence this thread loads (K and V alike), from `table`
  // (the sequence's page-table row) of which the first seqlen_k keys are valid. Pages of a whole tile or more:
  // the tile's page. Smaller pages: page j = lane + 32 * s of the tile in slot s (-1 past the keys).
  struct TilePages {
    static constexpr int kPerTile = kWarpLoads ? kBN / kPageSize : 1;
    static constexpr int kSlots = (kPerTile + 31) / 32;
    int page[kSlots];
  };
  static __device__ __forceinline__ TilePages tile_pages(int key0, const int* table, int seqlen_k) {
    TilePages t{};
    if constexpr (kWarpLoads) {
#pragma unroll
      for (int s = 0; s < TilePages::kSlots; ++s) {
        const int key = key0 + (threadIdx.x % 32 + 32 * s) * kPageSize;
        t.page[s] = key < seqlen_k ? table[key / kPageSize] : -1;
      }
    } else if constexpr (kPaged) {
      t.page[0] = table[key0 / kPageSize];
    }
    return t;
  }

  // One K or V tile of keys [key0, key0 + kBN) of a sequence: contiguous, at row n0 of the view; paged, from
  // `pages` (tile_pages), each lane its own boxes with kWarpLoads.
  template <class Cols>
  static __device__ __forceinline__ void load_kv_tile(unsigned dst, const TensorMap (&maps)[3], unsigned bar, int n0,
                                                      int key0, int kv_head, int batch, const TilePages& pages) {
    if constexpr (!kPaged) {
      load_tile_boxes<Cols, View::kv>(dst, maps, kBN, 0, bar, n0, kv_head, batch);
    } else if constexpr (!kWarpLoads) {
      load_tile_boxes<Cols, View::kv>(dst, maps, kBN, 0, bar, key0 % kPageSize, kv_head, pages.page[0]);
    } else {
#pragma unroll
      for (int s = 0; s < TilePages::kSlots; ++s) {
        const int j = threadIdx.x % 32 + 32 * s;
        if (TilePages::kPerTile % 32 == 0 || j < TilePages::kPerTile)
          load_tile_boxes<Cols, View::kv>(dst, maps, kBN, j * kPageSize, bar, 0, kv_head, pages.page[s]);
      }
    }
  }

  // kGather: where this lane's row (4 * lane + warp) of key tile [key0, key0 + kBN) starts in K or V (`base`:
  // the KV head's row 0 of page 0; page and token strides in 2-byte elements), as an address whose bit 0 is set
  // when the row is past the keys or its page outside the pool (rows start on 16 bytes: the bit is free). Such
  // a row's address is `base` itself, never read (its copies write zeros).
  static __device__ __forceinline__ unsigned long long gather_row(const AttentionParams& p, const int* table,
                                                                  int key0, int seqlen_k, const void* base,
                                                                  long long page_stride, long long token_stride) {
    const int lane = threadIdx.x % 32, row = 4 * lane + threadIdx.x / 32 % 4, key = key0 + row;
    const auto at = reinterpret_cast<unsigned long long>(base);
    if (lane >= kBN / 4 || key >= seqlen_k) return at | 1;
    const int page = table[key / kPageSize];
    if (static_cast<unsigned>(page) >= static_cast<unsigned>(p.num_pages)) return at | 1;
    return at + 2 * (static_cast<unsigned long long>(page) * page_stride + (row % kPageSize) * token_stride);
  }

  // kGather: this thread's cp.async copies of one K or V tile; `row` is this lane's gather_row.
  template <class Cols>
  static __device__ __forceinline__ void gather_tile(unsigned dst, unsigned long long row) {
    constexpr int kChunks = Cols::kPadded / 8;  // 16-byte chunks of a row, padding included
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32 % 4;
    constexpr int kCount = kBN / 4 * kChunks;  // the warp's chunks, 32 a pass (every lane runs every pass: the
                                               // shuffle needs the whole warp even where the last pass is short)
  // Two passes at a time overlap their shuffles (H200: 1-token pages 409 -> 446 TFLOP/s); four spill in the
  // 32-register producer of three consumer warpgroups.
#pragma unroll 2
    for (int first = 0; first < kCount; first += 32) {
      const int e = first + lane, local = e < kCount ? e / kChunks : 0, chunk = e % kChunks;
      const unsigned long long src = __shfl_sync(0xffffffffu, row, local);
      if (e >= kCount) break;
      const bool valid = (src & 1) == 0 && chunk < Cols::kChunks;
      ptx::cp_async_16(dst + Cols::swizzled(kBN, 4 * local + warp, chunk),
                       reinterpret_cast<const char*>(src & ~1ull) + (valid ? 16 * chunk : 0), valid);
    }
  }

  // kSequsedK: V tile [key0, key0 + kBN) of a sequence that has only `valid` of its keys, each lane of the producer
  // warp copying 16-byte chunks (row0: key0's element offset in V, head included) with cp.async into the layout a
  // box writes, rows from `valid` on and the padding columns zero-filled. Once the copies landed lane 0 arrives
  // on the tile's full barrier (its one expected arrival, no bytes announced).
  static __device__ void copy_v_tail(unsigned dst, const AttentionParams& p, long long row0, int valid, unsigned bar) {
    constexpr int kChunks = VO::kPadded / 8;  // 16-byte chunks of a row, padding included
    const int lane = threadIdx.x % 32;
    const char* src = static_cast<const char*>(p.v) + 2 * row0;
#pragma unroll 1
    for (int e = lane; e < kBN * kChunks; e += 32) {
      const int row = e / kChunks, chunk = e % kChunks;
      const bool in = row < valid && chunk < VO::kChunks;
      ptx::cp_async_16(dst + VO::swizzled(kBN, row, chunk), src + (in ? 2 * (row * p.v_seq + 8 * chunk) : 0), in);
    }
    ptx::cp_async_commit();
    ptx::cp_async_wait<0>();
    ptx::fence_proxy_async_shared();  // the consumers' wgmma reads the tile through the async proxy
    __syncwarp();
    if (lane == 0) ptx::mbarrier_arrive(bar);
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
    if constexpr (Bias::bytes() > 0) ptx::tma_prefetch_descriptor(&maps.bias);
  }

  // Loads the Q tile of the CTA's `local`-th work tile (after the consumers released the previous one) and
  // its K/V tiles into the ring, whose running index starts at `ring` (it continues across work tiles).
  // q_start / k_start: the sequence's first rows in the packed tensors (varlen; 0 otherwise). m0 is the tile's
  // first position; head its query head (packed GQA: its KV head, the same as kv_head). Paged: table is the
  // sequence's page-table row and seqlen_k its key count. With kWarpLoads or kSequsedK every lane of the warp
  // calls this; lane 0 alone arms the barriers and loads Q (kSequsedK: and issues the boxes).
  // tiles: the work tile's key tiles (attention/key_tiles.cuh).
  template <class Tiles>
  static __device__ void load_tile(const Storage& smem, const TensorMaps& maps, const AttentionParams& p, int local,
                                   int m0, int head, int kv_head, int batch, const Tiles& tiles, int ring,
                                   int q_start, int k_start, const int* table, int seqlen_k) {
    const int num_tiles = tiles.count;
    const bool leader = (!kWarpLoads && !kGather && !kSequsedK) || threadIdx.x % (kGather ? kGatherThreads : 32) == 0;
    auto load_kv = [&](int i) {
      const int r = ring + i, stage = r % kStages;
      // The first pass through the ring finds every stage free (parity trick: wait on the phase before).
      const unsigned free_parity = ((r / kStages) & 1) ^ 1;
      const int key0 = tiles.tile(i) * kBN, n0 = k_start + key0;
      if constexpr (kGather) {
        const unsigned long long k_row = gather_row(p, table, key0, seqlen_k, static_cast<const char*>(p.k) +
                                                    2 * kv_head * p.k_head, p.k_batch, p.k_seq);
        ptx::mbarrier_wait(smem.k_empty(stage), free_parity);
        gather_tile<QK>(smem.k(stage), k_row);
        ptx::cp_async_mbarrier_arrive_noinc(smem.k_full(stage));
        const unsigned long long v_row = gather_row(p, table, key0, seqlen_k, static_cast<const char*>(p.v) +
                                                    2 * kv_head * p.v_head, p.v_batch, p.v_seq);
        ptx::mbarrier_wait(smem.v_empty(stage), free_parity);
        gather_tile<VO>(smem.v(stage), v_row);
        ptx::cp_async_mbarrier_arrive_noinc(smem.v_full(stage));
        return;
      }
      const TilePages pages = tile_pages(key0, table, seqlen_k);  // read before the wait: its latency hides
      ptx::mbarrier_wait(smem.k_empty(stage), free_parity);
      if (leader) ptx::mbarrier_arrive_expect_tx(smem.k_full(stage), Storage::kKBytes + Bias::bytes());
      if (kWarpLoads || leader)
        load_kv_tile<QK>(smem.k(stage), maps.k, smem.k_full(stage), n0, key0, kv_head, batch, pages);
      if constexpr (Bias::bytes() > 0) {
        if (leader) Bias::load(smem.bias(stage), &maps.bias, smem.k_full(stage), p, key0, m0, head, batch);
      }
      ptx::mbarrier_wait(smem.v_empty(stage), free_parity);
      if constexpr (kSequsedK) {
        if (key0 + kBN > seqlen_k) {
          const long long row = kVarlen ? n0 * p.v_seq : batch * p.v_batch + static_cast<long long>(key0) * p.v_seq;
          copy_v_tail(smem.v(stage), p, row + kv_head * p.v_head, seqlen_k - key0, smem.v_full(stage));
          return;
        }
      }
      if (leader) ptx::mbarrier_arrive_expect_tx(smem.v_full(stage), Storage::kVBytes);
      if (kWarpLoads || leader)
        load_kv_tile<VO>(smem.v(stage), maps.v, smem.v_full(stage), n0, key0, kv_head, batch, pages);
    };
    // Q's buffer frees only when the epilogue of the work tile that last used it (which stages O there) is
    // done. With one buffer that is the previous tile, whose epilogue runs after its last GEMMs released the
    // ring's stages: so the first K/V tiles of this work tile go out before the wait for Q and stream under
    // that epilogue. With two buffers it is the tile before that, long finished: Q goes first.
    const int buf = local % Storage::kQBuffers, use = local / Storage::kQBuffers;
    const int early = Storage::kQBuffers == 1 && local > 0 ? (num_tiles < kStages ? num_tiles : kStages) : 0;
    for (int i = 0; i < early; ++i) load_kv(i);
    if (leader) {
      if (use > 0) ptx::mbarrier_wait(smem.q_empty(buf), (use - 1) & 1);
      ptx::mbarrier_arrive_expect_tx(smem.q_full(buf), Storage::kQBytes);
      load_tile_boxes<QK, kPackGqa ? View::q_packed : View::q>(smem.q(buf), maps.q, kBM, 0, smem.q_full(buf),
                                                               q_start + m0, head, batch);
    }
    if constexpr (kGather) __syncwarp();  // the leader's warp converged again for the gathers' shuffles
    for (int i = early; i < num_tiles; ++i) load_kv(i);
  }
};

}  // namespace flashjit::fa3
