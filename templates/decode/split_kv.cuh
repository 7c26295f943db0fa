// Split-KV decode kernel (sm_80+, mma.sync m16n8k16, cp.async): one CTA per (split, KV head, sequence).
// The group * q_len query rows of one KV head (row r: query head kv_head * group + r % group, new token
// r / group) are the rows of kRows / 16 m-tiles, so each K/V byte of the split is read once per KV head.
// Warp w computes m-tile w % kMT. The warps of an m-tile split either the keys or O's columns: with key
// groups, warp w takes key slice w / kMT of every kBN-key tile and the slices' softmax states are merged
// through shared memory at the end; with column groups, every warp of the m-tile computes the whole tile's
// scores (the same softmax state) and P·V for its kHeadDim / kColGroups columns of O. Without key groups
// each warp writes its rows (its columns) from its registers: no merge, no barrier after the main loop (but
// the cluster merge's). With one m-tile and key groups (or one warp) each warp reads only the K and V rows of
// its key slice: it copies them itself and waits for its own copies (a warp barrier), so past the first
// tile (a CTA barrier for Q, which every thread copies) no warp waits for another in the main loop. Warps that
// share rows (column groups, several m-tiles) copy tiles together and synchronize the CTA.
// Causal among the new tokens: token t sits at key position a = seqlen - q_len + t and sees keys j <= a;
// the mask policy (attention/mask.cuh, bottom-right aligned) hides the keys below its first key for a:
// a sliding window's (a - window_left) or a chunk's start.
// Split partials: with several splits each CTA's state (O normalized, fp32, and LSE) goes to the workspace
// for the combine kernel; with kClusterMerge the splits of one (sequence, KV head) are the CTAs of one
// thread-block cluster (launched with cluster dims (num_splits, 1, 1)), which leave their states in shared
// memory and merge them through distributed shared memory into the final O and LSE: no workspace, no second
// kernel.
//
#pragma once

#include "attention/mask.cuh"
#include "attention/softmax.cuh"
#include "attention/variant.cuh"
#include "common/math.cuh"
#include "common/types.cuh"
#include "decode/kv_loads.cuh"
#include "decode/params.cuh"
#include "fa2/smem_tile.cuh"
#include "ptx/cluster.cuh"
#include "ptx/cp_async.cuh"
#include "ptx/griddep.cuh"
#include "ptx/ldmatrix.cuh"
#include "ptx/mma.cuh"

namespace flashjit::decode {

template <class T, int kHeadDim, int kRows, int kBN, int kStages, int kWarps, int kColGroups, int kPageSize,
          MaskKind kMask, bool kClusterMerge, class V = NoVariant>
struct SplitKernel {
  static_assert(kMask == MaskKind::causal || kMask == MaskKind::sliding_window || kMask == MaskKind::chunked_causal,
                "decode is causal among the new tokens: causal, sliding_window or chunked_causal");
  // Masks that also hide the keys below a bound that moves with the position (Mask::first_key).
  static constexpr bool kLowerBound = kMask != MaskKind::causal;
  using DecodeMask = Mask<kMask>;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kMT = kRows / 16;                     // m-tiles
  static constexpr int kKeyGroups = kWarps / (kMT * kColGroups);  // warps sharing an m-tile, each on a key slice
  static constexpr int kSliceN = kBN / kKeyGroups;           // keys per warp per tile
  static constexpr int kNT = kSliceN / 8;                    // n-tiles of S
  static constexpr int kCols = kHeadDim / kColGroups;        // columns of O per warp
  static constexpr int kDT = kCols / 8;                      // n-tiles of O per warp
  static constexpr int kKS = kHeadDim / 16;                  // k-steps of Q·Kᵀ
  static constexpr bool kQInRegisters = kHeadDim <= 128;

  using QTile = fa2::SmemTile<kRows, kHeadDim>;
  using KVTile = fa2::SmemTile<kBN, kHeadDim>;
  static constexpr int kKVBytes = 2 * kStages * KVTile::kBytes;
  // After the main loop the K/V stages hold each key group's O (fp32), row max and row sum; one key group
  // writes its rows from registers and needs no merge buffer.
  static constexpr int kMergeBytes = kKeyGroups > 1 ? kKeyGroups * kRows * (kHeadDim + 2) * 4 : 0;
  // Cluster merge: this CTA's final state for the cluster to read, fp32 O [kRows][kHeadDim] then LSE [kRows],
  // behind the key groups' merge buffer (also in the K/V stages' space where it fits).
  static constexpr int kClusterBytes = kClusterMerge ? kRows * (kHeadDim + 1) * 4 : 0;
  static constexpr int kAfterLoopBytes = kMergeBytes + kClusterBytes;
  static constexpr int kSmemBytes = QTile::kBytes + (kKVBytes > kAfterLoopBytes ? kKVBytes : kAfterLoopBytes);

  static_assert(kRows % 16 == 0 && kWarps % kMT == 0, "whole m-tiles per key group");
  static_assert(kColGroups == 1 || (kKeyGroups == 1 && kWarps == kMT * kColGroups && kCols % 16 == 0),
                "column groups: every warp of an m-tile on every key, 16-column slices");
  static_assert(kBN % kKeyGroups == 0 && kSliceN % 16 == 0, "key slices of whole 16-key k-steps");
  static_assert(kHeadDim % 16 == 0 && kStages >= 2, "head_dim multiple of 16, two stages or more");
  static constexpr int kMaxClusterSplits = DecodeParams::kMaxClusterSplits;

  // Each warp copies and reads only its key slice of every tile (its rows of Q aside).
  static constexpr bool kWarpSlices = kMT == 1 && kColGroups == 1;
  using Loads = KvLoads<KVTile, kWarpSlices ? 32 : kThreads, kWarpSlices ? kSliceN : kBN, kPageSize>;
  static constexpr bool kPaged = kPageSize > 0;

  // Where a row of this CTA's tile goes: row r is token r / group of query head kv_head * group + r % group;
  // its LSE sits at [batch, head, token] of the output LSE (one split) or of this split's workspace slice,
  // its O at [batch, token, head] of the output (strided) or of the split's fp32 partials.
  struct RowTarget {
    int token, head;
    long long lse_index;  // in [B, Hq, q_len]

    __device__ RowTarget(const DecodeParams& p, int batch, int kv_head, int row)
        : token(row / p.group), head(kv_head * p.group + row % p.group),
          lse_index((static_cast<long long>(batch) * p.heads_q + head) * p.q_len + token) {}
    __device__ void store_lse(const DecodeParams& p, long long slice, float lse) const {
      if (p.num_splits > 1) p.ws_lse[slice * p.heads_q * p.q_len + lse_index] = lse;
      else if (p.lse != nullptr) p.lse[lse_index] = lse;
    }
    __device__ T* out(const DecodeParams& p, int batch) const {
      return static_cast<T*>(p.o) + batch * p.o_batch + token * p.o_seq + head * p.o_head;
    }
    __device__ float* partial(const DecodeParams& p, long long slice, int batch) const {
      return p.ws_o + (((slice + batch) * p.q_len + token) * p.heads_q + head) * kHeadDim;
    }
  };

  // Where column group d0 (a multiple of 8) of a row sits in the key groups' merge buffer: 8-column groups
  // swapped by XOR with bits of the row, so that the four rows of a half-warp's float2 stores fall on four
  // different 8-bank groups. Head dims that are multiples of 32 start every row on bank 0: the row's two low
  // bits; others (16 mod 32) start odd rows 16 banks on: bit 1 of the row (within 16-column blocks).
  static __device__ __forceinline__ int merge_column(int row, int d0) {
    return d0 ^ (8 * (kHeadDim % 32 == 0 ? row & 3 : (row >> 1) & 1));
  }

  static __device__ void run(const DecodeParams& p) {
    extern __shared__ __align__(128) unsigned char smem[];
    const unsigned s_q = ptx::smem_addr(smem);
    const unsigned s_k = s_q + QTile::kBytes;
    const unsigned s_v = s_k + kStages * KVTile::kBytes;

    // The combine pass behind a split launch may launch now (small CTAs that wait for this grid's completion
    // in-kernel): its launch is then off the critical path. Any other kernel behind this one is let in only
    // as this CTA ends (below): CTAs launched early are placed on the SMs free at that time, which can double
    // some of them up for the whole of that kernel. H200, the next decode step behind B16 Sk 8k (128 CTAs,
    // one per SM): 124.2 µs with the trigger here, 133.2 with it after the main loop, 124.7 with it at the
    // end, 125.1 without programmatic launch.
    if (p.num_splits > 1 && !kClusterMerge) ptx::launch_dependents();
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int split = blockIdx.x, kv_head = blockIdx.y, batch = blockIdx.z;
    const int rows_valid = p.group * p.q_len;
    Loads loads(p, batch, kv_head, kWarpSlices ? lane : tid, kWarpSlices ? warp * kSliceN : 0);
    // Orders a tile's copies (this thread's, landed) before the reads of the threads that read them, and
    // those reads before a later copy into the same stage.
    const auto loads_visible = [] {
      if constexpr (kWarpSlices) __syncwarp();
      else __syncthreads();
    };
    // Launched with programmatic dependent launch (sm_90), this CTA may have started while the kernel before
    // it still runs, which may write anything read or written below (Q, the cache, lengths, page table, the
    // workspace, O): wait for its completion before the first global access. Up to here: launch, setup and
    // address arithmetic, overlapped with that kernel's tail.
    ptx::grid_dependency_wait();
    // A CSR page table (FlashInfer's; page_indptr set): the sequence's row of the flat page indices, and the keys
    // its pages hold, which bound every table read (the last sequence's pages end the array) and its length; with
    // last_page_len the length itself. Read before the table, which they locate: one round trip more than a dense
    // table. Dense tables and contiguous caches: the keys of a row are max_seqlen_k.
    const bool csr = kPaged && p.page_indptr != nullptr;
    int table_keys = p.max_seqlen_k, csr_len = 0;
    if constexpr (kPaged) {
      if (csr) {
        const int first_page = ptx::load_after_wait(p.page_indptr + batch);
        const int pages = max(ptx::load_after_wait(p.page_indptr + batch + 1) - first_page, 0);
        const bool from_last = p.last_page_len != nullptr;
        const int count = ptx::load_after_wait(from_last ? p.last_page_len + batch : p.seqlens_k + batch);
        loads.csr_row(p, first_page);
        const long long held = static_cast<long long>(pages) * kPageSize;
        table_keys = held < p.max_seqlen_k ? static_cast<int>(held) : p.max_seqlen_k;
        const long long keys =
            !from_last ? count : pages > 0 ? held - kPageSize + min(max(count, 0), kPageSize) : 0;
        csr_len = keys < table_keys ? static_cast<int>(keys) : table_keys;
      }
    }
    // The page-table entries of the prologue tiles and the next one. Without a lower bound the split's first key
    // does not depend on the sequence's length, so they are read alongside seqlens_k (the copies leave rows
    // past the sequence unread): the first K/V copies wait for one memory round trip, not two.
    typename Loads::Pages first[kStages];
    if constexpr (kPaged && !kLowerBound) {
#pragma unroll
      for (int s = 0; s < kStages; ++s) loads.read(split * p.keys_per_split + s * kBN, table_keys, first[s]);
    }
    const int seqlen_read = csr ? csr_len : ptx::load_after_wait(p.seqlens_k + batch);
    // The split's keys [k0, k1) (num_tiles tiles of them) of a sequence of seqlen_read keys (clamped to the
    // bound, and to a CSR row's keys), and the positions a_min, a_max of its first and last new token: every row sees keys <= its own
    // position (and, with a lower bound, from the mask's first visible key of the first token on).
    struct Span {
      int a_min, a_max, k0, k1, num_tiles;
    };
    // The launch gives a window kernel window_left >= 0 and a chunked one chunk_size > 0 (launch/decode_launch.cpp):
    // said here, the mask's tests for an unbounded window drop out.
    if constexpr (kMask == MaskKind::sliding_window) __builtin_assume(p.window_left >= 0);
    if constexpr (kMask == MaskKind::chunked_causal) __builtin_assume(p.chunk_size > 0);
    // Rows counted from the first new token; decode asks only first_key, which needs no key count.
    const auto mask_of = [&](int a_min) { return DecodeMask(a_min, p.window_left, 0, p.chunk_size, 0); };
    const auto span_of = [&](int len) {
      const int seqlen = min(len, table_keys);
      Span sp;
      sp.a_min = seqlen - p.q_len, sp.a_max = seqlen - 1;
      int lo = 0;
      if constexpr (kLowerBound) lo = max(0, mask_of(sp.a_min).first_key(0));
      sp.k0 = lo - lo % kBN + split * p.keys_per_split;
      sp.k1 = min(seqlen, sp.k0 + p.keys_per_split);
      sp.num_tiles = sp.k1 > sp.k0 ? (sp.k1 - sp.k0 + kBN - 1) / kBN : 0;
      return sp;
    };
    // Q, the page-table prefetch, a lower-bound mask's table reads and the first kStages - 1 tiles, copied for
    // keys [k0, copy_k1) of span sp (paged caches and lower-bound masks use sp; contiguous causal ones need it
    // only when copy_k1 is the sequence's end).
    const auto commit = [] { ptx::cp_async_commit(); };
    const auto prologue = [&](const Span& sp, int k0, int copy_k1) {
      const int copy_tiles = copy_k1 > k0 ? (copy_k1 - k0 + kBN - 1) / kBN : 0;
      const auto* q = static_cast<const unsigned short*>(p.q) + batch * p.q_batch;
      // Q rows: row r is query head kv_head * group + r % group of token r / group; padding rows are zero.
      for (int i = tid; i < kRows * QTile::kChunks; i += kThreads) {
        const int r = i / QTile::kChunks, chunk = i % QTile::kChunks;
        const bool valid = r < rows_valid && copy_tiles > 0;
        const unsigned short* src =
            q + (valid ? (r / p.group) * p.q_seq + (kv_head * p.group + r % p.group) * p.q_head + chunk * 8 : 0);
        ptx::cp_async_16(s_q + QTile::offset(r, chunk), src, valid);
      }
      if constexpr (kPaged) {
        // The split's page-table entries into L2 now: Loads::read then finds them there one tile ahead,
        // instead of paying an HBM round trip per tile on the path to the next K/V loads.
        if (sp.num_tiles > 0) {
          const auto begin = reinterpret_cast<unsigned long long>(loads.table + k0 / kPageSize) & ~127ull;
          const auto end = reinterpret_cast<unsigned long long>(loads.table + (sp.k1 - 1) / kPageSize);
          for (unsigned long long a = begin + 128ull * tid; a <= end; a += 128ull * kThreads)
            ptx::prefetch_l2(reinterpret_cast<const void*>(a));
        }
      }
      // The first kStages - 1 tiles in flight (with a lower bound their page-table entries are read now, all
      // before the first copy). In the main loop each tile's entries are read one tile ahead of its copies,
      // under a tile of compute.
      if constexpr (kLowerBound) {
#pragma unroll
        for (int s = 0; s < kStages; ++s) loads.read(k0 + s * kBN, sp.k1, first[s]);
      }
      // Each tile's K and V are two commit groups (K first, with Q in tile 0's): Q·Kᵀ waits for K only.
#pragma unroll
      for (int s = 0; s < kStages - 1; ++s) {
        if (s < copy_tiles)
          loads.load(s_k + s * KVTile::kBytes, s_v + s * KVTile::kBytes, k0 + s * kBN, copy_k1, first[s], commit);
        else
          commit();
        commit();
      }
    };
    // Unsplit causal decodes of contiguous caches: the first key (0) does not depend on the length,
    // and the cache holds max_seqlen_k rows of every sequence, so Q and the first tiles are copied against that
    // bound before the length is used: its read and the copies share one memory round trip instead of taking
    // two in turn (H200, µs per call: B16 Sk 32 3.74 -> 3.51, B64 Sk 256 18.84 -> 18.53). The length's first
    // use must sit below the copies in program order (above them, ptxas kept it there and the warps stalled on
    // the read before the first copy). The rows between the sequence's end and the bound are masked out of the
    // scores, but P·V would carry a NaN or Inf of theirs into O: their V rows are zeroed before the main loop.
    // Split decodes do not: with max_seqlen_k above the lengths (the cache's capacity, say) every
    // split past a sequence's end would read its first tiles too, a burst that slowed the real splits' streams
    // more than the round trip saved (B1 over a 32k cache holding 1k keys: 12.2 -> 13.2 µs in 16 splits).
    constexpr bool kEarly = !kPaged && !kLowerBound;
    const bool early = kEarly && p.num_splits == 1;
    Span span;
    int copy_k1;
    if (early) {
      const Span at0 = span_of(0);  // without a lower bound, k0 does not depend on the length
      copy_k1 = min(p.max_seqlen_k, at0.k0 + p.keys_per_split);
      prologue(at0, at0.k0, copy_k1);
      span = span_of(seqlen_read);
    } else {
      span = span_of(seqlen_read);
      copy_k1 = span.k1;
      prologue(span, span.k0, copy_k1);
    }
    typename Loads::Pages pages = first[kStages - 1];
    const int a_min = span.a_min, k0 = span.k0, k1 = span.k1, num_tiles = span.num_tiles;
    const DecodeMask mask = mask_of(a_min);
    if constexpr (kEarly) {
      // A sequence shorter than the early prologue's tiles: zero the V rows copied past its end, each thread its
      // own copies once they landed; the main loop's first barrier shows them to the readers. (Here, not in
      // the main loop: only sequences of a tile or two pay the wait, and the loop is the same as without early
      // copies.)
      if (early && k1 < min(copy_k1, k0 + (kStages - 1) * kBN)) {
        ptx::cp_async_wait<0>();
#pragma unroll
        for (int s = 0; s < kStages - 1; ++s) {
          const int n0 = k0 + s * kBN;
          if (n0 + kBN > k1 && n0 < copy_k1) loads.zero_rows(s_v + s * KVTile::kBytes, n0, k1, copy_k1);
        }
      }
    }

    // Key groups and column groups do not mix (static_assert above): the other index is a constant 0.
    const int mt = warp % kMT, key_group = kColGroups > 1 ? 0 : warp / kMT, col_group = kColGroups > 1 ? warp / kMT : 0;
    const int col16 = col_group * (kCols / 16);  // first 16-column group of this warp's O columns
    float o[kDT][4];
#pragma unroll
    for (int d = 0; d < kDT; ++d)
#pragma unroll
      for (int c = 0; c < 4; ++c) o[d][c] = 0.f;
    OnlineSoftmax<2> softmax;
    softmax.init();
    // The variant of each of this thread's two rows (their query heads differ: rows are heads of the group).
    const auto row_head = [&](int row) { return kv_head * p.group + row % p.group; };
    // Query rows count new tokens (q_idx of the snippets); token t sits at key a_min + t.
    const auto variant_of = [&](int row) {
      const int head = row_head(row);
      return V(V::unit(p), p.softcap_in, V::kHasAlibi ? p.alibi_slopes[batch * p.alibi_batch + head] : 0.f,
               VariantSite{batch, head, a_min, ModContext{p.q_len, a_min + p.q_len, &p.aux}},
               V::Bias::of(p, batch, head, p.q_len, a_min + p.q_len));
    };
    const V variant[2] = {variant_of(mt * 16 + lane / 4), variant_of(mt * 16 + lane / 4 + 8)};

    unsigned q_frag[kQInRegisters ? kKS : 1][4];
    const typename QTile::Fragments q_ld(mt * 16 + lane % 16, lane / 16);
    const typename KVTile::Fragments k_ld((lane / 16) * 8 + lane % 8, (lane / 8) % 2);
    const typename KVTile::Fragments v_ld(((lane / 8) % 2) * 8 + lane % 8, lane / 16);
    const int slice_group0 = key_group * (kSliceN / 16);  // first 16-key group of this warp's slice

    for (int it = 0; it < num_tiles; ++it) {
      // Groups issued after this tile's K: its V and the K and V of the kStages - 2 tiles after it.
      ptx::cp_async_wait<2 * kStages - 3>();
      if (kWarpSlices && it == 0) __syncthreads();  // Q: copied by every thread, read by every warp
      else loads_visible();
      if (it + kStages - 1 < num_tiles) {
        const unsigned fill = ((it + kStages - 1) % kStages) * KVTile::kBytes;
        loads.load(s_k + fill, s_v + fill, k0 + (it + kStages - 1) * kBN, k1, pages, commit);
        loads.read(k0 + (it + kStages) * kBN, k1, pages);
      } else {
        commit();
      }
      commit();
      if constexpr (kQInRegisters) {
        if (it == 0) {
#pragma unroll
          for (int ks = 0; ks < kKS; ++ks) ptx::ldmatrix_x4(q_frag[ks], q_ld.at(s_q, 0, ks));
        }
      }
      const int stage = it % kStages;
      const unsigned k_tile = s_k + stage * KVTile::kBytes, v_tile = s_v + stage * KVTile::kBytes;

      float s[1][kNT][4];
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
        for (int c = 0; c < 4; ++c) s[0][nt][c] = 0.f;
#pragma unroll
      for (int ks = 0; ks < kKS; ++ks) {
        unsigned a[4];
        if constexpr (kQInRegisters) {
#pragma unroll
          for (int c = 0; c < 4; ++c) a[c] = q_frag[ks][c];
        } else {
          ptx::ldmatrix_x4(a, q_ld.at(s_q, 0, ks));
        }
#pragma unroll
        for (int j = 0; j < kNT / 2; ++j) {
          unsigned b[4];
          ptx::ldmatrix_x4(b, k_ld.at(k_tile, slice_group0 + j, ks));
          ptx::mma_16816<T>(s[0][2 * j], a, b[0], b[1]);
          ptx::mma_16816<T>(s[0][2 * j + 1], a, b[2], b[3]);
        }
      }

      const int n0 = k0 + it * kBN;
      // The variant's scores (softcap, ALiBi, the bias) at every key, then per-element masking only where the
      // split's end, the causal edge or the mask's lower bound cuts the tile.
      if constexpr (V::kTransformsScores) {
        const int k0 = n0 + key_group * kSliceN + 2 * (lane % 4);  // this thread's first key (distance_base)
        const int rows[2] = {mt * 16 + lane / 4, mt * 16 + lane / 4 + 8};
        const float base[2] = {variant[0].distance_base(rows[0] / p.group, k0),
                               variant[1].distance_base(rows[1] / p.group, k0)};
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) {
          const typename V::BiasPair bias[2] = {variant[0].bias_pair(rows[0] / p.group, k0 + nt * 8),
                                                variant[1].bias_pair(rows[1] / p.group, k0 + nt * 8)};
#pragma unroll
          for (int c = 0; c < 4; ++c) {
            const int d = nt * 8 + c % 2;
            s[0][nt][c] = variant[c / 2].score(s[0][nt][c], rows[c / 2] / p.group, k0 + d, base[c / 2],
                                               static_cast<float>(d), V::bias_value(bias[c / 2], c % 2));
          }
        }
      }
      const bool cut = V::kMasks || n0 + kBN > k1 || n0 + kBN - 1 > a_min ||
                       (kLowerBound && n0 < mask.first_key(p.q_len - 1));
      if (cut) {
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
          for (int c = 0; c < 4; ++c) {
            const int row = mt * 16 + lane / 4 + (c / 2) * 8;
            const int token = row / p.group, a = a_min + token;  // padding rows get a position too; never stored
            const int key = n0 + key_group * kSliceN + nt * 8 + 2 * (lane % 4) + c % 2;
            bool visible = key < k1 && key <= a;
            if constexpr (kLowerBound) visible = visible && key >= mask.first_key(token);
            if constexpr (V::kMasks) visible = visible && variant[c / 2].visible(token, key);
            if (!visible) s[0][nt][c] = neg_infinity();
          }
      }

      float rescale[2];
      if (softmax.update_lazy(s, V::unit_log2(p), rescale)) {
#pragma unroll
        for (int d = 0; d < kDT; ++d) {
          o[d][0] *= rescale[0];
          o[d][1] *= rescale[0];
          o[d][2] *= rescale[1];
          o[d][3] *= rescale[1];
        }
      }
      // This tile's V (groups issued after it: the K and V of the kStages - 1 tiles after it).
      ptx::cp_async_wait<2 * kStages - 2>();
      loads_visible();
#pragma unroll
      for (int kk = 0; kk < kNT / 2; ++kk) {
        unsigned a[4];
        a[0] = pack2<T>(s[0][2 * kk][0], s[0][2 * kk][1]);
        a[1] = pack2<T>(s[0][2 * kk][2], s[0][2 * kk][3]);
        a[2] = pack2<T>(s[0][2 * kk + 1][0], s[0][2 * kk + 1][1]);
        a[3] = pack2<T>(s[0][2 * kk + 1][2], s[0][2 * kk + 1][3]);
#pragma unroll
        for (int e = 0; e < kDT / 2; ++e) {
          unsigned b[4];
          ptx::ldmatrix_x4_trans(b, v_ld.at(v_tile, slice_group0 + kk, col16 + e));
          ptx::mma_16816<T>(o[2 * e], a, b[0], b[1]);
          ptx::mma_16816<T>(o[2 * e + 1], a, b[2], b[3]);
        }
      }
    }
    const bool final_output = p.num_splits == 1;
    const bool to_cluster = kClusterMerge && !final_output;  // else partials to the workspace
    const long long slice = static_cast<long long>(split) * p.batch;  // of the workspace (splits)
    float* c_o = reinterpret_cast<float*>(smem + QTile::kBytes + kMergeBytes);  // cluster merge: [kRows][kHeadDim]
    float* c_lse = c_o + kRows * kHeadDim;                                       // and [kRows]
    if constexpr (kKeyGroups == 1) {
      // Each warp saw every key of its rows: it normalizes and stores them (its columns of them) from its
      // registers, with no merge through shared memory (and no barrier but the cluster merge's). No copy may
      // still be landing in shared memory when the CTA exits or the cluster buffer takes the K/V stages: Q's
      // zero fill without a key, and prologue tiles copied past the sequence's last tile, were never waited for.
      ptx::cp_async_wait<0>();
      if (to_cluster) __syncthreads();  // the cluster buffer takes the K/V stages, which other warps may read
      float inv[2], lse[2];
      softmax.finalize(V::unit(p), inv, lse);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = mt * 16 + lane / 4 + h * 8;
        if (row >= rows_valid) continue;
        if (final_output) V::apply_sink(p.sinks, row_head(row), lse[h], inv[h]);  // else where the splits merge
        const int col = col_group * kCols + 2 * (lane % 4);
        if (to_cluster) {
          if (lane % 4 == 0 && col_group == 0) c_lse[row] = lse[h];
#pragma unroll
          for (int d = 0; d < kDT; ++d)
            *reinterpret_cast<float2*>(c_o + row * kHeadDim + col + d * 8) =
                make_float2(o[d][2 * h] * inv[h], o[d][2 * h + 1] * inv[h]);
          continue;
        }
        const RowTarget target(p, batch, kv_head, row);
        if (lane % 4 == 0 && col_group == 0) target.store_lse(p, slice, lse[h]);
        if (final_output) {
          T* dst = target.out(p, batch) + col;
#pragma unroll
          for (int d = 0; d < kDT; ++d)
            *reinterpret_cast<unsigned*>(dst + d * 8) = pack2<T>(o[d][2 * h] * inv[h], o[d][2 * h + 1] * inv[h]);
        } else {
          float* dst = target.partial(p, slice, batch) + col;
#pragma unroll
          for (int d = 0; d < kDT; ++d)
            *reinterpret_cast<float2*>(dst + d * 8) = make_float2(o[d][2 * h] * inv[h], o[d][2 * h + 1] * inv[h]);
        }
      }
      if constexpr (kClusterMerge)
        if (to_cluster) cluster_merge(p, ptx::smem_addr(c_o), batch, kv_head, rows_valid);
      if (final_output || to_cluster) ptx::launch_dependents();  // every SM this grid used is about to be free
      return;
    }
    ptx::cp_async_wait<0>();
    __syncthreads();  // every warp is done with the K/V stages, which now hold the merge buffers

    // Each key group's unnormalized O, row max (raw units) and row sum, [key_group][row]; O of the rows with
    // a query only (padding rows are never merged). The 8-column groups of row r sit XOR-swizzled by r
    // (merge_column), so the 8 rows of a warp's float2 stores spread over the banks.
    float* m_o = reinterpret_cast<float*>(smem + QTile::kBytes);
    float* m_max = m_o + kKeyGroups * kRows * kHeadDim;
    float* m_sum = m_max + kKeyGroups * kRows;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = mt * 16 + lane / 4 + h * 8;
      if (row < rows_valid) {
        float* dst = m_o + (key_group * kRows + row) * kHeadDim;
#pragma unroll
        for (int d = 0; d < kDT; ++d)
          *reinterpret_cast<float2*>(dst + merge_column(row, d * 8) + 2 * (lane % 4)) =
              make_float2(o[d][2 * h], o[d][2 * h + 1]);
      }
      const float l = quad_sum(softmax.row_sum[h]);
      if (lane % 4 == 0) {
        m_max[key_group * kRows + row] = softmax.row_max[h];
        m_sum[key_group * kRows + row] = l;
      }
    }
    __syncthreads();

    // Merge the key groups and write: the final O and LSE (one split), or this split's partial state. First
    // one thread per row: the groups' weights (normalization included) over the groups' max slots, the
    // row's 1 / l (0: no key) over group 0's sum slot, and its LSE. Then each thread merges 8 columns of a row
    // with 16-byte shared loads and a 16-byte store. (Per element, with the weights recomputed and a division
    // each, this took ≈ 1.8 µs of a 4.9 µs call at B4 Sk 32 on the H200.)
    if (tid < rows_valid) {
      const int row = tid;
      float m = neg_infinity();
#pragma unroll
      for (int g = 0; g < kKeyGroups; ++g) m = fmaxf(m, m_max[g * kRows + row]);
      const float unit_log2 = V::unit_log2(p);
      const float m_scaled = m == neg_infinity() ? 0.f : m * unit_log2;
      float w[kKeyGroups], l = 0.f;
#pragma unroll
      for (int g = 0; g < kKeyGroups; ++g) {
        w[g] = exp2_approx(m_max[g * kRows + row] * unit_log2 - m_scaled);
        l += w[g] * m_sum[g * kRows + row];
      }
      const bool empty = !(l > 0.f);
      float inv = empty ? 0.f : 1.f / l, sink_lse = 0.f;
      if constexpr (V::kHasSinks) {  // else the LSE is computed after the weights, as it always was
        sink_lse = empty ? neg_infinity() : m * V::unit(p) + log_approx(l);
        if (final_output) V::apply_sink(p.sinks, row_head(row), sink_lse, inv);  // else where the splits merge
      }
#pragma unroll
      for (int g = 0; g < kKeyGroups; ++g) m_max[g * kRows + row] = w[g] * inv;  // only this thread reads row
      m_sum[row] = inv;
      const float lse = V::kHasSinks ? sink_lse : empty ? neg_infinity() : m * V::unit(p) + log_approx(l);
      if (to_cluster) c_lse[row] = lse;
      else RowTarget(p, batch, kv_head, row).store_lse(p, slice, lse);
    }
    __syncthreads();
    constexpr int kChunks = kHeadDim / 8;
    for (int i = tid; i < rows_valid * kChunks; i += kThreads) {
      const int row = i / kChunks, d0 = (i % kChunks) * 8;
      float acc[8];
#pragma unroll
      for (int c = 0; c < 8; ++c) acc[c] = 0.f;
      if (m_sum[row] != 0.f) {  // else no key: O = 0 (never a weight times a group's unwritten buffer)
#pragma unroll
        for (int g = 0; g < kKeyGroups; ++g) {
          const float w = m_max[g * kRows + row];
          const float4* src =
              reinterpret_cast<const float4*>(m_o + (g * kRows + row) * kHeadDim + merge_column(row, d0));
          const float4 a = src[0], b = src[1];
          acc[0] = fmaf(w, a.x, acc[0]), acc[1] = fmaf(w, a.y, acc[1]), acc[2] = fmaf(w, a.z, acc[2]);
          acc[3] = fmaf(w, a.w, acc[3]), acc[4] = fmaf(w, b.x, acc[4]), acc[5] = fmaf(w, b.y, acc[5]);
          acc[6] = fmaf(w, b.z, acc[6]), acc[7] = fmaf(w, b.w, acc[7]);
        }
      }
      const RowTarget target(p, batch, kv_head, row);
      if (to_cluster) {
        float4* dst = reinterpret_cast<float4*>(c_o + row * kHeadDim + d0);
        dst[0] = make_float4(acc[0], acc[1], acc[2], acc[3]);
        dst[1] = make_float4(acc[4], acc[5], acc[6], acc[7]);
      } else if (final_output) {
        T* dst = target.out(p, batch) + d0;
        *reinterpret_cast<uint4*>(dst) = make_uint4(pack2<T>(acc[0], acc[1]), pack2<T>(acc[2], acc[3]),
                                                    pack2<T>(acc[4], acc[5]), pack2<T>(acc[6], acc[7]));
      } else {
        // A split without keys writes O = 0 beside its LSE of -inf; the combine kernel leaves it out.
        float4* dst = reinterpret_cast<float4*>(target.partial(p, slice, batch) + d0);
        dst[0] = make_float4(acc[0], acc[1], acc[2], acc[3]);
        dst[1] = make_float4(acc[4], acc[5], acc[6], acc[7]);
      }
    }
    if constexpr (kClusterMerge)
      if (to_cluster) cluster_merge(p, ptx::smem_addr(c_o), batch, kv_head, rows_valid);
    if (final_output || to_cluster) ptx::launch_dependents();  // every SM this grid used is about to be free
  }

  // The cluster's merge of its splits' states (every CTA of the cluster, every thread: two cluster barriers).
  // CTA `rank` takes every num_splits-th (row, 4-column) piece: the LSEs of the row in every split (a split
  // without keys has -inf and is left out, its O never multiplied in), then the weighted sum of their O
  // pieces; it writes the final O piece and, with the row's first piece, its LSE. Precise expf / logf, as the
  // combine kernel.
  static __device__ void cluster_merge(const DecodeParams& p, unsigned s_o, int batch, int kv_head, int rows_valid) {
    ptx::cluster_sync();  // every split's state is in its shared memory
    const int n = p.num_splits, rank = static_cast<int>(ptx::cluster_ctarank());
    const unsigned s_lse = s_o + kRows * kHeadDim * 4;
    constexpr int kQuads = kHeadDim / 4;
    for (int i = rank + n * static_cast<int>(threadIdx.x); i < rows_valid * kQuads; i += n * kThreads) {
      const int row = i / kQuads, col = (i % kQuads) * 4;
      // Every load first (one round trip), then the arithmetic.
      float lse[kMaxClusterSplits];
      float4 x[kMaxClusterSplits];
#pragma unroll
      for (int s = 0; s < kMaxClusterSplits; ++s) {
        lse[s] = neg_infinity(), x[s] = make_float4(0.f, 0.f, 0.f, 0.f);
        if (s < n) {
          lse[s] = ptx::cluster_load_f32(ptx::cluster_map(s_lse + row * 4, s));
          x[s] = ptx::cluster_load_f32x4(ptx::cluster_map(s_o + (row * kHeadDim + col) * 4, s));
        }
      }
      float m = neg_infinity();
#pragma unroll
      for (int s = 0; s < kMaxClusterSplits; ++s) m = fmaxf(m, lse[s]);
      float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
      float sum = 0.f;
      if (m != neg_infinity()) {  // else no key in any split: O = 0, LSE = -inf
#pragma unroll
        for (int s = 0; s < kMaxClusterSplits; ++s) {
          if (lse[s] == neg_infinity()) continue;
          const float w = expf(lse[s] - m);
          sum += w;
          acc.x = fmaf(w, x[s].x, acc.x), acc.y = fmaf(w, x[s].y, acc.y), acc.z = fmaf(w, x[s].z, acc.z);
          acc.w = fmaf(w, x[s].w, acc.w);
        }
      }
      const bool empty = !(sum > 0.f);
      float inv = empty ? 0.f : 1.f / sum, sink_lse = 0.f;
      const RowTarget target(p, batch, kv_head, row);
      if constexpr (V::kHasSinks) {  // else the LSE is computed at its store, as it always was
        sink_lse = empty ? neg_infinity() : m + logf(sum);
        V::apply_sink(p.sinks, target.head, sink_lse, inv);
      }
      *reinterpret_cast<uint2*>(target.out(p, batch) + col) =
          make_uint2(pack2<T>(acc.x * inv, acc.y * inv), pack2<T>(acc.z * inv, acc.w * inv));
      if (col == 0 && p.lse != nullptr)
        p.lse[target.lse_index] = V::kHasSinks ? sink_lse : empty ? neg_infinity() : m + logf(sum);
    }
    ptx::cluster_sync();  // no CTA leaves while another still reads its shared memory
  }
};

}  // namespace flashjit::decode
