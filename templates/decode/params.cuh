// Kernel arguments of the decode kernels (split-KV attention and the combine / merge of partial states).
// Plain C types only, so the host (gcc) and NVRTC see the same layout.
#pragma once

#include "attention/mod_aux.cuh"

namespace flashjit {

// The split kernel: grid (num_splits, heads_kv, batch). Split s of sequence b covers keys
// [base + s * keys_per_split, base + (s + 1) * keys_per_split) of the keys its rows can see, base being the
// first visible key rounded down to a tile. With num_splits == 1 it writes o and lse; else its partial
// state (O normalized, fp32, and LSE) into the workspace, one [B, q_len, Hq, D] / [B, Hq, q_len] slice per
// split, merged by the combine kernel; a cluster-merge kernel (one cluster of num_splits CTAs per sequence
// and KV head) merges them itself and writes o and lse.
struct DecodeParams {
  // Most splits a cluster-merge kernel takes (its cluster: the non-portable size on sm_90).
  static constexpr int kMaxClusterSplits = 16;
  const void* q;          // [B, q_len, Hq, D]
  void* o;                // [B, q_len, Hq, D]
  float* lse;             // [B, Hq, q_len] or null
  const void* k;          // contiguous [B, max_seq, Hkv, D] or paged [num_pages, page_size, Hkv, D]
  const void* v;
  const int* seqlens_k;   // [B], or null with last_page_len
  const int* page_table;  // [B, max_pages_per_seq] (paged) or null; CSR: the flat page indices
  // FlashInfer's CSR table (paged; page_indptr null: the dense one): sequence b's pages are page_table[page_indptr[b]
  // .. page_indptr[b + 1]), and with last_page_len set it has (pages - 1) * page_size + last_page_len[b] keys.
  const int* page_indptr;    // [B + 1] or null
  const int* last_page_len;  // [B] or null (seqlens_k)
  float* ws_o;            // [num_splits, B, q_len, Hq, D] fp32 (num_splits > 1 without a cluster merge)
  float* ws_lse;          // [num_splits, B, Hq, q_len] fp32 (num_splits > 1 without a cluster merge)

  // Element strides; for a paged cache "batch" is the page stride and "seq" the token stride.
  long long q_batch, q_seq, q_head;
  long long o_batch, o_seq, o_head;
  long long k_batch, k_seq, k_head;
  long long v_batch, v_seq, v_head;

  int batch, q_len, heads_q, heads_kv, group;
  int max_seqlen_k;       // every seqlens_k entry is clamped to this
  int max_pages_per_seq;
  int num_pages;          // page indices outside [0, num_pages) are not read (zeros instead)
  int num_splits, keys_per_split;
  int window_left;        // sliding_window kernels: keys a - window_left .. a (>= 0)
  float scale_log2;       // softmax_scale * log2(e)
  float softmax_scale;
  int chunk_size;         // chunked_causal kernels: keys of a's chunk up to a (> 0)
  // Variants (attention/variant.cuh; read only by kernels that compile them in).
  float softcap;          // softcap kernels: the cap
  float softcap_in;       // softmax_scale / softcap
  const float* alibi_slopes;  // alibi kernels: [B?, Hq] fp32
  long long alibi_batch;      // its batch stride in elements (0: one [Hq] row)
  const float* sinks;         // sinks kernels: [Hq] fp32 logits (applied where a row's splits merge)
  ModAuxParams aux;           // score_mod / mask_mod kernels: the snippets' auxiliary arguments
  // Bias kernels (attention/bias.cuh): entries [B, Hq, q_len, max_seqlen_k], as AttentionParams' bias fields.
  const void* bias;
  long long bias_batch, bias_head, bias_q, bias_k;
  int bias_pairs;
};

// The combine / merge kernel: out = Σ_i exp(lse_i - lse) · o_i with lse = log Σ_i exp(lse_i), for states
// over disjoint key sets. Inputs share strides; a state with lse_i = -inf (no key) counts for nothing (its O
// is read but never used, so it may hold anything, NaN included). The split pass's fp32 partials sit at
// regular distances in the workspace: state i at o_in[0] + i * o_state and lse_in[0] + i * lse_state
// (elements; the other array entries unused), so the kernel reads no per-state parameter. The merge API's
// states are anywhere: the arrays.
struct CombineParams {
  static constexpr int kMaxStates = 32;
  const void* o_in[kMaxStates];    // [B, S, H, D], fp32 (split partials) or the output type (merge)
  const float* lse_in[kMaxStates]; // [B, H, S] contiguous
  long long o_state, lse_state;    // split partials: the distance between two states
  void* o;                         // [B, S, H, D]
  float* lse;                      // [B, H, S] or null
  long long in_batch, in_seq, in_head;
  long long o_batch, o_seq, o_head;
  int num_states, batch, seqlen, heads;
  const float* sinks;              // sinks combine kernels: [heads] fp32 logits joined to each merged row
};

}  // namespace flashjit
