// Append: the new tokens' keys (blockIdx.z 0) or values (1) of one sequence (blockIdx.y) copied into a contiguous
// or paged KV cache in 16-byte vectors. A CTA covers kCtaVectors consecutive vectors of the sequence's rows
// (token-major, then head, then the row's kRowVectors vectors); thread t takes vectors t, t + kThreads, ...:
// each warp reads and writes whole 512-byte runs, and each thread has its kVectors loads in flight before its
// first store (the bytes in flight per SM that a copy needs to reach HBM bandwidth). A position outside
// [0, capacity) (a CSR sequence's: its pages' tokens), or a page index outside [0, num_pages), is not written.
// Registers only.
#pragma once

#include "append/params.cuh"
#include "common/types.cuh"
#include "ptx/griddep.cuh"

namespace flashjit::append {

template <class T, int kHeadDim, int kPageSize, int kWarps, int kVectors>
struct AppendKernel {
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kSmemBytes = 0;
  static constexpr int kVectorElements = 16 / sizeof(T);
  static constexpr int kRowVectors = kHeadDim / kVectorElements;  // 16-byte vectors of one (token, head) row
  static constexpr int kCtaVectors = kThreads * kVectors;
  static constexpr bool kPaged = kPageSize > 0;
  static_assert(kHeadDim % kVectorElements == 0, "rows of whole 16-byte vectors");
  static_assert(kPageSize == 0 || (kPageSize & (kPageSize - 1)) == 0, "pages of a power of two of tokens");

  // Sequence b's part of the cache: its row of the page table (paged) and the positions it holds.
  struct Sequence {
    const int* table;
    int capacity;
  };

  // Where position `pos` of sequence b starts in the cache (null when it is not to be written).
  static __device__ __forceinline__ T* cache_row(const AppendParams& p, const Sequence& seq, T* cache,
                                                 long long batch_stride, long long seq_stride, int b, int pos) {
    if (pos < 0 || pos >= seq.capacity) return nullptr;
    if constexpr (kPaged) {
      const int page = ptx::load_after_wait(seq.table + pos / kPageSize);
      if (page < 0 || page >= p.num_pages) return nullptr;
      return cache + page * batch_stride + (pos % kPageSize) * seq_stride;
    } else {
      return cache + b * batch_stride + pos * seq_stride;
    }
  }

  static __device__ void run(const AppendParams& p) {
    const int b = blockIdx.y;
    const bool values = blockIdx.z == 1;
    const T* src = static_cast<const T*>(values ? p.v : p.k);
    T* cache = static_cast<T*>(values ? p.v_cache : p.k_cache);
    const long long s_batch = values ? p.v_batch : p.k_batch, s_seq = values ? p.v_seq : p.k_seq,
                    s_head = values ? p.v_head : p.k_head;
    const long long c_batch = values ? p.vc_batch : p.kc_batch, c_seq = values ? p.vc_seq : p.kc_seq,
                    c_head = values ? p.vc_head : p.kc_head;
    const int first = blockIdx.x * kCtaVectors + threadIdx.x;
    // Launched with programmatic dependent launch (sm_90) behind the kernel that may have written the new rows,
    // the lengths or the page table: wait for its completion before the first global access.
    ptx::grid_dependency_wait();
    int start = 0, count = p.new_len;
    if (p.cu_seqlens != nullptr) {
      start = ptx::load_after_wait(p.cu_seqlens + b);
      count = min(max(ptx::load_after_wait(p.cu_seqlens + b + 1) - start, 0), p.new_len);
    }
    Sequence seq{nullptr, p.capacity};
    int cached;
    if constexpr (kPaged) {
      if (p.page_indptr != nullptr) {  // CSR: the sequence's pages bound its positions (and the table reads)
        const int first_page = ptx::load_after_wait(p.page_indptr + b);
        const int end_page = ptx::load_after_wait(p.page_indptr + b + 1);
        const bool from_last = p.last_page_len != nullptr;
        const int length = ptx::load_after_wait(from_last ? p.last_page_len + b : p.cache_seqlens + b);
        const int pages = min(max(end_page - first_page, 0), p.page_table_stride);
        const long long held = static_cast<long long>(pages) * kPageSize;
        seq.table = p.page_table + first_page;
        seq.capacity = held < p.capacity ? static_cast<int>(held) : p.capacity;
        // last_page_len: the length after the append (the new tokens' pages allocated), as the decode reads it;
        // one past the capacity (a saturated one) writes nothing.
        const long long after = pages > 0 ? held - kPageSize + min(max(length, 0), kPageSize) : 0;
        cached = !from_last ? length : after <= seq.capacity ? static_cast<int>(after) - count : seq.capacity;
      } else {
        seq.table = p.page_table + static_cast<long long>(b) * p.page_table_stride;
        cached = ptx::load_after_wait(p.cache_seqlens + b);
      }
    } else {
      cached = ptx::load_after_wait(p.cache_seqlens + b);
    }
    const int total = count * p.heads_kv * kRowVectors;

    // Every load first: the vectors, and for a paged cache the table entries their stores need (a table load
    // behind a store would wait for it, as the store might write the table).
    uint4 data[kVectors];
    T* dst[kVectors];
#pragma unroll
    for (int j = 0; j < kVectors; ++j) {
      const int i = first + j * kThreads;
      dst[j] = nullptr;
      if (i >= total) continue;
      const int row = i / kRowVectors, token = row / p.heads_kv, head = row % p.heads_kv;
      const int column = (i % kRowVectors) * kVectorElements;
      data[j] = *reinterpret_cast<const uint4*>(src + b * s_batch + (start + token) * s_seq + head * s_head + column);
      T* at = cache_row(p, seq, cache, c_batch, c_seq, b, cached + token);
      if (at != nullptr) dst[j] = at + head * c_head + column;
    }
    // The kernel behind this one (the fused decode) may launch now: it waits for this grid's completion.
    ptx::launch_dependents();
#pragma unroll
    for (int j = 0; j < kVectors; ++j)
      if (dst[j] != nullptr) *reinterpret_cast<uint4*>(dst[j]) = data[j];
    if (p.seqlens_out != nullptr && blockIdx.x == 0 && !values && threadIdx.x == 0) p.seqlens_out[b] = cached + count;
  }
};

}  // namespace flashjit::append
