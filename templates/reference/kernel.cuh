// The reference kernel (the seed's NAIVE): one CTA per (query row, head, batch), fp32 arithmetic with
// precise exp/log, any head dim that is a multiple of 8 and every mask. Slow on purpose-simple code: it is
// the yardstick for large-shape GPU tests and the fallback for problems no fast kernel supports.
// Varlen (kVarlen): blockIdx.z is the sequence (SeqInfo); rows past its length exit at once. Paged
// (kPageSize > 0): each key's row is looked up in the sequence's page-table row; a page outside the pool reads
// as zeros. Block-sparse (kBlockSparse): the keys are those of the key blocks the row's query block lists
// (attention/key_tiles.cuh, one "tile" per block), walked block by block; full blocks skip the mask_mod.
// seqused_k (kSequsedK): the sequence's first seqused_k[b] keys only (SeqInfo); no other key is read.
#pragma once

#include "attention/key_tiles.cuh"
#include "attention/mask.cuh"
#include "attention/params.cuh"
#include "attention/seqlen.cuh"
#include "attention/variant.cuh"
#include "common/math.cuh"
#include "common/types.cuh"

namespace flashjit::reference {

// kHeadDim: Q's and K's head dim; kHeadDimV: V's and O's.
template <class T, int kHeadDim, int kHeadDimV, int kBlockThreads, MaskKind kMask, bool kVarlen = false,
          int kPageSize = 0, class V = NoVariant, bool kBlockSparse = false, bool kSequsedK = false>
struct Kernel {
  static constexpr int kThreads = kBlockThreads;
  static constexpr int kWarps = kThreads / 32;
  static constexpr int kColsPerThread = (kHeadDimV + kThreads - 1) / kThreads;
  // probabilities of one key chunk, one float per warp for reductions, the query row
  static constexpr int kSmemBytes = (kThreads + 2 * 32 + kHeadDim) * 4;

  static __device__ float block_reduce(float x, float* scratch, bool is_max) {
    x = is_max ? warp_max(x) : warp_sum(x);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads();
    if (lane == 0) scratch[warp] = x;
    __syncthreads();
    float r = is_max ? neg_infinity() : 0.f;
    for (int w = 0; w < kWarps; ++w) r = is_max ? fmaxf(r, scratch[w]) : r + scratch[w];
    return r;
  }

  static __device__ void run(const AttentionParams& p) {
    extern __shared__ float smem[];
    float* probs = smem;
    float* scratch = smem + kThreads;
    float* q_row = smem + kThreads + 2 * 32;

    const int row = blockIdx.x, head = blockIdx.y, batch = blockIdx.z, tid = threadIdx.x;
    const int kv_head = head / p.group;
    const SeqInfo<kVarlen, kPageSize, kSequsedK> seq(p, batch);
    if constexpr (kVarlen) {
      if (row >= seq.seqlen_q) return;  // past this sequence's length
    }
    const T* q = static_cast<const T*>(p.q) + seq.q_offset(p, batch) + head * p.q_head + row * p.q_seq;
    const T* k = static_cast<const T*>(p.k) + kv_head * p.k_head;
    const T* v = static_cast<const T*>(p.v) + kv_head * p.v_head;
    if constexpr (kPageSize == 0) k += seq.k_offset(p, batch), v += seq.v_offset(p, batch);
    const int* table = kPageSize > 0 ? SeqInfo<kVarlen, kPageSize>::page_row(p, batch) : nullptr;
    // Key `key`'s rows of K and V (null: its page is outside the pool, zeros).
    auto key_rows = [&](int key, const T*& kr, const T*& vr) {
      if constexpr (kPageSize > 0) {
        long long k_off, v_off;
        const bool in_pool = seq.key_offset(p, table, key, k_off, v_off);
        kr = in_pool ? k + k_off : nullptr, vr = in_pool ? v + v_off : nullptr;
      } else {
        kr = k + key * p.k_seq, vr = v + key * p.v_seq;
      }
    };
    for (int d = tid; d < kHeadDim; d += kThreads) q_row[d] = to_float(q[d]);
    __syncthreads();

    const Mask<kMask> mask(p, seq.causal_offset(p), seq.seqlen_k);
    int lo, hi;
    mask.key_range(row, row + 1, lo, hi);
    const V variant(p, batch, head, seq.causal_offset(p), seq.seqlen_q, seq.seqlen_k);
    // The keys walked: [lo, hi), or the listed blocks' keys, position u of the walk being key key_at(u); n_walk
    // positions, those outside [lo, hi) hidden.
    const auto blocks = [&] {
      if constexpr (kBlockSparse) {
        return BlockTiles(p, batch, head, row / p.bm_q_block, p.bm_kv_block, seq.seqlen_k);
      } else {
        return KeyRun{lo, 1};
      }
    }();
    const int n_walk = kBlockSparse ? blocks.count * p.bm_kv_block : max(hi - lo, 0);
    const auto key_at = [&](int u) {
      if constexpr (kBlockSparse) return blocks.tile(u / p.bm_kv_block) * p.bm_kv_block + u % p.bm_kv_block;
      return lo + u;
    };
    const auto visible = [&](int u, int key) {
      if constexpr (kBlockSparse) {
        if (key < lo || key >= hi) return false;
        if (blocks.full(u / p.bm_kv_block)) return mask.visible(row, key);
      }
      return mask.visible(row, key) && variant.visible(row, key);
    };
    const float unit = V::unit(p);  // the scores' unit in natural logits (variant.cuh)
    auto score = [&](int key) {
      const T *kr, *vr;
      key_rows(key, kr, vr);
      float s = 0.f;
      if (kr != nullptr)
        for (int d = 0; d < kHeadDim; ++d) s = fmaf(q_row[d], to_float(kr[d]), s);
      return variant.score(s, row, key);
    };

    // Pass 1: the row max over visible keys.
    float m = neg_infinity();
    for (int u = tid; u < n_walk; u += kThreads)
      if (const int key = key_at(u); visible(u, key)) m = fmaxf(m, score(key));
    m = block_reduce(m, scratch, true);

    // Pass 2: probabilities chunk by chunk, accumulated into O columns owned by this thread.
    float acc[kColsPerThread];
    for (int c = 0; c < kColsPerThread; ++c) acc[c] = 0.f;
    float sum = 0.f;
    for (int base = 0; base < n_walk; base += kThreads) {
      const int u = base + tid, key = key_at(u);
      float pk = 0.f;
      if (u < n_walk && visible(u, key)) {
        const float x = score(key);  // -inf where a bool bias or a score_mod hides the pair
        if (x != neg_infinity()) pk = expf((x - m) * unit);
      }
      probs[tid] = pk;
      sum += pk;
      __syncthreads();
      const int n = min(kThreads, n_walk - base);
      for (int c = 0; c < kColsPerThread; ++c) {
        const int d = tid + c * kThreads;
        if (d < kHeadDimV)
          for (int j = 0; j < n; ++j) {
            if (probs[j] == 0.f) continue;  // hidden (or underflowed): its row may lie outside K and V
            const T *kr, *vr;
            key_rows(key_at(base + j), kr, vr);
            if (vr != nullptr) acc[c] = fmaf(probs[j], to_float(vr[d]), acc[c]);
          }
      }
      __syncthreads();
    }
    sum = block_reduce(sum, scratch, false);

    const bool empty = !(sum > 0.f);
    float lse = empty ? neg_infinity() : m * unit + logf(sum), factor = empty ? 0.f : 1.f / sum;
    V::apply_sink(p.sinks, head, lse, factor);
    T* o = static_cast<T*>(p.o) + seq.o_offset(p, batch) + head * p.o_head + row * p.o_seq;
    for (int c = 0; c < kColsPerThread; ++c) {
      const int d = tid + c * kThreads;
      if (d < kHeadDimV) o[d] = from_float<T>(acc[c] * factor);
    }
    if (p.lse != nullptr && tid == 0)
      p.lse[seq.lse_index(p, batch, head, row)] = lse;
  }
};

}  // namespace flashjit::reference
