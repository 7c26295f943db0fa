// Kernel arguments of the append kernel. Plain C types only, so the host (gcc) and NVRTC see the same layout.
#pragma once

namespace flashjit {

// Grid (ceil(vectors of one sequence's new rows / vectors per CTA), batch, 2): blockIdx.z 0 copies keys, 1 values.
// The rows of sequence b: new_len of them from row b * k_batch (dense), or those of [cu_seqlens[b],
// cu_seqlens[b + 1]) capped at new_len (ragged, batch strides 0); row s goes to position cache_seqlens[b] + s.
struct AppendParams {
  const void* k;            // new keys, dense [B, new_len, Hkv, D] or ragged [total_new, Hkv, D]
  const void* v;
  void* k_cache;            // contiguous [B, capacity, Hkv, D] or paged [num_pages, page_size, Hkv, D]
  void* v_cache;
  const int* cu_seqlens;    // [B + 1] (ragged) or null (dense)
  const int* cache_seqlens; // [B]
  int* seqlens_out;         // [B] or null: cache_seqlens[b] + the sequence's count
  const int* page_table;    // [B, page_table_stride] (paged) or null

  // Element strides; for a paged cache "batch" is the page stride and "seq" the token stride.
  long long k_batch, k_seq, k_head;
  long long v_batch, v_seq, v_head;
  long long kc_batch, kc_seq, kc_head;
  long long vc_batch, vc_seq, vc_head;

  int heads_kv;
  int new_len;              // tokens per sequence (ragged: the bound on each count)
  int capacity;             // positions at or past this are not written
  int num_pages;            // pages outside [0, num_pages) are not written
  int page_table_stride;    // the table's row length (max_pages_per_seq)
};

}  // namespace flashjit
