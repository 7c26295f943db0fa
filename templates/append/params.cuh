// Kernel arguments of the append kernel. Plain C types only, so the host (gcc) and NVRTC see the same layout.
#pragma once

namespace flashjit {

// Grid (ceil(vectors of one sequence's new rows / vectors per CTA), batch, 2): blockIdx.z 0 copies keys, 1 values.
// The rows of sequence b: new_len of them from row b * k_batch (dense), or those of [cu_seqlens[b],
// cu_seqlens[b + 1]) capped at new_len (ragged, batch strides 0); row s goes to position cache_seqlens[b] + s.
// A CSR page table (page_indptr set; paged): sequence b's pages are page_table[page_indptr[b] .. page_indptr[b + 1])
// (at most page_table_stride of them), its capacity their tokens; with last_page_len (cache_seqlens null) its
// length after the append is (pages - 1) * page_size + last_page_len[b] (0 without pages), and row s goes to
// position that - count + s.
struct AppendParams {
  const void* k;            // new keys, dense [B, new_len, Hkv, D] or ragged [total_new, Hkv, D]
  const void* v;
  void* k_cache;            // contiguous [B, capacity, Hkv, D] or paged [num_pages, page_size, Hkv, D]
  void* v_cache;
  const int* cu_seqlens;    // [B + 1] (ragged) or null (dense)
  const int* cache_seqlens; // [B], or null with last_page_len
  int* seqlens_out;         // [B] or null: the sequence's length after the append
  const int* page_table;    // [B, page_table_stride] (paged; CSR: the flat page indices) or null
  const int* page_indptr;   // [B + 1] (a CSR table) or null
  const int* last_page_len; // [B] (a CSR table, instead of cache_seqlens) or null

  // Element strides; for a paged cache "batch" is the page stride and "seq" the token stride.
  long long k_batch, k_seq, k_head;
  long long v_batch, v_seq, v_head;
  long long kc_batch, kc_seq, kc_head;
  long long vc_batch, vc_seq, vc_head;

  int heads_kv;
  int new_len;              // tokens per sequence (ragged: the bound on each count)
  int capacity;             // positions at or past this are not written
  int num_pages;            // pages outside [0, num_pages) are not written
  int page_table_stride;    // the table's row length (max_pages_per_seq; CSR: the most pages of a sequence)
};

}  // namespace flashjit
