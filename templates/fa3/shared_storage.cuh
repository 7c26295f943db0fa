// Shared-memory layout of the FA3 kernel. Every tile is stored as the TMA box writes it with 128-byte
// swizzling: [head_dim / 64 column blocks][rows][128 bytes], each 8-row x 128-byte atom 1024-byte aligned,
// which is also the layout wgmma descriptors read. Barriers follow the tiles. With two Q buffers (persistent
// CTAs, when they fit) work tile t uses buffer t % 2, so the next tile's Q loads while this one computes and
// its epilogue stages O in its own buffer.
#pragma once

namespace flashjit::fa3 {

template <int kHeadDim, int kBM, int kBN, int kStages, int kQBuffers_ = 1>
struct SharedStorage {
  static constexpr int kQBuffers = kQBuffers_;
  static constexpr int kQBytes = kBM * kHeadDim * 2;   // one Q buffer
  static constexpr int kKVBytes = kBN * kHeadDim * 2;  // one K or V stage
  static constexpr int kKOffset = kQBuffers * kQBytes;
  static constexpr int kVOffset = kKOffset + kStages * kKVBytes;
  static constexpr int kBarrierOffset = kVOffset + kStages * kKVBytes;
  // q_full per Q buffer, then per stage k_full, v_full, k_empty, v_empty, then q_empty per Q buffer
  static constexpr int kBarriers = 2 * kQBuffers + 4 * kStages;
  static constexpr int kBytes = kBarrierOffset + kBarriers * 8;
  // The dynamic allocation adds 1024 bytes so the base can be rounded up to a 1024-byte boundary.
  static constexpr int kAllocBytes = kBytes + 1024;

  static_assert(kHeadDim % 64 == 0, "tiles are made of 64-column (128-byte) blocks");
  static_assert(kBM % 64 == 0 && kBN % 8 == 0, "1024-byte aligned atoms");
  static_assert(kQBuffers == 1 || kQBuffers == 2, "one or two Q buffers");

  unsigned base;  // shared-space address, 1024-byte aligned

  static constexpr int q_offset(int buffer) { return buffer * kQBytes; }
  __device__ unsigned q(int buffer) const { return base + q_offset(buffer); }
  __device__ unsigned k(int stage) const { return base + kKOffset + stage * kKVBytes; }
  __device__ unsigned v(int stage) const { return base + kVOffset + stage * kKVBytes; }
  __device__ unsigned q_full(int buffer) const { return base + kBarrierOffset + 8 * buffer; }
  __device__ unsigned k_full(int stage) const { return base + kBarrierOffset + 8 * (kQBuffers + stage); }
  __device__ unsigned v_full(int stage) const { return base + kBarrierOffset + 8 * (kQBuffers + kStages + stage); }
  __device__ unsigned k_empty(int stage) const { return base + kBarrierOffset + 8 * (kQBuffers + 2 * kStages + stage); }
  __device__ unsigned v_empty(int stage) const { return base + kBarrierOffset + 8 * (kQBuffers + 3 * kStages + stage); }
  __device__ unsigned q_empty(int buffer) const {
    return base + kBarrierOffset + 8 * (kQBuffers + 4 * kStages + buffer);
  }

  // Byte offset of 16-byte chunk `chunk` (0 .. kHeadDim/8) of `row` in a tile of `rows` rows.
  static __device__ __forceinline__ unsigned swizzled(int rows, int row, int chunk) {
    return static_cast<unsigned>((chunk / 8) * rows * 128 + row * 128 + (((chunk % 8) ^ (row % 8)) << 4));
  }
};

}  // namespace flashjit::fa3
