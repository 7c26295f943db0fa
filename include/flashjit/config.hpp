// Kernel configs: what is compiled. One struct per kind of kernel (prefill, decode split, combine, append), each
// declared once with its fields (src/config/kinds.hpp): the canonical JSON, the parsers with their
// field-by-field errors, the readable name, equality and hashing all follow from that declaration. Only the
// canonical JSON (plus the template texts, NVRTC version, compile options and flashjit version) forms a
// kernel's cache key. Mask *constants* (window sizes, chunk size) are run-time arguments of the problem, so
// one compiled kernel serves every window.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "flashjit/error.hpp"

namespace flashjit {

enum class Algorithm { naive, fa2, fa3, automatic };
enum class DType { bf16, fp16 };
enum class MaskKind { none, causal, sliding_window, chunked, chunked_causal };
// grid: one tile per CTA (heavy tiles first for causal masks); persistent (fa3): one CTA per SM strides
// over all tiles.
enum class Scheduler { grid, persistent };
enum class KvLayout { contiguous, paged };
// The element type of an additive bias tensor (AttentionProblem::bias; templates/attention/bias.cuh): none, or
// entries of float32, bfloat16, float16 added to the natural logits, or bool ("bool" in text), where false hides
// the pair (adds -inf) and true adds 0.
enum class BiasType { none, fp32, bf16, fp16, boolean };

const char* to_string(Algorithm a);
const char* to_string(DType d);
const char* to_string(MaskKind m);
const char* to_string(Scheduler s);
const char* to_string(KvLayout layout);
const char* to_string(BiasType bias);
std::optional<Algorithm> parse_algorithm(std::string_view s);
std::optional<DType> parse_dtype(std::string_view s);
std::optional<MaskKind> parse_mask(std::string_view s);
std::optional<Scheduler> parse_scheduler(std::string_view s);
std::optional<KvLayout> parse_kv_layout(std::string_view s);
std::optional<BiasType> parse_bias_type(std::string_view s);

// A CUDA target: sm_80, sm_86, sm_89, sm_90, sm_90a, ...
struct Arch {
  int sm = 90;             // compute capability major*10 + minor
  bool accelerated = true; // the "a" suffix (wgmma, setmaxnreg); only meaningful for sm_90 and newer

  std::string to_string() const;                 // "sm_90a"
  static std::optional<Arch> parse(std::string_view s);
  bool operator==(const Arch&) const = default;
};

// Prefill (templates/fa2, fa3, reference). Which fields a config has depends on its algorithm: `warps`
// belongs to fa2 and naive, `consumer_warpgroups` to fa3; the other is not part of the config (not in its
// JSON, its name, its equality or hash). Default member values are fa2's; a parsed config starts from the
// defaults of the algorithm it names (KernelConfig::defaults).
struct KernelConfig {
  Algorithm algorithm = Algorithm::fa2;
  Arch arch{};
  DType dtype = DType::bf16;
  int head_dim = 128;  // Q's and K's
  int head_dim_v = 0;  // V's and O's when it differs (DeepSeek: 192 / 128); 0: the same as head_dim
  int block_m = 128;   // query rows per CTA (naive: 1)
  int block_n = 64;    // keys per main-loop step
  int stages = 2;      // K/V shared-memory pipeline depth
  int warps = 4;                // fa2, naive: warps per CTA
  int consumer_warpgroups = 2;  // fa3: consumer warpgroups (64 query rows each) beside the producer warpgroup
  MaskKind mask = MaskKind::none;
  Scheduler scheduler = Scheduler::grid;
  // Ragged batches (AttentionProblem::cu_seqlens_q/k): per-sequence offsets and lengths read by the kernel.
  // A compile-time variant, so fixed-length kernels keep their code; the dispatcher sets it from the problem.
  bool varlen = false;
  // fa3: the query heads of one KV head packed into a work tile's rows (row r: position r / group, head
  // r % group of the KV head's group), so a tile of block_m rows covers block_m / group positions of every
  // head that reads the same K/V: short key ranges (sliding windows, short queries) load and compute fewer
  // keys per row. The group (heads_q / heads_kv) is the problem's and must divide block_m. In the JSON and
  // the name only when on.
  bool pack_gqa = false;
  // Keys and values in pages of page_size tokens (AttentionProblem::page_table; a power of two in [1, 256],
  // compiled in); 0: contiguous. fa3 needs a page to hold 128 bytes of each of its tile's column blocks (d80,
  // d112, ...: their 16-column block takes pages of 4 tokens or more), and block_n and page_size to divide one
  // another. In the JSON and the name only when set.
  int page_size = 0;
  // Variants (templates/attention/variant.cuh), compiled in only when on; their constants (the cap, the slopes,
  // the sink logits) are run-time arguments of the problem. In the JSON and the name only when on.
  bool softcap = false;  // scores <- cap * tanh(scores / cap) (Gemma 2), before the mask
  bool alibi = false;    // scores -= slope[head] * |i + seqlen_k - seqlen_q - j| (flash-attn's alibi_slopes)
  bool sinks = false;    // one learnable logit per query head in each row's softmax denominator (gpt-oss)
  // User snippets (templates/attention/mod.cuh): CUDA C++ source defining flashjit_user's score_mod / mask_mod;
  // empty: none. Their text is part of the config (its JSON, so the cache key; its name has a hash of each).
  std::string score_mod;
  std::string mask_mod;
  // An additive bias tensor of this element type (AttentionProblem::bias), read per (query, key) pair; none: no
  // bias. In the JSON and the name ("_biasbf16") only when set. Not with pack_gqa (a packed tile's rows are
  // several heads' rows).
  BiasType bias = BiasType::none;
  // fa3 with a bias: the bias tensor's tile of each key tile is staged in shared memory by TMA with K
  // (templates/fa3/bias_tile.cuh) instead of each consumer thread loading its entries. Needs block_n entries to be
  // a multiple of 128 bytes, pages of at least 16 tokens, and a tensor whose rows TMA can read
  // (config::bias_tma_layout_issue). In the JSON and the name ("_tma" after the bias) only when on.
  bool bias_tma = false;
  // A relative-logits table (AttentionProblem::rel_bias: an entry per query head and distance q - k), read per
  // score beside ALiBi. In the JSON and the name ("_relbias") only when on. Not with pack_gqa (a packed tile's
  // rows are several heads' rows).
  bool rel_bias = false;
  // Block sparsity (AttentionProblem::block_mask): the key tiles of a block of query rows come from the block
  // mask's lists instead of the mask's key range, and full blocks skip the mask_mod. Dense batches only (not
  // with varlen, page_size or pack_gqa). In the JSON and the name only when on.
  bool block_sparse = false;
  // Dense keys of which sequence b uses its first seqused_k[b] (AttentionProblem::seqused_k without a page
  // table): each sequence's key count read by the kernel, masks aligned to it, and (fa3) the V rows of a key tile
  // past it zero-filled. Paged kernels read seqused_k anyway: not with page_size, nor block_sparse. In the JSON and
  // the name ("_sequsedk") only when on.
  bool seqused_k = false;

  // The tiles an algorithm's config has when none are given (naive: its only shape; fa2 / fa3: the d128
  // tiles). The dispatcher's heuristics choose per head dim and problem instead (Runtime::resolve).
  static KernelConfig defaults(Algorithm algorithm);
};
// Equal when every field the algorithm has is equal.
bool operator==(const KernelConfig& a, const KernelConfig& b);
// V's and O's head dim (head_dim_v, or head_dim when that is 0).
inline int value_head_dim(const KernelConfig& c) { return c.head_dim_v > 0 ? c.head_dim_v : c.head_dim; }

// Decode split-KV kernel (templates/decode/split_kv.cuh).
struct DecodeKernelConfig {
  Arch arch{};
  DType dtype = DType::bf16;
  int head_dim = 128;
  int rows = 16;      // query rows per CTA: group * q_len rounded up to 16 (one m-tile per 16 rows)
  int block_n = 64;   // keys per pipeline step
  int stages = 3;     // cp.async K/V stages
  int warps = 4;      // a multiple of rows / 16: warps beyond one per m-tile split each tile's keys ...
  int column_groups = 1;  // ... or, above 1, O's columns: rows / 16 x column_groups warps, each on every key
  KvLayout layout = KvLayout::contiguous;
  int page_size = 0;  // paged: tokens per page (a power of two in [1, 256], compiled in); contiguous: 0
  // The new tokens are causal among themselves (bottom-right aligned); sliding_window and chunked_causal also
  // hide the keys before the window or the chunk (templates/attention/mask.cuh).
  MaskKind mask = MaskKind::causal;
  // sm_90+: the splits of one (sequence, KV head) run as one thread-block cluster and merge their states
  // through distributed shared memory (no workspace, no combine kernel); launched with cluster dims
  // (num_splits, 1, 1), at most DecodeParams::kMaxClusterSplits splits.
  bool cluster_merge = false;
  // Variants, as KernelConfig's (softcap, alibi, sinks, score_mod, mask_mod, bias); in the JSON and the name only
  // when on.
  bool softcap = false;
  bool alibi = false;
  bool sinks = false;
  std::string score_mod;
  std::string mask_mod;
  BiasType bias = BiasType::none;

  bool operator==(const DecodeKernelConfig&) const = default;
};

// Combine / merge kernel (templates/decode/combine.cuh): fp32 split partials (split-KV) or states in `dtype`
// (the merge API).
struct CombineKernelConfig {
  Arch arch{};
  DType dtype = DType::bf16;  // output type
  bool fp32_inputs = true;    // false: the merge API's inputs, in `dtype`
  int head_dim = 128;
  int warps = 4;              // output rows per CTA (one warp each)
  bool sinks = false;         // split-KV: each row's sink logit joins the merged state (in the JSON only when on)

  bool operator==(const CombineKernelConfig&) const = default;
};

// Append kernel (templates/append/kernel.cuh): the new tokens' keys and values copied into a KV cache, 16 bytes
// per access. Grid (CTAs over one sequence's new rows, batch, K / V); a CTA moves warps x 32 x vectors 16-byte
// vectors of (token, head) rows, each thread issuing its `vectors` loads before its first store.
struct AppendKernelConfig {
  Arch arch{};
  DType dtype = DType::bf16;
  int head_dim = 128;  // a multiple of 8 (whole 16-byte vectors) in [8, 256]
  KvLayout layout = KvLayout::contiguous;
  int page_size = 0;   // paged: tokens per page (a power of two in [1, 256], compiled in); contiguous: 0
  int warps = 4;       // warps per CTA
  int vectors = 2;     // 16-byte vectors each thread has in flight (1, 2, 4 or 8)

  bool operator==(const AppendKernelConfig&) const = default;
};

// Block-mask kernel (templates/block_mask/kernel.cuh): the BlockMask of a mask, the built-in one (its constants
// run-time) and a mask_mod compiled in, for Runtime::make_block_mask. Grid (query blocks, heads, batch entries);
// each warp classifies key blocks (none, partial, full) by evaluating their pairs, then the CTA lists them.
struct BlockMaskKernelConfig {
  Arch arch{};
  MaskKind mask = MaskKind::none;
  std::string mask_mod;  // CUDA C++ source defining flashjit_user's mask_mod; empty: none
  int warps = 4;         // warps per CTA (1 to 32)

  bool operator==(const BlockMaskKernelConfig&) const = default;
};

enum class KernelKind { prefill, decode, combine, append, block_mask };
const char* to_string(KernelKind kind);

// A config of any kind: what the runtime's kernel map, the cache, the CLI, the C ABI and the compile pool
// pass around. Told apart in JSON by the "kernel" field: absent (or "prefill"), "decode", "combine", "append",
// "block_mask".
class AnyKernelConfig {
 public:
  using Variant =
      std::variant<KernelConfig, DecodeKernelConfig, CombineKernelConfig, AppendKernelConfig, BlockMaskKernelConfig>;

  AnyKernelConfig() = default;
  AnyKernelConfig(const KernelConfig& c) : config_(c) {}         // NOLINT: implicit on purpose
  AnyKernelConfig(const DecodeKernelConfig& c) : config_(c) {}   // NOLINT
  AnyKernelConfig(const CombineKernelConfig& c) : config_(c) {}  // NOLINT
  AnyKernelConfig(const AppendKernelConfig& c) : config_(c) {}   // NOLINT
  AnyKernelConfig(const BlockMaskKernelConfig& c) : config_(c) {}  // NOLINT

  KernelKind kind() const { return static_cast<KernelKind>(config_.index()); }
  const Variant& variant() const { return config_; }
  template <class Config>
  const Config* get_if() const { return std::get_if<Config>(&config_); }
  template <class Config>
  Config* get_if() { return std::get_if<Config>(&config_); }
  template <class F>
  decltype(auto) visit(F&& f) const { return std::visit(std::forward<F>(f), config_); }
  const Arch& arch() const;

  bool operator==(const AnyKernelConfig&) const = default;

 private:
  Variant config_;
};

struct ConfigIssue {
  std::string field;    // "block_m"
  std::string message;  // "must be a multiple of 16 * warps (64)"
};

// Every problem with the config, each naming its field; empty when valid. Shared by the dispatcher, the
// CLI and the autotuner.
std::vector<ConfigIssue> validate(const KernelConfig& config);
std::vector<ConfigIssue> validate(const DecodeKernelConfig& config);
std::vector<ConfigIssue> validate(const CombineKernelConfig& config);
std::vector<ConfigIssue> validate(const AppendKernelConfig& config);
std::vector<ConfigIssue> validate(const BlockMaskKernelConfig& config);
std::vector<ConfigIssue> validate(const AnyKernelConfig& config);
// validate() as a Status (invalid_config, one line per issue).
Status check(const KernelConfig& config);
Status check(const DecodeKernelConfig& config);
Status check(const CombineKernelConfig& config);
Status check(const AppendKernelConfig& config);
Status check(const BlockMaskKernelConfig& config);
Status check(const AnyKernelConfig& config);

// Resources: dynamic shared memory in bytes, threads per CTA.
int shared_memory_bytes(const KernelConfig& config);
int shared_memory_bytes(const DecodeKernelConfig& config);
int shared_memory_bytes(const CombineKernelConfig& config);
int shared_memory_bytes(const AppendKernelConfig& config);
int shared_memory_bytes(const BlockMaskKernelConfig& config);
int shared_memory_bytes(const AnyKernelConfig& config);
int threads_per_cta(const KernelConfig& config);
int threads_per_cta(const DecodeKernelConfig& config);
int threads_per_cta(const CombineKernelConfig& config);
int threads_per_cta(const AppendKernelConfig& config);
int threads_per_cta(const BlockMaskKernelConfig& config);
int threads_per_cta(const AnyKernelConfig& config);

// Canonical JSON: every field of the config, by name, in declaration order, no whitespace; decode and
// combine and append configs start with their "kernel" field. Round-trips through the parsers.
std::string to_json(const KernelConfig& config);
std::string to_json(const DecodeKernelConfig& config);
std::string to_json(const CombineKernelConfig& config);
std::string to_json(const AppendKernelConfig& config);
std::string to_json(const BlockMaskKernelConfig& config);
std::string to_json(const AnyKernelConfig& config);
// Readable names: fa3_bf16_d128_bm128_bn128_s2_wg2_causal_persistent_sm90a,
// decode_bf16_d128_r16_bn64_s3_w4_paged16_window_sm90a, combine_f32_bf16_d128_w4_sm90a,
// append_bf16_d128_paged16_w4_v4_sm90a, block_mask_causal_mmod3f2a1b0c_w4_sm90a.
std::string readable_name(const KernelConfig& config);
std::string readable_name(const DecodeKernelConfig& config);
std::string readable_name(const CombineKernelConfig& config);
std::string readable_name(const AppendKernelConfig& config);
std::string readable_name(const BlockMaskKernelConfig& config);
std::string readable_name(const AnyKernelConfig& config);
// Hash over the config's fields (the runtime's loaded-kernel map).
std::size_t hash_of(const AnyKernelConfig& config);

// A config as a text named it: the named fields set on the defaults of its kind (for prefill, of the
// algorithm it names), and the names given. Runtime::resolve completes it: every field not named takes the
// dispatcher's choice for the arch (heuristic tiles of the head dim; algorithm auto resolved).
struct PartialConfig {
  AnyKernelConfig config;
  std::vector<std::string> given;  // field names, as written
  bool has(std::string_view field) const;
};

// Parse a JSON object or key=value pairs (head_dim=64 mask=causal ...): "kernel" picks the kind (absent:
// prefill). Unknown fields, fields the kind (or the algorithm) does not have and bad values are errors
// (invalid_config) naming the field: "config field 'layout': 'ring' is not one of contiguous, paged". The
// config is not validated here (validate() does that).
Result<PartialConfig> parse_config_json(std::string_view json);
Result<PartialConfig> parse_config_pairs(const std::vector<std::string>& pairs);
// The same, as the config alone (fields not named keep the defaults).
Result<AnyKernelConfig> any_config_from_json(std::string_view json);
Result<AnyKernelConfig> any_config_from_pairs(const std::vector<std::string>& pairs);
// One kind only ("kernel", when given, must name it).
Result<KernelConfig> config_from_json(std::string_view json);
Result<KernelConfig> config_from_pairs(const std::vector<std::string>& pairs);
Result<DecodeKernelConfig> decode_config_from_json(std::string_view json);
Result<DecodeKernelConfig> decode_config_from_pairs(const std::vector<std::string>& pairs);
Result<CombineKernelConfig> combine_config_from_json(std::string_view json);
Result<CombineKernelConfig> combine_config_from_pairs(const std::vector<std::string>& pairs);
Result<AppendKernelConfig> append_config_from_json(std::string_view json);
Result<AppendKernelConfig> append_config_from_pairs(const std::vector<std::string>& pairs);
Result<BlockMaskKernelConfig> block_mask_config_from_json(std::string_view json);
Result<BlockMaskKernelConfig> block_mask_config_from_pairs(const std::vector<std::string>& pairs);

}  // namespace flashjit
