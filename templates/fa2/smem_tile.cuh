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
  static constexpr int kElems = kRows * kRowElems;
  static constexpr int kBytes = kElems * 2;
  static_assert(kCols % 8 == 0, "rows are copied in 16-byte chunks");

  // Byte offset of (row, chunk) from the tile's start.
  static __device__ __forceinline__ unsigned offset(int row, int chunk) {
    return static_cast<unsigned>((row * kRowElems + ((chunk ^ (row & 7)) << 3)) * 2);
  }

  // Per-thread ldmatrix addressing: the thread's row is row0 + 16 * i and its chunk 2 * c + sub, for
  // compile-time i and c. Since 16 * i keeps (row % 8) and 2 * c only moves whole 8-chunk groups beyond
  // c % 4, four precomputed offsets plus immediates address every fragment (no per-load swizzle math).
  struct Fragments {
    unsigned offsets[4];
    __device__ Fragments(int row0, int sub) {
#pragma unroll
      for (int c = 0; c < 4; ++c) offsets[c] = offset(row0, 2 * c + sub);
    }
    __device__ __forceinline__ unsigned at(unsigned tile, int i, int c) const {
      return tile + offsets[c % 4] + (c / 4) * 128 + i * 16 * kRowElems * 2;
    }
  };

  // Issues cp.async copies of rows [0, kRows) from `src` (row stride `ld` elements); rows >= valid_rows
  // are zero-filled and not read.
  template <int kThreads>
  static __device__ __forceinline__ void load_async(unsigned dst, const unsigned short* src, long long ld,
                                                    int valid_rows, int tid) {
#pragma unroll
    for (int i = tid; i < kRows * kChunks; i += kThreads) {
      const int row = i / kChunks, chunk = i % kChunks;
      const bool valid = row < valid_rows;
      const unsigned short* p = src + (valid ? row * ld + chunk * 8 : 0);
      ptx::cp_async_16(dst + offset(row, chunk), p, valid);
    }
  }
};

}  // namespace flashjit::fa2
