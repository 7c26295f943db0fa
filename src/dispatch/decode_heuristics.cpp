#include "dispatch/decode_heuristics.hpp"

#include <algorithm>
#include <numeric>

#include "config/limits.hpp"
#include "dispatch/variant_check.hpp"

namespace flashjit::dispatch {
namespace {

int at_least_1(int x) { return std::max(x, 1); }
int keys_of(const DecodeSplitInputs& in) { return std::clamp(in.max_keys, 1, kMaxDecodeSeqlen); }
int ceil_div(long long a, long long b) { return static_cast<int>((a + b - 1) / b); }

// Where the time model was measured (the H200, one m-tile: group 4, q_len 1); elsewhere the fill rule alone.
bool time_model_applies(const DecodeKernelConfig& split) { return split.arch.sm >= 90 && split.rows == 16; }

// The workspace of `rows` partial rows (DecodePlan's layout): fp32 O, then fp32 LSE at a 256-byte boundary.
std::size_t workspace_bytes(std::size_t rows, int head_dim, std::size_t* lse_offset = nullptr) {
  const std::size_t offset = (rows * head_dim * sizeof(float) + 255) / 256 * 256;
  if (lse_offset != nullptr) *lse_offset = offset;
  return offset + rows * sizeof(float);
}

// Keys the longest sequence's rows can see: a window (a chunk) starts the key range at the first visible key
// rounded down to a tile (split_kv.cuh), so the range is at most window + q_len + block_n - 1 keys long
// (chunk_size + q_len + block_n - 2: the first token's chunk starts at most chunk_size - 1 keys before it).
int visible_keys(const DecodeProblem& p, int block_n) {
  long long keys = p.max_seqlen_k;
  if (p.window_left >= 0) keys = std::min<long long>(keys, 1LL * p.window_left + p.q_len + block_n - 1);
  if (p.chunk_size > 0) keys = std::min<long long>(keys, 1LL * p.chunk_size + p.q_len + block_n - 2);
  return static_cast<int>(std::max<long long>(keys, 1));
}

// Keys per split for `splits` splits over `keys`, rounded up to the granule.
int keys_per_split(int keys, int splits, int granule) {
  return ceil_div(ceil_div(keys, splits), granule) * granule;
}

// The model's constants, measured on the H200 (d128 bf16, 8 KV heads, Sk 8k, contiguous with two CTAs per SM
// and paged with one): an SM streams K/V at about 50 GB/s, with one CTA or two (72 CTAs on 72 SMs read
// 3598-3850 GB/s, 80 read 3883-4148), and about 86 SMs together saturate HBM (4300 GB/s: 96 to 264 CTAs
// read 4150-4440). A CTA costs ≈ 2 µs besides its streaming (launch, Q load, pipeline fill, epilogue), the
// combine pass ≈ 3 µs; for small batches (below) ≈ 0.1 µs more per split (more partials to write and read
// back: B1 in 8 and in 16 splits differ by 0.06-0.15 µs per split beyond the streaming rates, e.g. Sk 2k 7.81 /
// 8.03 µs, Sk 4k 10.19 / 9.59; not measured elsewhere).
constexpr double kSmGBs = 50.0;
constexpr double kSaturatingSmsPerSm = 86.0 / 132.0;
constexpr double kCtaFixedUs = 2.0;
constexpr double kCombineUs = 3.0;
constexpr double kSplitUs = 0.1;

// Small batches: B·Hkv CTAs fill at most a quarter of the SMs (B1-B4 with 8 KV heads on the H200), where
// the split counts are latency, not bandwidth (see plan_decode_splits).
bool small_batch(const DecodeSplitInputs& in) {
  return 4LL * at_least_1(in.batch) * at_least_1(in.heads_kv) <= at_least_1(in.sms);
}
// Small batches split down to kModelMinKeysPerSplit keys (plan_decode_splits).
bool short_splits(const DecodeSplitInputs& in) { return in.time_model && in.short_splits && small_batch(in); }

// Whether the splits merge in a thread-block cluster (split_kv.cuh) rather than in the combine kernel: only
// where forced (SplitMerge::cluster), wherever a cluster can run (sm_90+, at most kMaxDecodeClusterSplits
// splits, its buffer within the shared memory a CTA may take: decode_kernel_config sized the stages without
// it). The planner keeps the combine kernel: since that kernel reads its states' addresses before its wait,
// it is as fast or faster where clusters of two or three fit (H200, d128, same process, µs, combine kernel /
// cluster: B6 Sk 1k 10.24-10.29 / 10.80-10.84, B8 Sk 1k 12.03-12.17 / 12.30-12.39, B7 Sk 2k 18.01 / 18.15-18.27,
// B6 Sk 16k 94.2-94.7 / 95.0-95.1, B5 Sk 4k in three splits 23.6-23.7 / 24.0-24.1, B6 Sk 1k on 64-token pages
// 10.64 / 10.87; level at B8 Sk 4k 34.35-34.83 / 34.30-34.45, Sk 16k 121.9-123.4 / 121.7-123.0 and on 16-token
// pages B8 Sk 2k 20.66-20.73 / 20.53-20.67), where before it the cluster saved 2-5% and was planned. Larger
// clusters lose more: clusters of 4 to 16 CTAs find room on only 112-120 of the H200's 132 SMs at one CTA per
// SM (cuOccupancyMaxActiveClusters: 30 of 4, 15 of 8, 7 of 16), and where a kernel fits twice the scheduler
// doubles CTAs up on SMs, each of which streams at its own rate of ≈ 50 GB/s with one CTA or two: B1 Sk 32k in
// 16 splits 35.5 / 41.0, B4 Sk 1k in 4 splits 9.3 / 10.0, B1 Sk 32k on 16-token pages (one CTA per SM, a
// second wave) 37.0 / 55.0.
bool cluster_kernel_allowed(const DecodeProblem& p, DecodeKernelConfig split) {
  if (split.arch.sm < 90 || p.split_merge != SplitMerge::cluster) return false;
  split.cluster_merge = true;
  return shared_memory_bytes(split) <= config::max_shared_memory_per_block(split.arch);
}
bool cluster_merge(const DecodeProblem& p, const DecodeKernelConfig& split, int splits) {
  return splits >= 2 && splits <= kMaxDecodeClusterSplits && cluster_kernel_allowed(p, split);
}

// A split count replaces the fill rule's only where the model makes it this much faster.
constexpr double kModelMargin = 1.05;

}  // namespace

int decode_split_granule(const DecodeSplitInputs& in) {
  const int block_n = at_least_1(in.block_n);
  // A split covers whole tiles (only the last tile of a sequence is partial, as without splits) and, on a
  // paged cache, whole pages: no page is fetched in part by two CTAs.
  return in.page_size > 0 ? std::lcm(block_n, in.page_size) : block_n;
}

double modeled_decode_us(const DecodeSplitInputs& in, int splits) {
  // The n CTAs run in rounds of as many as the SMs hold at once (SMs x ctas_per_sm), all of the same length:
  // a round of a CTAs on m SMs streams a x bytes at min(m x kSmGBs, HBM) and pays one CTA's fixed cost. The
  // launch spreads the first round one CTA per SM before doubling up (B17, 136 CTAs: 4266-4375 GB/s); a later
  // round's CTAs take the slots that free up, both of an SM at once (384 CTAs two per SM, B48 unsplit, B24 in
  // two splits, B16 in three: 3681-3881 GB/s, as if the last 120 ran on 60 SMs). A last round on fewer SMs
  // than saturate HBM streams at their rate: that tail is what a split count that fills the rounds avoids.
  const int sms = at_least_1(in.sms), keys = keys_of(in);
  const int per_split = keys_per_split(keys, at_least_1(splits), decode_split_granule(in));
  splits = ceil_div(keys, per_split);  // the splits the rounding left empty are dropped
  const long long n = 1LL * at_least_1(in.batch) * at_least_1(in.heads_kv) * splits;
  const int per_sm = at_least_1(in.ctas_per_sm);
  const long long slots = 1LL * sms * per_sm;
  const double bytes = 1.0 * per_split * at_least_1(in.bytes_per_key);
  const double hbm_gbs = kSmGBs * kSaturatingSmsPerSm * sms;
  auto round_us = [&](long long round_ctas, long long busy_sms) {  // GB/s = 1e3 bytes per µs
    return round_ctas * bytes / (std::min(busy_sms * kSmGBs, hbm_gbs) * 1e3) + kCtaFixedUs;
  };
  const long long full = n / slots, last = n % slots;
  double us = (splits > 1 ? kCombineUs + (short_splits(in) ? kSplitUs * splits : 0.0) : 0.0) +
              full * round_us(slots, sms);
  if (last > 0) us += round_us(last, full == 0 ? std::min<long long>(last, sms) : (last + per_sm - 1) / per_sm);
  return us;
}

DecodeSplitPlan plan_decode_splits(const DecodeSplitInputs& in) {
  const long long ctas = 1LL * at_least_1(in.batch) * at_least_1(in.heads_kv);
  const int keys = keys_of(in);
  // The seed's fill rule. Decode streams K/V from HBM once; a CTA per (sequence, KV head) reads at the rate
  // of one SM, so when B·Hkv CTAs leave SMs idle, the keys are shared by SMs / (B·Hkv) CTAs (integer part).
  // Measured on the H200 (contiguous, 132 SMs): B1 Sk 32k 16 splits 3.35-3.39 TB/s against 3.19-3.22 with 32.
  // Each split costs a fixed prologue (Q tile, pipeline fill) and writes rows x D fp32 partials that the
  // combine pass reads back; below ~512 keys per split (256 KB of K/V at D128 bf16 against 8 KB of
  // partials for 16 rows) that overhead stops being small, so short caches get fewer splits.
  auto fill = [&](int min_keys_per_split) {
    const int most = std::min(kMaxDecodeSplits, std::max(1, keys / min_keys_per_split));
    return static_cast<int>(std::clamp<long long>(at_least_1(in.sms) / ctas, 1, most));
  };
  int splits = fill(kMinKeysPerSplit);
  double best = modeled_decode_us(in, splits);
  // Small batches of short caches are latency, not bandwidth, and that floor leaves most SMs idle there. For
  // small batches where the time model applies, the fill count with a 256-key floor replaces it when the model
  // rates it faster, and the model's own counts (below) go down to one 64-key tile. H200, µs, the 512-key
  // floor's count → the planner's now (the fastest forced count where it differs): B1 Sk 512 7.49 → 6.10 in 4
  // splits (5.84 in 8), Sk 1k 9.30 → 6.69 (8), Sk 2k 9.58 → 7.81 (8), Sk 4k 10.22 → 9.59 (16); B2 Sk 1k 9.55 →
  // 7.82 (4); B4 Sk 1k 10.23 → 9.33 (4); cuDNN 8.46, 7.47, 8.61, 11.59, 8.39, 11.44. (Taking the 256-key fill
  // count always split B4 Sk 512 on 16-token pages into four one-tile splits, 8.6 µs against 8.0 unsplit.)
  const bool short_ok = short_splits(in);
  if (short_ok) {
    const int wider = fill(kModelFillMinKeysPerSplit);
    const double us = modeled_decode_us(in, wider);
    if (us < best) splits = wider, best = us;
  }
  // The fill rule leaves two cases slow, which the time model (modeled_decode_us) finds: fewer CTAs than
  // saturate HBM, and a last partial round on few SMs. H200, Sk 8k, GB/s unsplit / with the model's count:
  // B9 (72 CTAs) 3850 / 4131 (2 splits); B40 (320 CTAs, two per SM) 4026 / 4193 (3), B48 3881 / 4492 (2);
  // paged B20 (160 CTAs of 200 KB, one per SM) 3414 / 4099 (4), B24 3675 / 4242 (2), B40 3941 / 4313 (2) --
  // since then decode_split_kernel gives paged d128 between one and two CTAs per SM 64-key tiles (two per SM).
  // Another count is taken only where the model makes it kModelMargin faster, and with at most
  // model_ctas_per_sm CTAs per SM (so that the workspace stays bounded: decode_workspace_reserve).
  const int most =
      std::min(kMaxDecodeSplits, std::max(1, keys / (short_ok ? kModelMinKeysPerSplit : kMinKeysPerSplit)));
  for (int s = 1; in.time_model && s <= most; ++s) {
    if (s > 1 && ctas * s > 1LL * std::clamp(in.model_ctas_per_sm, 1, kMaxModelSplitCtasPerSm) * at_least_1(in.sms))
      break;
    const double us = modeled_decode_us(in, s);
    if (us * kModelMargin < best) splits = s, best = us;
  }
  // Round keys per split up to the granule, then drop the splits the rounding left empty (e.g. 3 splits of
  // 1000 keys with 512-key pages become 2 of 512): an empty split for the longest sequence is a wasted CTA.
  const int granule = decode_split_granule(in);
  const int per_split = keys_per_split(keys, splits, granule);
  return {ceil_div(keys, per_split), per_split};
}

DecodeSplitPlan forced_decode_splits(const DecodeSplitInputs& in, int splits) {
  const int n = std::clamp(splits, 1, kMaxDecodeSplits);
  return {n, keys_per_split(keys_of(in), n, decode_split_granule(in))};
}

DecodeKernelConfig decode_kernel_config(DType dtype, int head_dim, int group, int q_len, KvLayout layout,
                                        int page_size, MaskKind mask, const Arch& arch) {
  DecodeKernelConfig c;
  c.arch = arch, c.dtype = dtype, c.head_dim = head_dim, c.layout = layout, c.mask = mask;
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
  // Where the stages do not fit the arch's shared memory (sm_86 and sm_89 take 99 KB per CTA: the d128 tiles'
  // three stages are 100 KB; on sm_80 many rows of a large head dim, Q taking rows x D x 2 bytes): two
  // stages, then halve the tile while each warp keeps a 16-key slice, then halve the key groups.
  while (shared_memory_bytes(c) > config::max_shared_memory_per_block(arch)) {
    const int key_groups = c.warps / m_tiles;
    if (c.stages > 2) {
      --c.stages;
    } else if (c.block_n % (32 * key_groups) == 0) {
      c.block_n /= 2;
    } else if (key_groups % 2 == 0) {
      c.warps /= 2;
    } else {
      break;  // validate() names the shared memory
    }
  }
  return c;
}

DecodeKernelConfig decode_split_kernel(const DecodeProblem& p, const Arch& arch, int sms) {
  const int group = p.heads_q / std::max(p.heads_kv, 1);
  DecodeKernelConfig split =
      decode_kernel_config(p.dtype, p.head_dim, group, p.q_len, p.layout, p.page_size, mask_of(p), arch);
  // Short caches (the kernels below take at most 64 keys or more CTAs than SMs: never split) are bound by each CTA's
  // latency chain (sequence length, Q and K/V loads, merge, store), not by HBM. At most 64 keys, up to two CTAs per SM
  // (since the twelfth session only up to 32 keys: see below): four warps that each compute the whole tile's scores
  // and P·V for a quarter of O's columns (column groups), so no warp waits for another's keys and none merges (the
  // key-group merge and its two barriers were ≈ 1600 of a B4 Sk 32 call's ≈ 6800 cycles). One tile holds every key (32
  // or 64), two stages (one is loaded). H200, µs, column groups / the kernel before / cuDNN: contiguous d128 B4 Sk 32
  // 3.25 / 3.82 / 3.26, Sk 64 3.67 / 3.82 / 3.92; B16 Sk 32 3.69 / 4.35 / 3.91, Sk 64 4.54 / 4.78 / 4.57; B32 Sk 32
  // 4.55 / 4.77 (one warp) / 4.80; d64 B16 Sk 32 3.24 / 3.76 / 3.51, Sk 64 3.67 / 4.01 / 3.75; 16-token pages B4 Sk 32
  // 3.45 / 4.59 / 3.55, B32 Sk 32 4.68 / 9.20 / 4.79 (the 200 KB paged kernel in two rounds). From 128 keys deeper
  // pipelines win (contiguous d128 B4 Sk 128: 4.85 with 32-key tiles in three stages, 4.39 with the key groups' 64-key
  // tiles).
  // Since the key groups' merge stores only rows with a query and Q·Kᵀ waits for K only (twelfth session), key
  // groups on one 64-key tile (two stages) beat the column groups from 33 keys. H200, µs, key groups / column groups /
  // cuDNN: contiguous d128 B1 Sk 64 3.24 / 3.48 / 3.50, B4 3.40 / 3.66 / 3.62, B8 3.66 / 3.90 / 3.73, B16 4.30 / 4.52
  // / 4.23, B32 5.42 / 5.90 / 5.92, B16 Sk 48 4.17 / 4.45 / 4.08; d64 B16 Sk 64 3.47 / 3.60 / 3.43, B32 4.20 / 4.47 /
  // 4.35; 16-token pages B16 Sk 64 4.45 / 4.60 / 4.21, B32 5.62 / 6.03 / 5.92; 1-token pages B16 4.50 / 4.57 / 4.20.
  // At 32 keys the column groups stay (B16 Sk 32 3.74 against 3.87 with key groups on a half-empty 64-key tile).
  // Longer short caches over more CTAs than SMs: small CTAs that several fit per SM overlap the latency chains.
  // Contiguous d128: one warp per CTA (32-key tiles; its rows' whole state in its registers, so no merge of key groups
  // through shared memory), three stages (52 KB, four per SM) unless more CTAs than four per SM wait with at most 128
  // keys each or more than eight per SM with any: two (36 KB, six per SM). H200, group 4, µs: four-warp default or the
  // two-warp kernel below / one warp / cuDNN: B24 Sk 32 5.32 / 4.55 / 4.61, Sk 128 7.75 / 6.95 / 7.72; B32 Sk 32 5.64 /
  // 4.82 / 4.81, Sk 128 8.61 / 7.74 / 8.14, Sk 512 19.04 / 18.66 / 19.76; B64 Sk 32 6.80 / 5.90 / 7.85, Sk 256 19.60 /
  // 18.85 / 21.60; B128 Sk 32 10.92 / 8.84 / 13.72, Sk 512 67.67 / 65.08 / 66.83; B256 Sk 32 16.68 / 14.33 / 25.18, Sk
  // 512 124.1 / 123.0 / 126.8. With one CTA per SM or fewer (B16) four warps are faster from 64 keys (Sk 64 4.91 /
  // 4.95, Sk 256 7.54 / 9.15). Up to two CTAs per SM, four warps on key slices of 64-key tiles in two stages (68 KB:
  // the rule for longer caches, last below) now beat the one warp (twelfth session; H200, µs, four warps / one warp /
  // cuDNN): B24 Sk 128 6.27 / 6.95 / 7.34, B32 Sk 128 7.06 / 7.59 / 7.79, Sk 256 10.84 / 11.42 / 11.58, Sk 512 18.09 /
  // 18.78 / 19.48; beyond, the one warp stays ahead (B48 Sk 128 10.62 / 9.67 / 12.71, B64 Sk 128 12.50 / 11.66 / 13.87,
  // Sk 256 19.79 / 19.12 / 21.48, B128 Sk 64 16.38 / 12.58 / 17.89).
  // Other head dims and paged caches (not measured with one warp): two warps, 32-key tiles (column groups, stages:
  // below) over more CTAs than two per SM (paged d128 up to two per SM: as contiguous). H200, contiguous d128, two
  // warps on key slices in two stages, µs against the default config and cuDNN: B64 Sk 32 8.8 / 12.0 / 7.9, Sk 128
  // 14.4 / 17.5 / 14.2, Sk 512 36.5 / 37.9 / 36.4; B256 Sk 32 22.6 / 39.3 / 25.2, Sk 128 42.8 / 48.5 / 48.4, Sk 512
  // 130.2 / 130.3 / 129.0.
  const long long ctas = 1LL * std::max(p.batch, 1) * std::max(p.heads_kv, 1);
  const int short_keys = visible_keys(p, split.block_n);
  // Measured on the H200 only: the archs with its 228 KB of shared memory per SM (sm_120's 100 KB fit fewer CTAs).
  const bool short_cache =
      config::large_shared_memory(arch) && split.rows == 16 && p.head_dim <= 128 && short_keys <= 512;
  if (short_cache && p.head_dim % 64 == 0 && short_keys <= 64 && ctas <= 2LL * sms) {
    split.block_n = short_keys <= 32 ? 32 : 64;
    split.warps = 4;
    split.column_groups = short_keys <= 32 ? 4 : 1;
    split.stages = 2;
  } else if (short_cache && p.head_dim == 128 && p.layout == KvLayout::contiguous && ctas > 2LL * sms) {
    split.block_n = 32;
    split.warps = 1;
    split.stages = ctas > 8LL * sms || (ctas > 4LL * sms && short_keys <= 128) ? 2 : 3;
  } else if (short_cache && ctas > 2LL * sms) {
    // Two column groups where the head dim splits into two slices of whole 16-column groups (else key slices).
    // H200, µs, this / two warps on key slices / cuDNN (contiguous): 16-token pages B48 Sk 32 5.06 / 5.94 /
    // 7.18, Sk 128 9.63 / 10.36 / 13.22, B128 Sk 128 21.20 / 22.98 / 26.58; contiguous d64 B128 Sk 32 5.74 /
    // 6.44 / 7.96. Over more than 128 keys a third stage pays (52 KB at d128, four CTAs per SM instead of six),
    // as for the one-warp kernel up to eight CTAs per SM (beyond, the CTAs waiting for a slot outweigh the
    // depth). H200, µs, three / two stages / cuDNN: contiguous d64 B48 Sk 512 15.25 / 18.00 / 15.76, B64 Sk 256
    // 11.39 / 12.16 / 11.86, Sk 512 18.97 / 20.68 / 19.80; 1-token pages B48 Sk 512 28.06 / 29.41 / 29.81,
    // B128 Sk 512 68.66 / 71.94 / 68.46; 16-token pages B128 Sk 512 66.65 / 69.40 / 68.60. At 128 keys it is
    // mixed (contiguous d64 B48 6.40 / 7.04, B128 11.63 / 11.21; 16-token pages B48 9.79 / 9.63).
    split.block_n = 32;
    split.warps = 2;
    split.column_groups = p.head_dim % 32 == 0 ? 2 : 1;
    split.stages = short_keys > 128 && ctas <= 8LL * sms ? 3 : 2;
  } else if (config::large_shared_memory(arch) && p.head_dim == 128 && split.rows == 16 && ctas > sms &&
             (p.layout == KvLayout::contiguous || ctas <= 2LL * sms)) {
    // Short caches between one and two CTAs per SM (from 65 keys): see above for contiguous ones; paged ones took
    // two column groups on 32-key tiles in three stages until the fourteenth session (52 KB; H200, µs, this /
    // those / cuDNN on a contiguous cache): 16-token pages B24 Sk 128 6.32 / 6.51 / 7.36, Sk 512 15.19 / 15.88 /
    // 16.05, B32 Sk 256 11.27 / 11.45 / 11.72, Sk 512 19.02 / 19.46 / 19.66; 64-token pages B32 Sk 128 7.29 /
    // 7.36 / 7.78, Sk 512 18.72 / 18.99 / 19.64; 1-token pages B24 Sk 256 9.48 / 12.67 / 10.03, B32 Sk 512 19.23
    // / 24.64 / 19.69. Three stages there: mixed (B32 Sk 512, 16-token pages, 18.93; B24 Sk 128 6.86).
    // Longer caches over more CTAs than SMs: 64-key tiles in two stages (68 KB; two CTAs per SM by registers).
    // Where one to two CTAs per SM run at once, three stages let some streams fall behind and the last of them
    // run alone (per-CTA end times at B20 Sk 8k: median 142-145 µs, last 163-171); a paged cache's 128-key
    // tiles (200 KB at d128, one CTA per SM) ran in two rounds or split. H200 (thirteenth session), Sk 8k
    // unless stated, µs, two stages / three (64-key tiles) / cuDNN: B17 134.9 / 137.4 / 135.8, B18 141.5 /
    // 150.6 / 143.9, B20 156.0 / 170.3 / 160.3, B22 168.3 / 183.6 / 179.2, B24 183.2 / 192.5 / 196.9, B28 213.0
    // / 219.8 / 226.2, B20 Sk 4k 78.8 / 87.1 / 81.8, B20 Sk 16k 307.7 / 337.0 / 314.6; 16-token pages B20 156.7
    // / 161.8 / 155.9 (128-key tiles over two rounds: 169.8, eighth session; 1- and 64-token pages follow the
    // 16-token ones, not measured with two stages). Beyond two CTAs per SM a little ahead: B32 236.2 / 237.7 /
    // 238.9, B40 298.9 / 301.4 / 336.9, B128 Sk 2k 237.9 / 239.5 / 240.9, B64 Sk 16k 929 / 940 / 939; paged caches
    // there keep the 128-key tiles (16-token pages B64 Sk 2k 123.5 / 124.0 with them). With one CTA per SM or
    // fewer three stages win (B16 Sk 8k 125.5 / 120.3, B1 Sk 32k 35.6 / 34.5).
    split.block_n = 64;
    split.warps = 4;
    split.stages = 2;
  }
  split.softcap = p.softcap > 0.f, split.alibi = p.alibi_slopes != nullptr, split.sinks = p.sinks != nullptr;
  split.score_mod = snippet_text(p.score_mod), split.mask_mod = snippet_text(p.mask_mod);
  split.bias = bias_of(p.bias, p.bias_type);
  return split;
}

DecodePlan plan_decode(const DecodeProblem& p, const Arch& arch, int sms) {
  DecodePlan plan;
  plan.split = decode_split_kernel(p, arch, sms);
  DecodeSplitInputs in;
  in.sms = sms, in.batch = p.batch, in.heads_kv = p.heads_kv, in.block_n = plan.split.block_n;
  in.page_size = p.layout == KvLayout::paged ? p.page_size : 0;
  // The split kernels an SM holds at once (two of the 100 KB d128 kernel of 64-key tiles on sm_90, one of the
  // 200 KB paged one of 128-key tiles) and the bytes a key costs: the time model's inputs.
  in.ctas_per_sm = ctas_per_sm(plan.split);
  in.bytes_per_key = 2 * p.head_dim * 2;  // K and V, bf16 or fp16
  in.time_model = time_model_applies(plan.split);
  in.short_splits = config::large_shared_memory(arch);
  // Several m-tiles (speculative decoding's q_len > 1 with a large group; the time model was measured with one):
  // small batches of d128 with up to four m-tiles on a contiguous cache split as one m-tile does (H200, group 8,
  // µs, the 512-key floor's count / the fastest: q_len 4 B1 Sk 1k 11.97 / 8.51 in 8 splits, Sk 2k 12.21 / 9.94
  // in 8, B2 Sk 1k 12.48 / 10.04 in 4; q_len 8 B1 Sk 1k 15.54 / 9.49 in 8, Sk 2k 15.72 / 11.73 in 8, B2 Sk 1k
  // 20.58 / 12.75 in 8), within one CTA per SM so that the fill rule's workspace bound holds there
  // (decode_workspace_reserve). Paged caches, other head dims and more rows were not measured.
  if (plan.split.rows > 16 && plan.split.rows <= 64 && p.head_dim == 128 && p.layout == KvLayout::contiguous &&
      in.short_splits && small_batch(in)) {
    in.time_model = true;
    in.model_ctas_per_sm = 1;
  }
  in.max_keys = visible_keys(p, plan.split.block_n);
  plan.granule = decode_split_granule(in);
  plan.splits = p.num_splits > 0 ? forced_decode_splits(in, p.num_splits) : plan_decode_splits(in);
  if (p.split_merge == SplitMerge::cluster && plan.splits.num_splits > kMaxDecodeClusterSplits)
    plan.splits = forced_decode_splits(in, kMaxDecodeClusterSplits);  // a planned count, to fit one cluster
  plan.split.cluster_merge = cluster_merge(p, plan.split, plan.splits.num_splits);
  plan.combine.arch = arch, plan.combine.dtype = p.dtype, plan.combine.fp32_inputs = true;
  plan.combine.head_dim = p.head_dim, plan.combine.warps = 4;
  plan.combine.sinks = p.sinks != nullptr;  // the sinks join each row once its splits merge
  if (plan.splits.num_splits > 1 && !plan.split.cluster_merge) {
    const std::size_t rows = static_cast<std::size_t>(plan.splits.num_splits) * p.batch * p.q_len * p.heads_q;
    plan.workspace_bytes = workspace_bytes(rows, p.head_dim, &plan.lse_offset);
  }
  return plan;
}

std::size_t decode_workspace_reserve(const DecodeProblem& p, const Arch& arch, int sms) {
  const DecodePlan plan = plan_decode(p, arch, sms);
  if (p.num_splits > 0) return plan.workspace_bytes;  // the forced count: the largest batch needs the most
  // A forced cluster merge needs none (where it cannot run, decode refuses the problem).
  if (p.split_merge == SplitMerge::cluster) return plan.workspace_bytes;
  // A split plan has B·Hkv·splits <= SMs (the fill rule, and the model for several m-tiles: plan_decode caps it
  // at one CTA per SM) or <= kMaxModelSplitCtasPerSm x SMs (the model for one m-tile), each CTA writing group x
  // q_len rows. Some batch splits only if a batch of one may: two splits of its Hkv CTAs within that many CTAs.
  const long long two_splits = 2LL * std::max(p.heads_kv, 1);
  const bool model = time_model_applies(plan.split) && two_splits <= 1LL * kMaxModelSplitCtasPerSm * at_least_1(sms);
  if (!model && two_splits > at_least_1(sms)) return plan.workspace_bytes;
  const std::size_t ctas = static_cast<std::size_t>(at_least_1(sms)) * (model ? kMaxModelSplitCtasPerSm : 1);
  const std::size_t rows = ctas * static_cast<std::size_t>(p.heads_q / std::max(p.heads_kv, 1)) * p.q_len;
  return std::max(plan.workspace_bytes, workspace_bytes(rows, p.head_dim));
}

std::vector<DecodeKernelConfig> decode_prepare_kernels(const DecodeProblem& p, const Arch& arch, int sms) {
  const int batch = at_least_1(p.batch), heads_kv = at_least_1(p.heads_kv);
  std::vector<int> batches = {1, batch};
  for (int m = 1; m <= 16; ++m) {  // the last batch with at most m·SMs CTAs, and the first with more
    const int b = static_cast<int>(1LL * m * at_least_1(sms) / heads_kv);
    for (int x : {b, b + 1})
      if (x >= 1 && x <= batch) batches.push_back(x);
  }
  std::vector<int> lengths = {1};
  for (long long k = 1; k <= kMaxDecodeSeqlen; k *= 2)
    for (long long x : {k, k + 1})
      if (x <= kMaxDecodeSeqlen) lengths.push_back(static_cast<int>(x));
  std::vector<DecodeKernelConfig> out;
  DecodeProblem q = p;
  for (int b : batches)
    for (int keys : lengths) {
      q.batch = b, q.max_seqlen_k = keys;
      DecodeKernelConfig c = decode_split_kernel(q, arch, sms);
      if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
      // A forced cluster merge: also the kernel's cluster-merge variant where it may split (more keys than a
      // tile, or a forced count); which of the two runs depends on the split count.
      const bool may_split = p.num_splits > 1 || (p.num_splits == 0 && visible_keys(q, c.block_n) > c.block_n);
      if (!may_split || !cluster_kernel_allowed(p, c)) continue;
      c.cluster_merge = true;
      if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
    }
  return out;
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
