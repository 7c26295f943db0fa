#include "dispatch/decode_heuristics.hpp"

#include <algorithm>
#include <numeric>

#include "config/limits.hpp"

namespace flashjit::dispatch {
namespace {

int at_least_1(int x) { return std::max(x, 1); }
int ceil_div(long long a, long long b) { return static_cast<int>((a + b - 1) / b); }

// Keys the longest sequence's rows can see: a window starts the key range at the first visible key rounded
// down to a tile (split_kv.cuh), so the range is at most window + q_len + block_n - 1 keys long.
int visible_keys(const DecodeProblem& p, int block_n) {
  long long keys = p.max_seqlen_k;
  if (p.window_left >= 0) keys = std::min<long long>(keys, 1LL * p.window_left + p.q_len + block_n - 1);
  return static_cast<int>(std::max<long long>(keys, 1));
}

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
                                        int page_size, bool window, const Arch& arch) {
  DecodeKernelConfig c;
  c.arch = arch, c.dtype = dtype, c.head_dim = head_dim, c.layout = layout, c.window = window;
  // The page size is compiled in (templates/decode/kv_loads.cuh): pages of 16 tokens or more then cost one
  // page-table read and one pointer per page, not per row.
  c.page_size = layout == KvLayout::paged ? page_size : 0;
  c.rows = std::clamp((at_least_1(group) * at_least_1(q_len) + 15) / 16 * 16, 16, kMaxDecodeRows);
  // Warps beyond one per m-tile split each tile's keys (16-key slices or more per warp). Three stages hide
  // the HBM latency; d256 takes two (128 KB) to fit sm_80's 163 KB.
  const int m_tiles = c.rows / 16;
  c.stages = head_dim <= 128 ? 3 : 2;
  if ((layout == KvLayout::paged || head_dim <= 64) && head_dim <= 128 && 8 % m_tiles == 0 && m_tiles <= 4 &&
      arch.sm >= 90) {
    // 128-key tiles (one 200 KB CTA per SM at d128) keep twice the bytes in flight. H200, GB/s against
    // 64-key tiles, four warps: paged d128 with 16-token pages B16 Sk 8k 4235 / 4119 (the latter with two
    // CTAs per SM), B1 Sk 32k 3319 / 3187, 64-token pages 4284 / 4157 and 3442 / 3305; contiguous d64 B16
    // Sk 8k 4177 / 3755 (cuDNN 3684). Four warps for one or two m-tiles (32- or 64-key slices), eight for four:
    // since the epilogue merges key groups with vector loads, fewer groups cost less than the extra warps
    // win (µs, eight / four warps, H200: paged 16 d128 B1 Sk 32k 38.1 / 36.8, B16 Sk 8k 125.0 / 123.6;
    // paged 64 B1 37.0 / 36.4; d64 contiguous B4 Sk 8k 22.7 / 20.3; q_len 8 (two m-tiles) paged 16 B4 Sk 8k
    // 41.8 / 41.3, B16 128.8 / 129.8, B64 Sk 2k 143.0 / 141.9).
    c.block_n = 128;
    c.warps = m_tiles <= 2 ? 4 : 8;
  } else {
    // Four warps: 64-key tiles of 32 KB (d128), 96 KB per CTA, one CTA per SM streams a contiguous d128
    // cache at cuDNN's rate (H200: 4343 GB/s at B16 Sk 8k, cuDNN 4367; 128-key tiles 4323), and short
    // caches fill the pipeline sooner (B128 Sk 512: 3873 against 3682 with 128-key tiles).
    c.block_n = 64;
    c.warps = m_tiles * std::max(1, 4 / m_tiles);
  }
  // Many rows of a large head dim (Q takes rows x D x 2 bytes: 80 KB for 80 rows at d256) may not leave room
  // for the stages on sm_80: halve the tile while each warp keeps a 16-key slice.
  const int key_groups = c.warps / m_tiles;
  while (shared_memory_bytes(c) > config::max_shared_memory_per_block(arch) && c.block_n % (32 * key_groups) == 0)
    c.block_n /= 2;
  return c;
}

DecodePlan plan_decode(const DecodeProblem& p, const Arch& arch, int sms) {
  DecodePlan plan;
  const int group = p.heads_q / std::max(p.heads_kv, 1);
  plan.split =
      decode_kernel_config(p.dtype, p.head_dim, group, p.q_len, p.layout, p.page_size, p.window_left >= 0, arch);
  // Short caches over more CTAs than two per SM (no split then): small CTAs (two warps, 32-key tiles, two
  // stages: 36 KB at d128) that fit five per SM overlap the per-CTA latency chain (sequence length, Q and
  // K/V loads, store) that bounds these launches. H200, contiguous d128, group 4, µs against the default
  // config and cuDNN: B64 Sk 32 8.8 / 12.0 / 7.9, Sk 128 14.4 / 17.5 / 14.2, Sk 512 36.5 / 37.9 / 36.4;
  // B256 Sk 32 22.6 / 39.3 / 25.2, Sk 128 42.8 / 48.5 / 48.4, Sk 512 130.2 / 130.3 / 129.0. With one CTA
  // per SM or fewer (B16) the default's four warps are faster (Sk 32 5.1 against 5.7; Sk 512 12.5 / 18.0).
  const long long ctas = 1LL * std::max(p.batch, 1) * std::max(p.heads_kv, 1);
  if (arch.sm >= 90 && plan.split.rows == 16 && p.head_dim <= 128 && ctas > 2LL * sms &&
      visible_keys(p, plan.split.block_n) <= 512) {
    plan.split.block_n = 32;
    plan.split.warps = 2;
    plan.split.stages = 2;
  }
  DecodeSplitInputs in;
  in.sms = sms, in.batch = p.batch, in.heads_kv = p.heads_kv, in.block_n = plan.split.block_n;
  in.page_size = p.layout == KvLayout::paged ? p.page_size : 0;
  // One CTA per SM: a second one (two splits where one would do) costs the combine pass and gained nothing
  // measured on the H200 since the paged kernel keeps more bytes in flight itself (B16 Sk 8k, 64-key tiles:
  // contiguous 4206 / 4359 GB/s with two / one CTAs per SM, 16-token pages 4122 / 4059, against 4235 with
  // the 128-key tiles above at one CTA per SM).
  in.ctas_per_sm = 1;
  in.max_keys = visible_keys(p, plan.split.block_n);
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
