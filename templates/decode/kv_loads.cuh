// K/V tile loads of the split-KV decode kernel: kRows cache rows of one KV head into fa2::SmemTile stages with
// cp.async, from a contiguous cache or a paged one whose page size is a compile-time constant. The rows are
// the whole kBN-row tile (kThreads = the CTA) or one warp's key slice of it (kThreads = 32, rows row0 ...
// row0 + kRows - 1 of the tile: a warp that copies only the rows it reads waits for no other warp).
//
// Thread plan: kRowThreads threads share a row (8 when the row has 8 chunks or a multiple: one warp
// instruction moves whole 128-byte lines), each moving chunks chunk0 + i * kRowThreads (16 bytes each); a
// pass covers kPassRows rows (a power of two dividing kRows) and the rows kPasses passes. Threads past
// kActive = kPassRows * kRowThreads (three warps, say) copy nothing. Every address is a per-thread pointer
// fixed at construction plus, per tile, one offset per page (or one per tile when the cache is contiguous)
// and, per pass, a 64-bit add: the copy itself takes an immediate offset. The generic alternative (a 64-bit
// multiply per row and copy) cost about 300 of 750 instructions of a 64-key tile.
//
// Paged caches: passes start at multiples of kPassRows (tiles start at multiples of kBN and slices at
// multiples of kRows, so at page starts when kRows is a multiple of the page size), so with pages of
// kPassRows tokens or more the rows of a pass share one page, the same for every thread; the rows then need
// kLookups page-table entries (one per page they touch). Smaller pages (down to one token) gather: each
// thread looks up the page of each of its rows.
// (Sixteen threads per row, which would keep the 16-row passes of 256 threads within 16-token pages,
// measured slower on the H200 than gathering with eight: B16 Sk 8k 3869 against 4235 GB/s.)
#pragma once

#include "decode/params.cuh"
#include "ptx/cp_async.cuh"
#include "ptx/griddep.cuh"

namespace flashjit::decode {

template <class Tile, int kThreads, int kRows, int kPageSize>
struct KvLoads {
  static constexpr bool kPaged = kPageSize > 0;
  static constexpr int kRowThreads = Tile::kChunks % 8 == 0 ? 8 : Tile::kChunks % 4 == 0 ? 4 : 2;
  static constexpr int kCopies = Tile::kChunks / kRowThreads;  // per thread and row
  static constexpr int pass_rows() {
    int r = 1;  // the largest power of two that divides kRows with r * kRowThreads <= kThreads
    while (kRows % (2 * r) == 0 && 2 * r * kRowThreads <= kThreads) r *= 2;
    return r;
  }
  static constexpr int kPassRows = pass_rows();
  static constexpr int kActive = kPassRows * kRowThreads;  // threads that copy
  static constexpr int kPasses = kRows / kPassRows;
  static constexpr bool kGather = kPaged && kPageSize < kPassRows;
  // Passes that share one pointer computation (a page-table entry when paged), and the entries a tile needs.
  static constexpr int kPassesPerLookup = !kPaged  ? kPasses
                                          : kGather ? 1
                                          : kRows % kPageSize == 0 ? kPageSize / kPassRows
                                          : kPageSize % kRows == 0 ? kPasses
                                                                   : 1;
  static constexpr int kLookups = kPaged ? kPasses / kPassesPerLookup : 1;
  // Shared addresses as registers plus immediates: with 8 threads per row a copy's chunk keeps its swizzle
  // across the row (chunk0 + 8i), and rows 8 apart share it, so the first kDstBases passes' offsets (one
  // when a pass covers a multiple of 8 rows; two for the 4-row passes of one warp) address every copy.
  static constexpr bool kImmediateDst = kRowThreads == 8;
  static constexpr int kDstBases = !kImmediateDst || kPassRows >= 8 ? 1
                                   : 8 / kPassRows < kPasses      ? 8 / kPassRows
                                                                  : kPasses;
  static_assert(!kPaged || (kPageSize & (kPageSize - 1)) == 0, "page sizes are powers of two");

  // The page-table entries of one tile, read a tile ahead of its copies and kept as read: -1 past the read's
  // limit (entries of keys between the sequence's end and that limit are the table's, never used: the copies
  // leave rows past the sequence unread). load checks them against [0, num_pages) (outside: a caller error;
  // those rows read as zeros, never from a wild address) only where it uses them, so that nothing waits for
  // the entries' read before then. (H200: with the check at the read, the warps stalled a table round trip per
  // tile right after the tile's copies.)
  struct Pages {
    int page[kLookups];
  };

  int row, chunk0;                       // within the loader's rows
  int row0;                              // the loader's first row in the tile
  int num_pages;
  bool active;
  unsigned dst0[kDstBases];              // shared offsets of (row0 + row + m * kPassRows, chunk0)
  const unsigned short *k_base, *v_base; // the KV head's cache plus the thread's row and chunk0 offsets
  long long k_pass, v_pass;              // kPassRows rows, elements
  long long k_outer, v_outer;            // sequence (contiguous) or page stride, elements
  long long k_seq, v_seq;
  const int* table;                      // the sequence's page-table row (paged; CSR: set by csr_row)

  // tid: the thread among the loader's kThreads; first_row: the loader's first row in the tile.
  __device__ KvLoads(const DecodeParams& p, int batch, int kv_head, int tid, int first_row) {
    row = tid / kRowThreads;
    chunk0 = tid % kRowThreads;
    row0 = first_row;
    num_pages = p.num_pages;
    active = tid < kActive;
#pragma unroll
    for (int m = 0; m < kDstBases; ++m)
      dst0[m] = Tile::offset(row0 + row + m * kPassRows, chunk0);
    k_seq = p.k_seq, v_seq = p.v_seq;
    k_pass = kPassRows * p.k_seq, v_pass = kPassRows * p.v_seq;
    k_outer = p.k_batch, v_outer = p.v_batch;
    k_base = static_cast<const unsigned short*>(p.k) + kv_head * p.k_head + row * p.k_seq + chunk0 * 8;
    v_base = static_cast<const unsigned short*>(p.v) + kv_head * p.v_head + row * p.v_seq + chunk0 * 8;
    // (row0 is added per tile: to the key of a page lookup, or to the contiguous tile's first row.)
    if constexpr (kPaged) {
      table = p.page_table + static_cast<long long>(batch) * p.max_pages_per_seq;
    } else {
      table = nullptr;
      k_base += batch * p.k_batch;
      v_base += batch * p.v_batch;
    }
  }

  // A CSR page table (p.page_indptr set): the sequence's row starts at entry `first` (page_indptr[batch]) of the
  // flat page indices. After the grid dependency wait, which the constructor runs before.
  __device__ __forceinline__ void csr_row(const DecodeParams& p, int first) { table = p.page_table + first; }

  // The first key of lookup s of the tile at n0 (gather: the thread's own row of pass s).
  __device__ __forceinline__ int lookup_key(int n0, int s) const {
    return n0 + row0 + s * kPassesPerLookup * kPassRows + (kGather ? row : 0);
  }

  // The raw entries of the loader's rows of the tile at n0 for keys below `limit` (at most the table row's
  // keys), unchecked.
  __device__ __forceinline__ void read(int n0, int limit, Pages& t) const {
    if constexpr (kPaged) {
      if constexpr (kActive < kThreads) {
        if (!active) return;  // its entries are never used
      }
#pragma unroll
      for (int s = 0; s < kLookups; ++s) {
        const int key = lookup_key(n0, s);  // >= 0
        t.page[s] = key < limit ? ptx::load_after_wait(table + static_cast<unsigned>(key) / kPageSize) : -1;
      }
    }
  }

  __device__ __forceinline__ unsigned dst(int j, int i) const {
    if constexpr (kImmediateDst)
      return dst0[j % kDstBases] + ((j / kDstBases) * kDstBases * kPassRows * Tile::kRowElems + i * 64) * 2;
    return Tile::offset(row0 + row + j * kPassRows, chunk0 + i * kRowThreads);
  }

  // Copies the loader's rows of keys [n0, n0 + kBN) (keys n0 + row0 ... n0 + row0 + kRows - 1) into the
  // stage at s_k / s_v, K's rows first, then `between()` (the caller's commit: K and V land as two cp.async
  // groups, so that Q·Kᵀ need not wait for V), then V's rows; rows at or past `limit` (the sequence's end, or
  // a bound past it whose extra rows the caller keeps out of use) are zero-filled, unread.
  template <class Between>
  __device__ __forceinline__ void load(unsigned s_k, unsigned s_v, int n0, int limit, const Pages& pages,
                                       Between&& between) const {
    if constexpr (kActive < kThreads) {
      if (!active) {  // a zero fill of its rows would land on other threads' rows or past the tile
        between();
        return;
      }
    }
    // Per lookup (a page, or the tile's first row when contiguous): the element offsets of its rows.
    long long k_off[kLookups], v_off[kLookups];
    bool page_ok[kLookups];
#pragma unroll
    for (int s = 0; s < kLookups; ++s) {
      if constexpr (kPaged) {
        // Tiles start at multiples of kBN (the host rounds splits to whole tiles and pages) and the loader's
        // rows at multiples of kRows, so when pages tile the rows, every lookup starts a page.
        const int token = kRows % kPageSize == 0 && !kGather
                              ? 0
                              : static_cast<int>(static_cast<unsigned>(lookup_key(n0, s)) % kPageSize) -
                                    (kGather ? row : 0);
        page_ok[s] = static_cast<unsigned>(pages.page[s]) < static_cast<unsigned>(num_pages);
        const unsigned long long page = page_ok[s] ? static_cast<unsigned>(pages.page[s]) : 0u;
        k_off[s] = static_cast<long long>(page * k_outer) + token * k_seq;
        v_off[s] = static_cast<long long>(page * v_outer) + token * v_seq;
      } else {
        page_ok[s] = true;
        k_off[s] = (n0 + row0) * k_seq;
        v_off[s] = (n0 + row0) * v_seq;
      }
    }
    copy(s_k, k_base, k_pass, k_off, page_ok, n0, limit);
    between();
    copy(s_v, v_base, v_pass, v_off, page_ok, n0, limit);
  }

  // Zeroes the loader's rows of keys [from, to) in the stage tile at s_tile (K or V of the tile at n0), which
  // its own copies wrote: call after those copies landed (cp_async_wait), before the barrier that shows the
  // tile to its readers.
  __device__ __forceinline__ void zero_rows(unsigned s_tile, int n0, int from, int to) const {
    if constexpr (kActive < kThreads) {
      if (!active) return;
    }
#pragma unroll
    for (int j = 0; j < kPasses; ++j) {
      const int key = n0 + row0 + j * kPassRows + row;
      if (key >= from && key < to) {
#pragma unroll
        for (int i = 0; i < kCopies; ++i) ptx::st_shared_zero_16(s_tile + dst(j, i));
      }
    }
  }

 private:
  __device__ __forceinline__ void copy(unsigned s_dst, const unsigned short* base, long long pass,
                                       const long long (&off)[kLookups], const bool (&page_ok)[kLookups], int n0,
                                       int limit) const {
    const unsigned short* src = nullptr;
#pragma unroll
    for (int j = 0; j < kPasses; ++j) {
      const int s = j / kPassesPerLookup;
      if (j % kPassesPerLookup == 0) src = base + off[s];
      const bool valid = page_ok[s] && n0 + row0 + j * kPassRows + row < limit;
#pragma unroll
      for (int i = 0; i < kCopies; ++i) ptx::cp_async_16(s_dst + dst(j, i), src + i * kRowThreads * 8, valid);
      src += pass;
    }
  }
};

}  // namespace flashjit::decode
