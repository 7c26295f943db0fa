// AttentionProblem: what the caller has. Tensors are BSHD with the last dimension contiguous:
// Q [B, Sq, Hq, D], K and V [B, Sk, Hkv, D], O like Q, optional LSE [B, Hq, Sq] float32 contiguous.
//
// Ragged (varlen) batches, like flash-attn's flash_attn_varlen_func: set cu_seqlens_q and cu_seqlens_k (both
// or neither), device int32 arrays of batch + 1 non-decreasing offsets (usually from 0). Sequence b then owns
// query rows [cu_seqlens_q[b], cu_seqlens_q[b + 1]) of the packed Q [total_q, Hq, D] (and O), and key rows
// [cu_seqlens_k[b], cu_seqlens_k[b + 1]) of K and V [total_k, Hkv, D]; a length may be 0. In that mode
//   - seqlen_q / seqlen_k are the maximum lengths over the batch (host values; seqlen_q sizes the grid, so
//     query rows of a sequence past it would not be written), total_q / total_k the rows of the packed
//     tensors (required: TMA descriptors and bounds), which must cover every offset (the offsets are device
//     data: the host does not read them);
//   - the strides' batch components must be 0 (seq and head strides as usual, 0 = contiguous);
//   - LSE is [Hq, total_q] float32 contiguous (flash-attn's varlen layout);
//   - every mask applies per sequence, with that sequence's lengths: causal is bottom-right aligned per
//     sequence (query i of sequence b sees keys j <= i + len_k[b] - len_q[b]), and likewise the diagonal of
//     sliding windows and chunks. A sequence with len_k = 0 gets O = 0 and LSE = -inf for its rows.
// A tile of the FA3 kernel may read rows of the next sequence (masked as keys, never stored as outputs);
// like every row below total_q / total_k they must hold finite values.
#pragma once

#include <cstdint>
#include <optional>

#include "flashjit/config.hpp"

namespace flashjit {

// Where the masks' diagonal sits when seqlen_q != seqlen_k: bottom-right (query i at key i + seqlen_k - seqlen_q,
// flash-attn's causal) or top-left (query i at key i, torch SDPA's is_causal). Varlen: per sequence.
enum class Alignment { bottom_right, top_left };
const char* to_string(Alignment a);

// The auxiliary arguments of the user snippets (score_mod, mask_mod: templates/attention/mod.cuh), read in a
// snippet through its flashjit::ModContext: ctx.pointer<T>(i), ctx.scalar(i), ctx.integer(i).
struct ModAux {
  static constexpr int kPointers = 8, kScalars = 8, kIntegers = 8;
  const void* pointers[kPointers] = {};  // device memory, e.g. a document-id table
  float scalars[kScalars] = {};
  long long integers[kIntegers] = {};
};

// Block sparsity (FlexAttention's BlockMask layout): which key blocks each block of query rows visits. Query
// block m (rows [m * q_block, (m + 1) * q_block)) of batch entry b and query head h visits the
// kv_num_blocks[i] key blocks kv_indices[i * num_kv_blocks + n] (n < kv_num_blocks[i]; key block j: keys
// [j * kv_block, (j + 1) * kv_block)), where the mask_mod decides each pair ("partial" blocks), and the
// full_kv_num_blocks[i] blocks of full_kv_indices (optional), where the mask_mod is not evaluated ("full" blocks:
// every pair the built-in mask shows is visible), with i = b * batch_stride + h * head_stride + m. A pair in no listed block is
// hidden; its keys are never loaded. The built-in mask (causal, windows, chunks) applies in every block. Each
// block is listed at most once, in either list (FlexAttention's create_block_mask and Runtime::make_block_mask
// list them in ascending order). Counts are clamped to [0, num_kv_blocks]; an index outside [0, num_kv_blocks) stands
// for no keys (never read). Dense batches only (no cu_seqlens, no page_table); not with packed GQA tiles.
// The largest q_block or kv_block a block mask takes (and a multiple of 16 at least 16).
inline constexpr int kMaxBlockMaskBlock = 1 << 20;

struct BlockMask {
  const int* kv_num_blocks = nullptr;       // device int32, [B', H', num_q_blocks]; null: no block mask
  const int* kv_indices = nullptr;          // device int32, [B', H', num_q_blocks, num_kv_blocks]
  const int* full_kv_num_blocks = nullptr;  // optional, as kv_num_blocks (both full_* or neither)
  const int* full_kv_indices = nullptr;     // optional, as kv_indices
  int q_block = 128;   // query rows per block (a multiple of 64 for fa3, 16 for fa2)
  int kv_block = 128;  // keys per block (a multiple of 16)
  int num_q_blocks = 0;   // at least ceil(seqlen_q / q_block)
  int num_kv_blocks = 0;  // the index arrays' row length: at least ceil(seqlen_k / kv_block)
  // Element strides of the count arrays over the batch entry and the query head (the index arrays': these times
  // num_kv_blocks); 0 broadcasts one mask over that dimension (B' or H' = 1). Contiguous [B, Hq, num_q_blocks]:
  // head_stride num_q_blocks, batch_stride Hq * num_q_blocks.
  std::int64_t batch_stride = 0;
  std::int64_t head_stride = 0;

  bool active() const { return kv_num_blocks != nullptr; }
};

// Element strides of a BSHD tensor. Zero means "contiguous BSHD" for that dimension.
struct Strides {
  std::int64_t batch = 0;
  std::int64_t seq = 0;
  std::int64_t head = 0;
};

// Element strides of a bias tensor [B, Hq, Sq, Sk] (AttentionProblem::bias, DecodeProblem::bias). Unlike Strides,
// zero is not "contiguous": a zero stride broadcasts that dimension (torch's expand()), so a [B, 1, 1, Sk] key
// padding mask is {Sk, 0, 0, 1}. contiguous() gives the strides of a dense [B, Hq, Sq, Sk] tensor.
struct BiasStrides {
  std::int64_t batch = 0;
  std::int64_t head = 0;
  std::int64_t q = 0;
  std::int64_t k = 0;
  static BiasStrides contiguous(int heads, int seqlen_q, int seqlen_k) {
    const std::int64_t row = seqlen_k, plane = row * seqlen_q;
    return {plane * heads, plane, row, 1};
  }
};

struct AttentionProblem {
  DType dtype = DType::bf16;
  int batch = 1;
  int seqlen_q = 0;
  int seqlen_k = 0;
  int heads_q = 0;
  int heads_kv = 0;
  int head_dim = 0;    // Q's and K's
  int head_dim_v = 0;  // V's and O's when it differs (DeepSeek: 192 / 128); 0: the same as head_dim

  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  float* lse = nullptr;  // optional: natural-log log-sum-exp of each row's scores, -inf for empty rows

  // Varlen (see the top of this file): device int32 [batch + 1] offsets, both or neither; then seqlen_q /
  // seqlen_k are the max lengths and total_q / total_k (host) the rows of the packed tensors.
  const int* cu_seqlens_q = nullptr;
  const int* cu_seqlens_k = nullptr;
  int total_q = 0;
  int total_k = 0;

  Strides q_strides{}, k_strides{}, v_strides{}, o_strides{};

  // Masks. Causal with seqlen_k != seqlen_q is bottom-right aligned: query i sees keys
  // j <= i + (seqlen_k - seqlen_q). sliding_window: keys in [i' - window_left, i' + window_right]
  // with i' = i + seqlen_k - seqlen_q; -1 means unbounded on that side. chunked: i' and j in the same
  // chunk of chunk_size keys; chunked_causal: that and j <= i'.
  MaskKind mask = MaskKind::none;
  int window_left = -1;
  int window_right = -1;
  int chunk_size = 0;
  // The diagonal of every mask above (and ALiBi's distances, and the snippets' ctx lengths are as they are):
  // bottom-right as described, or top-left, where query i is aligned to key i (seqlen_k - seqlen_q read as 0).
  Alignment alignment = Alignment::bottom_right;

  // Variants (each compiled into the kernel only when used; the values are run-time arguments):
  //   softcap > 0: each scaled score x = softmax_scale * q·k becomes softcap * tanh(x / softcap) (Gemma 2,
  //     flash-attn's softcap), before the mask and ALiBi; 0: off.
  //   alibi_slopes: device fp32 [Hq] (alibi_slopes_batch_stride 0) or [B, Hq] (stride Hq, or any stride in
  //     elements): slope[b][h] * |i + seqlen_k - seqlen_q - j| is subtracted from the scaled score of query i
  //     and key j (flash-attn's alibi_slopes; varlen: each sequence's own lengths).
  //   sinks: device fp32 [Hq], one logit per query head (gpt-oss's learnable sinks): each row's softmax
  //     denominator gains exp(sinks[h]) and no value, so O = Σ_j e^{x_j} v_j / (e^{sink} + Σ_j e^{x_j});
  //     the LSE includes it (a row that sees no key gets O = 0 and LSE = sinks[h]).
  //   rel_bias: a relative-logits table (T5-style relative positions, issue 26), device fp32 [Hq, rel_bias_extent]
  //     at row stride rel_bias_head_stride elements (0: one row for every head): query i, aligned to key a (a = i +
  //     seqlen_k - seqlen_q bottom-right, per sequence for varlen, paged and seqused_k; a = i top-left), and key j
  //     gain rel_bias[h][clamp(a - j + rel_bias_offset, 0, rel_bias_extent - 1)] in natural-log units, added with
  //     ALiBi (after softcap, before the bias tensor and score_mod). rel_bias_extent in [1, 2^30], rel_bias_offset
  //     in [-2^30, 2^30]. Not with pack_gqa configs.
  float softcap = 0.f;
  const float* alibi_slopes = nullptr;
  std::int64_t alibi_slopes_batch_stride = 0;
  const float* sinks = nullptr;
  const float* rel_bias = nullptr;
  std::int64_t rel_bias_head_stride = 0;
  int rel_bias_extent = 0;
  int rel_bias_offset = 0;
  // User snippets (templates/attention/mod.cuh documents their signatures and what they see): NUL-terminated
  // CUDA C++ source defining score_mod (rewrites each natural logit, after softcap and ALiBi) or mask_mod
  // (hides (query, key) pairs the mask shows), at most 64 KiB each; null: none. The text is compiled into the
  // kernel (NVRTC's messages name the snippet's own lines: "score_mod(3): error ...") and is part of its cache
  // key; aux holds what they read per call.
  const char* score_mod = nullptr;
  const char* mask_mod = nullptr;
  ModAux aux{};
  // An additive bias (attention masks as tensors: torch SDPA's attn_mask, T5's relative bias), compiled in only
  // when set: device memory of bias_type entries (fp32, bf16, fp16, or bool: false hides the pair, true adds 0),
  // aligned to one entry, indexed [batch, query head, query row, key] with bias_strides (elements; 0
  // broadcasts). The entry of query i and key j is added to the natural logit after softcap and ALiBi, before
  // score_mod (which sees the sum) and the masks: x = softcap(scale q.k) - ALiBi + bias[b, h, i, j]. Varlen and
  // paged problems index it by positions within each sequence, [sequence, Hq, seqlen_q, seqlen_k] at the max
  // lengths (row i of sequence b is its i-th query, key j its j-th key). A row whose keys are all hidden gets
  // O = 0 and LSE = -inf (or the sink's logit). Not with pack_gqa configs.
  const void* bias = nullptr;
  BiasType bias_type = BiasType::none;
  BiasStrides bias_strides{};

  // Block sparsity (BlockMask above; Runtime::make_block_mask makes one from a mask_mod): key blocks a block of
  // query rows does not list are skipped, and listed full blocks skip the mask_mod.
  BlockMask block_mask{};

  // Paged keys and values (chunked prefill and prefix caching over a serving engine's cache; flash-attn's
  // block_table): set page_table. K and V are then page pools [num_pages, page_size, Hkv, D] (k_strides /
  // v_strides: batch = page, seq = token, head; zero: contiguous pages), and key j of sequence b lives in page
  // page_table[b * max_pages_per_seq + j / page_size], token j % page_size. Sequence b has seqused_k[b] keys
  // (device int32 [batch], required): its queries are its last ones (masks bottom-right per sequence, or
  // top-left), and seqlen_k is the maximum over the batch, a host bound of at most max_pages_per_seq *
  // page_size. Queries are dense [B, Sq, Hq, D] or ragged (cu_seqlens_q and total_q; cu_seqlens_k stays null,
  // total_k 0). page_size is a power of two in [1, 256]. A page index outside [0, num_pages) is never
  // dereferenced: its keys read as zeros (check_pages refuses it before launching). The tokens of a sequence's
  // last page past its length are read (masked, never used): like every row of K and V they must hold finite
  // values (a cache allocated with zeros, as serving engines do).
  const int* page_table = nullptr;
  int page_size = 0;
  int num_pages = 0;
  int max_pages_per_seq = 0;
  // Paged: each sequence's key count (above). Without page_table: a padded batch over contiguous K and V
  // [B, Sk, Hkv, D] (flash-attn's seqused_k, a key padding mask), or a varlen one (cu_seqlens_k), of which
  // sequence b uses its first seqused_k[b] keys, in [0, seqlen_k] (varlen: at most its cu_seqlens_k length). Its
  // masks are aligned to that count like the paged path's (its seqlen_q queries its last positions, or
  // top-left); the other keys are never used, whatever they hold (NaN and inf included: the kernels zero-fill
  // or mask them). 0 keys: O = 0 and LSE = -inf (or the sink's logit). Compiled in only when set
  // (KernelConfig::seqused_k); check_seqlens refuses a count past the keys. Not with a block mask.
  const int* seqused_k = nullptr;
  // FlashInfer's CSR page table instead of the dense one: with page_indptr (device int32 [batch + 1],
  // non-decreasing from >= 0) page_table is the flat page index array (paged_kv_indices) and sequence b's pages
  // are page_table[page_indptr[b] .. page_indptr[b + 1]), at most max_pages_per_seq of them (the host bound that
  // stays required). Its key count is seqused_k[b], or with last_page_len (device int32 [batch], the tokens of
  // its last page, in [1, page_size]; seqused_k null then) (pages - 1) * page_size + last_page_len[b], 0 without
  // pages. Read on the device only (check_pages checks them too).
  const int* page_indptr = nullptr;
  const int* last_page_len = nullptr;
  // Paged: copy seqused_k and the page table to the host before launching (synchronizes the stream; refused
  // while it captures a graph) and refuse lengths above seqlen_k and page indices outside [0, num_pages).
  // A debug check; RuntimeOptions::check_pages turns it on for every paged forward.
  bool check_pages = false;

  // Varlen: copy the offsets to the host before launching (synchronizes the stream; refused while it captures a
  // graph) and refuse offsets that are not non-decreasing from >= 0 up to total_q / total_k, or a length above
  // seqlen_q / seqlen_k; seqused_k over contiguous keys (dense or varlen): refuse a count outside [0, seqlen_k]
  // or past its sequence's cu_seqlens_k length. A debug check; RuntimeOptions::check_seqlens turns it on for every
  // forward.
  bool check_seqlens = false;

  std::optional<float> softmax_scale;  // default 1/sqrt(head_dim)
  void* stream = nullptr;              // CUstream; nullptr is the legacy default stream

  // A ragged batch (cu_seqlens_q or cu_seqlens_k set).
  bool varlen() const { return cu_seqlens_q != nullptr || cu_seqlens_k != nullptr; }
  // Keys and values in pages (page_table set).
  bool paged() const { return page_table != nullptr; }
};

// `s` with each zero replaced by the stride of a contiguous [batch, seqlen, heads, head_dim] tensor (a batch
// stride past int64, of dimensions check() refuses, saturates to INT64_MAX or INT64_MIN).
Strides contiguous_bshd(const Strides& s, int seqlen, int heads, int head_dim);

// The strides with zeros replaced by contiguous-BSHD values (for a varlen problem: contiguous
// [total, heads, head_dim], batch stride 0).
Strides resolved_q_strides(const AttentionProblem& p);
Strides resolved_kv_strides(const AttentionProblem& p, const Strides& s);  // K's (head_dim columns)
Strides resolved_v_strides(const AttentionProblem& p);                     // V's (head_dim_v columns)
Strides resolved_o_strides(const AttentionProblem& p);
// V's and O's head dim (head_dim_v, or head_dim when that is 0).
inline int value_head_dim(const AttentionProblem& p) { return p.head_dim_v > 0 ? p.head_dim_v : p.head_dim; }

// Shape, stride and mask-constant checks that need no device (pointers non-null and 16-byte aligned,
// strides multiples of 8 elements, Hq % Hkv == 0, ...). The runtime adds device-side pointer checks.
Status check(const AttentionProblem& p);

// Floating-point operations (2·B·Hq·Σ visible (q,k) pairs·(D + Dv); for masks only the visible pairs count).
// A varlen problem's lengths live on the device: this counts every sequence at the max lengths (seqlen_q,
// seqlen_k), an upper bound; the overload below takes the offsets from the host for the exact count.
double attention_flops(const AttentionProblem& p);
// Exact count of a varlen problem from host copies of cu_seqlens_q / cu_seqlens_k (batch + 1 entries each).
double attention_flops(const AttentionProblem& p, const int* host_cu_seqlens_q, const int* host_cu_seqlens_k);

}  // namespace flashjit
