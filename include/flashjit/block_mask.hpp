// BlockMaskProblem: a block mask (problem.hpp's BlockMask) made on the device from a mask, like FlexAttention's
// create_block_mask: a generated kernel evaluates the built-in mask (mask, windows, chunks, alignment, as an
// AttentionProblem's) and the mask_mod over every (query, key) pair of every q_block x kv_block block, and lists
// each query block's key blocks: partial ones (the mask_mod hides some pair the built-in mask shows) in kv_indices,
// full ones (the mask_mod passes every pair the built-in mask shows, or there is no mask_mod) in full_kv_indices
// (or, without those arrays, in kv_indices too), ascending; blocks where no pair is both shown and passed are not
// listed. An attention with the same built-in mask then applies it in every block itself (the cut ones are its
// diagonal), and the mask_mod in the partial blocks only. One block mask
// serves every call (and layer) with the same lengths, masks and aux data.
//
// The mask_mod (templates/attention/mod.cuh) sees b in [0, batch) and h in [0, heads): a mask made with batch 1
// (or heads 1) is the one every batch entry (head) of the attention reads (BlockMask strides 0).
//
// Outputs (device int32, contiguous, written by the kernel; entries of a row past its count are not written):
//   kv_num_blocks, full_kv_num_blocks   [batch, heads, num_q_blocks]
//   kv_indices, full_kv_indices         [batch, heads, num_q_blocks, num_kv_blocks]
// with num_q_blocks = ceil(seqlen_q / q_block) and num_kv_blocks = ceil(seqlen_k / kv_block) (block_mask_shape).
#pragma once

#include "flashjit/problem.hpp"

namespace flashjit {

struct BlockMaskProblem {
  int batch = 1;  // the mask's batch entries (1: one for all)
  int heads = 1;  // its query heads (1: one for all)
  int seqlen_q = 0;
  int seqlen_k = 0;
  int q_block = 128;  // a multiple of 16 (FlexAttention's default block: 128 x 128)
  int kv_block = 128;

  MaskKind mask = MaskKind::none;
  int window_left = -1;
  int window_right = -1;
  int chunk_size = 0;
  Alignment alignment = Alignment::bottom_right;
  const char* mask_mod = nullptr;  // NUL-terminated CUDA C++ (mod.cuh's signature); null: the built-in mask only
  ModAux aux{};

  int* kv_num_blocks = nullptr;
  int* kv_indices = nullptr;
  int* full_kv_num_blocks = nullptr;  // optional (both full_* or neither)
  int* full_kv_indices = nullptr;
  void* stream = nullptr;
};

// The number of query and key blocks (the outputs' last dimensions).
struct BlockMaskShape {
  int num_q_blocks = 0;
  int num_kv_blocks = 0;
};
BlockMaskShape block_mask_shape(const BlockMaskProblem& p);

// The BlockMask an AttentionProblem takes for the outputs (strides 0 over a batch or heads of 1).
BlockMask block_mask_of(const BlockMaskProblem& p);

// Shape, mask-constant and pointer checks that need no device; each message names its field.
Status check(const BlockMaskProblem& p);

}  // namespace flashjit
