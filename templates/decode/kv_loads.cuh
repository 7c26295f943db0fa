// K/V tile loads of the split-KV decode kernel: kBN cache rows of one KV head into fa2::SmemTile stages with
// cp.async, from a contiguous cache or a paged one whose page size is a compile-time constant.
//
// Thread plan: kRowThreads threads share a row (8 when the row has 8 chunks or a multiple: one warp
// instruction moves whole 128-byte lines), each moving chunks chunk0 + i * kRowThreads (16 bytes each); a
// pass covers kPassRows rows (a power of two dividing kBN) and a tile kPasses passes. Threads past
// kActive = kPassRows * kRowThreads (three warps, say) copy nothing. Every address is a per-thread pointer
// fixed at construction plus, per tile, one offset per page (or one per tile when the cache is contiguous)
// and, per pass, a 64-bit add: the copy itself takes an immediate offset. The generic alternative (a 64-bit
// multiply per row and copy) cost about 300 of 750 instructions of a 64-key tile.
//
// Paged caches: passes start at multiples of kPassRows (tiles start at multiples of kBN, so at page starts
// when kBN is a multiple of the page size), so with pages of kPassRows tokens or more the rows of a pass
// share one page, the same for every thread; a tile then needs kLookups page-table entries (one per page it
// touches). Smaller pages (down to one token) gather: each thread looks up the page of each of its rows.
// (Sixteen threads per row, which would keep the 16-row passes of 256 threads within 16-token pages,
// measured slower on the H200 than gathering with eight: B16 Sk 8k 3869 against 4235 GB/s.)
#pragma once

#include "decode/params.cuh"
#include "ptx/cp_async.cuh"

namespace flashjit::decode {

template <class Tile, int kThreads, int kBN, int kPageSize>
struct KvLoads {
  static constexpr bool kPaged = kPageSize > 0;
  static constexpr int kRowThreads = Tile::kChunks % 8 == 0 ? 8 : Tile::kChunks % 4 == 0 ? 4 : 2;
  static constexpr int kCopies = Tile::kChunks / kRowThreads;  // per thread and row
  static constexpr int pass_rows() {
    int r = 1;  // the largest power of two that divides kBN with r * kRowThreads <= kThreads
    while (kBN % (2 * r) == 0 && 2 * r * kRowThreads <= kThreads) r *= 2;
    return r;
  }
  static constexpr int kPassRows = pass_rows();
  static constexpr int kActive = kPassRows * kRowThreads;  // threads that copy
  static constexpr int kPasses = kBN / kPassRows;
  static constexpr bool kGather = kPaged && kPageSize < kPassRows;
  // Passes that share one pointer computation (a page-table entry when paged), and the entries a tile needs.
  static constexpr int kPassesPerLookup = !kPaged  ? kPasses
                                          : kGather ? 1
                                          : kBN % kPageSize == 0 ? kPageSize / kPassRows
                                          : kPageSize % kBN == 0 ? kPasses
                                                                 : 1;
  static constexpr int kLookups = kPaged ? kPasses / kPassesPerLookup : 1;
  // Same swizzle for every pass and copy: shared addresses are one register plus immediates.
  static constexpr bool kImmediateDst = kRowThreads == 8 && kPassRows % 8 == 0;
  static_assert(!kPaged || (kPageSize & (kPageSize - 1)) == 0, "page sizes are powers of two");

  // The page-table entries of one tile, fetched a tile ahead of its copies. -1: past the split's end, or
  // an index outside [0, num_pages) (a caller error: those rows read as zeros, never from a wild address).
  struct Pages {
    int page[kLookups];
  };

  int row, chunk0;
  bool active;
  unsigned dst0;                         // shared offset of (row, chunk0) in a tile
  const unsigned short *k_base, *v_base; // the KV head's cache plus the thread's row and chunk0 offsets
  long long k_pass, v_pass;              // kPassRows rows, elements
  long long k_outer, v_outer;            // sequence (contiguous) or page stride, elements
  long long k_seq, v_seq;
  const int* table;                      // the sequence's page-table row (paged)

  __device__ KvLoads(const DecodeParams& p, int batch, int kv_head, int tid) {
    row = tid / kRowThreads;
    chunk0 = tid % kRowThreads;
    active = tid < kActive;
    dst0 = Tile::offset(row, chunk0);
    k_seq = p.k_seq, v_seq = p.v_seq;
    k_pass = kPassRows * p.k_seq, v_pass = kPassRows * p.v_seq;
    k_outer = p.k_batch, v_outer = p.v_batch;
    k_base = static_cast<const unsigned short*>(p.k) + kv_head * p.k_head + row * p.k_seq + chunk0 * 8;
    v_base = static_cast<const unsigned short*>(p.v) + kv_head * p.v_head + row * p.v_seq + chunk0 * 8;
    if constexpr (kPaged) {
      table = p.page_table + static_cast<long long>(batch) * p.max_pages_per_seq;
    } else {
      table = nullptr;
      k_base += batch * p.k_batch;
      v_base += batch * p.v_batch;
    }
  }

  // The first key of lookup s (gather: the thread's own row of pass s).
  __device__ __forceinline__ int lookup_key(int n0, int s) const {
    return n0 + s * kPassesPerLookup * kPassRows + (kGather ? row : 0);
  }

  // The raw entries of the tile at n0 for keys below `limit` (at most the table row's keys), unchecked.
  __device__ __forceinline__ void read(int n0, int limit, Pages& t) const {
    if constexpr (kPaged) {
      if constexpr (kActive < kThreads) {
        if (!active) return;  // its entries are never used
      }
#pragma unroll
      for (int s = 0; s < kLookups; ++s) {
        const int key = lookup_key(n0, s);  // >= 0
        t.page[s] = key < limit ? __ldg(table + static_cast<unsigned>(key) / kPageSize) : -1;
      }
    }
  }

  // Entries for keys at or past the split's end k1, or outside [0, num_pages), become -1.
  __device__ __forceinline__ void check(int num_pages, int n0, int k1, Pages& t) const {
    if constexpr (kPaged) {
#pragma unroll
      for (int s = 0; s < kLookups; ++s) {
        const bool used = lookup_key(n0, s) < k1 && static_cast<unsigned>(t.page[s]) < static_cast<unsigned>(num_pages);
        t.page[s] = used ? t.page[s] : -1;
      }
    }
  }

  __device__ __forceinline__ void fetch(int num_pages, int n0, int k1, Pages& t) const {
    read(n0, k1, t);
    check(num_pages, n0, k1, t);
  }

  __device__ __forceinline__ unsigned dst(int j, int i) const {
    if constexpr (kImmediateDst) return dst0 + (j * kPassRows * Tile::kRowElems + i * 64) * 2;
    return Tile::offset(row + j * kPassRows, chunk0 + i * kRowThreads);
  }

  // Copies keys [n0, n0 + kBN) into the stage at s_k / s_v; rows at or past k1 are zero-filled, unread.
  __device__ __forceinline__ void load(unsigned s_k, unsigned s_v, int n0, int k1, const Pages& pages) const {
    if constexpr (kActive < kThreads) {
      if (!active) return;  // a zero fill of its rows would land on other threads' rows or past the tile
    }
    const unsigned short *kp = nullptr, *vp = nullptr;
    bool page_ok = true;
#pragma unroll
    for (int j = 0; j < kPasses; ++j) {
      if (j % kPassesPerLookup == 0) {
        // A new page (paged) or the tile's first row (contiguous): the pointers of this pass's rows.
        const int s = j / kPassesPerLookup;
        long long k_off, v_off;
        if constexpr (kPaged) {
          // Tiles start at multiples of kBN (the host rounds splits to whole tiles and pages), so when pages
          // tile the tile, every lookup starts a page.
          const int token = kBN % kPageSize == 0 && !kGather
                                ? 0
                                : static_cast<int>(static_cast<unsigned>(lookup_key(n0, s)) % kPageSize) -
                                      (kGather ? row : 0);
          page_ok = pages.page[s] >= 0;
          const unsigned long long page = page_ok ? static_cast<unsigned>(pages.page[s]) : 0u;
          k_off = static_cast<long long>(page * k_outer) + token * k_seq;
          v_off = static_cast<long long>(page * v_outer) + token * v_seq;
        } else {
          k_off = n0 * k_seq;
          v_off = n0 * v_seq;
        }
        kp = k_base + k_off, vp = v_base + v_off;
      }
      const bool valid = page_ok && n0 + j * kPassRows + row < k1;
#pragma unroll
      for (int i = 0; i < kCopies; ++i) {
        ptx::cp_async_16(s_k + dst(j, i), kp + i * kRowThreads * 8, valid);
        ptx::cp_async_16(s_v + dst(j, i), vp + i * kRowThreads * 8, valid);
      }
      kp += k_pass, vp += v_pass;
    }
  }
};

}  // namespace flashjit::decode
