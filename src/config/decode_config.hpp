// Configs of the decode kernels. Kept apart from KernelConfig, whose canonical JSON, tuner, tuned tables and
// C ABI describe the prefill kernels: a decode kernel has other parameters (rows = group * q_len, the KV
// layout, the window) and is launched as a pair (split, then combine) rather than alone.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flashjit/config.hpp"
#include "flashjit/decode.hpp"

namespace flashjit {

// templates/decode/split_kv.cuh
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
  bool window = false;
  // sm_90+: the splits of one (sequence, KV head) run as one thread-block cluster and merge their states
  // through distributed shared memory (no workspace, no combine kernel); launched with cluster dims
  // (num_splits, 1, 1), at most DecodeParams::kMaxClusterSplits splits.
  bool cluster_merge = false;

  bool operator==(const DecodeKernelConfig&) const = default;
};

// templates/decode/combine.cuh: fp32 split partials (split-KV) or states in `dtype` (the merge API).
struct CombineKernelConfig {
  Arch arch{};
  DType dtype = DType::bf16;  // output type
  bool fp32_inputs = true;    // false: the merge API's inputs, in `dtype`
  int head_dim = 128;
  int warps = 4;              // output rows per CTA (one warp each)

  bool operator==(const CombineKernelConfig&) const = default;
};

std::vector<ConfigIssue> validate(const DecodeKernelConfig& c);
std::vector<ConfigIssue> validate(const CombineKernelConfig& c);
Status check(const DecodeKernelConfig& c);
Status check(const CombineKernelConfig& c);

int shared_memory_bytes(const DecodeKernelConfig& c);
inline int shared_memory_bytes(const CombineKernelConfig&) { return 0; }  // registers and shuffles only
int threads_per_cta(const DecodeKernelConfig& c);
int threads_per_cta(const CombineKernelConfig& c);
// The split kernels one SM holds at once, as the planner's time model counts them: as many as shared
// memory allows, at most what the kernel family's registers per thread allow (192 without column groups at
// head dims of 128 and more, else 168; the NVRTC compile test checks the planner's kernels against them).
int ctas_per_sm(const DecodeKernelConfig& c);

// decode_bf16_d128_r16_bn64_s3_w4_paged16_window_sm90a, combine_f32_bf16_d128_w4_sm90a.
std::string readable_name(const DecodeKernelConfig& c);
std::string readable_name(const CombineKernelConfig& c);
// Canonical JSON (every field, fixed order, "kernel" naming the kind first): the generated source's header
// and the cache key. Round-trips through the parsers below.
std::string to_json(const DecodeKernelConfig& c);
std::string to_json(const CombineKernelConfig& c);

// Parse canonical JSON or any object with a subset of the fields (missing ones keep their defaults);
// "kernel", when given, must name the kind ("decode", "combine"). Unknown fields and bad values are errors
// (invalid_config) naming the field: "config field 'layout': 'ring' is not one of contiguous, paged". The
// configs are not validated here (validate() does that).
Result<DecodeKernelConfig> decode_config_from_json(std::string_view json);
Result<CombineKernelConfig> combine_config_from_json(std::string_view json);
// key=value pairs (kernel=decode head_dim=64 layout=paged page_size=16 ...), the CLI's inline form.
Result<DecodeKernelConfig> decode_config_from_pairs(const std::vector<std::string>& pairs);
Result<CombineKernelConfig> combine_config_from_pairs(const std::vector<std::string>& pairs);
std::optional<KvLayout> parse_kv_layout(std::string_view s);

}  // namespace flashjit
