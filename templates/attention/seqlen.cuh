// Where one batch entry's rows live and how long its sequences are. Fixed-length kernels (kVarlen = false)
// read the problem-wide values, as before; varlen kernels read the entry's offsets from cu_seqlens_q/k:
// its rows start at those offsets in the packed tensors, its lengths are the offset differences, and its
// masks are aligned to its own lengths (causal offset len_k - len_q). LSE is [B, Hq, Sq] for fixed lengths,
// [Hq, total_q] for varlen.
#pragma once

#include "attention/params.cuh"

namespace flashjit {

template <bool kVarlen>
struct SeqInfo {
  int seqlen_q, seqlen_k;  // this entry's lengths
  int q_start, k_start;    // varlen: first row of the entry in the packed tensors (0 otherwise)

  __device__ SeqInfo(const AttentionParams& p, int batch) : SeqInfo(p, batch, false) {}

  // The same values, read again from memory where needed (an epilogue): a register-bound kernel need not keep
  // them live through its main loop (the compiler cannot merge these loads with the first ones).
  static __device__ SeqInfo reread(const AttentionParams& p, int batch) { return SeqInfo(p, batch, true); }

 private:
  static __device__ __forceinline__ int load(const int* ptr, bool fresh) {
    if (!fresh) return __ldg(ptr);
    int v;
    asm volatile("ld.global.nc.b32 %0, [%1];" : "=r"(v) : "l"(ptr));
    return v;
  }

  __device__ SeqInfo(const AttentionParams& p, int batch, bool fresh) {
    if constexpr (kVarlen) {
      q_start = load(p.cu_seqlens_q + batch, fresh);
      k_start = load(p.cu_seqlens_k + batch, fresh);
      seqlen_q = load(p.cu_seqlens_q + batch + 1, fresh) - q_start;
      seqlen_k = load(p.cu_seqlens_k + batch + 1, fresh) - k_start;
    } else {
      seqlen_q = p.seqlen_q, seqlen_k = p.seqlen_k;
      q_start = 0, k_start = 0;
    }
  }

 public:
  // Query row i is aligned to key i + causal_offset (bottom-right per sequence, or top-left: 0).
  __device__ int causal_offset(const AttentionParams& p) const {
    if constexpr (kVarlen) return p.top_left ? 0 : seqlen_k - seqlen_q;
    return p.causal_offset;
  }

  // Element offsets of the entry's first row (head 0) in Q/O and in K/V.
  __device__ long long q_offset(const AttentionParams& p, int batch) const {
    if constexpr (kVarlen) return q_start * p.q_seq;
    return batch * p.q_batch;
  }
  __device__ long long o_offset(const AttentionParams& p, int batch) const {
    if constexpr (kVarlen) return q_start * p.o_seq;
    return batch * p.o_batch;
  }
  __device__ long long k_offset(const AttentionParams& p, int batch) const {
    if constexpr (kVarlen) return k_start * p.k_seq;
    return batch * p.k_batch;
  }
  __device__ long long v_offset(const AttentionParams& p, int batch) const {
    if constexpr (kVarlen) return k_start * p.v_seq;
    return batch * p.v_batch;
  }

  // Index of query row `row` (of this entry) of head `head` in LSE.
  __device__ long long lse_index(const AttentionParams& p, int batch, int head, int row) const {
    if constexpr (kVarlen) return static_cast<long long>(head) * p.total_q + q_start + row;
    return (static_cast<long long>(batch) * p.heads_q + head) * p.seqlen_q + row;
  }
};

}  // namespace flashjit
