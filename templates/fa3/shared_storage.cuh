// Shared-memory layout of the FA3 kernel. Every tile is stored as the TMA box writes it with 128-byte
// swizzling: [head_dim / 64 column blocks][rows][128 bytes], each 8-row x 128-byte atom 1024-byte aligned,
// which is also the layout wgmma descriptors read. Barriers follow the tiles.
#pragma once

namespace flashjit::fa3 {

template <int kHeadDim, int kBM, int kBN, int kStages>
struct SharedStorage {
  static constexpr int kQBytes = kBM * kHeadDim * 2;
  static constexpr int kKVBytes = kBN * kHeadDim * 2;  // one K or V stage
  static constexpr int kQOffset = 0;
  static constexpr int kKOffset = kQBytes;
  static constexpr int kVOffset = kKOffset + kStages * kKVBytes;
  static constexpr int kBarrierOffset = kVOffset + kStages * kKVBytes;
  // q_full, then per stage k_full, v_full, k_empty, v_empty, then q_empty
  static constexpr int kBarriers = 2 + 4 * kStages;
  static constexpr int kBytes = kBarrierOffset + kBarriers * 8;
  // The dynamic allocation adds 1024 bytes so the base can be rounded up to a 1024-byte boundary.
  static constexpr int kAllocBytes = kBytes + 1024;

  static_assert(kHeadDim % 64 == 0, "tiles are made of 64-column (128-byte) blocks");
  static_assert(kBM % 64 == 0 && kBN % 8 == 0, "1024-byte aligned atoms");

  unsigned base;  // shared-space address, 1024-byte aligned

  __device__ unsigned q() const { return base + kQOffset; }
  __device__ unsigned k(int stage) const { return base + kKOffset + stage * kKVBytes; }
  __device__ unsigned v(int stage) const { return base + kVOffset + stage * kKVBytes; }
  __device__ unsigned q_full() const { return base + kBarrierOffset; }
  __device__ unsigned k_full(int stage) const { return base + kBarrierOffset + 8 * (1 + stage); }
  __device__ unsigned v_full(int stage) const { return base + kBarrierOffset + 8 * (1 + kStages + stage); }
  __device__ unsigned k_empty(int stage) const { return base + kBarrierOffset + 8 * (1 + 2 * kStages + stage); }
  __device__ unsigned v_empty(int stage) const { return base + kBarrierOffset + 8 * (1 + 3 * kStages + stage); }
  __device__ unsigned q_empty() const { return base + kBarrierOffset + 8 * (1 + 4 * kStages); }

  // Byte offset of 16-byte chunk `chunk` (0 .. kHeadDim/8) of `row` in a tile of `rows` rows.
  static __device__ __forceinline__ unsigned swizzled(int rows, int row, int chunk) {
    return static_cast<unsigned>((chunk / 8) * rows * 128 + row * 128 + (((chunk % 8) ^ (row % 8)) << 4));
  }
};

}  // namespace flashjit::fa3
