// AppendProblem: the new tokens' keys and values written into a KV cache (flash-attn's
// flash_attn_with_kvcache(k=, v=, cache_seqlens=), FlashInfer's append_paged_kv_cache), on the device: token s of
// sequence b goes to position cache_seqlens[b] + s of that sequence's cache. The cache is the one decode and the
// paged prefill read (decode.hpp, problem.hpp).
//
// Tensors (element strides, last dimension contiguous, 16-byte aligned rows):
//   dense new rows:   k, v [B, new_len, Hkv, D]                      (strides: batch, seq, head)
//   ragged new rows:  k, v [total_new, Hkv, D] with cu_seqlens [B + 1] int32 on the device: sequence b brings
//                     rows [cu_seqlens[b], cu_seqlens[b + 1]) (strides: batch 0, seq, head)
//   contiguous cache: k_cache, v_cache [B, cache_seqlen, Hkv, D]     (strides: batch, seq, head)
//   paged cache:      k_cache, v_cache [num_pages, page_size, Hkv, D] (strides: page, token, head; FlashInfer's
//                     HND pool [num_pages, Hkv, page_size, D] is strides {Hkv*page_size*D, D, page_size*D});
//                     position j of sequence b is token j % page_size of page
//                     page_table[b * max_pages_per_seq + j / page_size]
//   cache_seqlens     [B] int32 on the device: keys already in each sequence's cache (read by the kernel only)
//   seqlens_out       [B] int32 on the device, optional: cache_seqlens[b] + the sequence's new count
// A position outside [0, capacity) (capacity: cache_seqlen, or max_pages_per_seq * page_size), or one whose page
// index is outside [0, num_pages), is never written (check_pages refuses such a call before launching).
#pragma once

#include <cstdint>

#include "flashjit/config.hpp"
#include "flashjit/problem.hpp"

namespace flashjit {

inline constexpr int kMaxAppendHeadDim = 256;
inline constexpr int kMaxAppendPageSize = 256;
// new_len * heads_kv * head_dim / 8 (16-byte vectors of one sequence's new rows) at most 2^30: the kernel indexes
// one sequence's vectors in 32 bits.
inline constexpr std::int64_t kMaxAppendVectorsPerSequence = std::int64_t{1} << 30;

struct AppendProblem {
  DType dtype = DType::bf16;
  int batch = 1;
  int heads_kv = 0;
  int head_dim = 0;

  // The new rows. Dense (cu_seqlens null): new_len tokens per sequence. Ragged: new_len is a host bound on every
  // sequence's count (it sizes the grid; rows of a sequence past it are not written, and its seqlens_out counts
  // at most new_len), total_new the rows of k and v (required), and the strides' batch components 0.
  const void* k = nullptr;
  const void* v = nullptr;
  Strides k_strides{}, v_strides{};  // zero: contiguous [B, new_len, Hkv, D] (ragged: [total_new, Hkv, D])
  int new_len = 0;
  const int* cu_seqlens = nullptr;
  int total_new = 0;

  const int* cache_seqlens = nullptr;  // [B] int32 on the device
  int* seqlens_out = nullptr;          // [B] int32 on the device or null; must not be cache_seqlens itself

  KvLayout layout = KvLayout::contiguous;
  void* k_cache = nullptr;
  void* v_cache = nullptr;
  Strides k_cache_strides{}, v_cache_strides{};  // zero: contiguous (NHD); paged: batch = page, seq = token
  int cache_seqlen = 0;             // contiguous: the cache's sequence capacity (required)
  const int* page_table = nullptr;  // paged: [B, max_pages_per_seq] int32 on the device
  int num_pages = 0;
  int page_size = 0;                // a power of two in [1, 256]
  int max_pages_per_seq = 0;

  // Debug: copy cache_seqlens (and cu_seqlens, and the page table) to the host, synchronizing the stream, and
  // refuse a negative length, a ragged count outside [0, new_len], a position at or past the capacity or a page
  // index outside [0, num_pages) before launching; also on with RuntimeOptions::check_pages.
  bool check_pages = false;
  void* stream = nullptr;

  bool ragged() const { return cu_seqlens != nullptr; }
};

// Element strides with zeros replaced by contiguous values.
Strides resolved_new_strides(const AppendProblem& p, const Strides& s);
Strides resolved_cache_strides(const AppendProblem& p, const Strides& s);
// Positions a sequence's cache holds: cache_seqlen, or max_pages_per_seq * page_size (saturated to INT32_MAX).
int append_capacity(const AppendProblem& p);

// Shape, layout, stride and pointer checks that need no device; each message names its field.
Status check(const AppendProblem& p);

}  // namespace flashjit
