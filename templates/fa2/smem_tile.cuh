// A [kRows x kCols] tile of 16-bit elements in shared memory, rows padded to a multiple of 64 elements and
// 16-byte chunks XOR-swizzled by (row % 8), so ldmatrix and cp.async hit all 32 banks. Filled from global
// memory with cp.async (zero fill past the last valid row); read with ldmatrix.
#pragma once

#include "ptx/cp_async.cuh"

namespace flashjit::fa2 {

template <int kRows, int kCols>
struct SmemTile {
  static constexpr int kRowElems = (kCols + 63) / 64 * 64;
  static constexpr int kChunks = kCols / 8;  // 16-byte chunks holding data
  // Chunks the mma k-steps (16 columns) read past the data when kCols is an odd multiple of 8.
  static constexpr int kPadChunks = (kCols + 15) / 16 * 2 - kChunks;
  static constexpr int kElems = kRows * kRowElems;
  static constexpr int kBytes = kElems * 2;
  static_assert(kCols % 8 == 0, "rows are copied in 16-byte chunks");

  // Byte offset of (row, chunk) from the tile's start.
  static __device__ __forceinline__ unsigned offset(int row, int chunk) {
    return static_cast<unsigned>((row * kRowElems + ((chunk ^ (row & 7)) << 3)) * 2);
  }

  // Per-thread ldmatrix addressing: the thread's row is row0 + 16 * i and its chunk 2 * c + sub, for
  // compile-time i and c. Since 16 * i keeps (row % 8) and 2 * c only moves whole 8-chunk groups beyond
  // c % 4, one precomputed offset, an XOR and immediates address every fragment (see at()).
  struct Fragments {
    unsigned base;  // offset of (row0, sub)
    __device__ Fragments(int row0, int sub) : base(offset(row0, sub)) {}
    // Chunk 2c + sub of a row r is (sub ^ r % 8) ^ 2c, so its offset is base ^ (c << 5) for c < 4 (bits 5-6,
    // which the row part and a 128-byte aligned tile leave zero) and that plus 128 per further 8 chunks.
    __device__ __forceinline__ unsigned at(unsigned tile, int i, int c) const {
      return ((tile + base) ^ ((c % 4) << 5)) + (c / 4) * 128 + i * 16 * kRowElems * 2;
    }
  };

  // Thread `tid` of kThreads moves chunk tid % kChunks of rows tid / kChunks + j * kPassRows. When a pass
  // covers whole rows and a multiple of 8 of them, every row of the thread has the same swizzle, so its
  // shared address is the first one plus an immediate and its global address the first plus j passes:
  // two adds per 16-byte copy, none of the per-copy division and 64-bit multiplies of a generic loop.
  template <int kThreads>
  struct Passes {
    static constexpr int kPassRows = kThreads / kChunks;
    static constexpr bool kUniform = kThreads % kChunks == 0 && kPassRows % 8 == 0 && kRows % kPassRows == 0;
    static constexpr int kCount = kUniform ? kRows / kPassRows : (kRows * kChunks + kThreads - 1) / kThreads;
  };

  // Issues cp.async copies of rows [0, kRows) from `src` (row stride `ld` elements); rows >= valid_rows
  // are zero-filled and not read.
  template <int kThreads>
  static __device__ __forceinline__ void load_async(unsigned dst, const unsigned short* src, long long ld,
                                                    int valid_rows, int tid) {
    using P = Passes<kThreads>;
    if constexpr (P::kUniform) {
      const int row = tid / kChunks, chunk = tid % kChunks;
      const unsigned d = dst + offset(row, chunk);
      const unsigned short* s = src + row * ld + chunk * 8;
#pragma unroll
      for (int j = 0; j < P::kCount; ++j) {
        // A row past valid_rows copies 0 bytes from its (unread) address: no select of a safe pointer.
        ptx::cp_async_16(d + j * P::kPassRows * kRowElems * 2, s + j * P::kPassRows * ld, row + j * P::kPassRows < valid_rows);
      }
    } else {
#pragma unroll
      for (int j = 0; j < P::kCount; ++j) {
        const int i = tid + j * kThreads;
        if (i < kRows * kChunks) {
          const int row = i / kChunks, chunk = i % kChunks;
          const bool valid = row < valid_rows;
          ptx::cp_async_16(dst + offset(row, chunk), src + (valid ? row * ld + chunk * 8 : 0), valid);
        }
      }
    }
  }

  // load_async over keys in pages of kPageSize tokens (a power of two): row r of the tile is key key0 + r,
  // in page table[(key0 + r) / kPageSize] of `base` (page stride `page` elements, token stride `ld`). Rows >=
  // valid_rows, and rows whose page is outside [0, num_pages), are zero-filled and not read. Pages of a whole
  // tile or more: one lookup for the tile; smaller pages: one per row.
  template <int kThreads, int kPageSize>
  static __device__ __forceinline__ void load_async_paged(unsigned dst, const unsigned short* base, long long page,
                                                          long long ld, const int* table, int num_pages, int key0,
                                                          int valid_rows, int tid) {
    if constexpr (kPageSize >= kRows) {
      const int pg = table[key0 / kPageSize];
      const bool in_pool = static_cast<unsigned>(pg) < static_cast<unsigned>(num_pages);
      load_async<kThreads>(dst, base + (in_pool ? pg * page + (key0 % kPageSize) * ld : 0), ld, in_pool ? valid_rows : 0,
                           tid);
    } else {
      using P = Passes<kThreads>;
#pragma unroll
      for (int j = 0; j < P::kCount; ++j) {
        const int i = P::kUniform ? tid % kChunks + (tid / kChunks + j * P::kPassRows) * kChunks : tid + j * kThreads;
        if (P::kUniform || i < kRows * kChunks) {
          const int row = i / kChunks, chunk = i % kChunks, key = key0 + row;
          const int pg = row < valid_rows ? table[key / kPageSize] : -1;
          const bool valid = static_cast<unsigned>(pg) < static_cast<unsigned>(num_pages);
          const unsigned short* src = base + (valid ? pg * page + (key % kPageSize) * ld + chunk * 8 : 0);
          ptx::cp_async_16(dst + offset(row, chunk), src, valid);
        }
      }
    }
  }

  // Zeroes the padding chunk of every row (loads never write it), so a k-step over it adds nothing.
  template <int kThreads>
  static __device__ __forceinline__ void zero_padding(unsigned char* tile, int tid) {
    if constexpr (kPadChunks > 0) {
      for (int row = tid; row < kRows; row += kThreads)
        *reinterpret_cast<uint4*>(tile + offset(row, kChunks)) = uint4{0u, 0u, 0u, 0u};
    }
  }

  // Copies rows [0, valid_rows) of the tile at `tile` (generic address of shared memory) to `dst` (row
  // stride `ld` elements) with 16-byte stores; the same per-thread row and chunk plan as load_async.
  template <int kThreads>
  static __device__ __forceinline__ void store(unsigned short* dst, long long ld, const unsigned char* tile,
                                               int valid_rows, int tid) {
    using P = Passes<kThreads>;
#pragma unroll
    for (int j = 0; j < P::kCount; ++j) {
      const int i = P::kUniform ? tid % kChunks + (tid / kChunks + j * P::kPassRows) * kChunks : tid + j * kThreads;
      const int row = i / kChunks, chunk = i % kChunks;
      if ((P::kUniform || i < kRows * kChunks) && row < valid_rows)
        *reinterpret_cast<uint4*>(dst + row * ld + chunk * 8) = *reinterpret_cast<const uint4*>(tile + offset(row, chunk));
    }
  }
};

}  // namespace flashjit::fa2
