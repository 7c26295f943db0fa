/* flashjit C ABI (libflashjit.so): a stable C interface over the C++ runtime, for ctypes, FFI and C callers.
 *
 * Conventions
 * - Functions return an int status (flashjit_status: FLASHJIT_OK = 0, one code per failure kind), or, for
 *   those that produce text, an int64_t: the text's length in bytes (without the terminating NUL) on
 *   success, or minus the status on failure. Text is copied into `out` only when it fits (length < cap);
 *   otherwise `out` receives an empty string (when cap > 0) and the caller retries with length + 1 bytes.
 *   out = NULL with cap = 0 asks for the length only.
 * - flashjit_last_error() returns the full description of this thread's last failure (what failed, the
 *   context lines, NVRTC logs), valid until this thread's next failing call.
 * - Versioned structs carry their size first (struct_size = sizeof as the caller compiled it). Fields past
 *   struct_size take their defaults, so a caller built against an older (shorter) header keeps working; a
 *   struct_size below the struct's MIN_SIZE is rejected, and a larger one (a newer header) is accepted
 *   when the bytes this library does not know are all zero.
 * - No C++ exception crosses this interface. Every function is thread-safe; one runtime serves many
 *   threads and devices.
 */
#ifndef FLASHJIT_FLASHJIT_H
#define FLASHJIT_FLASHJIT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__)
#define FLASHJIT_API __attribute__((visibility("default")))
#else
#define FLASHJIT_API
#endif

/* The version of this C ABI: raised on any change that breaks a caller built against an older header (a
 * function removed or its signature changed, a struct changed other than by appending fields under the
 * struct_size rule above). libflashjit.so's SONAME carries it (libflashjit.so.1), and flashjit_abi_version()
 * returns the library's, for a caller that loads it at run time (dlopen, ctypes) to compare. */
#define FLASHJIT_ABI_VERSION 1

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes, one per flashjit::ErrorCode. */
typedef enum flashjit_status {
  FLASHJIT_OK = 0,
  FLASHJIT_ERROR_INVALID_ARGUMENT = 1, /* the caller's problem or arguments are wrong */
  FLASHJIT_ERROR_INVALID_CONFIG = 2,   /* a kernel config is malformed or fails validation */
  FLASHJIT_ERROR_UNSUPPORTED = 3,      /* valid, but no kernel supports it */
  FLASHJIT_ERROR_NO_DEVICE = 4,        /* no CUDA driver or no GPU on this machine */
  FLASHJIT_ERROR_DRIVER = 5,           /* a CUDA driver call failed */
  FLASHJIT_ERROR_COMPILE = 6,          /* NVRTC rejected the generated source */
  FLASHJIT_ERROR_CACHE = 7,            /* the disk cache is unusable */
  FLASHJIT_ERROR_NOT_FOUND = 8,        /* precompiled-only mode and the kernel is not in the cache */
  FLASHJIT_ERROR_IO = 9,               /* a file could not be read or written */
  FLASHJIT_ERROR_INTERNAL = 10         /* a bug or an exhausted resource (out of memory) */
} flashjit_status;

typedef enum flashjit_dtype { FLASHJIT_DTYPE_BF16 = 0, FLASHJIT_DTYPE_FP16 = 1 } flashjit_dtype;

/* Masks. Causal with seqlen_k != seqlen_q is bottom-right aligned: query i sees keys
 * j <= i + seqlen_k - seqlen_q. Sliding window: keys in [i' - window_left, i' + window_right] with
 * i' = i + seqlen_k - seqlen_q, -1 = unbounded on that side. Chunked: i' and j in the same chunk of
 * chunk_size keys; chunked causal: that and j <= i'. */
/* flashjit_attention_args.alignment: where query i sits among the keys when seqlen_q != seqlen_k. */
typedef enum flashjit_alignment {
  FLASHJIT_ALIGN_BOTTOM_RIGHT = 0, /* at key i + seqlen_k - seqlen_q (flash-attn's causal) */
  FLASHJIT_ALIGN_TOP_LEFT = 1      /* at key i (torch SDPA's is_causal) */
} flashjit_alignment;

typedef enum flashjit_mask {
  FLASHJIT_MASK_NONE = 0,
  FLASHJIT_MASK_CAUSAL = 1,
  FLASHJIT_MASK_SLIDING_WINDOW = 2,
  FLASHJIT_MASK_CHUNKED = 3,
  FLASHJIT_MASK_CHUNKED_CAUSAL = 4
} flashjit_mask;

/* Diagnostics of one runtime (on stderr, or to its log_callback); DEFAULT: FLASHJIT_LOG decides (unset:
 * warnings). A runtime reports the messages of its level and of the more severe ones. */
typedef enum flashjit_log_level {
  FLASHJIT_LOG_DEFAULT = 0,
  FLASHJIT_LOG_ERROR = 1,
  FLASHJIT_LOG_WARN = 2,
  FLASHJIT_LOG_INFO = 3,
  FLASHJIT_LOG_DEBUG = 4
} flashjit_log_level;

typedef struct flashjit_runtime flashjit_runtime;

/* Receives one diagnostic of a runtime: level is a flashjit_log_level (ERROR .. DEBUG), message one line
 * without a newline, valid during the call only; user is the options' log_user. Called from any thread the
 * runtime works in, possibly from several at once. */
typedef void (*flashjit_log_callback)(int level, const char* message, void* user);

/* Runtime options; every field is optional (zero = default). The environment is read once, at
 * flashjit_runtime_create, for what the options leave at their defaults. */
typedef struct flashjit_runtime_options {
  size_t struct_size;    /* sizeof(flashjit_runtime_options) */
  const char* cache_dir; /* NULL: FLASHJIT_CACHE_DIR, else $XDG_CACHE_HOME/flashjit, else ~/.cache/flashjit */
  int log_level;         /* flashjit_log_level */
  int precompiled_only;  /* nonzero: a cache miss is an error (no NVRTC); 0: FLASHJIT_JIT decides */
  uint64_t cache_max_mb; /* disk cache size cap in MiB; 0: FLASHJIT_CACHE_MAX_MB (unset: no cap) */
  /* Tuned tables, ':'-separated files or folders, read before <cache dir>/tuned (which is read when it exists);
   * NULL: FLASHJIT_TUNED; "": none. */
  const char* tuned_tables;
  int pdl;         /* programmatic dependent launch of decode and merge (sm_90+): 1 on, -1 off, 0: FLASHJIT_PDL (on) */
  int check_pages; /* check every decode's page table on the host: 1 on, -1 off, 0: FLASHJIT_CHECK_PAGES (off) */
  flashjit_log_callback log_callback; /* NULL: diagnostics on stderr */
  void* log_user;                     /* passed to log_callback */
  /* check every ragged forward's cu_seqlens (and seqused_k over contiguous keys) on the host: 1 on, -1 off, 0:
   * FLASHJIT_CHECK_SEQLENS (off) */
  int check_seqlens;
  /* compile cache misses in this process (1) or in a worker process (-1: a crashing or hanging compiler fails
   * that kernel only); 0: FLASHJIT_COMPILE_IN_PROCESS (unset: in a worker) */
  int compile_in_process;
  double compile_timeout_s;   /* seconds a worker may compile one kernel; 0: FLASHJIT_COMPILE_TIMEOUT (600) */
  const char* compile_worker; /* the flashjit executable; NULL: FLASHJIT_COMPILE_WORKER, else the one beside this library */
} flashjit_runtime_options;

#define FLASHJIT_RUNTIME_OPTIONS_MIN_SIZE (offsetof(flashjit_runtime_options, cache_dir))

/* Element strides of a BSHD tensor; 0 means contiguous BSHD for that dimension. */
typedef struct flashjit_strides {
  int64_t batch;
  int64_t seq;
  int64_t head;
} flashjit_strides;

/* Element types of an additive bias tensor (flashjit_attention_args.bias): entries added to the natural logits,
 * or booleans (one byte each) of which false hides the pair and true adds 0. */
typedef enum flashjit_bias_type {
  FLASHJIT_BIAS_NONE = 0,
  FLASHJIT_BIAS_FP32 = 1,
  FLASHJIT_BIAS_BF16 = 2,
  FLASHJIT_BIAS_FP16 = 3,
  FLASHJIT_BIAS_BOOL = 4
} flashjit_bias_type;

/* Element strides of a bias tensor [B, Hq, Sq, Sk]; 0 broadcasts that dimension (not "contiguous"). */
typedef struct flashjit_bias_strides {
  int64_t batch;
  int64_t head;
  int64_t q;
  int64_t k;
} flashjit_bias_strides;

/* One attention forward: O = softmax(Q·Kᵀ·scale + mask)·V, per (batch, query head). Tensors are BSHD with
 * the last dimension contiguous: q [B, Sq, Hq, D], k and v [B, Sk, Hkv, D], o like q; lse (optional)
 * [B, Hq, Sq] float32 contiguous. Device pointers, 16-byte aligned; GQA when Hkv divides Hq. Ragged batches
 * of packed sequences: cu_seqlens_q / cu_seqlens_k; the variants (softcap, ALiBi, sinks), the user snippets and
 * paged keys and values (page_table, seqused_k): fields appended after them, in that order. */
typedef struct flashjit_attention_args {
  size_t struct_size; /* sizeof(flashjit_attention_args) */
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse; /* NULL: not written */
  int batch;
  int seqlen_q;
  int seqlen_k;
  int heads_q;
  int heads_kv;
  int head_dim;
  int dtype; /* flashjit_dtype */
  /* -- Fields above are required (FLASHJIT_ATTENTION_ARGS_MIN_SIZE); those below have defaults. -- */
  flashjit_strides q_strides; /* default 0: contiguous */
  flashjit_strides k_strides;
  flashjit_strides v_strides;
  flashjit_strides o_strides;
  int mask;           /* flashjit_mask; default NONE */
  int window_left;    /* sliding window only; default -1 (unbounded) */
  int window_right;   /* sliding window only; default -1 (unbounded) */
  int chunk_size;     /* chunked masks only; default 0 */
  float softmax_scale; /* 0: default 1/sqrt(head_dim) */
  void* stream;       /* CUstream; NULL: the legacy default stream */
  /* Explicit kernel config as JSON (tools, tuning); NULL: the dispatcher picks. Fields absent from the
   * object are taken from the problem (dtype, head_dim, mask, varlen, page_size) and its device (arch); others
   * default. */
  const char* config_json;
  /* Ragged (varlen) batches, like flash_attn_varlen_func; both offsets or neither (default NULL: fixed
   * lengths). cu_seqlens_q / cu_seqlens_k: device int32 [batch + 1] non-decreasing offsets: sequence b owns rows
   * [cu_seqlens_q[b], cu_seqlens_q[b + 1]) of q and o, packed [total_q, Hq, D], and rows
   * [cu_seqlens_k[b], cu_seqlens_k[b + 1]) of k and v, packed [total_k, Hkv, D]; lengths may be 0. Then
   * seqlen_q / seqlen_k are the max lengths, the strides' batch fields must be 0, lse is [Hq, total_q], and
   * masks apply per sequence with its own lengths (causal: query i sees keys j <= i + len_k - len_q). Paged keys
   * (page_table, below) take cu_seqlens_q alone. */
  const int* cu_seqlens_q;
  const int* cu_seqlens_k;
  int total_q; /* rows of the packed q and o (varlen only, required there) */
  int total_k; /* rows of the packed k and v (varlen only, required there) */
  /* V's and O's head dim when it differs from head_dim (DeepSeek: 192 / 128): v [B, Sk, Hkv, Dv] and o
   * [B, Sq, Hq, Dv]; a multiple of 8 up to 256. Default 0: the same as head_dim. */
  int head_dim_v;
  /* nonzero: check cu_seqlens on the host before launching (copies them, synchronizing the stream): each
   * non-decreasing from >= 0, the last at most total_q / total_k, no length above seqlen_q / seqlen_k; and
   * seqused_k without page_table: each count in [0, seqlen_k] and within its sequence's cu_seqlens_k length */
  int check_seqlens;
  /* Variants, each compiled into the kernel only when used (the values are run-time arguments); default 0 / NULL:
   * off. With x = softmax_scale * q.k the natural logit of query i and key j:
   * softcap > 0: x becomes softcap * tanh(x / softcap) (Gemma 2, flash-attn's softcap), before ALiBi and the mask.
   * alibi_slopes: device float32 [heads_q] (alibi_slopes_batch_stride 0: one set for every sequence) or
   *   [batch, heads_q] (stride heads_q, or any stride in elements); slope[b][h] * |i + seqlen_k - seqlen_q - j|
   *   is subtracted from x (flash-attn's alibi_slopes; varlen: each sequence's own lengths). 4-byte aligned.
   * sinks: device float32 [heads_q], one learnable logit per query head (gpt-oss): each row's softmax denominator
   *   gains exp(sinks[h]) and no value, O = sum_j e^x_j v_j / (e^sink + sum_j e^x_j); lse includes it, and a row
   *   that sees no key gets O = 0 and lse = sinks[h]. 4-byte aligned. */
  float softcap;
  const float* alibi_slopes;
  int64_t alibi_slopes_batch_stride;
  const float* sinks;
  /* User snippets: NUL-terminated CUDA C++ source (at most 64 KiB each, read during the call only), compiled into
   * the kernel; default NULL: none. score_mod defines
   *   __device__ float score_mod(float score, int batch, int head, int q_idx, int kv_idx,
   *                              const flashjit::ModContext& ctx)
   * which rewrites each natural logit (after softcap and ALiBi; return -INFINITY to hide the pair), and mask_mod
   *   __device__ bool mask_mod(int batch, int head, int q_idx, int kv_idx, const flashjit::ModContext& ctx)
   * which hides the pairs for which it returns false (on top of the mask). The text is part of the kernel's cache
   * key; a compile error names the snippet's own lines ("score_mod(3): error: ..."). ctx gives seqlen_q,
   * seqlen_k and the aux values below: ctx.pointer<T>(i), ctx.scalar(i), ctx.integer(i) (templates/attention/
   * mod.cuh). */
  const char* score_mod;
  const char* mask_mod;
  const void* aux_pointers[8]; /* device pointers the snippets read */
  float aux_scalars[8];
  int64_t aux_integers[8];
  /* flashjit_alignment: where the masks' diagonal sits when seqlen_q != seqlen_k (also ALiBi's distances and the
   * FLOP count); default BOTTOM_RIGHT. */
  int alignment;
  /* Paged keys and values (chunked prefill and prefix caching over a serving engine's cache; flash-attn's
   * block_table); default NULL / 0: contiguous k and v. With page_table set, k and v are page pools
   * [num_pages, page_size, Hkv, D] (k_strides / v_strides: page, token, head in the batch, seq, head fields; 0:
   * contiguous pages) and page_table is device int32 [batch, max_pages_per_seq], rows back to back: key j of
   * sequence b is token j % page_size of page page_table[b * max_pages_per_seq + j / page_size]. seqused_k
   * (device int32 [batch], required) gives each sequence's key count, never read on the host (unless
   * check_pages); seqlen_k is the longest, a host bound of at most max_pages_per_seq * page_size. Each sequence's
   * queries are its last positions (the masks bottom-right per sequence, or top-left with alignment). Queries
   * are dense q, o [B, Sq, Hq, D], or ragged: cu_seqlens_q and total_q as above, cu_seqlens_k NULL and total_k
   * 0. page_size is a power of two in [1, 256]. A page index outside [0, num_pages) is never dereferenced (its
   * keys read as zeros); the tokens of a sequence's last page past its length are read and masked, so the
   * pools must hold finite values there (a cache allocated with zeros). page_table and seqused_k 4-byte
   * aligned. Without page_table, seqused_k (default NULL) is a padded batch's key counts over contiguous k and
   * v (flash-attn's seqused_k): sequence b uses its first seqused_k[b] keys, at most seqlen_k (varlen: at most
   * its cu_seqlens_k length), its queries its last positions as above; the other keys are never used whatever
   * they hold (NaN included); check_seqlens refuses counts past them. */
  const int* page_table;
  const int* seqused_k;
  int page_size;
  int num_pages;         /* pages in k and v */
  int max_pages_per_seq; /* columns of page_table */
  /* nonzero: copy seqused_k and page_table to the host before launching (synchronizing the stream; refused while
   * it captures a graph) and refuse lengths above seqlen_k and page indices outside [0, num_pages); also on with
   * the runtime's check_pages (FLASHJIT_CHECK_PAGES=1) */
  int check_pages;
  /* FlashInfer's CSR page table instead of the dense one (default NULL): with page_indptr (device int32
   * [batch + 1], non-decreasing from >= 0) page_table is the flat page index array and sequence b's pages are
   * page_table[page_indptr[b] .. page_indptr[b + 1]), at most max_pages_per_seq of them. Its key count is
   * seqused_k[b], or with last_page_len (device int32 [batch], its last page's tokens in [1, page_size];
   * seqused_k NULL then) (pages - 1) * page_size + last_page_len[b]. Both 4-byte aligned. */
  const int* page_indptr;
  const int* last_page_len;
  /* Block sparsity (FlexAttention's BlockMask layout; default NULL: none; dense batches only). Query block m (rows
   * [m * bm_q_block, (m + 1) * bm_q_block)) of batch entry b and query head h visits the bm_kv_num_blocks[i] key
   * blocks bm_kv_indices[i * bm_num_kv_blocks + n] (keys [j * bm_kv_block, (j + 1) * bm_kv_block) of block j; the
   * mask_mod decides their pairs) and the bm_full_kv_num_blocks[i] blocks of bm_full_kv_indices (every pair
   * the mask shows visible, the mask_mod not evaluated; optional, both or neither), with i = b * bm_batch_stride + h *
   * bm_head_stride + m (element strides; 0 broadcasts one mask). Pairs in no listed block are hidden and their
   * keys never loaded; the mask applies in every block. Each block listed at most once. Device int32, 4-byte
   * aligned; bm_q_block and bm_kv_block multiples of 16, bm_num_q_blocks >= ceil(seqlen_q / bm_q_block) and
   * bm_num_kv_blocks (the index rows' length) >= ceil(seqlen_k / bm_kv_block). flashjit_make_block_mask makes
   * one from a mask_mod. */
  const int32_t* bm_kv_num_blocks;
  const int32_t* bm_kv_indices;
  const int32_t* bm_full_kv_num_blocks;
  const int32_t* bm_full_kv_indices;
  int bm_q_block;
  int bm_kv_block;
  int bm_num_q_blocks;
  int bm_num_kv_blocks;
  int64_t bm_batch_stride;
  int64_t bm_head_stride;
  /* An additive bias, compiled into the kernel only when set (default NULL: none): device memory of bias_type
   * entries (flashjit_bias_type; aligned to one entry) indexed [batch, query head, query row, key] with
   * bias_strides (elements, 0 broadcasts; varlen and paged: positions within each sequence, at the max lengths).
   * The entry is added to the natural logit after softcap and ALiBi, before score_mod and the masks; a bool
   * entry false hides the pair. A row whose keys are all hidden gets O = 0 and lse = -inf (or the sink). */
  const void* bias;
  int bias_type;
  flashjit_bias_strides bias_strides;
  /* A relative-logits table, compiled into the kernel only when set (default NULL: none): device fp32 [Hq,
   * rel_bias_extent] at row stride rel_bias_head_stride elements (0: one row for every head), 4-byte aligned.
   * Query i, aligned to key a (bottom-right a = i + seqlen_k - seqlen_q, per sequence where lengths are; top-left
   * a = i), and key j gain rel_bias[h * rel_bias_head_stride + clamp(a - j + rel_bias_offset, 0,
   * rel_bias_extent - 1)] in natural-log units, added with ALiBi (after softcap, before bias and score_mod).
   * rel_bias_extent in [1, 2^30], rel_bias_offset in [-2^30, 2^30]. */
  const float* rel_bias;
  int64_t rel_bias_head_stride;
  int rel_bias_extent;
  int rel_bias_offset;
} flashjit_attention_args;

#define FLASHJIT_ATTENTION_ARGS_MIN_SIZE (offsetof(flashjit_attention_args, q_strides))

/* Arguments with struct_size set and every optional field at its default. */
static inline flashjit_attention_args flashjit_attention_args_default(void) {
  flashjit_attention_args a;
  memset(&a, 0, sizeof a);
  a.struct_size = sizeof(flashjit_attention_args);
  a.window_left = -1;
  a.window_right = -1;
  return a;
}

/* KV cache layouts of a decode. */
typedef enum flashjit_kv_layout {
  FLASHJIT_KV_CONTIGUOUS = 0, /* k_cache, v_cache [B, cache_seqlen, Hkv, D] */
  FLASHJIT_KV_PAGED = 1       /* k_cache, v_cache [num_pages, page_size, Hkv, D] and a page table */
} flashjit_kv_layout;

/* How a split decode merges its splits' partial states (flashjit_decode_args.split_merge; tests, tuning). */
typedef enum flashjit_split_merge {
  FLASHJIT_SPLIT_MERGE_AUTO = 0,           /* the planner decides */
  FLASHJIT_SPLIT_MERGE_COMBINE_KERNEL = 1, /* partials in the workspace, merged by a second kernel */
  FLASHJIT_SPLIT_MERGE_CLUSTER = 2         /* one thread-block cluster per (sequence, KV head): sm_90+, <= 16 splits */
} flashjit_split_merge;

/* One decode step (token generation over a KV cache). Each of `batch` sequences brings q_len (1..16) new
 * query tokens, already appended to its cache: sequence b has seqlens_k[b] keys and its query token i sees
 * key j when j <= seqlens_k[b] - q_len + i (causal among the new tokens), and with window_left >= 0 also
 * j >= that - window_left. Tensors (device pointers, last dimension contiguous, 16-byte aligned):
 *   q, o          [B, q_len, Hq, D]
 *   lse           [B, Hq, q_len] float32 contiguous, optional
 *   contiguous:   k_cache, v_cache [B, cache_seqlen, Hkv, D]   (strides: batch, seq, head)
 *   paged:        k_cache, v_cache [num_pages, page_size, Hkv, D] (strides: page, token, head, in the
 *                 batch, seq, head fields); page_table [B, max_pages_per_seq] int32 contiguous: key j of
 *                 sequence b is token j % page_size of page page_table[b * max_pages_per_seq + j / page_size];
 *                 or FlashInfer's CSR table (page_indptr, last_page_len: the fields at the end)
 *   seqlens_k     [B] int32 on the device, read by the kernels only (never by the host, unless check_pages)
 * max_seqlen_k is a host-side bound on every seqlens_k entry (the split planner divides this many keys;
 * the kernels clamp each length to it): at most cache_seqlen, or max_pages_per_seq * page_size, and 2^30.
 * A contiguous cache's rows up to cache_seqlen must be allocated: decode may read rows between a sequence's
 * length and max_seqlen_k (and never uses them). */
typedef struct flashjit_decode_args {
  size_t struct_size; /* sizeof(flashjit_decode_args) */
  const void* q;
  void* o;
  float* lse; /* NULL: not written */
  const void* k_cache;
  const void* v_cache;
  const int32_t* seqlens_k;
  const int32_t* page_table; /* paged layout only; NULL for a contiguous cache */
  int batch;
  int q_len;
  int heads_q;
  int heads_kv;
  int head_dim;
  int dtype; /* flashjit_dtype */
  int max_seqlen_k;
  /* -- Fields above are required (FLASHJIT_DECODE_ARGS_MIN_SIZE); those below have defaults. -- */
  int layout;            /* flashjit_kv_layout; default CONTIGUOUS */
  int cache_seqlen;      /* contiguous: the cache's sequence capacity; default 0: max_seqlen_k */
  int num_pages;         /* paged: pages in k_cache and v_cache */
  int page_size;         /* paged: tokens per page, a power of two in [1, 256] */
  int max_pages_per_seq; /* paged: columns of page_table */
  flashjit_strides q_strides; /* default 0: contiguous */
  flashjit_strides o_strides;
  flashjit_strides k_strides; /* paged: page, token, head */
  flashjit_strides v_strides;
  int window_left;      /* default -1: no sliding window */
  float softmax_scale;  /* 0: default 1/sqrt(head_dim) */
  int num_splits;       /* 0: planned; 1..32 forces that many key splits (tests, tuning) */
  /* Scratch for the split partials, workspace_bytes (flashjit_decode_workspace_bytes) on the device; NULL:
   * the runtime's own workspace for this (device, stream), allocated by the first decode or prepare_decode
   * on that stream outside CUDA-graph capture. */
  void* workspace;
  size_t workspace_bytes;
  /* Debug: copy seqlens_k and page_table to the host (synchronizing the stream) and check every page index
   * against num_pages before launching; also on with the runtime's check_pages (FLASHJIT_CHECK_PAGES=1).
   * Not graph-capturable. */
  int check_pages;
  void* stream; /* CUstream; NULL: the legacy default stream */
  int split_merge; /* flashjit_split_merge; default AUTO */
  int chunk_size;  /* default 0: no chunks; > 0: each token sees the keys of its chunk up to itself (not with a
                    * window) */
  /* Variants, as in flashjit_attention_args (the query of new token t sits at key position
   * seqlens_k[b] - q_len + t, which is what ALiBi's distance is measured from; a token before the first key sees
   * none: O = 0, lse = the sink); default 0 / NULL: off. The split kernel compiles them in, and the combine kernel
   * the sinks, which join each row where its splits merge. */
  float softcap;
  const float* alibi_slopes;           /* device float32 [heads_q] or [batch, heads_q] */
  int64_t alibi_slopes_batch_stride;   /* elements; 0: [heads_q] for every sequence */
  const float* sinks;                  /* device float32 [heads_q] */
  /* User snippets and their aux values, as in flashjit_attention_args (q_idx is the new token, 0 .. q_len - 1, which
   * sits at key seqlens_k[b] - q_len + q_idx; ctx.seqlen_q is q_len and ctx.seqlen_k the sequence's length). */
  const char* score_mod;
  const char* mask_mod;
  const void* aux_pointers[8];
  float aux_scalars[8];
  int64_t aux_integers[8];
  /* Fused append (flash_attn_with_kvcache's k=, v=): new_len > 0 new tokens per sequence, k_new / v_new
   * [B, new_len, Hkv, D] (last dimension contiguous, 16-byte aligned rows), written into k_cache / v_cache at
   * positions seqlens_k[b] .. seqlens_k[b] + new_len - 1 before the attention, which then covers
   * seqlens_k[b] + new_len keys (seqlens_k: the keys already cached; max_seqlen_k: a bound on the lengths after
   * the append). Positions at or past the capacity, or on a page index outside [0, num_pages), are not written.
   * seqlens_out (int32 [B] on the device, not seqlens_k): receives the new lengths; NULL: they go to the
   * workspace (flashjit_decode_workspace_bytes counts them). Default 0 / NULL: no append. */
  const void* k_new;
  const void* v_new;
  flashjit_strides k_new_strides; /* default 0: contiguous [B, new_len, Hkv, D] */
  flashjit_strides v_new_strides;
  int new_len;
  int32_t* seqlens_out;
  /* FlashInfer's CSR page table instead of the dense one (paged layout; default NULL), as in
   * flashjit_attention_args: with page_indptr (device int32 [batch + 1], non-decreasing from >= 0) page_table is the
   * flat page index array and sequence b's pages are page_table[page_indptr[b] .. page_indptr[b + 1]), at most
   * max_pages_per_seq of them. Its key count is seqlens_k[b], or with last_page_len (device int32 [batch], its last
   * page's tokens in [1, page_size]; seqlens_k NULL then) (pages - 1) * page_size + last_page_len[b]; the kernels
   * clamp it to the sequence's pages and to max_seqlen_k. Both 4-byte aligned. With a fused append (new_len > 0)
   * seqlens_k counts the keys before the new rows, as above, while last_page_len describes the cache after the
   * append (FlashInfer's convention: the new tokens' pages allocated already): the new rows go to each sequence's
   * last new_len positions, and the attention covers (pages - 1) * page_size + last_page_len[b] keys. */
  const int32_t* page_indptr;
  const int32_t* last_page_len;
  /* An additive bias, as in flashjit_attention_args, [B, Hq, q_len, max_seqlen_k]: row t is new token t, column j
   * the sequence's key j. Default NULL: none. */
  const void* bias;
  int bias_type;
  flashjit_bias_strides bias_strides;
} flashjit_decode_args;

#define FLASHJIT_DECODE_ARGS_MIN_SIZE (offsetof(flashjit_decode_args, layout))

static inline flashjit_decode_args flashjit_decode_args_default(void) {
  flashjit_decode_args a;
  memset(&a, 0, sizeof a);
  a.struct_size = sizeof(flashjit_decode_args);
  a.window_left = -1;
  return a;
}

/* Merge of attention states over disjoint key sets (shared-prefix cascades, context parallelism): from
 * (O_i, LSE_i) of the same queries against key sets K_i, the attention over their union:
 * O = sum_i exp(LSE_i - LSE) O_i with LSE = log sum_i exp(LSE_i). A state with LSE = -inf counts for
 * nothing; a row empty in every state gets O = 0 and LSE = -inf. */
#define FLASHJIT_MAX_MERGE_STATES 32
typedef struct flashjit_merge_args {
  size_t struct_size; /* sizeof(flashjit_merge_args) */
  int dtype;          /* flashjit_dtype of every O_i and of o */
  int batch;
  int seqlen; /* query positions */
  int heads;
  int head_dim;
  int num_states;              /* 1..FLASHJIT_MAX_MERGE_STATES */
  const void* const* o_in;     /* num_states pointers to [B, S, H, D], all with in_strides */
  const float* const* lse_in;  /* num_states pointers to [B, H, S] float32 contiguous */
  void* o;                     /* [B, S, H, D]; may alias none of the inputs */
  /* -- Fields above are required (FLASHJIT_MERGE_ARGS_MIN_SIZE); those below have defaults. -- */
  flashjit_strides in_strides; /* default 0: contiguous */
  flashjit_strides o_strides;
  float* lse;   /* [B, H, S] float32, NULL: not written */
  void* stream; /* CUstream; NULL: the legacy default stream */
} flashjit_merge_args;

#define FLASHJIT_MERGE_ARGS_MIN_SIZE (offsetof(flashjit_merge_args, in_strides))

static inline flashjit_merge_args flashjit_merge_args_default(void) {
  flashjit_merge_args a;
  memset(&a, 0, sizeof a);
  a.struct_size = sizeof(flashjit_merge_args);
  return a;
}

/* Append: the new tokens' keys and values written into a KV cache (FlashInfer's append_paged_kv_cache): token s of
 * sequence b goes to position cache_seqlens[b] + s (with a CSR table's last_page_len: the sequence's last positions
 * after the append, below). Tensors (device pointers, last dimension contiguous, 16-byte aligned rows, element
 * strides multiples of 8):
 *   k, v          dense [B, new_len, Hkv, D]; or ragged [total_new, Hkv, D] with cu_seqlens int32 [B + 1]
 *                 (sequence b brings rows cu_seqlens[b] .. cu_seqlens[b + 1] - 1, at most new_len of them:
 *                 new_len is then a host bound that sizes the grid; batch strides 0)
 *   contiguous:   k_cache, v_cache [B, cache_seqlen, Hkv, D]      (strides: batch, seq, head)
 *   paged:        k_cache, v_cache [num_pages, page_size, Hkv, D] (strides: page, token, head in the batch, seq,
 *                 head fields; FlashInfer's HND [num_pages, Hkv, page_size, D] is {Hkv*page_size*D, D,
 *                 page_size*D}); page_table [B, max_pages_per_seq] int32 contiguous
 *   cache_seqlens [B] int32 on the device: keys already cached (read by the kernel only)
 *   CSR table:    FlashInfer's (page_indptr set, the last fields): page_table is the flat page indices and sequence
 *                 b's pages are page_table[page_indptr[b] .. page_indptr[b + 1]), at most max_pages_per_seq of them;
 *                 cache_seqlens gives the lengths before the append, or last_page_len (cache_seqlens NULL) the
 *                 tokens of each last page after it (the new tokens' pages allocated already): the new rows are the
 *                 sequence's last ones of (pages - 1) * page_size + last_page_len[b]
 * A position at or past the capacity (cache_seqlen, or max_pages_per_seq * page_size; a CSR sequence's pages), or
 * on a page index outside [0, num_pages), is not written. */
typedef struct flashjit_append_args {
  size_t struct_size; /* sizeof(flashjit_append_args) */
  const void* k;
  const void* v;
  void* k_cache;
  void* v_cache;
  const int32_t* cache_seqlens;
  int batch;
  int new_len;
  int heads_kv;
  int head_dim;
  int dtype; /* flashjit_dtype */
  /* -- Fields above are required (FLASHJIT_APPEND_ARGS_MIN_SIZE); those below have defaults. -- */
  int layout;            /* flashjit_kv_layout; default CONTIGUOUS */
  int cache_seqlen;      /* contiguous: the cache's sequence capacity (required there) */
  int num_pages;         /* paged: pages in k_cache and v_cache */
  int page_size;         /* paged: tokens per page, a power of two in [1, 256] */
  int max_pages_per_seq; /* paged: columns of page_table */
  const int32_t* page_table;  /* paged only */
  const int32_t* cu_seqlens;  /* NULL: dense new rows */
  int total_new;              /* ragged: rows of k and v */
  int32_t* seqlens_out;       /* NULL, or int32 [B] on the device (not cache_seqlens): cache_seqlens + new count */
  flashjit_strides k_strides; /* default 0: contiguous */
  flashjit_strides v_strides;
  flashjit_strides k_cache_strides;
  flashjit_strides v_cache_strides;
  /* Debug: copy cache_seqlens, cu_seqlens and page_table to the host (synchronizing the stream) and refuse
   * positions past the capacity or pages outside [0, num_pages) before launching; also on with the runtime's
   * check_pages (FLASHJIT_CHECK_PAGES=1). Not graph-capturable. */
  int check_pages;
  void* stream; /* CUstream; NULL: the legacy default stream */
  /* FlashInfer's CSR page table (paged): int32 [B + 1] offsets into page_table, non-decreasing from >= 0; NULL: the
   * dense table [B, max_pages_per_seq]. */
  const int32_t* page_indptr;
  /* With page_indptr, instead of cache_seqlens (NULL then): int32 [B], the tokens of each sequence's last page after
   * the append, in [1, page_size]. */
  const int32_t* last_page_len;
} flashjit_append_args;

#define FLASHJIT_APPEND_ARGS_MIN_SIZE (offsetof(flashjit_append_args, layout))

static inline flashjit_append_args flashjit_append_args_default(void) {
  flashjit_append_args a;
  memset(&a, 0, sizeof a);
  a.struct_size = sizeof(flashjit_append_args);
  return a;
}

/* A GPU that flashjit_select_target and flashjit_select_decode answer for without one being present. */
typedef struct flashjit_target {
  size_t struct_size; /* sizeof(flashjit_target) */
  const char* arch;   /* "sm_90a", "sm_80", ... */
  /* -- Fields above are required (FLASHJIT_TARGET_MIN_SIZE); those below have defaults. -- */
  int sms;              /* multiprocessors (the decode split plan depends on them); default 0: 132 (H100 SXM, H200) */
  const char* gpu_name; /* NULL: the heuristics alone; else the tuned tables stamped for this GPU name (as
                         * `flashjit info` shows it) and arch are consulted, as on that GPU */
} flashjit_target;

#define FLASHJIT_TARGET_MIN_SIZE (offsetof(flashjit_target, sms))

static inline flashjit_target flashjit_target_default(void) {
  flashjit_target t;
  memset(&t, 0, sizeof t);
  t.struct_size = sizeof(flashjit_target);
  t.arch = "sm_90a";
  return t;
}

/* "0.1.0". */
FLASHJIT_API const char* flashjit_version(void);
/* FLASHJIT_ABI_VERSION as this library was built. */
FLASHJIT_API int flashjit_abi_version(void);
/* Short name of a status ("ok", "invalid argument", ...). */
FLASHJIT_API const char* flashjit_status_string(int status);
/* This thread's last failure in full; "" when none. */
FLASHJIT_API const char* flashjit_last_error(void);

/* options may be NULL (defaults). Opens (creates) the disk cache; needs no GPU. */
FLASHJIT_API int flashjit_runtime_create(const flashjit_runtime_options* options, flashjit_runtime** out);
/* NULL is ignored. No call on the runtime may be in flight. */
FLASHJIT_API void flashjit_runtime_destroy(flashjit_runtime* runtime);

/* Picks a config (or takes args->config_json), compiles or loads it, launches on args->stream.
 * Asynchronous: nothing is synchronized and nothing is allocated on the device. The first call for a
 * kernel compiles or loads it: do that before capturing a CUDA graph (see flashjit_prepare). */
FLASHJIT_API int flashjit_forward(flashjit_runtime* runtime, const flashjit_attention_args* args);

/* Everything flashjit_forward does but the launch: resolves the config, compiles or loads it and loads it
 * on the device of the pointers (which are not read). Writes the kernel's info JSON (as flashjit_compile).
 * A later forward of the same problem kind then neither compiles nor loads, e.g. inside graph capture. */
FLASHJIT_API int64_t flashjit_prepare(flashjit_runtime* runtime, const flashjit_attention_args* args, char* info_json_out,
                                      size_t cap);

/* Decode: the append of new keys and values when args->new_len > 0, split-KV attention over the cache, then
 * the combine pass when the keys were split. Asynchronous
 * on args->stream, nothing synchronized (unless check_pages). The first call for a kind of problem compiles
 * or loads its kernels, and without a caller workspace allocates the runtime's for the stream: do that
 * before capturing a CUDA graph (flashjit_prepare_decode), or pass a workspace. */
FLASHJIT_API int flashjit_decode(flashjit_runtime* runtime, const flashjit_decode_args* args);

/* Everything flashjit_decode does but the launch (the tensors are not read): compiles or loads the kernels
 * on the device of the pointers, and without a caller workspace allocates the runtime's for the stream,
 * large enough for every batch up to args->batch and any max_seqlen_k (the split count rises and falls with
 * both).
 * The runtime's workspace of a stream is shared by the decodes on that stream (CU_STREAM_PER_THREAD: per
 * thread; threads may share a stream, each decode's kernels enter it together); a graph captured on the
 * stream keeps using it: replay such graphs only on that stream's order, or give each graph a caller
 * workspace. */
FLASHJIT_API int flashjit_prepare_decode(flashjit_runtime* runtime, const flashjit_decode_args* args);

/* Frees the runtime's decode workspace of `stream` (a CUstream) on every device, after synchronizing the
 * stream; graphs captured on it must not be replayed afterwards. Call it before destroying a stream that
 * decoded without a caller workspace. */
FLASHJIT_API int flashjit_release_decode_workspace(flashjit_runtime* runtime, void* stream);

/* Bytes of workspace the problem needs on its device (0 when its keys are not split or merge in a thread-block
 * cluster), or minus the status. Reads neither the tensors nor the workspace fields. They depend on the batch
 * and on max_seqlen_k, not monotonically (a shorter cache may split into more pieces): size a caller workspace
 * for the problems it will serve, not only the longest. */
FLASHJIT_API int64_t flashjit_decode_workspace_bytes(flashjit_runtime* runtime, const flashjit_decode_args* args);

/* Merge of attention states (flashjit_merge_args). Asynchronous; the first call loads the kernel, so it
 * may be captured into a CUDA graph only after one call of the same kind outside capture. */
FLASHJIT_API int flashjit_merge(flashjit_runtime* runtime, const flashjit_merge_args* args);

/* Append (flashjit_append_args). Asynchronous on args->stream, nothing synchronized (unless check_pages) and
 * nothing allocated. The first call for a kind of problem (dtype, head dim, layout, page size) loads its kernels:
 * do that before capturing a CUDA graph (flashjit_prepare_append_kv, which loads every kernel of that kind for
 * any size, or one flashjit_append_kv of the same size). */
FLASHJIT_API int flashjit_append_kv(flashjit_runtime* runtime, const flashjit_append_args* args);
FLASHJIT_API int flashjit_prepare_append_kv(flashjit_runtime* runtime, const flashjit_append_args* args);

/* A block mask made on the device from a mask and a mask_mod, like FlexAttention's create_block_mask: a generated
 * kernel evaluates every (query, key) pair of every q_block x kv_block block and lists each query block's key
 * blocks, partial ones (the mask_mod hides a pair the mask shows) in kv_indices and full ones (the mask_mod passes
 * every pair the mask shows) in full_kv_indices (or, when those are NULL, in kv_indices too), ascending; blocks
 * with no pair both shown and passed are not listed. An attention with the same mask applies it in every block. The mask_mod sees batch entries
 * [0, batch) and heads [0, heads); a mask of batch 1 (heads 1) serves every batch entry (head): bm_batch_stride
 * (bm_head_stride) 0. Outputs: device int32, contiguous, kv_num_blocks / full_kv_num_blocks [batch, heads,
 * ceil(seqlen_q / q_block)], kv_indices / full_kv_indices [batch, heads, ceil(seqlen_q / q_block),
 * ceil(seqlen_k / kv_block)] (entries past a row's count are not written). Asynchronous on stream. */
typedef struct flashjit_block_mask_args {
  size_t struct_size; /* sizeof(flashjit_block_mask_args) */
  int batch;          /* the mask's batch entries (1: one for all) */
  int heads;          /* its query heads (1: one for all) */
  int seqlen_q;
  int seqlen_k;
  int q_block;        /* a multiple of 16; 0: 128 */
  int kv_block;       /* a multiple of 16; 0: 128 */
  int mask;           /* flashjit_mask, with window_left / window_right / chunk_size as an attention's */
  int window_left;
  int window_right;
  int chunk_size;
  int alignment;      /* flashjit_alignment */
  const char* mask_mod; /* NULL: the mask alone */
  const void* aux_pointers[8];
  float aux_scalars[8];
  int64_t aux_integers[8];
  int32_t* kv_num_blocks;
  int32_t* kv_indices;
  int32_t* full_kv_num_blocks; /* optional */
  int32_t* full_kv_indices;    /* optional */
  void* stream;
} flashjit_block_mask_args;

#define FLASHJIT_BLOCK_MASK_ARGS_MIN_SIZE (sizeof(flashjit_block_mask_args))

FLASHJIT_API int flashjit_make_block_mask(flashjit_runtime* runtime, const flashjit_block_mask_args* args);

/* The canonical JSON of the config the dispatcher picks for args on their device. The variants args ask for are
 * in it ("softcap":true, "alibi":true, "sinks":true; the kernel's name, as flashjit_compile's info gives it, has
 * _softcap, _alibi, _sinks before the arch). */
FLASHJIT_API int64_t flashjit_select(flashjit_runtime* runtime, const flashjit_attention_args* args,
                                     char* config_json_out, size_t cap);

/* flashjit_select for a GPU of `target`, which need not be present: no device is touched, and the tensor
 * pointers of args are not read and may be NULL (cu_seqlens_q / cu_seqlens_k, which make the problem varlen,
 * page_table, which makes it paged, with seqused_k, and alibi_slopes / sinks, which turn those variants on, may be
 * any 4-byte aligned value). target NULL: the pointers' device, as flashjit_select. */
FLASHJIT_API int64_t flashjit_select_target(flashjit_runtime* runtime, const flashjit_attention_args* args,
                                            const flashjit_target* target, char* config_json_out, size_t cap);

/* What flashjit_decode would launch for args, as JSON: {"split": the split kernel's config, "num_splits",
 * "keys_per_split", "combine": the combine kernel's config or null (keys not split, or merged in a
 * thread-block cluster), "append": the append kernel's config or null (no new_len), "workspace_bytes"}. target NULL: on the pointers' device; else on a GPU of `target`
 * without touching a device (the pointers are not read and may be NULL; alibi_slopes and sinks any 4-byte aligned
 * value to ask for those variants). */
FLASHJIT_API int64_t flashjit_select_decode(flashjit_runtime* runtime, const flashjit_decode_args* args,
                                            const flashjit_target* target, char* json_out, size_t cap);

/* Compiles one config (or finds it in the cache); needs no GPU. Info JSON: name, key, config, cache_hit,
 * compile_ms, registers, spill_stores, spill_loads, stack_frame, static_smem, dynamic_smem. */
FLASHJIT_API int64_t flashjit_compile(flashjit_runtime* runtime, const char* config_json, char* info_json_out,
                                      size_t cap);

/* The generated CUDA source of a config. */
FLASHJIT_API int64_t flashjit_emit(const char* config_json, char* out, size_t cap);

/* The disk cache: {"dir", "writable", "entries", "bytes", "max_bytes"}. */
FLASHJIT_API int64_t flashjit_cache_info(flashjit_runtime* runtime, char* json_out, size_t cap);

#ifdef __cplusplus
}
#endif

#endif /* FLASHJIT_FLASHJIT_H */
