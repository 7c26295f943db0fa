// FA3 epilogue of one consumer warpgroup: O / l as T written into the warpgroup's rows of the Q tile
// (same swizzled layout, so stores are conflict-free), then copied to global memory with 16-byte stores;
// the log-sum-exp of each row goes straight to global memory. Afterwards the warpgroup releases the Q
// buffer (q_empty) so the producer may load the next work tile's Q.
// Packed GQA (kPackGqa, fa3/rows.cuh): tile row r is position m0 + r / group of query head head + r % group.
#pragma once

#include "attention/params.cuh"
#include "attention/variant.cuh"
#include "common/types.cuh"
#include "fa3/rows.cuh"
#include "ptx/mbarrier.cuh"
#include "ptx/regs.cuh"

namespace flashjit::fa3 {

template <class T, class Storage, int kBM, class V = NoVariant, bool kPackGqa = false>
struct Epilogue {
  using VO = typename Storage::VO;
  static constexpr int kAllConsumersBarrier = 8;  // 1-3: per warpgroup; 4-7: the consumers' turns
  // seq: the batch entry's SeqInfo (its length, where its rows and LSE live). m0: the tile's first position;
  // head: its (first) query head.
  template <class Consumer, class Seq>
  static __device__ void run(Consumer& c, unsigned char* smem_q, unsigned q_empty, const AttentionParams& p, int m0,
                             int head, int batch, const Seq& seq, const Rows<kPackGqa, kBM>& rows) {
    float inv_sum[2], lse[2];
    c.softmax.finalize(V::unit(p), inv_sum, lse);
    // Per-thread addresses from a fresh thread index: hoisted out of the persistent loop they took registers
    // the main loop needs (ptxas spilled them, d72-d96 and d136-d192).
    const int tid = ptx::thread_index_here() % 128, warp = tid / 32, lane = tid % 32;
    const int my_row = 64 * c.wg + 16 * warp + lane / 4;  // the thread's first tile row (the second: + 8)
    const int row_head[2] = {head + rows.head_in_group(my_row), head + rows.head_in_group(my_row + 8)};
#pragma unroll
    for (int h = 0; h < 2; ++h) V::apply_sink(p.sinks, row_head[h], lse[h], inv_sum[h]);
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
        const int row = h ? c.row1() : c.row0;
        if (row < seq.seqlen_q) p.lse[seq.lse_index(p, batch, row_head[h], row)] = lse[h];
      }
    }
    ptx::named_barrier_sync(barrier, 128);
    auto* out = static_cast<unsigned short*>(p.o) + seq.o_offset(p, batch) + head * p.o_head;
    // Thread tid copies chunk tid % kChunks of rows tid / kChunks + j * kPassRows (when 128 threads cover
    // whole rows: the chunk is fixed, each copy is the first shared and global address plus j steps), else
    // chunks tid + 128 j of the warpgroup's 64 rows (head dims of 9, 10, ... chunks, and d8's one).
    constexpr int kChunks = VO::kChunks;
    // Row r of the warpgroup's 64: where it goes, and whether it is a row of the sequence.
    const int rows_left = seq.seqlen_q - (m0 + 64 * c.wg);
    unsigned short* wg_out = out + (m0 + 64 * c.wg) * p.o_seq;
    auto row_out = [&](int r) -> unsigned short* {
      if constexpr (kPackGqa) {
        const int t = 64 * c.wg + r;
        return out + static_cast<long long>(m0 + rows.position(t)) * p.o_seq + rows.head_in_group(t) * p.o_head;
      }
      return wg_out + r * p.o_seq;
    };
    auto row_in = [&](int r) {
      if constexpr (kPackGqa) return m0 + rows.position(64 * c.wg + r) < seq.seqlen_q;
      return r < rows_left;
    };
    if constexpr (128 % kChunks == 0 && 128 / kChunks <= 64) {
      constexpr int kPassRows = 128 / kChunks;
      const int chunk = tid % kChunks, r0 = tid / kChunks;
      unsigned short* dst = wg_out + r0 * p.o_seq + chunk * 8;
#pragma unroll
      for (int j = 0; j < 64 / kPassRows; ++j) {
        if (row_in(r0 + j * kPassRows))
          *reinterpret_cast<uint4*>(kPackGqa ? row_out(r0 + j * kPassRows) + chunk * 8 : dst + j * kPassRows * p.o_seq) =
              *reinterpret_cast<const uint4*>(smem_q + VO::swizzled(kBM, 64 * c.wg + r0 + j * kPassRows, chunk));
      }
    } else {
#pragma unroll
      for (int j = 0; j < (64 * kChunks + 127) / 128; ++j) {
        const int i = tid + 128 * j, r = i / kChunks, chunk = i % kChunks;
        if (i < 64 * kChunks && row_in(r))
          *reinterpret_cast<uint4*>(row_out(r) + chunk * 8) =
              *reinterpret_cast<const uint4*>(smem_q + VO::swizzled(kBM, 64 * c.wg + r, chunk));
      }
    }
    ptx::named_barrier_sync(barrier, 128);  // every thread is done reading the staged O
    if (tid == 0) ptx::mbarrier_arrive(q_empty);
  }
};

}  // namespace flashjit::fa3
