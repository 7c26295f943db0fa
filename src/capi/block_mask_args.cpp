// The C ABI's block-mask inputs: flashjit_block_mask_args, and the block mask's fields of flashjit_attention_args.
#include <fmt/format.h>

#include "capi/args.hpp"
#include "capi/struct_size.hpp"

namespace flashjit::capi {

static_assert(sizeof(flashjit_block_mask_args::aux_pointers) / sizeof(void*) == ModAux::kPointers &&
                  sizeof(flashjit_block_mask_args::aux_scalars) / sizeof(float) == ModAux::kScalars &&
                  sizeof(flashjit_block_mask_args::aux_integers) / sizeof(int64_t) == ModAux::kIntegers,
              "the C ABI's aux arrays are ModAux's");

void read_block_mask(const flashjit_attention_args& a, BlockMask& m) {
  if (FLASHJIT_PRESENT(a, bm_kv_num_blocks)) m.kv_num_blocks = a.bm_kv_num_blocks;
  if (FLASHJIT_PRESENT(a, bm_kv_indices)) m.kv_indices = a.bm_kv_indices;
  if (FLASHJIT_PRESENT(a, bm_full_kv_num_blocks)) m.full_kv_num_blocks = a.bm_full_kv_num_blocks;
  if (FLASHJIT_PRESENT(a, bm_full_kv_indices)) m.full_kv_indices = a.bm_full_kv_indices;
  if (FLASHJIT_PRESENT(a, bm_q_block)) m.q_block = a.bm_q_block;
  if (FLASHJIT_PRESENT(a, bm_kv_block)) m.kv_block = a.bm_kv_block;
  if (FLASHJIT_PRESENT(a, bm_num_q_blocks)) m.num_q_blocks = a.bm_num_q_blocks;
  if (FLASHJIT_PRESENT(a, bm_num_kv_blocks)) m.num_kv_blocks = a.bm_num_kv_blocks;
  if (FLASHJIT_PRESENT(a, bm_batch_stride)) m.batch_stride = a.bm_batch_stride;
  if (FLASHJIT_PRESENT(a, bm_head_stride)) m.head_stride = a.bm_head_stride;
}

Result<BlockMaskProblem> read_block_mask_args(const flashjit_block_mask_args* args) {
  if (args == nullptr) return Error(ErrorCode::invalid_argument, "args is NULL");
  const flashjit_block_mask_args& a = *args;
  FLASHJIT_TRY(check_struct_size(a, FLASHJIT_BLOCK_MASK_ARGS_MIN_SIZE, "flashjit_block_mask_args"));
  BlockMaskProblem p;
  p.batch = a.batch, p.heads = a.heads, p.seqlen_q = a.seqlen_q, p.seqlen_k = a.seqlen_k;
  p.q_block = a.q_block != 0 ? a.q_block : 128;
  p.kv_block = a.kv_block != 0 ? a.kv_block : 128;
  auto mask = mask_of(a.mask);
  if (!mask.ok()) return std::move(mask).error();
  p.mask = *mask;
  p.window_left = a.window_left, p.window_right = a.window_right, p.chunk_size = a.chunk_size;
  auto alignment = alignment_of(a.alignment);
  if (!alignment.ok()) return std::move(alignment).error();
  p.alignment = *alignment;
  p.mask_mod = a.mask_mod;
  for (int i = 0; i < ModAux::kPointers; ++i) p.aux.pointers[i] = a.aux_pointers[i];
  for (int i = 0; i < ModAux::kScalars; ++i) p.aux.scalars[i] = a.aux_scalars[i];
  for (int i = 0; i < ModAux::kIntegers; ++i) p.aux.integers[i] = a.aux_integers[i];
  p.kv_num_blocks = a.kv_num_blocks, p.kv_indices = a.kv_indices;
  p.full_kv_num_blocks = a.full_kv_num_blocks, p.full_kv_indices = a.full_kv_indices;
  p.stream = a.stream;
  return p;
}

}  // namespace flashjit::capi
