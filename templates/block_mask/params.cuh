// Kernel arguments of the block-mask kernel. Plain C types only, so the host (gcc) and NVRTC see the same layout.
#pragma once

#include "attention/mod_aux.cuh"

namespace flashjit {

// Grid (num_q_blocks, heads, batch); the outputs are contiguous [batch, heads, num_q_blocks(, num_kv_blocks)].
struct BlockMaskParams {
  int* kv_num;        // partial (or, without full lists, every listed) key blocks per query block
  int* kv_indices;
  int* full_num;      // full key blocks, or null
  int* full_indices;
  int seqlen_q, seqlen_k;
  int q_block, kv_block;
  int num_q_blocks, num_kv_blocks;
  // The built-in mask's constants (attention/mask.cuh): query i aligned to key i + causal_offset.
  int causal_offset, window_left, window_right, chunk_size;
  ModAuxParams aux;  // the mask_mod's arguments
};

}  // namespace flashjit
