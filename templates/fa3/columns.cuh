// The columns of an FA3 shared-memory tile whose rows hold kDim 16-bit elements (any multiple of 8 up to
// 256). Rows are padded to a multiple of 16 elements (one wgmma k-step) and stored as column blocks, each the
// box of one TMA load and the span of one swizzle pattern: 64-column blocks with 128-byte swizzling, then at
// most one 32-column block (64-byte swizzling) and one 16-column block (32-byte swizzling) for the rest.
// d80 = 64 + 16 and d96 = 64 + 32 so pay for 80 and 96 columns, not 128; d72 pads to 80. Block b of a tile
// of R rows holds R rows of its width: [block][row][width bytes], each 8-row atom aligned to its pattern
// (1024 / 512 / 256 bytes), which is both the layout the TMA box writes and the one wgmma descriptors read.
// The padding columns are zero (the tensor maps end at kDim: TMA fills the rest of the box with zeros).
// src/config/prefill.cpp (fa3_padded_dim) and src/launch/launch.cpp (the maps) follow the same rule.
#pragma once

namespace flashjit::fa3 {

// Descriptor swizzle modes (wgmma matrix descriptor bits 62-63) per block width.
enum class Swizzle : int { b128 = 1, b64 = 2, b32 = 3 };

template <int kDim>
struct Columns {
  static_assert(kDim % 8 == 0 && kDim >= 8 && kDim <= 256, "a multiple of 8 in [8, 256]");
  static constexpr int kPadded = (kDim + 15) / 16 * 16;
  static constexpr int kWide = kPadded / 64;                 // 64-column blocks
  static constexpr bool kHas32 = kPadded % 64 >= 32;         // a 32-column block after them
  static constexpr bool kHas16 = kPadded % 32 == 16;         // a 16-column block last
  static constexpr int kCol32 = 64 * kWide;                  // first column of the 32-column block
  static constexpr int kCol16 = kCol32 + (kHas32 ? 32 : 0);  // first column of the 16-column block
  static constexpr int kKSteps = kPadded / 16;
  static constexpr int kChunks = kDim / 8;                   // 16-byte chunks holding data

  // Byte offsets of the narrow blocks in a tile of `rows` rows.
  static constexpr int offset32(int rows) { return kWide * rows * 128; }
  static constexpr int offset16(int rows) { return offset32(rows) + (kHas32 ? rows * 64 : 0); }
  static constexpr int bytes(int rows) { return rows * kPadded * 2; }

  // The block holding column `col` (a multiple of 16): its byte offset in a tile of `rows` rows, its row
  // width in bytes and the byte offset of the column within a row. Compile-time for unrolled k-steps.
  static __device__ __forceinline__ void locate(int rows, int col, int& block, int& width, int& within) {
    if (col < kCol32) {
      block = (col / 64) * rows * 128, width = 128, within = (col % 64) * 2;
    } else if (kHas32 && col < kCol16) {
      block = offset32(rows), width = 64, within = (col - kCol32) * 2;
    } else {
      block = offset16(rows), width = 32, within = (col - kCol16) * 2;
    }
  }

  // Byte offset of 16-byte chunk `chunk` (0 .. kPadded / 8) of `row` in a tile of `rows` rows: the 16-byte
  // unit index XORed with the address bits each pattern uses (bits 7-9 for 128 bytes, 7-8 for 64, 7 for 32).
  static __device__ __forceinline__ unsigned swizzled(int rows, int row, int chunk) {
    if (chunk < kCol32 / 8)
      return static_cast<unsigned>((chunk / 8) * rows * 128 + row * 128 + (((chunk % 8) ^ (row % 8)) << 4));
    if (kHas32 && chunk < kCol16 / 8)
      return static_cast<unsigned>(offset32(rows) + row * 64 + (((chunk - kCol32 / 8) ^ ((row / 2) % 4)) << 4));
    return static_cast<unsigned>(offset16(rows) + row * 32 + (((chunk - kCol16 / 8) ^ ((row / 4) % 2)) << 4));
  }
};

}  // namespace flashjit::fa3
