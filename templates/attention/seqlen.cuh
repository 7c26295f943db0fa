// Where one batch entry's rows live and how long its sequences are. Fixed-length kernels (kVarlen = false)
// read the problem-wide values, as before; varlen kernels read the entry's offsets from cu_seqlens_q/k:
// its rows start at those offsets in the packed tensors, its lengths are the offset differences, and its
// masks are aligned to its own lengths (causal offset len_k - len_q). LSE is [B, Hq, Sq] for fixed lengths,
// [Hq, total_q] for varlen. Paged kernels (kPageSize > 0) read each entry's key count from seqused_k and find
// its keys through its page-table row (key_offset); their queries are fixed-length or varlen as above, their
// masks aligned per entry like varlen's. seqused_k kernels (kSequsedK) over contiguous keys, fixed-length or
// varlen, take the entry's key count from seqused_k too (its keys still start where they would) and align its
// masks to it.
#pragma once

#include "attention/params.cuh"

namespace flashjit {

template <bool kVarlen, int kPageSize = 0, bool kSequsedK = false>
struct SeqInfo {
  static constexpr bool kPaged = kPageSize > 0;
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
      seqlen_q = load(p.cu_seqlens_q + batch + 1, fresh) - q_start;
    } else {
      seqlen_q = p.seqlen_q, q_start = 0;
    }
    if constexpr (kPaged) {
      k_start = 0;
      if (p.last_page_len != nullptr) {  // CSR pages: the count of the last page (clamped to one page)
        const int pages = load(p.page_indptr + batch + 1, fresh) - load(p.page_indptr + batch, fresh);
        const int last = min(max(load(p.last_page_len + batch, fresh), 0), kPageSize);
        seqlen_k = pages > 0 ? (pages - 1) * kPageSize + last : 0;
      } else {
        seqlen_k = load(p.seqused_k + batch, fresh);
      }
    } else if constexpr (kVarlen) {
      k_start = load(p.cu_seqlens_k + batch, fresh);
      if constexpr (kSequsedK) {
        seqlen_k = load(p.seqused_k + batch, fresh);
      } else {
        seqlen_k = load(p.cu_seqlens_k + batch + 1, fresh) - k_start;
      }
    } else if constexpr (kSequsedK) {
      seqlen_k = load(p.seqused_k + batch, fresh), k_start = 0;
    } else {
      seqlen_k = p.seqlen_k, k_start = 0;
    }
  }

 public:
  // Query row i is aligned to key i + causal_offset (bottom-right per sequence, or top-left: 0).
  __device__ int causal_offset(const AttentionParams& p) const {
    // The entry's own key count (varlen's offsets, the pages' seqused_k, a seqused_k kernel's). No static member
    // for the condition: NVRTC emits a global for each, which would move every kernel's global memory.
    if constexpr (kVarlen || kPaged || kSequsedK) return p.top_left ? 0 : seqlen_k - seqlen_q;
    return p.causal_offset;
  }

  // Paged: the entry's row of the page table (dense [B, page_table_stride], or CSR from page_indptr).
  static __device__ __forceinline__ const int* page_row(const AttentionParams& p, int batch) {
    if (p.page_indptr != nullptr) return p.page_table + __ldg(p.page_indptr + batch);
    return p.page_table + static_cast<long long>(batch) * p.page_table_stride;
  }

  // Paged: the element offsets (head 0) of key j's row in K and V, from the entry's page-table row `table`
  // (page_row); false when its page is outside [0, num_pages) (the caller then reads zeros, never that
  // address).
  __device__ __forceinline__ bool key_offset(const AttentionParams& p, const int* table, int j, long long& k_off,
                                             long long& v_off) const {
    const int page = table[j / kPageSize], token = j % kPageSize;
    k_off = static_cast<long long>(page) * p.k_batch + token * p.k_seq;
    v_off = static_cast<long long>(page) * p.v_batch + token * p.v_seq;
    return static_cast<unsigned>(page) < static_cast<unsigned>(p.num_pages);
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
  // Contiguous keys only (paged: key_offset).
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
