// Kernel arguments shared by the host launcher and every attention kernel. Plain C types only, so the host
// (gcc) and NVRTC see the same layout; the host static_asserts its size.
#pragma once

#include "attention/mod_aux.cuh"

namespace flashjit {

struct AttentionParams {
  const void* q;  // [B, Sq, Hq, D]     varlen: [total_q, Hq, D]
  const void* k;  // [B, Sk, Hkv, D]    varlen: [total_k, Hkv, D]
  const void* v;  // [B, Sk, Hkv, D]    varlen: [total_k, Hkv, D]
  void* o;        // [B, Sq, Hq, D]     varlen: [total_q, Hq, D]
  float* lse;     // [B, Hq, Sq] or null; varlen: [Hq, total_q]

  // Element strides (batch, sequence, head); the last dimension is contiguous. Varlen: batch strides unused.
  long long q_batch, q_seq, q_head;
  long long k_batch, k_seq, k_head;
  long long v_batch, v_seq, v_head;
  long long o_batch, o_seq, o_head;

  int batch, seqlen_q, seqlen_k, heads_q, heads_kv;  // varlen: seqlen_q / seqlen_k are the max lengths
  int group;           // heads_q / heads_kv
  float scale_log2;    // softmax_scale * log2(e)
  float softmax_scale;

  // Mask constants (run-time, so one kernel serves every window). Query row i is aligned to key
  // i + causal_offset (bottom-right alignment, causal_offset = seqlen_k - seqlen_q).
  int causal_offset;
  int window_left;   // -1: unbounded
  int window_right;  // -1: unbounded
  int chunk_size;

  // Varlen kernels only (after the fixed-length fields, whose offsets stay put): rows of the packed tensors,
  // and the [batch + 1] offsets of each sequence's rows in them (0 and null otherwise).
  int total_q, total_k;
  const int* cu_seqlens_q;
  const int* cu_seqlens_k;

  // Variants (templates/attention/variant.cuh; read only by kernels that compile them in).
  float softcap;       // softcap kernels: the cap (natural logits x become softcap * tanh(x / softcap))
  float softcap_in;    // softmax_scale / softcap: raw score -> tanh argument
  const float* alibi_slopes;  // alibi kernels: [B?, Hq] fp32
  long long alibi_batch;      // its batch stride in elements (0: one [Hq] row for every sequence)
  const float* sinks;         // sinks kernels: [Hq] fp32 logits
  ModAuxParams aux;           // score_mod / mask_mod kernels: the snippets' auxiliary arguments
  int top_left;               // varlen, paged and seqused_k kernels: 1 aligns each sequence's query i to its key i (offset 0)

  // Paged kernels only: K and V are page pools [num_pages, page_size, Hkv, D] (k_batch / v_batch: the page
  // stride); key j of sequence b is in page page_table[b * page_table_stride + j / page_size], which has
  // seqused_k[b] keys. The page size is compiled in. CSR tables (FlashInfer's; page_indptr set): sequence b's
  // pages are page_table[page_indptr[b] + j / page_size], and with last_page_len set it has (pages - 1) *
  // page_size + last_page_len[b] keys (seqused_k is null then).
  const int* page_table;
  const int* seqused_k;  // also seqused_k kernels' (contiguous keys): sequence b uses its first seqused_k[b]
  int page_table_stride;  // max_pages_per_seq
  int num_pages;
  const int* page_indptr;    // [B + 1] or null (dense table)
  const int* last_page_len;  // [B] or null (seqused_k)

  // Block-sparse kernels only (attention/key_tiles.cuh; flashjit/problem.hpp's BlockMask): the key blocks of query
  // block m of (batch b, head h) at count index i = b * bm_batch + h * bm_head + m, their indices in row i of
  // [*, bm_num_kv_blocks] arrays; full blocks (null: none) skip the mask_mod.
  const int* bm_kv_num;
  const int* bm_kv_indices;
  const int* bm_full_num;
  const int* bm_full_indices;
  long long bm_batch, bm_head;
  int bm_q_block, bm_kv_block;
  int bm_num_kv_blocks;
  int bm_pad;

  // Bias kernels only (attention/bias.cuh): entries [B, Hq, Sq, Sk] of the kernel's bias type (varlen and paged:
  // positions within each sequence), at element strides that may be 0 (broadcast).
  const void* bias;
  long long bias_batch, bias_head, bias_q, bias_k;
  int bias_pairs;  // 1: the entries of keys 2j and 2j + 1 of a row are one aligned load (bias_k 1, even offsets)

  // Relative-logits kernels only (variant.cuh, RelBias): fp32 [Hq, rel_extent] at row stride rel_head elements (0:
  // one row for every head); query row i aligned to key a and key k read entry clamp(a - k + rel_offset, 0,
  // rel_extent - 1).
  const float* rel_bias;
  long long rel_head;
  int rel_extent, rel_offset;
};

}  // namespace flashjit
