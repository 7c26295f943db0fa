// Per-architecture limits the config checks and the heuristics share.
#pragma once

#include <string>

#include "flashjit/config.hpp"

namespace flashjit::config {

// The data-center parts from Hopper on (sm_90, sm_100 / 101 / 103, sm_110): 228 KB of shared memory per SM.
// The GeForce / workstation Blackwell parts (sm_120, sm_121) have the 100 KB of sm_86 and sm_89.
inline bool large_shared_memory(const Arch& arch) { return arch.sm >= 90 && arch.sm < 120; }

// Bytes of dynamic shared memory a block may use after opting in (CUDA C++ Programming Guide, compute
// capabilities: 163 KB on sm_80 / sm_87, 227 KB on the parts above, 99 KB on sm_86, sm_89, sm_12x and others).
inline int max_shared_memory_per_block(const Arch& arch) {
  if (arch.sm == 80 || arch.sm == 87) return 163 * 1024;
  if (large_shared_memory(arch)) return 227 * 1024;
  return 99 * 1024;
}

// Shared memory of one SM (the same table: 164 KB, 228 KB, 100 KB), and what the driver reserves per block
// out of it: a kernel of b bytes fits floor(per_sm / (b + reserved)) blocks per SM.
inline int shared_memory_per_sm(const Arch& arch) {
  if (arch.sm == 80 || arch.sm == 87) return 164 * 1024;
  if (large_shared_memory(arch)) return 228 * 1024;
  return 100 * 1024;
}
inline constexpr int kSharedMemoryReservedPerBlock = 1024;

// fa3 gathers K/V pages of fewer tokens than this with cp.async (templates/fa3/producer.cuh, kGatherBelow);
// larger pages are TMA boxes.
inline constexpr int kFa3GatherBelow = 16;
inline bool fa3_gathers_pages(const KernelConfig& c) {
  return c.algorithm == Algorithm::fa3 && c.page_size > 0 && c.page_size < kFa3GatherBelow;
}

// Shared-memory rows of the fa2 and decode kernels are padded to a multiple of 64 elements so the 128-byte
// XOR swizzle applies (fa2::SmemTile).
inline constexpr int padded_head_dim(int head_dim) { return (head_dim + 63) / 64 * 64; }

// Per-thread registers of an FA3 consumer, an estimate: O (head_dim_v / 2, padded to 16), S (block_n / 2), P
// (block_n / 4), softmax state, descriptors and addressing; and its budget (setmaxnreg, templates/fa3/kernel.cuh).
// ptxas has the last word (CI checks for spills).
inline int fa3_consumer_registers(const KernelConfig& c) {
  return (value_head_dim(c) + 15) / 16 * 16 / 2 + c.block_n / 2 + c.block_n / 4 + 40;
}
inline int fa3_consumer_budget(int consumers) { return consumers == 1 ? 256 : consumers == 2 ? 240 : 160; }
// What a bias tensor adds to that: the entries of a tile a thread holds while Q·Kᵀ runs (two rows' key pairs of each
// 8-key n-tile, a register each, two for fp32: block_n / 4 or block_n / 2), with the margins under which NVRTC 13.0's
// ptxas kept two consumer warpgroups spill-free at d64-d256 (dispatch/heuristics.cpp, fit_variant_registers).
inline int fa3_bias_registers(const KernelConfig& c) {
  switch (c.bias) {
    case BiasType::none: return 0;
    case BiasType::fp32: return c.block_n / 2 + 16;
    case BiasType::boolean: return c.block_n / 4 + 12;
    default: return c.block_n / 4 + 8;
  }
}

// Why a packed-GQA fa3 config cannot run a problem with these head counts (empty when it can): the group
// (heads_q / heads_kv) must be whole and divide block_m, so that a tile holds whole positions
// (templates/fa3/rows.cuh).
inline std::string pack_gqa_mismatch(const KernelConfig& c, long long heads_q, long long heads_kv) {
  if (!c.pack_gqa) return {};
  if (heads_kv <= 0 || heads_q % heads_kv != 0) return "pack_gqa needs heads_q to be a multiple of heads_kv";
  const long long group = heads_q / heads_kv;
  if (c.block_m % group != 0)
    return "pack_gqa needs the group (heads_q / heads_kv = " + std::to_string(group) + ") to divide block_m (" +
           std::to_string(c.block_m) + ")";
  return {};
}

// Why a config cannot run a problem with this block mask (empty when it can; q_block 0: the problem has none):
// block_sparse must match the problem, and a tile must lie within one block: block_m divides q_block and
// block_n kv_block (templates/attention/key_tiles.cuh; the reference kernel looks up each key's block).
inline std::string block_mask_mismatch(const KernelConfig& c, int q_block, int kv_block) {
  const bool has = q_block > 0;
  if (c.block_sparse != has)
    return has ? "the problem has a block mask but the kernel is not block_sparse"
               : "a block_sparse kernel needs a problem with a block mask";
  if (!has || c.algorithm == Algorithm::naive) return {};
  if (q_block % c.block_m != 0 || kv_block % c.block_n != 0)
    return "a block_sparse kernel's tile (block_m " + std::to_string(c.block_m) + ", block_n " +
           std::to_string(c.block_n) + ") must divide the block mask's blocks (q_block " + std::to_string(q_block) +
           ", kv_block " + std::to_string(kv_block) + ")";
  return {};
}

}  // namespace flashjit::config
