// Shared-memory layout of the FA3 kernel. Every tile is stored as the TMA boxes write it: column blocks of
// 64, 32 and 16 columns with 128-, 64- and 32-byte swizzling (fa3/columns.cuh), which is also the layout the
// wgmma descriptors read. Q and K rows hold head_dim elements, V rows head_dim_v; a Q buffer is large enough
// for the O tile the epilogue stages in it (head_dim_v may be the larger). Barriers follow the tiles. With two Q buffers (persistent
// CTAs, when they fit) work tile t uses buffer t % 2, so the next tile's Q loads while this one computes and
// its epilogue stages O in its own buffer. Kernels that stage a bias tensor's tiles (fa3/bias_tile.cuh) add one
// bias tile of kBiasBytes per stage after the V stages, loaded with the stage's K.
#pragma once

#include "fa3/columns.cuh"

namespace flashjit::fa3 {

template <int kHeadDim, int kHeadDimV, int kBM, int kBN, int kStages, int kQBuffers_ = 1, int kBiasBytes_ = 0>
struct SharedStorage {
  using QK = Columns<kHeadDim>;
  using VO = Columns<kHeadDimV>;
  static constexpr int kQBuffers = kQBuffers_;
  static constexpr int kQBytes = QK::bytes(kBM);  // what Q's TMA boxes bring
  static constexpr int kQBufferBytes = kQBytes > VO::bytes(kBM) ? kQBytes : VO::bytes(kBM);
  static constexpr int kKBytes = QK::bytes(kBN);  // what one K stage's boxes bring
  static constexpr int kVBytes = VO::bytes(kBN);  // ... and one V stage's
  // Stages start on 1024-byte boundaries (a 16-column block may end a tile on a 512-byte one).
  static constexpr int kKStride = (kKBytes + 1023) / 1024 * 1024;
  static constexpr int kVStride = (kVBytes + 1023) / 1024 * 1024;
  static constexpr int kKOffset = kQBuffers * kQBufferBytes;
  static constexpr int kVOffset = kKOffset + kStages * kKStride;
  // One stage's bias tile (kBiasBytes_, 0: none staged) after the V stages, at this stride. A function, not a
  // member: with -default-device NVRTC makes each static constexpr data member a global, and plain kernels keep
  // theirs as they were.
  static constexpr int bias_stride() { return (kBiasBytes_ + 1023) / 1024 * 1024; }
  static constexpr int kBarrierOffset = kVOffset + kStages * kVStride + kStages * bias_stride();
  // q_full per Q buffer, then per stage k_full, v_full, k_empty, v_empty, then q_empty per Q buffer
  static constexpr int kBarriers = 2 * kQBuffers + 4 * kStages;
  static constexpr int kBytes = kBarrierOffset + kBarriers * 8;
  // The dynamic allocation adds 1024 bytes so the base can be rounded up to a 1024-byte boundary.
  static constexpr int kAllocBytes = kBytes + 1024;

  static_assert(kBM % 64 == 0 && kBN % 16 == 0, "1024-byte aligned blocks and atoms");
  static_assert(kQBuffers == 1 || kQBuffers == 2, "one or two Q buffers");

  unsigned base;  // shared-space address, 1024-byte aligned

  static constexpr int q_offset(int buffer) { return buffer * kQBufferBytes; }
  __device__ unsigned q(int buffer) const { return base + q_offset(buffer); }
  __device__ unsigned k(int stage) const { return base + kKOffset + stage * kKStride; }
  __device__ unsigned v(int stage) const { return base + kVOffset + stage * kVStride; }
  __device__ unsigned bias(int stage) const {
    return base + kVOffset + kStages * kVStride + stage * bias_stride();
  }
  __device__ unsigned q_full(int buffer) const { return base + kBarrierOffset + 8 * buffer; }
  __device__ unsigned k_full(int stage) const { return base + kBarrierOffset + 8 * (kQBuffers + stage); }
  __device__ unsigned v_full(int stage) const { return base + kBarrierOffset + 8 * (kQBuffers + kStages + stage); }
  __device__ unsigned k_empty(int stage) const { return base + kBarrierOffset + 8 * (kQBuffers + 2 * kStages + stage); }
  __device__ unsigned v_empty(int stage) const { return base + kBarrierOffset + 8 * (kQBuffers + 3 * kStages + stage); }
  __device__ unsigned q_empty(int buffer) const {
    return base + kBarrierOffset + 8 * (kQBuffers + 4 * kStages + buffer);
  }
};

}  // namespace flashjit::fa3
