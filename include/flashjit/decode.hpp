// DecodeProblem: token generation against a KV cache. Each of `batch` sequences brings q_len (1..16) new
// query tokens, already appended to its cache, so sequence b has seqlens_k[b] keys and query token i sees
// key j when j <= seqlens_k[b] - q_len + i (causal among the new tokens), and with a sliding window also
// j >= that - window_left; with chunks, only the keys of its own chunk (j / chunk_size == that / chunk_size).
//
// Tensors (element strides, last dimension contiguous, like AttentionProblem):
//   q, o        [B, q_len, Hq, D]
//   lse         [B, Hq, q_len] float32, optional
//   contiguous: k_cache, v_cache [B, max_seqlen_k, Hkv, D]        (strides: batch, seq, head)
//   paged:      k_cache, v_cache [num_pages, page_size, Hkv, D]   (strides: page, token, head)
//               page_table [B, max_pages_per_seq] int32: key j of sequence b lives in page
//               page_table[b * max_pages_per_seq + j / page_size], token j % page_size
//               or FlashInfer's CSR table (page_indptr set): page_table[page_indptr[b] + j / page_size]
//   seqlens_k   [B] int32, device memory: keys of each sequence (read by the kernels, never by the host); with a
//               CSR table it may be left null and the counts come from last_page_len
//
// Fused append (flash-attn's flash_attn_with_kvcache(k=, v=, cache_seqlens=)): with new_len > 0, k_new / v_new
// [B, new_len, Hkv, D] are written into the cache first (the append kernel, append.hpp: token s of sequence b at
// position seqlens_k[b] + s), and the attention then covers seqlens_k[b] + new_len keys: seqlens_k holds the
// keys already in the cache, and max_seqlen_k bounds the lengths after the append. Both kernels run on the
// stream, the decode's lengths read from the device (a workspace buffer, or seqlens_out): no host sync,
// graph-capturable. Over a CSR page table the same with seqlens_k; with last_page_len instead (FlashInfer's
// convention: the pages of the new tokens are allocated already) the table describes the cache after the append:
// sequence b's (pages - 1) * page_size + last_page_len[b] keys are what the attention covers, and the new rows go
// to its last new_len positions (the decode reads last_page_len itself; no lengths in the workspace).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "flashjit/config.hpp"
#include "flashjit/problem.hpp"

namespace flashjit {

// How the partial states of a split decode merge into O and LSE: as the planner decides; in a combine
// kernel behind the split kernel (partials in the workspace); or inside the split kernel, the splits of one
// (sequence, KV head) forming one thread-block cluster (sm_90+, at most kMaxDecodeClusterSplits splits).
enum class SplitMerge { automatic, combine_kernel, cluster };
const char* to_string(SplitMerge merge);
inline constexpr int kMaxDecodeClusterSplits = 16;

inline constexpr int kMaxDecodeQueryLen = 16;
inline constexpr int kMaxDecodePageSize = 256;
// group * q_len query rows of one KV head share one CTA (rows of its mma tiles).
inline constexpr int kMaxDecodeRows = 128;
// Keys per sequence (max_seqlen_k): 2^30, so that key arithmetic in 32 bits never overflows.
inline constexpr int kMaxDecodeSeqlen = 1 << 30;

struct DecodeProblem {
  DType dtype = DType::bf16;
  int batch = 1;
  int q_len = 1;  // new tokens per sequence, 1..16
  int heads_q = 0;
  int heads_kv = 0;
  int head_dim = 0;

  const void* q = nullptr;
  void* o = nullptr;
  float* lse = nullptr;
  Strides q_strides{}, o_strides{};  // zero: contiguous [B, q_len, H, D]

  KvLayout layout = KvLayout::contiguous;
  const void* k_cache = nullptr;
  const void* v_cache = nullptr;
  Strides k_strides{}, v_strides{};  // zero: contiguous; for a paged cache batch means page
  const int* seqlens_k = nullptr;    // [B] int32 on the device
  // A host-side bound on every seqlens_k entry: the split planner divides this many keys, and the kernels
  // clamp each length to it (a larger entry is a caller error, never a read past the cache). Contiguous: at
  // most the cache's capacity max_seq, whose rows must all be allocated: a contiguous decode may read rows
  // between a sequence's length and this bound (and never uses them); paged: at most max_pages_per_seq *
  // page_size; and kMaxDecodeSeqlen.
  int max_seqlen_k = 0;

  // Contiguous cache: its sequence capacity (the max_seq dimension); 0 means max_seqlen_k.
  int cache_seqlen = 0;
  // Paged cache.
  const int* page_table = nullptr;  // [B, max_pages_per_seq] int32 on the device
  int num_pages = 0;
  int page_size = 0;  // tokens per page: a power of two in [1, 256]
  int max_pages_per_seq = 0;
  // FlashInfer's CSR page table instead of the dense one (as AttentionProblem's, problem.hpp): with page_indptr
  // (device int32 [batch + 1], non-decreasing from >= 0) page_table is the flat page index array (paged_kv_indices)
  // and sequence b's pages are page_table[page_indptr[b] .. page_indptr[b + 1]), at most max_pages_per_seq of them
  // (the host bound that stays required, with max_seqlen_k). Its key count is seqlens_k[b], or with last_page_len
  // (device int32 [batch], the tokens of its last page, in [1, page_size]; seqlens_k null then) (pages - 1) *
  // page_size + last_page_len[b], 0 without pages; the kernels clamp it to the sequence's pages and to max_seqlen_k.
  // Read on the device only (check_pages checks them too).
  const int* page_indptr = nullptr;
  const int* last_page_len = nullptr;

  int window_left = -1;  // -1: no sliding window; else keys a - window_left .. a (a = the query's position)
  int chunk_size = 0;    // 0: no chunks; else keys of a's chunk up to a (chunked-causal; not with a window)
  std::optional<float> softmax_scale;  // default 1/sqrt(head_dim)
  // Variants, as AttentionProblem's (problem.hpp): softcap > 0 caps the scaled scores; alibi_slopes (device
  // fp32 [Hq], or [B, Hq] with alibi_slopes_batch_stride) subtracts slope * (a - j) for the query at position
  // a and key j; sinks (device fp32 [Hq]) adds one logit per query head to each row's softmax denominator.
  float softcap = 0.f;
  const float* alibi_slopes = nullptr;
  std::int64_t alibi_slopes_batch_stride = 0;
  const float* sinks = nullptr;
  // User snippets and their arguments, as AttentionProblem's; a snippet's q_idx counts the new tokens (0 ..
  // q_len - 1) and its ctx has seqlen_q = q_len and seqlen_k = the sequence's keys.
  const char* score_mod = nullptr;
  const char* mask_mod = nullptr;
  ModAux aux{};
  // An additive bias, as AttentionProblem's, [B, Hq, q_len, max_seqlen_k]: row t is new token t, column j the
  // sequence's key j (the token sits at key seqlens_k[b] - q_len + t).
  const void* bias = nullptr;
  BiasType bias_type = BiasType::none;
  BiasStrides bias_strides{};
  int num_splits = 0;   // 0: the split planner decides; 1..32 forces that many (tests, tuning)
  // automatic: the planner decides; else forces the merge of the splits (tests, tuning). A forced cluster caps
  // a planned split count at kMaxDecodeClusterSplits (a forced num_splits above it is invalid); where the
  // cluster cannot run (below sm_90, or its buffer beyond the kernel's shared memory) decode, prepare_decode
  // and decode_workspace_bytes refuse a problem that splits.
  SplitMerge split_merge = SplitMerge::automatic;
  // Scratch for the split partials (Runtime::decode_workspace_bytes tells the size). Null: the runtime's
  // own workspace for this (device, stream), allocated by the first decode or prepare_decode on that
  // stream (never during CUDA graph capture) and grown only outside capture.
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  // Debug: copy seqlens_k and the page table to the host (synchronizing the stream) and check every page
  // index a sequence uses against num_pages before launching; also on when the runtime's check_pages is
  // (RuntimeOptions::check_pages, default FLASHJIT_CHECK_PAGES=1). With new rows, also the positions they go to
  // (below the capacity, the new lengths at most max_seqlen_k, their pages in [0, num_pages)).
  bool check_pages = false;
  void* stream = nullptr;

  // Fused append (see the top of this file): new_len > 0 new tokens per sequence written into k_cache /
  // v_cache (which the call then writes) before the attention. A position at or past the cache's capacity (a CSR
  // sequence's: its pages' tokens), or on a page index outside [0, num_pages), is not written. The new lengths go
  // to seqlens_out when set (int32 [B] on the device, not seqlens_k or last_page_len itself), else to the
  // workspace (Runtime::decode_workspace_bytes counts them; the runtime's own workspace when none is given) unless
  // a CSR table's last_page_len gives them.
  const void* k_new = nullptr;
  const void* v_new = nullptr;
  Strides k_new_strides{}, v_new_strides{};  // zero: contiguous [B, new_len, Hkv, D]
  int new_len = 0;
  int* seqlens_out = nullptr;
};

// Merge of attention states over disjoint key sets (shared-prefix cascades, context parallelism): given
// (O_i, LSE_i) of the same queries against key sets K_i, the attention over their union is
// O = Σ_i exp(LSE_i - LSE) O_i with LSE = log Σ_i exp(LSE_i). A state with LSE = -inf (no key) counts for
// nothing; a row empty in every state gets O = 0 and LSE = -inf.
inline constexpr int kMaxMergeStates = 32;
struct MergeProblem {
  DType dtype = DType::bf16;  // of every O_i and of the output
  int batch = 1;
  int seqlen = 0;             // query positions
  int heads = 0;
  int head_dim = 0;
  int num_states = 0;         // 1..kMaxMergeStates
  const void* o_in[kMaxMergeStates] = {};    // [B, S, H, D], all with in_strides
  const float* lse_in[kMaxMergeStates] = {}; // [B, H, S] float32 contiguous
  Strides in_strides{};       // zero: contiguous
  void* o = nullptr;          // [B, S, H, D] (may alias none of the inputs)
  Strides o_strides{};
  float* lse = nullptr;       // [B, H, S] or null
  void* stream = nullptr;
};

Status check(const MergeProblem& p);

// Element strides with zeros replaced by contiguous values.
Strides resolved_q_strides(const DecodeProblem& p);
Strides resolved_o_strides(const DecodeProblem& p);
Strides resolved_cache_strides(const DecodeProblem& p, const Strides& s);

// Shape, layout, stride and pointer checks that need no device; each message names its field.
Status check(const DecodeProblem& p);

// The problem's mask (the split kernel's, compiled in): causal, sliding_window (window_left >= 0) or
// chunked_causal (chunk_size > 0).
MaskKind mask_of(const DecodeProblem& p);

}  // namespace flashjit
