// The block-mask kernel (Runtime::make_block_mask, flashjit/block_mask.hpp): one CTA per (query block, head,
// batch entry). Its warps take the key blocks in turn and classify each by evaluating its pairs inside the
// lengths, 32 keys of one query row per step: none (no pair both shown by the built-in mask and passed by the
// mask_mod), full (the mask_mod passes every pair the built-in mask shows: the attention then applies the
// built-in mask alone, which costs it nothing off its diagonal) or partial, stopping at the first row that has
// settled it. Blocks outside the built-in mask's key range are none without evaluating; without a mask_mod every
// other block is full.  Then warp 0 lists the blocks in ascending order, 32 at a time (a ballot gives each block
// its place).
#pragma once

#include "attention/mask.cuh"
#include "attention/mod.cuh"
#include "block_mask/params.cuh"

namespace flashjit::block_mask {

template <MaskKind kMask, class MaskMod, int kWarps>
struct BlockMaskKernel {
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kSmemBytes = 0;  // static; the launch gives num_kv_blocks bytes of dynamic shared memory
  enum Kind : unsigned char { kNone = 0, kPartial = 1, kFull = 2 };

  static __device__ unsigned char classify(const Mask<kMask>& mask, const ModContext& ctx,
                                           int batch, int head, int q0, int q1, int k0, int k1, int lane) {
    const bool builtin_all = mask.tile_all_visible(q0, q1, k0, k1);
    bool any = false, all = true;  // some pair shown and passed; every shown pair passed
    const int cols = k1 - k0;
    for (int q = q0; q < q1 && !(any && (!all || !MaskMod::kOn)); ++q)
      for (int c = 0; c < cols; c += 32) {
        const int k = k0 + c + lane;
        const bool shown = c + lane < cols && (builtin_all || mask.visible(q, k));
        bool passed = true;
        if constexpr (MaskMod::kOn) passed = shown && MaskMod::apply(batch, head, q, k, ctx);
        any |= __any_sync(0xffffffffu, shown && passed);
        all &= __all_sync(0xffffffffu, !shown || passed);
      }
    return !any ? kNone : all ? kFull : kPartial;
  }

  static __device__ void run(const BlockMaskParams& p) {
    extern __shared__ unsigned char kinds[];  // one per key block
    const int m = blockIdx.x, head = blockIdx.y, batch = blockIdx.z;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const Mask<kMask> mask(p.causal_offset, p.window_left, p.window_right, p.chunk_size, p.seqlen_k);
    const ModContext ctx{p.seqlen_q, p.seqlen_k, &p.aux};
    const int q0 = m * p.q_block, q1 = min(q0 + p.q_block, p.seqlen_q);
    int lo = 0, hi = 0;
    if (q0 < q1) mask.key_range(q0, q1, lo, hi);
    for (int j = warp; j < p.num_kv_blocks; j += kWarps) {
      const int k0 = j * p.kv_block, k1 = min(k0 + p.kv_block, p.seqlen_k);
      unsigned char kind = kNone;
      if (q0 < q1 && max(k0, lo) < min(k1, hi)) kind = classify(mask, ctx, batch, head, q0, q1, k0, k1, lane);
      if (lane == 0) kinds[j] = kind;
    }
    __syncthreads();
    if (warp != 0) return;
    const long long row = (static_cast<long long>(batch) * gridDim.y + head) * p.num_q_blocks + m;
    int* partial = p.kv_indices + row * p.num_kv_blocks;
    int* full = p.full_indices != nullptr ? p.full_indices + row * p.num_kv_blocks : nullptr;
    const unsigned below = (1u << lane) - 1u;
    int partials = 0, fulls = 0;
    for (int base = 0; base < p.num_kv_blocks; base += 32) {
      const int j = base + lane;
      const unsigned char kind = j < p.num_kv_blocks ? kinds[j] : kNone;
      const bool to_full = kind == kFull && full != nullptr;
      const bool to_partial = kind == kPartial || (kind == kFull && full == nullptr);
      const unsigned in_partial = __ballot_sync(0xffffffffu, to_partial), in_full = __ballot_sync(0xffffffffu, to_full);
      if (to_partial) partial[partials + __popc(in_partial & below)] = j;
      if (to_full) full[fulls + __popc(in_full & below)] = j;
      partials += __popc(in_partial);
      fulls += __popc(in_full);
    }
    if (lane == 0) {
      p.kv_num[row] = partials;
      if (p.full_num != nullptr) p.full_num[row] = fulls;
    }
  }
};

}  // namespace flashjit::block_mask
