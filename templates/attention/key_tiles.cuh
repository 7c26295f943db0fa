// The key tiles a block of query rows visits, in the order a kernel's loops take them (index i = 0 .. count - 1):
//   KeyRun:     the run [begin, begin + count) of the mask's key range (every kernel without a block mask);
//   BlockTiles: block-sparse kernels (flashjit/problem.hpp's BlockMask): the tiles of the key blocks the block mask
//               lists for the rows' query block, its partial blocks first, then its full ones, each block
//               kv_block / kBN tiles in key order.
// tile(i) is the key tile (keys [tile * kBN, (tile + 1) * kBN)), full(i) whether the block mask says every pair
// of it is visible (the mask_mod is then not evaluated; the built-in mask and the key count still apply). A
// listed index outside [0, num_kv_blocks) stands for tile `past`, the first tile past the keys, which every
// kernel masks whole and whose loads read nothing (TMA boxes out of bounds, predicated copies): so the kernels
// never address K or V through a caller's index. A block listed twice (in either list) is computed twice: a
// block mask lists each block at most once.
#pragma once

#include "attention/params.cuh"

namespace flashjit {

struct KeyRun {
  int begin, count;

  __device__ __forceinline__ int tile(int i) const { return begin + i; }
  __device__ __forceinline__ bool full(int) const { return false; }
};

struct BlockTiles {
  const int* partial;  // the query block's partial key blocks (its row of bm_kv_indices)
  const int* fulls;    // its full key blocks (null: none)
  int partial_count, count;
  int ratio;           // key tiles per key block (kv_block / kBN)
  int num_blocks;      // the index arrays' row length
  int past;            // the first key tile past the keys

  // The tiles of query block `q_block_index` of (batch, head).
  __device__ BlockTiles(const AttentionParams& p, int batch, int head, int q_block_index, int kBN, int seqlen_k) {
    const long long i = batch * p.bm_batch + head * p.bm_head + q_block_index;
    num_blocks = p.bm_num_kv_blocks;
    ratio = p.bm_kv_block / kBN;
    past = (seqlen_k + kBN - 1) / kBN;
    partial = p.bm_kv_indices + i * num_blocks;
    partial_count = min(max(__ldg(p.bm_kv_num + i), 0), num_blocks);
    int full_count = 0;
    fulls = nullptr;
    if (p.bm_full_num != nullptr) {
      fulls = p.bm_full_indices + i * num_blocks;
      full_count = min(max(__ldg(p.bm_full_num + i), 0), num_blocks);
    }
    count = (partial_count + full_count) * ratio;
  }

  __device__ __forceinline__ int block_of(int i) const { return ratio == 1 ? i : i / ratio; }
  __device__ __forceinline__ int tile(int i) const {
    const int j = block_of(i);
    const int block = j < partial_count ? __ldg(partial + j) : __ldg(fulls + (j - partial_count));
    if (static_cast<unsigned>(block) >= static_cast<unsigned>(num_blocks)) return past;
    return block * ratio + (i - j * ratio);
  }
  __device__ __forceinline__ bool full(int i) const { return block_of(i) >= partial_count; }
};

// KeyTiles<kBlockSparse>::type: the kernel's tile list (enum values, not static constexpr members: NVRTC emits
// a global for each of those).
template <bool kBlockSparse> struct KeyTiles { using type = KeyRun; };
template <> struct KeyTiles<true> { using type = BlockTiles; };
template <class Tiles> struct IsBlockTiles { enum { value = 0 }; };
template <> struct IsBlockTiles<BlockTiles> { enum { value = 1 }; };

}  // namespace flashjit
