// FA3 epilogue of one consumer warpgroup: O / l as T written into the warpgroup's rows of the Q tile
// (same swizzled layout, so stores are conflict-free), then copied to global memory with 16-byte stores;
// the log-sum-exp of each row goes straight to global memory. Afterwards the warpgroup releases the Q
// buffer (q_empty) so the producer may load the next work tile's Q.
#pragma once

#include "attention/params.cuh"
#include "attention/variant.cuh"
#include "common/types.cuh"
#include "ptx/mbarrier.cuh"
#include "ptx/regs.cuh"

namespace flashjit::fa3 {

template <class T, class Storage, int kBM, class V = NoVariant>
struct Epilogue {
  using VO = typename Storage::VO;
  static constexpr int kAllConsumersBarrier = 8;  // 1-3: per warpgroup; 4-7: the consumers' turns
  // seq: the batch entry's SeqInfo (its length, where its rows and LSE live).
  template <class Consumer, class Seq>
  static __device__ void run(Consumer& c, unsigned char* smem_q, unsigned q_empty, const AttentionParams& p, int m0,
                             int head, int batch, const Seq& seq) {
    float inv_sum[2], lse[2];
    c.softmax.finalize(V::unit(p), inv_sum, lse);
#pragma unroll
    for (int h = 0; h < 2; ++h) V::apply_sink(p.sinks, head, lse[h], inv_sum[h]);
    // Per-thread addresses from a fresh thread index: hoisted out of the persistent loop they took registers
    // the main loop needs (ptxas spilled them, d72-d96 and d136-d192).
    const int tid = ptx::thread_index_here() % 128, warp = tid / 32, lane = tid % 32;
    const int barrier = 1 + c.wg;
    ptx::named_barrier_sync(barrier, 128);  // every warp of the group is done reading its Q rows
    // With head_dim_v != head_dim the O tile's rows of this warpgroup may cover Q rows of another, which may
    // still be in its last Q·Kᵀ: every consumer warpgroup must be done with Q first.
    if constexpr (Storage::QK::kPadded != VO::kPadded) ptx::named_barrier_sync(kAllConsumersBarrier, 128 * c.consumers);
#pragma unroll
    for (int j = 0; j < VO::kPadded / 8; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = 64 * c.wg + 16 * warp + lane / 4 + 8 * h;
        const unsigned off = VO::swizzled(kBM, row, j) + 4 * (lane % 4);
        *reinterpret_cast<unsigned*>(smem_q + off) =
            pack2<T>(c.o[j][2 * h] * inv_sum[h], c.o[j][2 * h + 1] * inv_sum[h]);
      }
    if (p.lse != nullptr && lane % 4 == 0) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = c.row0 + 8 * h;
        if (row < seq.seqlen_q) p.lse[seq.lse_index(p, batch, head, row)] = lse[h];
      }
    }
    ptx::named_barrier_sync(barrier, 128);
    auto* out = static_cast<unsigned short*>(p.o) + seq.o_offset(p, batch) + head * p.o_head;
    // Thread tid copies chunk tid % kChunks of rows tid / kChunks + j * kPassRows (when 128 threads cover
    // whole rows: the chunk is fixed, each copy is the first shared and global address plus j steps), else
    // chunks tid + 128 j of the warpgroup's 64 rows (head dims of 9, 10, ... chunks, and d8's one).
    constexpr int kChunks = VO::kChunks;
    const int rows_left = seq.seqlen_q - (m0 + 64 * c.wg);
    unsigned short* wg_out = out + (m0 + 64 * c.wg) * p.o_seq;
    if constexpr (128 % kChunks == 0 && 128 / kChunks <= 64) {
      constexpr int kPassRows = 128 / kChunks;
      const int chunk = tid % kChunks, r0 = tid / kChunks;
      unsigned short* dst = wg_out + r0 * p.o_seq + chunk * 8;
#pragma unroll
      for (int j = 0; j < 64 / kPassRows; ++j) {
        if (r0 + j * kPassRows < rows_left)
          *reinterpret_cast<uint4*>(dst + j * kPassRows * p.o_seq) =
              *reinterpret_cast<const uint4*>(smem_q + VO::swizzled(kBM, 64 * c.wg + r0 + j * kPassRows, chunk));
      }
    } else {
#pragma unroll
      for (int j = 0; j < (64 * kChunks + 127) / 128; ++j) {
        const int i = tid + 128 * j, r = i / kChunks, chunk = i % kChunks;
        if (i < 64 * kChunks && r < rows_left)
          *reinterpret_cast<uint4*>(wg_out + r * p.o_seq + chunk * 8) =
              *reinterpret_cast<const uint4*>(smem_q + VO::swizzled(kBM, 64 * c.wg + r, chunk));
      }
    }
    ptx::named_barrier_sync(barrier, 128);  // every thread is done reading the staged O
    if (tid == 0) ptx::mbarrier_arrive(q_empty);
  }
};

}  // namespace flashjit::fa3
