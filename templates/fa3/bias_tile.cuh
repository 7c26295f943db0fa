// A bias tensor's tile staged in shared memory by TMA (KernelConfig::bias_tma; attention/bias.cuh): the entries of
// a work tile's kBM rows and one key tile's kBN keys, loaded by the producer with the key tile's K (on its full
// barrier) and read by the consumers while Q·Kᵀ runs. Where the consumers' own 4-byte loads of each key pair reach
// about a quarter of the HBM bandwidth (H200, bf16 [1, 32, 4096, 4096]: 1.03 TB/s, 0.72× FlexAttention), one
// box per 128 bytes of a row streams the tile at the copy engine's rate.
//
// Layout: the tile's rows (kBN entries, a multiple of 128 bytes) split into blocks of 128 bytes; block b holds
// the kBM rows' entries [b * kPerBlock, (b + 1) * kPerBlock) with 128-byte swizzling (16-byte chunk c of row r at
// chunk c ^ (r % 8)), which is what one box of (kPerBlock keys, kBM rows) writes. A warp's read of one n-tile
// (8 rows x 4 lanes, each a pair of adjacent keys) then touches 8 distinct chunks: no bank conflicts.
// The view (src/launch/bias_map.cpp) is 4-D (keys, rows, heads, batch) of the tensor; a broadcast head or batch
// (stride 0) is a dimension of one and its coordinate 0. Rows and keys past the tensor's are zeros (every such
// pair is masked or never stored).
#pragma once

#include "attention/bias.cuh"
#include "attention/params.cuh"
#include "common/tensor_map.cuh"
#include "ptx/tma.cuh"

namespace flashjit::fa3 {

template <BiasType kType, int kBM, int kBN>
struct BiasTile {
  using E = BiasEntries<kType>;
  using Two = typename E::Two;
  static constexpr int kEntry = sizeof(typename E::One);
  static constexpr int kPerBlock = 128 / kEntry;  // entries of a row in one 128-byte block
  static constexpr int kBlocks = kBN * kEntry / 128;
  static constexpr int bytes() { return kBM * kBN * kEntry; }
  static_assert(kBN * kEntry % 128 == 0, "a bias tile row is a whole number of 128-byte blocks");

  // The producer's boxes of key tile [key0, key0 + kBN) for the rows of positions [m0, m0 + kBM) of (batch,
  // head), completing on `bar` (whose expected bytes include bytes()).
  static __device__ __forceinline__ void load(unsigned dst, const TensorMap* map, unsigned bar, const AttentionParams& p,
                                              int key0, int m0, int head, int batch) {
    const int h = p.bias_head != 0 ? head : 0, b = p.bias_batch != 0 ? batch : 0;
#pragma unroll
    for (int blk = 0; blk < kBlocks; ++blk)
      ptx::tma_load_4d(dst + blk * kBM * 128, map, bar, key0 + blk * kPerBlock, m0, h, b);
  }

  // Where the fragment pairs of tile row `row` start, for a thread of `lane`: the row's offset in the tile with the
  // lane's part of the swizzle and its bytes within a 16-byte chunk (a pair's address then takes one XOR and one
  // immediate per n-tile: pair()). Row r + 8 is 1024 bytes on (the same swizzle).
  static __device__ __forceinline__ unsigned row_offset(int row, int lane) {
    const int lane_bytes = 2 * kEntry * (lane % 4);  // < 32: below any n-tile's chunk bits
    return static_cast<unsigned>(row * 128 + ((((row % 8) ^ (lane_bytes / 16)) << 4) | (lane_bytes % 16)));
  }

  // The entries of keys 8j + 2 (lane % 4) and the next of the row whose row_offset() is `row_at`, in the tile at
  // `tile`. The n-tile's bytes 8j * kEntry of the row split into 128-byte blocks, a 16-byte chunk (swizzled by an
  // XOR: the lane's chunk bits never overlap the n-tile's) and bytes within the chunk.
  static __device__ __forceinline__ Two pair(unsigned tile, unsigned row_at, int j) {
    constexpr int kStep = 8 * kEntry;  // an n-tile's bytes in a row
    const int bytes = kStep * j;
    const unsigned at = (tile + (row_at ^ static_cast<unsigned>(bytes % 128 / 16 << 4))) + bytes % 16 +
                        (bytes / 128) * kBM * 128;
    Two t;
    if constexpr (sizeof(Two) == 8) {
      float x, y;
      asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];" : "=f"(x), "=f"(y) : "r"(at));
      t = make_float2(x, y);
    } else if constexpr (sizeof(Two) == 4) {
      asm volatile("ld.shared.u32 %0, [%1];" : "=r"(t) : "r"(at));
    } else {
      asm volatile("ld.shared.u16 %0, [%1];" : "=h"(t) : "r"(at));
    }
    return t;
  }
};

// The bias tile a kernel stages (kBiasTma), or none (bytes() 0; a function, not a static constexpr member, which
// NVRTC would emit as a global in every kernel).
template <bool kStaged, BiasType kType, int kBM, int kBN>
struct StagedBias {
  static constexpr int bytes() { return 0; }
};
template <BiasType kType, int kBM, int kBN>
struct StagedBias<true, kType, kBM, kBN> : BiasTile<kType, kBM, kBN> {};
using NoStagedBias = StagedBias<false, BiasType::none, 64, 64>;

}  // namespace flashjit::fa3
