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
//                     or FlashInfer's CSR table (page_indptr set, below): page_table[page_indptr[b] + j / page_size]
//   cache_seqlens     [B] int32 on the device: keys already in each sequence's cache (read by the kernel only)
//   seqlens_out       [B] int32 on the device, optional: the sequence's length after the append (cache_seqlens[b]
//                     + its new count)
// A position outside [0, capacity) (capacity: cache_seqlen, or max_pages_per_seq * page_size, and with a CSR table
// also the sequence's own pages' tokens), or one whose page index is outside [0, num_pages), is never written
// (check_pages refuses such a call before launching).
//
// FlashInfer's CSR page table (append_paged_kv_cache's paged_kv_indptr / indices / last_page_len): with page_indptr
// (device int32 [B + 1], non-decreasing from >= 0) page_table is the flat page index array and sequence b's pages
// are page_table[page_indptr[b] .. page_indptr[b + 1]), at most max_pages_per_seq of them (the host bound stays
// required); its capacity is its pages' tokens. Its length before the append is cache_seqlens[b], or, with
// last_page_len instead (device int32 [B], cache_seqlens null), FlashInfer's convention: the caller has allocated
// the pages of the new tokens already and last_page_len[b] (in [1, page_size], clamped to [0, page_size] on the
// device) counts the tokens of the last page AFTER the append, so the new rows go to positions from
// (pages - 1) * page_size + last_page_len[b] - (the sequence's new count) on (0 pages: length 0, nothing written).
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

  const int* cache_seqlens = nullptr;  // [B] int32 on the device (null with a CSR table's last_page_len)
  int* seqlens_out = nullptr;          // [B] int32 on the device or null; not cache_seqlens or last_page_len itself

  KvLayout layout = KvLayout::contiguous;
  void* k_cache = nullptr;
  void* v_cache = nullptr;
  Strides k_cache_strides{}, v_cache_strides{};  // zero: contiguous (NHD); paged: batch = page, seq = token
  int cache_seqlen = 0;             // contiguous: the cache's sequence capacity (required)
  const int* page_table = nullptr;  // paged: [B, max_pages_per_seq] int32 on the device (CSR: the flat indices)
  int num_pages = 0;
  int page_size = 0;                // a power of two in [1, 256]
  int max_pages_per_seq = 0;        // paged: the most pages of one sequence (a CSR table's host bound too)
  // FlashInfer's CSR page table (see the top of this file); paged only. Exactly one of cache_seqlens and
  // last_page_len gives the lengths. Read on the device only (check_pages checks them too).
  const int* page_indptr = nullptr;    // [B + 1] int32 on the device, or null: the dense table
  const int* last_page_len = nullptr;  // [B] int32 on the device (the lengths after the append), or null

  // Debug: copy cache_seqlens (and cu_seqlens, and the page table, and a CSR table's offsets and last_page_len) to
  // the host, synchronizing the stream, and refuse a negative length, a ragged count outside [0, new_len], a position
  // at or past the capacity (a CSR sequence's pages), a page index outside [0, num_pages), CSR offsets that decrease
  // or give a sequence more than max_pages_per_seq pages, or a last_page_len outside [1, page_size] before
  // launching; also on with RuntimeOptions::check_pages.
  bool check_pages = false;
  void* stream = nullptr;

  bool ragged() const { return cu_seqlens != nullptr; }
  bool csr() const { return page_indptr != nullptr; }
};

// Element strides with zeros replaced by contiguous values.
Strides resolved_new_strides(const AppendProblem& p, const Strides& s);
Strides resolved_cache_strides(const AppendProblem& p, const Strides& s);
// Positions a sequence's cache holds at most: cache_seqlen, or max_pages_per_seq * page_size (saturated to
// INT32_MAX); a CSR sequence holds at most its own pages' tokens besides.
int append_capacity(const AppendProblem& p);

// Shape, layout, stride and pointer checks that need no device; each message names its field.
Status check(const AppendProblem& p);

}  // namespace flashjit
