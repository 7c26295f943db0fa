// Split-KV (flash decoding) planning: how many CTAs share the keys of one (sequence, KV head). A pure
// function of the device's SM count and the problem's shape, with the reason for each rule beside it.
#pragma once

#include <cstddef>
#include <vector>

#include "config/occupancy.hpp"
#include "dispatch/plans.hpp"
#include "flashjit/decode.hpp"
#include "flashjit/config.hpp"

namespace flashjit::dispatch {

// The combine kernel merges at most this many partial states per output row.
inline constexpr int kMaxDecodeSplits = 32;
// The time model's split counts keep B·Hkv·splits within this many CTAs per SM (the workspace bound).
inline constexpr int kMaxModelSplitCtasPerSm = 8;
// Fewest keys worth a split of their own (see plan_decode_splits): for the fill rule alone, for the fill rule
// where the time model applies, and for the counts the model may take instead.
inline constexpr int kMinKeysPerSplit = 512;
inline constexpr int kModelFillMinKeysPerSplit = 256;
inline constexpr int kModelMinKeysPerSplit = 64;

struct DecodeSplitInputs {
  int sms = 132;       // multiprocessors of the device
  int batch = 1;       // sequences
  int heads_kv = 1;    // KV heads (one CTA row per (sequence, KV head))
  int max_keys = 1;    // keys the longest sequence's rows can see (its length, or the window when shorter)
  int page_size = 0;   // 0: contiguous cache; else tokens per page
  int block_n = 64;    // keys per tile of the split kernel
  int ctas_per_sm = 1; // CTAs of the split kernel one SM holds at once (config's ctas_per_sm)
  int bytes_per_key = 512;  // K and V bytes of one key of one KV head (2 x head_dim x element size)
  bool time_model = true;   // the time model may replace the fill rule's count (sm_90+, one m-tile: measured)
  // Small batches (B·Hkv at most a quarter of the SMs) may split down to kModelMinKeysPerSplit keys where the
  // time model applies (measured on the H200: the 228 KB-per-SM archs).
  bool short_splits = true;
  // The time model's counts above one keep B·Hkv·splits within this many CTAs per SM, clamped to
  // [1, kMaxModelSplitCtasPerSm] (the workspace bound).
  int model_ctas_per_sm = kMaxModelSplitCtasPerSm;
};

// Keys per split are rounded up to the granule lcm(block_n, page_size); a split never starts inside a tile
// or a page. Non-positive inputs are read as 1 (0 for page_size) and max_keys as at most kMaxDecodeSeqlen,
// so the functions below are total.
int decode_split_granule(const DecodeSplitInputs& in);

// The heuristic: see the comments in decode_heuristics.cpp. Never returns an empty split for the longest
// sequence (shorter ones may have empty trailing splits, which write an empty state).
DecodeSplitPlan plan_decode_splits(const DecodeSplitInputs& in);

// The time model plan_decode_splits compares split counts with: modeled µs of the split kernel (and the
// combine pass) for `splits` splits of the longest sequence's keys on an H200-like device.
double modeled_decode_us(const DecodeSplitInputs& in, int splits);

// Exactly `splits` splits (clamped to [1, kMaxDecodeSplits]) over max_keys, keys per split rounded up to
// the granule: tests force 1, 2, 7 this way, and trailing splits may then be empty.
DecodeSplitPlan forced_decode_splits(const DecodeSplitInputs& in, int splits);

// The split kernel's config for a shape: rows = group * q_len rounded up to 16, warps a multiple of the
// m-tiles (each tile's keys split over the rest), tile, warps and pipeline depth by layout and head dim, the
// page size (paged) compiled in. plan_decode may then pick a small-CTA kernel for short caches. See
// decode_heuristics.cpp for the reasons.
DecodeKernelConfig decode_kernel_config(DType dtype, int head_dim, int group, int q_len, KvLayout layout,
                                        int page_size, MaskKind mask, const Arch& arch);

// The split kernel plan_decode launches for the problem (decode_kernel_config, then the rules for short caches and
// for longer ones over more CTAs than SMs).
DecodeKernelConfig decode_split_kernel(const DecodeProblem& problem, const Arch& arch, int sms);

// The plan of a checked problem on a device with `sms` multiprocessors: problem.num_splits forces the
// count, else plan_decode_splits decides over the keys the longest sequence's rows can see (max_seqlen_k,
// or the window plus the new tokens and one tile of alignment when that is fewer).
DecodePlan plan_decode(const DecodeProblem& problem, const Arch& arch, int sms);

// The workspace prepare_decode reserves: enough for the problem with any batch up to problem.batch and any
// max_seqlen_k (the split count rises and falls with both), i.e. for B·Hkv·splits up to SMs (the fill rule)
// or kMaxModelSplitCtasPerSm x SMs (the time model); with forced splits, the problem's own.
std::size_t decode_workspace_reserve(const DecodeProblem& problem, const Arch& arch, int sms);

// The split kernels plan_decode picks for the problem with any batch up to problem.batch and any
// max_seqlen_k (distinct, in no particular order): what prepare_decode loads, so that any of those problems
// may then be captured. The planner's rules compare B·Hkv with multiples of the SM count (up to 16) and the
// visible keys with powers of two; the batches and lengths tried are those rules' edges.
std::vector<DecodeKernelConfig> decode_prepare_kernels(const DecodeProblem& problem, const Arch& arch, int sms);

// The combine kernel's config for the merge API (inputs in the output type).
CombineKernelConfig merge_kernel_config(DType dtype, int head_dim, const Arch& arch);

}  // namespace flashjit::dispatch
