#include "dispatch/decode_heuristics.hpp"

#include <algorithm>
#include <numeric>

namespace flashjit::dispatch {
namespace {

int at_least_1(int x) { return std::max(x, 1); }
int ceil_div(long long a, long long b) { return static_cast<int>((a + b - 1) / b); }

// Keys per split for `splits` splits over `keys`, rounded up to the granule.
int keys_per_split(int keys, int splits, int granule) {
  return ceil_div(ceil_div(keys, splits), granule) * granule;
}

}  // namespace

int decode_split_granule(const DecodeSplitInputs& in) {
  const int block_n = at_least_1(in.block_n);
  // A split covers whole tiles (only the last tile of a sequence is partial, as without splits) and, on a
  // paged cache, whole pages: no page is fetched in part by two CTAs.
  return in.page_size > 0 ? std::lcm(block_n, in.page_size) : block_n;
}

DecodeSplitPlan plan_decode_splits(const DecodeSplitInputs& in) {
  const int ctas = at_least_1(in.batch) * at_least_1(in.heads_kv);
  const int keys = at_least_1(in.max_keys);
  // The seed's rule. Decode streams K/V from HBM once; a CTA per (sequence, KV head) reads at the rate of
  // one SM slot, so when B·Hkv CTAs leave slots idle, the keys are shared by slots / (B·Hkv) CTAs (integer
  // part: with B·Hkv > slots / 2 a second split would only add a second, partial wave). Measured on the
  // H200 (contiguous, 132 slots): B1 Sk 32k 16 splits 3.35-3.39 TB/s against 3.19-3.22 with 32.
  int splits = std::clamp(at_least_1(in.sms) * at_least_1(in.ctas_per_sm) / ctas, 1, kMaxDecodeSplits);
  // Each split costs a fixed prologue (Q tile, pipeline fill) and writes rows x D fp32 partials that the
  // combine pass reads back; below ~512 keys per split (256 KB of K/V at D128 bf16 against 8 KB of
  // partials for 16 rows) that overhead stops being small, so short caches get fewer splits.
  splits = std::min(splits, std::max(1, keys / kMinKeysPerSplit));
  // Round keys per split up to the granule, then drop the splits the rounding left empty (e.g. 3 splits of
  // 1000 keys with 512-key pages become 2 of 512): an empty split for the longest sequence is a wasted CTA.
  const int granule = decode_split_granule(in);
  const int per_split = keys_per_split(keys, splits, granule);
  return {ceil_div(keys, per_split), per_split};
}

DecodeSplitPlan forced_decode_splits(const DecodeSplitInputs& in, int splits) {
  const int n = std::clamp(splits, 1, kMaxDecodeSplits);
  return {n, keys_per_split(at_least_1(in.max_keys), n, decode_split_granule(in))};
}

DecodeKernelConfig decode_kernel_config(DType dtype, int head_dim, int group, int q_len, KvLayout layout,
                                        bool window, const Arch& arch) {
  DecodeKernelConfig c;
  c.arch = arch, c.dtype = dtype, c.head_dim = head_dim, c.layout = layout, c.window = window;
  c.rows = std::clamp((at_least_1(group) * at_least_1(q_len) + 15) / 16 * 16, 16, kMaxDecodeRows);
  // Unmeasured (written without a GPU): four warps so that a CTA keeps enough cp.async in flight to stream
  // K/V at its share of HBM bandwidth; with fewer than four m-tiles the extra warps split each tile's keys
  // (one to four 16-key slices of a 64-key tile), with more, one warp per m-tile.
  const int m_tiles = c.rows / 16;
  c.warps = m_tiles * std::max(1, 4 / m_tiles);
  c.block_n = 64;
  // Three stages (96 KB at d128) hide the HBM latency while leaving room for two CTAs per SM on sm_90;
  // d256 takes two (128 KB) to fit sm_80's 163 KB.
  c.stages = head_dim <= 128 ? 3 : 2;
  return c;
}

int shared_memory_per_sm(const Arch& arch) {
  // CUDA C++ Programming Guide, compute capabilities: shared memory per SM.
  if (arch.sm >= 90) return 228 * 1024;
  if (arch.sm == 80 || arch.sm == 87) return 164 * 1024;
  if (arch.sm == 86 || arch.sm == 89) return 100 * 1024;
  return 64 * 1024;
}

DecodePlan plan_decode(const DecodeProblem& p, const Arch& arch, int sms) {
  DecodePlan plan;
  const int group = p.heads_q / std::max(p.heads_kv, 1);
  plan.split = decode_kernel_config(p.dtype, p.head_dim, group, p.q_len, p.layout, p.window_left >= 0, arch);
  DecodeSplitInputs in;
  in.sms = sms, in.batch = p.batch, in.heads_kv = p.heads_kv, in.block_n = plan.split.block_n;
  in.page_size = p.layout == KvLayout::paged ? p.page_size : 0;
  // Paged caches aim at two CTAs per SM when two fit (two 100 KB CTAs at d128 on sm_90): the page-table
  // reads and scattered pages add latency that one CTA's pipeline does not hide (H200, B16 Sk 8k, 16-token
  // pages: 3.26 TB/s with 128 CTAs, 4.08 with 256; a contiguous cache is faster with 128: 4.27-4.38 / 4.16).
  if (p.layout == KvLayout::paged && 2 * (shared_memory_bytes(plan.split) + 1024) <= shared_memory_per_sm(arch))
    in.ctas_per_sm = 2;
  // A window starts the key range at the first visible key rounded down to a tile (split_kv.cuh), so the
  // range is at most window + q_len + block_n - 1 keys long.
  long long keys = p.max_seqlen_k;
  if (p.window_left >= 0) keys = std::min<long long>(keys, 1LL * p.window_left + p.q_len + plan.split.block_n - 1);
  in.max_keys = static_cast<int>(std::max<long long>(keys, 1));
  plan.splits = p.num_splits > 0 ? forced_decode_splits(in, p.num_splits) : plan_decode_splits(in);
  plan.combine.arch = arch, plan.combine.dtype = p.dtype, plan.combine.fp32_inputs = true;
  plan.combine.head_dim = p.head_dim, plan.combine.warps = 4;
  if (plan.splits.num_splits > 1) {
    const std::size_t rows = static_cast<std::size_t>(plan.splits.num_splits) * p.batch * p.q_len * p.heads_q;
    plan.lse_offset = (rows * p.head_dim * sizeof(float) + 255) / 256 * 256;
    plan.workspace_bytes = plan.lse_offset + rows * sizeof(float);
  }
  return plan;
}

CombineKernelConfig merge_kernel_config(DType dtype, int head_dim, const Arch& arch) {
  CombineKernelConfig c;
  c.arch = arch, c.dtype = dtype, c.fp32_inputs = false, c.head_dim = head_dim;
  // One warp per output row; four rows per CTA keep CTAs small enough to spread a few thousand rows (a
  // decode batch) over every SM.
  c.warps = 4;
  return c;
}

}  // namespace flashjit::dispatch
