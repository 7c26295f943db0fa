// Tests of the split-KV planner: the issue's benchmark shapes on the H200 (132 SMs), the short-cache and
// page-size rules, invariants over a grid of shapes, forced split counts and degenerate inputs.
#include <algorithm>
#include <tuple>

#include "dispatch/decode_heuristics.hpp"
#include "support/catch.hpp"

using flashjit::dispatch::decode_split_granule;
using flashjit::dispatch::DecodeSplitInputs;
using flashjit::dispatch::DecodeSplitPlan;
using flashjit::dispatch::forced_decode_splits;
using flashjit::dispatch::kMaxDecodeSplits;
using flashjit::dispatch::modeled_decode_us;
using flashjit::dispatch::plan_decode_splits;

namespace {

DecodeSplitInputs h200(int batch, int heads_kv, int keys, int page_size = 0, int block_n = 64) {
  DecodeSplitInputs in;
  in.sms = 132, in.batch = batch, in.heads_kv = heads_kv, in.max_keys = keys, in.page_size = page_size;
  in.block_n = block_n;
  return in;
}

}  // namespace

TEST_CASE("decode splits: the issue's benchmark shapes (H32 KV8 on 132 SMs)", "[dispatch][decode]") {
  // B1 Sk 32k: 8 CTAs leave 124 SMs idle; 132 / 8 = 16 splits of 2048 keys.
  DecodeSplitPlan p = plan_decode_splits(h200(1, 8, 32768));
  CHECK(p.num_splits == 16);
  CHECK(p.keys_per_split == 2048);
  // B16 (128 CTAs) and B64 (512 CTAs) fill the SMs: no split, no combine pass.
  p = plan_decode_splits(h200(16, 8, 8192));
  CHECK(p.num_splits == 1);
  CHECK(p.keys_per_split == 8192);
  p = plan_decode_splits(h200(64, 8, 16384));
  CHECK(p.num_splits == 1);
}

TEST_CASE("decode splits: at most kMaxDecodeSplits, at least 512 keys per split without the time model",
          "[dispatch][decode]") {
  // One CTA on 132 SMs would take 132 splits: the combine kernel's limit caps it.
  CHECK(plan_decode_splits(h200(1, 1, 1 << 20)).num_splits == kMaxDecodeSplits);
  // The fill rule alone (sm_80, or several m-tiles): 1000 keys are one split, 1024 two of 512, 4097 eight
  // (the ninth would be empty).
  DecodeSplitInputs in = h200(1, 8, 1000);
  in.time_model = false;
  CHECK(plan_decode_splits(in).num_splits == 1);
  in.max_keys = 1024;
  DecodeSplitPlan p = plan_decode_splits(in);
  CHECK(p.num_splits == 2);
  CHECK(p.keys_per_split == 512);
  in.max_keys = 4097;
  p = plan_decode_splits(in);
  CHECK(p.num_splits == 8);
  CHECK(p.keys_per_split == 576);  // ceil(4097 / 8) = 513, rounded up to 9 tiles of 64
  CHECK(plan_decode_splits(h200(1, 8, 1)).num_splits == 1);
}

TEST_CASE("decode splits: small batches of short caches split down to 64 keys with the time model",
          "[dispatch][decode]") {
  // H200, H32 KV8 D128, µs per call with forced counts (bench/results/2026-11-29-session9): B1 Sk 512 6.10 in
  // 4 splits (5.84 in 8, 7.49 in 1), Sk 1k 6.69 in 8 (9.30 in 2), Sk 2k 7.81 in 8 (9.58 in 4), Sk 4k 9.59 in
  // 16 (10.22 in 8); B2 Sk 1k 7.82 in 4 (9.55 in 2); B4 Sk 1k 9.33 in 4 (10.23 in 2); B4 Sk 512 7.79 in 1,
  // 7.78 in 4.
  DecodeSplitPlan p = plan_decode_splits(h200(1, 8, 512));
  CHECK(p.num_splits == 4);
  CHECK(p.keys_per_split == 128);
  p = plan_decode_splits(h200(1, 8, 1024));
  CHECK(p.num_splits == 8);
  CHECK(p.keys_per_split == 128);
  CHECK(plan_decode_splits(h200(1, 8, 2048)).num_splits == 8);
  CHECK(plan_decode_splits(h200(1, 8, 4096)).num_splits == 16);
  CHECK(plan_decode_splits(h200(2, 8, 1024)).num_splits == 4);
  CHECK(plan_decode_splits(h200(4, 8, 1024)).num_splits == 4);
  // Unsplit where splits would not pay: B4 Sk 512 (level in the probe), 256 keys at B1 and B4, and the
  // 128-key tiles of 16-token pages at B4 Sk 512 (8.0 µs unsplit, 8.6 in four splits of one tile).
  CHECK(plan_decode_splits(h200(4, 8, 512)).num_splits == 1);
  CHECK(plan_decode_splits(h200(1, 8, 256)).num_splits == 1);
  CHECK(plan_decode_splits(h200(4, 8, 256)).num_splits == 1);
  CHECK(plan_decode_splits(h200(4, 8, 512, 16, 128)).num_splits == 1);
  // Without the time model the 512-key floor stays.
  DecodeSplitInputs in = h200(1, 8, 1024);
  in.time_model = false;
  CHECK(plan_decode_splits(in).num_splits == 2);
}

TEST_CASE("decode splits: keys per split are whole pages and whole tiles", "[dispatch][decode]") {
  CHECK(decode_split_granule(h200(1, 8, 1000)) == 64);
  CHECK(decode_split_granule(h200(1, 8, 1000, 16)) == 64);
  CHECK(decode_split_granule(h200(1, 8, 1000, 256)) == 256);
  CHECK(decode_split_granule(h200(1, 8, 1000, 1)) == 64);
  CHECK(decode_split_granule(h200(1, 8, 1000, 16, 48)) == 48);
  CHECK(decode_split_granule(h200(1, 8, 1000, 32, 48)) == 96);
  // 1536 keys (the fill rule alone): three splits of 512 contiguous; with 1024-token pages the rounding
  // leaves two. With the time model, 8 splits of 192 keys (three tiles).
  DecodeSplitInputs in = h200(1, 8, 1536);
  in.time_model = false;
  CHECK(plan_decode_splits(in).num_splits == 3);
  in.page_size = 1024;
  DecodeSplitPlan p = plan_decode_splits(in);
  CHECK(p.num_splits == 2);
  CHECK(p.keys_per_split == 1024);
  p = plan_decode_splits(h200(1, 8, 1536));
  CHECK(p.num_splits == 8);
  CHECK(p.keys_per_split == 192);
}

TEST_CASE("decode splits: invariants over a grid of shapes", "[dispatch][decode]") {
  for (bool model : {true, false})
    for (int sms : {1, 16, 78, 108, 132})
      for (int batch : {1, 2, 4, 16, 40, 64, 256, 65535})
        for (int heads_kv : {1, 2, 8, 65535})
          for (int keys : {1, 7, 128, 300, 511, 512, 768, 4097, 32768, 131072, 1 << 30})
            for (int page : {0, 1, 16, 64, 256})
              for (int block_n : {32, 64, 128}) {
                if (batch == 65535 && heads_kv == 65535 && page > 1) continue;  // the extremes once per page regime
                DecodeSplitInputs in = h200(batch, heads_kv, keys, page, block_n);
                in.sms = sms, in.time_model = model;
                in.ctas_per_sm = 1 + (batch + keys) % 3;  // 1 to 3 CTAs per SM
                const DecodeSplitPlan p = plan_decode_splits(in);
                INFO("model " << model << " sms " << sms << " B " << batch << " Hkv " << heads_kv << " keys " << keys
                              << " page " << page << " bn " << block_n << " -> " << p.num_splits << " x "
                              << p.keys_per_split);
                REQUIRE(p.num_splits >= 1);
                REQUIRE(p.num_splits <= kMaxDecodeSplits);
                REQUIRE(p.keys_per_split % decode_split_granule(in) == 0);
                REQUIRE(static_cast<long long>(p.num_splits) * p.keys_per_split >= keys);  // every key covered
                REQUIRE(static_cast<long long>(p.num_splits - 1) * p.keys_per_split < keys);  // none empty
                // Small batches (B·Hkv at most a quarter of the SMs) with the time model: splits down to 64 keys;
                // else 512.
                const long long ctas = 1LL * batch * heads_kv;
                const bool small = model && ctas * 4 <= sms;
                if (p.num_splits > 1) REQUIRE(p.keys_per_split >= (small ? 64 : 512));
                // The fill rule's count (for small batches the one of the 512- and 256-key floors the model
                // rates faster), or one the time model makes 5% faster.
                auto fill_with = [&](int floor) {
                  const int n = static_cast<int>(
                      std::clamp<long long>(sms / ctas, 1, std::max(1, std::min(32, keys / floor))));
                  const int per = forced_decode_splits(in, n).keys_per_split;
                  return static_cast<int>((1LL * keys + per - 1) / per);  // the splits its rounding left empty dropped
                };
                int fill = fill_with(512);
                if (small && modeled_decode_us(in, fill_with(256)) < modeled_decode_us(in, fill)) fill = fill_with(256);
                if (p.num_splits != fill) {
                  REQUIRE(model);
                  REQUIRE(modeled_decode_us(in, p.num_splits) * 1.05 < modeled_decode_us(in, fill));
                }
              }
}

TEST_CASE("decode splits: forced counts keep the count, trailing splits may be empty", "[dispatch][decode]") {
  DecodeSplitPlan p = forced_decode_splits(h200(3, 2, 300), 7);
  CHECK(p.num_splits == 7);
  CHECK(p.keys_per_split == 64);  // ceil(300 / 7) = 43, one tile; splits 5 and 6 start past key 300
  p = forced_decode_splits(h200(3, 2, 4097), 2);
  CHECK(p.num_splits == 2);
  CHECK(p.keys_per_split == 2112);
  p = forced_decode_splits(h200(3, 2, 4097), 1);
  CHECK(p.num_splits == 1);
  CHECK(p.keys_per_split == 4160);
  CHECK(forced_decode_splits(h200(1, 1, 100), 0).num_splits == 1);
  CHECK(forced_decode_splits(h200(1, 1, 100), 1000).num_splits == kMaxDecodeSplits);
}

TEST_CASE("decode splits: keys beyond 2^30 are read as 2^30 (no 32-bit overflow)", "[dispatch][decode]") {
  for (int keys : {(1 << 30) + 1, 2147483647}) {
    for (int batch : {1, 16, 40}) {
      INFO("keys " << keys << " B " << batch);
      const DecodeSplitPlan p = plan_decode_splits(h200(batch, 8, keys, 256, 128));
      CHECK(p.num_splits >= 1);
      CHECK(p.keys_per_split > 0);
      CHECK(static_cast<long long>(p.num_splits) * p.keys_per_split >= (1LL << 30));
      CHECK(modeled_decode_us(h200(batch, 8, keys), 1) > 0);
    }
    const DecodeSplitPlan forced = forced_decode_splits(h200(1, 8, keys), 1);
    CHECK(forced.keys_per_split == 1 << 30);
  }
}

TEST_CASE("decode splits: non-positive inputs are read as 1", "[dispatch][decode]") {
  DecodeSplitInputs in{0, 0, -3, 0, -1, 0};
  const DecodeSplitPlan p = plan_decode_splits(in);
  CHECK(p.num_splits == 1);
  CHECK(p.keys_per_split == 1);
  CHECK(decode_split_granule(in) == 1);
}

namespace {

flashjit::DecodeProblem decode_problem(int batch, int max_keys, int q_len = 1, int window = -1) {
  flashjit::DecodeProblem p;
  p.batch = batch, p.q_len = q_len, p.heads_q = 32, p.heads_kv = 8, p.head_dim = 128;
  p.max_seqlen_k = max_keys, p.window_left = window;
  return p;
}

constexpr flashjit::Arch kSm90a{90, true};

// The same problem over a paged cache of `page`-token pages: every sequence's max_seqlen_k keys on pages of
// its own.
flashjit::DecodeProblem with_pages(flashjit::DecodeProblem p, int page) {
  p.layout = flashjit::KvLayout::paged, p.page_size = page;
  p.max_pages_per_seq = (p.max_seqlen_k + page - 1) / page, p.num_pages = p.batch * p.max_pages_per_seq;
  return p;
}

}  // namespace

TEST_CASE("decode plan: split kernel, splits and workspace of the benchmark shapes", "[dispatch][decode]") {
  using flashjit::dispatch::plan_decode;
  auto plan = plan_decode(decode_problem(1, 32768), kSm90a, 132);
  CHECK(plan.split.rows == 16);  // group 4 x q_len 1, one m-tile
  CHECK(plan.split.layout == flashjit::KvLayout::contiguous);
  CHECK(plan.split.mask == flashjit::MaskKind::causal);
  CHECK(plan.splits.num_splits == 16);
  CHECK(plan.combine.fp32_inputs);
  CHECK(plan.combine.head_dim == 128);
  // 16 splits x 32 rows (B1, q_len 1, Hq 32) of 128 floats, then 512 LSE floats at a 256-byte boundary.
  CHECK(plan.lse_offset == 16u * 32 * 128 * 4);
  CHECK(plan.workspace_bytes == plan.lse_offset + 16u * 32 * 4);
  plan = plan_decode(decode_problem(64, 16384), kSm90a, 132);
  CHECK(plan.splits.num_splits == 1);
  CHECK(plan.workspace_bytes == 0);
}

TEST_CASE("decode plan: the combine kernel merges planned splits; a forced cluster merge wherever one can run",
          "[dispatch][decode]") {
  using flashjit::SplitMerge;
  using flashjit::dispatch::plan_decode;
  struct Case {
    int batch, keys, page;
    int splits;
  };
  // The band where clusters of two or three fit at one CTA per SM (B·Hkv·splits within the 132 SMs), where
  // the planner once took them, and beyond it.
  const Case c = GENERATE(Case{8, 4096, 0, 2}, Case{8, 16384, 0, 2}, Case{6, 1024, 0, 2}, Case{5, 4096, 0, 3},
                          Case{8, 2048, 16, 2}, Case{5, 4096, 16, 3}, Case{9, 4096, 0, 2}, Case{3, 4096, 0, 5},
                          Case{4, 1024, 0, 4}, Case{1, 32768, 0, 16}, Case{16, 2048, 0, 1});
  INFO("B" << c.batch << " Sk " << c.keys << " page " << c.page);
  auto p = decode_problem(c.batch, c.keys);
  if (c.page > 0) p = with_pages(p, c.page);
  for (flashjit::Arch arch : {kSm90a, flashjit::Arch{100, true}, flashjit::Arch{80, false}}) {
    const auto plan = plan_decode(p, arch, 132);
    if (arch.sm == 90) CHECK(plan.splits.num_splits == c.splits);
    CHECK_FALSE(plan.split.cluster_merge);
    CHECK((plan.workspace_bytes > 0) == (plan.splits.num_splits > 1));
  }
  // Forced: the combine kernel anywhere; the cluster wherever one can run.
  p.split_merge = SplitMerge::combine_kernel;
  auto plan = plan_decode(p, kSm90a, 132);
  CHECK_FALSE(plan.split.cluster_merge);
  CHECK((plan.workspace_bytes > 0) == (c.splits > 1));
  p.split_merge = SplitMerge::cluster;
  plan = plan_decode(p, kSm90a, 132);
  CHECK(plan.split.cluster_merge == (c.splits > 1));
  CHECK(plan.workspace_bytes == 0);
  CHECK(plan_decode(p, flashjit::Arch{100, true}, 132).split.cluster_merge == (c.splits > 1));
  CHECK_FALSE(plan_decode(p, flashjit::Arch{80, false}, 132).split.cluster_merge);  // decode() refuses it
}

TEST_CASE("decode plan: a forced cluster merge caps the planner's count at one cluster", "[dispatch][decode]") {
  using flashjit::dispatch::plan_decode;
  auto p = decode_problem(1, 1 << 20);
  p.heads_q = 4, p.heads_kv = 1;  // one CTA row: the planner's count is the most splits
  REQUIRE(plan_decode(p, kSm90a, 132).splits.num_splits == kMaxDecodeSplits);
  p.split_merge = flashjit::SplitMerge::cluster;
  const auto plan = plan_decode(p, kSm90a, 132);
  CHECK(plan.splits.num_splits == flashjit::kMaxDecodeClusterSplits);
  CHECK(plan.splits.num_splits * plan.splits.keys_per_split >= (1 << 20));
  CHECK(plan.split.cluster_merge);
}

TEST_CASE("decode plan: small batches of short caches split down to 64 keys on the 228 KB archs only",
          "[dispatch][decode]") {
  using flashjit::dispatch::plan_decode;
  // The planner's real inputs (the contiguous d128 kernel two per SM, paged caches the 128-key kernel): the
  // counts measured fastest on the H200 (bench/results/2026-11-29-session9/small-batch-split-probes.md).
  struct Case {
    int batch, keys, page, splits;
  };
  for (const Case c : {Case{1, 512, 0, 4}, Case{1, 1024, 0, 8}, Case{1, 2048, 0, 8}, Case{1, 4096, 0, 16},
                       Case{2, 1024, 0, 4}, Case{2, 2048, 0, 8}, Case{4, 512, 0, 1}, Case{4, 1024, 0, 4},
                       Case{1, 2048, 16, 8}, Case{1, 2048, 1, 8}, Case{4, 512, 16, 1}, Case{4, 1024, 16, 4}}) {
    auto p = decode_problem(c.batch, c.keys);
    if (c.page > 0) p.layout = flashjit::KvLayout::paged, p.page_size = c.page;
    INFO("B" << c.batch << " Sk " << c.keys << " page " << c.page);
    CHECK(plan_decode(p, kSm90a, 132).splits.num_splits == c.splits);
  }
  // Several m-tiles of d128 on a contiguous cache (group 8, q_len 4 and 8: 32 and 64 rows) split alike, within one
  // CTA per SM: µs measured, q_len 4 B1 Sk 1k 12.04 in 2 splits / 8.49 in 8, Sk 2k 12.26 in 4 / 10.01 in 8, B2 Sk
  // 1k 12.53 in 2 / 10.06 in 4; q_len 8 B1 Sk 1k 15.53 / 9.53, B2 Sk 1k 20.53 / 15.10. B4 Sk 600 and B3 Sk 1344
  // (q_len 4) are where an uncapped model would go past one CTA per SM (5 and 7 splits).
  struct Rows {
    int batch, keys, q_len, splits;
  };
  for (const Rows c : {Rows{1, 1024, 4, 8}, Rows{1, 2048, 4, 8}, Rows{1, 4096, 4, 16}, Rows{2, 1024, 4, 4},
                       Rows{1, 1024, 8, 8}, Rows{2, 1024, 8, 4}, Rows{4, 600, 4, 2}, Rows{3, 1344, 4, 5}}) {
    auto p = decode_problem(c.batch, c.keys, c.q_len);
    p.heads_q = 64;  // group 8
    INFO("B" << c.batch << " Sk " << c.keys << " q_len " << c.q_len);
    const auto plan = plan_decode(p, kSm90a, 132);
    CHECK(plan.split.rows == 8 * c.q_len);
    CHECK(plan.splits.num_splits == c.splits);
    CHECK(1LL * c.batch * 8 * plan.splits.num_splits <= 132);  // one CTA per SM at most
  }
  // Not measured, the 512-key floor stays: 128 rows (q_len 16), paged caches with several m-tiles, B5 (40 CTAs).
  auto rows128 = decode_problem(1, 1024, 16);
  rows128.heads_q = 64;
  CHECK(plan_decode(rows128, kSm90a, 132).splits.num_splits == 2);
  auto paged = decode_problem(1, 2048, 8);
  paged.heads_q = 64, paged.layout = flashjit::KvLayout::paged, paged.page_size = 16;
  CHECK(plan_decode(paged, kSm90a, 132).splits.num_splits == 4);
  auto several = decode_problem(5, 1024, 4);
  several.heads_q = 64;
  CHECK(plan_decode(several, kSm90a, 132).splits.num_splits == 2);
  // Small means B·Hkv at most a quarter of the SMs: B4 with 8 KV heads at 128 SMs, not at 127.
  CHECK(plan_decode(decode_problem(4, 1024), kSm90a, 128).splits.num_splits == 4);
  CHECK(plan_decode(decode_problem(4, 1024), kSm90a, 127).splits.num_splits == 2);
  CHECK(plan_decode(decode_problem(5, 1024), kSm90a, 132).splits.num_splits == 2);
  // The 0.1 µs per split is charged to small batches only: B10 Sk 14080 keeps two splits.
  CHECK(plan_decode(decode_problem(10, 14080), kSm90a, 132).splits.num_splits == 2);
  // No short splits on sm_120 (about 100 KB of shared memory per SM; not measured there) nor on sm_80.
  const flashjit::Arch sm120{120, false};
  CHECK(plan_decode(decode_problem(1, 1024), sm120, 170).splits.num_splits == 2);
  CHECK(plan_decode(decode_problem(1, 1024), flashjit::Arch{80, false}, 108).splits.num_splits == 2);
  // sm_120 keeps the time model's tail splits (as before the short splits): B22 Sk 10752 in 6, B11 Sk 8k in 3.
  CHECK(plan_decode(decode_problem(22, 10752), sm120, 170).splits.num_splits == 6);
  CHECK(plan_decode(decode_problem(11, 8192), sm120, 170).splits.num_splits == 3);
}

TEST_CASE("decode splits: the time model's counts stay within model_ctas_per_sm CTAs per SM", "[dispatch][decode]") {
  // B4 (32 CTAs) over 600 keys: the model would take 5 splits (160 CTAs); capped at one CTA per SM, 2.
  DecodeSplitInputs in = h200(4, 8, 600);
  in.ctas_per_sm = 2;
  for (int cap : {-3, 0, 1}) {
    in.model_ctas_per_sm = cap;  // read as 1
    CHECK(plan_decode_splits(in).num_splits == 2);
  }
  for (int cap : {2, 8, 100}) {
    in.model_ctas_per_sm = cap;  // at most 8
    CHECK(plan_decode_splits(in).num_splits == 5);
  }
}

TEST_CASE("decode plan: a window bounds the keys to split, forced splits are kept", "[dispatch][decode]") {
  using flashjit::dispatch::plan_decode;
  // 1000-key window over a 32k cache: at most 1000 + 1 + 63 keys are visible, split as a 1064-key cache.
  auto plan = plan_decode(decode_problem(1, 32768, 1, 1000), kSm90a, 132);
  CHECK(plan.split.mask == flashjit::MaskKind::sliding_window);
  const DecodeSplitPlan unwindowed = plan_decode(decode_problem(1, 1064, 1), kSm90a, 132).splits;
  CHECK(plan.splits.num_splits == unwindowed.num_splits);
  CHECK(plan.splits.keys_per_split == unwindowed.keys_per_split);
  CHECK(plan.splits.num_splits < 16);  // not the 32k cache's 16 splits
  CHECK(plan.splits.num_splits * plan.splits.keys_per_split >= 1000 + 1 + 63);
  auto p = decode_problem(2, 300, 4);
  p.num_splits = 7;
  plan = plan_decode(p, kSm90a, 132);
  CHECK(plan.splits.num_splits == 7);
  CHECK(plan.split.rows == 16);
  const std::size_t rows = 7u * 2 * 4 * 32;
  CHECK(plan.workspace_bytes == (rows * 128 * 4 + 255) / 256 * 256 + rows * 4);
  p.heads_q = 64;  // group 8 x q_len 4 = 32 rows: two m-tiles
  CHECK(plan_decode(p, kSm90a, 132).split.rows == 32);
}

TEST_CASE("decode plan: a chunk bounds the keys to split (chunk_size + q_len + block_n - 2)", "[dispatch][decode]") {
  using flashjit::dispatch::plan_decode;
  // 1000-key chunks over a 32k cache: the first token's chunk starts at most 999 keys before it, rounded down
  // to a tile: at most 1000 + 1 + 64 - 2 keys are visible, split as a 1063-key cache.
  auto p = decode_problem(1, 32768);
  p.chunk_size = 1000;
  auto plan = plan_decode(p, kSm90a, 132);
  CHECK(plan.split.mask == flashjit::MaskKind::chunked_causal);
  REQUIRE(plan.split.block_n == 64);
  const int bound = 1000 + 1 + plan.split.block_n - 2;
  const DecodeSplitPlan unchunked = plan_decode(decode_problem(1, bound), kSm90a, 132).splits;
  CHECK(plan.splits.num_splits == unchunked.num_splits);
  CHECK(plan.splits.keys_per_split == unchunked.keys_per_split);
  CHECK(plan.splits.num_splits < 16);  // not the 32k cache's 16 splits
  CHECK(plan.splits.num_splits * plan.splits.keys_per_split >= bound);
  // Four new tokens on 16-token pages, 300-key chunks: 300 + 4 + block_n - 2 keys.
  p = with_pages(decode_problem(2, 16384, 4), 16);
  p.chunk_size = 300;
  plan = plan_decode(p, kSm90a, 132);
  CHECK(plan.split.mask == flashjit::MaskKind::chunked_causal);
  auto q = with_pages(decode_problem(2, 300 + 4 + plan.split.block_n - 2, 4), 16);
  const auto bounded = plan_decode(q, kSm90a, 132);
  CHECK(bounded.split.block_n == plan.split.block_n);
  CHECK(plan.splits.num_splits == bounded.splits.num_splits);
  CHECK(plan.splits.keys_per_split == bounded.splits.keys_per_split);
  // A chunk at least as long as the cache bounds nothing: the causal problem's splits, the chunked kernel.
  for (int chunk : {32768, 1 << 30}) {
    p = decode_problem(1, 32768);
    p.chunk_size = chunk;
    plan = plan_decode(p, kSm90a, 132);
    INFO("chunk_size " << chunk);
    CHECK(plan.split.mask == flashjit::MaskKind::chunked_causal);
    const DecodeSplitPlan causal = plan_decode(decode_problem(1, 32768), kSm90a, 132).splits;
    CHECK(plan.splits.num_splits == causal.num_splits);
    CHECK(plan.splits.keys_per_split == causal.keys_per_split);
  }
  // Forced splits are kept.
  p = decode_problem(2, 4096, 4);
  p.chunk_size = 64, p.num_splits = 3;
  plan = plan_decode(p, kSm90a, 132);
  CHECK(plan.splits.num_splits == 3);
  CHECK(plan.split.mask == flashjit::MaskKind::chunked_causal);
}

TEST_CASE("decode plan: paged caches take 128-key tiles on sm_90 (four warps, eight for four m-tiles), one CTA per SM",
          "[dispatch][decode]") {
  using flashjit::dispatch::plan_decode;
  auto p = decode_problem(16, 8192);
  auto plan = plan_decode(p, kSm90a, 132);
  CHECK(plan.split.block_n == 64);
  CHECK(plan.split.warps == 4);
  CHECK(plan.split.page_size == 0);
  CHECK(plan.splits.num_splits == 1);  // 128 CTAs, one per SM
  p.head_dim = 64;  // contiguous d64 streams faster with the 128-key tiles too
  CHECK(plan_decode(p, kSm90a, 132).split.block_n == 128);
  CHECK(plan_decode(p, kSm90a, 132).split.warps == 4);
  p.head_dim = 128;
  p.layout = flashjit::KvLayout::paged, p.page_size = 16, p.num_pages = 8192, p.max_pages_per_seq = 512;
  plan = plan_decode(p, kSm90a, 132);
  CHECK(plan.split.block_n == 128);
  CHECK(plan.split.warps == 4);
  CHECK(plan.split.stages == 3);
  p.q_len = 8;  // group 4 x q_len 8: two m-tiles, two warps each
  CHECK(plan_decode(p, kSm90a, 132).split.rows == 32);
  CHECK(plan_decode(p, kSm90a, 132).split.warps == 4);
  p.q_len = 16;  // four m-tiles: eight warps, two per m-tile
  CHECK(plan_decode(p, kSm90a, 132).split.rows == 64);
  CHECK(plan_decode(p, kSm90a, 132).split.block_n == 128);
  CHECK(plan_decode(p, kSm90a, 132).split.warps == 8);
  p.q_len = 1;
  plan = plan_decode(p, kSm90a, 132);
  CHECK(plan.split.page_size == 16);
  CHECK(flashjit::shared_memory_bytes(plan.split) <= 227 * 1024);
  CHECK(plan.splits.num_splits == 1);
  p = decode_problem(1, 32768);
  p.layout = flashjit::KvLayout::paged, p.page_size = 64, p.num_pages = 512, p.max_pages_per_seq = 512;
  plan = plan_decode(p, kSm90a, 132);
  CHECK(plan.splits.num_splits == 16);  // 132 / 8
  CHECK(plan.splits.keys_per_split % 128 == 0);
}

TEST_CASE("decode splits: the time model splits where the grid leaves a slow tail or too few CTAs", "[dispatch][decode]") {
  // Contiguous d128 (two CTAs per SM), Sk 8k: B9 (72 CTAs, fewer than saturate HBM) splits in two, B40
  // (320 CTAs: a last round of 56 on 28 SMs) in three, B48 (384: 120 on 60 SMs) in two; B10-B33 keep one CTA
  // per (sequence, KV head), B3 and B5 the fill rule's count.
  auto contiguous = [](int batch, int keys) {
    auto in = h200(batch, 8, keys);
    in.ctas_per_sm = 2;
    return plan_decode_splits(in).num_splits;
  };
  CHECK(contiguous(9, 8192) == 2);
  CHECK(contiguous(40, 8192) == 3);
  CHECK(contiguous(48, 8192) == 2);
  for (int batch : {10, 12, 14, 16, 17, 20, 24, 28, 33, 64}) {
    INFO("B" << batch);
    CHECK(contiguous(batch, 8192) == 1);
  }
  CHECK(contiguous(3, 8192) == 5);
  CHECK(contiguous(5, 8192) == 3);
  CHECK(contiguous(1, 32768) == 16);
  // Paged, 128-key tiles of 200 KB (one CTA per SM): B20 (160 CTAs) would leave a round of 28, B24 of 60. (The
  // model's inputs only: plan_decode gives paged d128 between one and two CTAs per SM 64-key tiles.)
  auto in = h200(20, 8, 8192, 16, 128);
  CHECK(plan_decode_splits(in).num_splits == 4);
  CHECK(modeled_decode_us(in, 4) * 1.05 < modeled_decode_us(in, 1));
  in.batch = 24;
  CHECK(plan_decode_splits(in).num_splits == 2);
  in.batch = 16;
  CHECK(plan_decode_splits(in).num_splits == 1);
  // The model itself: a saturated single round costs its bytes at HBM's rate plus the fixed costs.
  in = h200(16, 8, 8192);
  in.ctas_per_sm = 2;
  CHECK(modeled_decode_us(in, 1) == Approx(128 * 8192 * 512 / (50.0 * 86 * 1e3) + 2.0));
  CHECK(modeled_decode_us(in, 2) > modeled_decode_us(in, 1));  // 256 CTAs: the combine for nothing
  in.batch = 9;  // 72 CTAs on 72 SMs, below saturation
  CHECK(modeled_decode_us(in, 1) == Approx(72 * 8192 * 512 / (50.0 * 72 * 1e3) + 2.0));
  in.batch = 48;  // 384 CTAs: 264, then 120 on 60 SMs
  CHECK(modeled_decode_us(in, 1) ==
        Approx(264 * 8192 * 512 / (50.0 * 86 * 1e3) + 120 * 8192 * 512 / (50.0 * 60 * 1e3) + 4.0));
}

TEST_CASE("decode plan: the paged 128-key kernel only where it fits and pays", "[dispatch][decode]") {
  using flashjit::dispatch::plan_decode;
  auto p = decode_problem(16, 8192);
  p.layout = flashjit::KvLayout::paged, p.page_size = 16, p.num_pages = 8192, p.max_pages_per_seq = 512;
  // sm_80: 200 KB does not fit 163 KB.
  auto plan = plan_decode(p, flashjit::Arch{80, false}, 108);
  CHECK(plan.split.block_n == 64);
  CHECK(plan.split.warps == 4);
  CHECK(plan.splits.num_splits == 1);  // 108 SMs / 128 CTAs (the time model is the H200's: not on sm_80)
  // d256: two 64-key stages.
  p.head_dim = 256;
  plan = plan_decode(p, kSm90a, 132);
  CHECK(plan.split.block_n == 64);
  CHECK(plan.split.stages == 2);
  // Eight m-tiles (group 8 x q_len 16): one warp per m-tile, 64-key tiles.
  p.head_dim = 128, p.heads_q = 64, p.q_len = 16;
  plan = plan_decode(p, kSm90a, 132);
  CHECK(plan.split.rows == 128);
  CHECK(plan.split.warps == 8);
  CHECK(plan.split.block_n == 64);
}

TEST_CASE("decode plan: short caches over more CTAs than SMs take four warps on key slices in two stages up to two "
          "per SM and one-warp CTAs beyond (contiguous d128), else two-warp CTAs over more than two per SM",
          "[dispatch][decode]") {
  using flashjit::dispatch::plan_decode;
  auto shape = [](const flashjit::dispatch::DecodePlan& plan) {
    return std::tuple{plan.split.block_n, plan.split.warps, plan.split.stages};
  };
  using Shape = std::tuple<int, int, int>;
  // Contiguous d128 up to two CTAs per SM: four warps on key slices of 64-key tiles, two stages (at most 64 keys
  // take one tile: the next test).
  CHECK(shape(plan_decode(decode_problem(17, 128), kSm90a, 132)) == Shape{64, 4, 2});  // 136 CTAs
  CHECK(shape(plan_decode(decode_problem(33, 512), kSm90a, 132)) == Shape{64, 4, 2});  // 264 CTAs
  CHECK(plan_decode(decode_problem(33, 512), kSm90a, 132).split.column_groups == 1);
  // Beyond: one warp, 32-key tiles; three stages up to four CTAs per SM (or eight with more than 128 keys), two
  // beyond.
  CHECK(shape(plan_decode(decode_problem(34, 128), kSm90a, 132)) == Shape{32, 1, 3});  // 272 CTAs
  CHECK(shape(plan_decode(decode_problem(34, 32), kSm90a, 132)) == Shape{32, 1, 3});
  CHECK(shape(plan_decode(decode_problem(64, 32), kSm90a, 132)) == Shape{32, 1, 3});  // 512 CTAs
  CHECK(shape(plan_decode(decode_problem(128, 128), kSm90a, 132)) == Shape{32, 1, 2});
  CHECK(shape(plan_decode(decode_problem(128, 256), kSm90a, 132)) == Shape{32, 1, 3});
  CHECK(shape(plan_decode(decode_problem(256, 512), kSm90a, 132)) == Shape{32, 1, 2});
  CHECK(flashjit::shared_memory_bytes(plan_decode(decode_problem(64, 32), kSm90a, 132).split) == 53248);
  CHECK(shape(plan_decode(decode_problem(16, 128), kSm90a, 132)) == Shape{64, 4, 3});  // 128 CTAs: one per SM
  CHECK(shape(plan_decode(decode_problem(64, 513), kSm90a, 132)) == Shape{64, 4, 2});  // a longer cache: the next test
  CHECK(shape(plan_decode(decode_problem(64, 32, 8), kSm90a, 132)) == Shape{64, 4, 3});  // 32 rows
  // A window bounds the visible keys: a long cache with a short window counts as short.
  CHECK(shape(plan_decode(decode_problem(64, 32768, 1, 100), kSm90a, 132)) == Shape{32, 1, 3});
  // d64 and paged caches: two warps (two column groups), 32-key tiles, from more than two CTAs per SM; two
  // stages up to 128 keys, three beyond up to eight CTAs per SM.
  auto d64 = decode_problem(64, 32);
  d64.head_dim = 64;
  CHECK(shape(plan_decode(d64, kSm90a, 132)) == Shape{32, 2, 2});
  d64.max_seqlen_k = 128;
  CHECK(shape(plan_decode(d64, kSm90a, 132)) == Shape{32, 2, 2});
  d64.max_seqlen_k = 129;
  CHECK(shape(plan_decode(d64, kSm90a, 132)) == Shape{32, 2, 3});
  d64.batch = 132, d64.max_seqlen_k = 512;  // 1056 CTAs: eight per SM
  CHECK(shape(plan_decode(d64, kSm90a, 132)) == Shape{32, 2, 3});
  d64.batch = 133;
  CHECK(shape(plan_decode(d64, kSm90a, 132)) == Shape{32, 2, 2});
  d64.batch = 33, d64.max_seqlen_k = 128;  // 264 CTAs: two per SM
  CHECK(shape(plan_decode(d64, kSm90a, 132)) == Shape{128, 4, 3});
  auto paged = decode_problem(64, 256);
  paged.layout = flashjit::KvLayout::paged, paged.page_size = 16, paged.num_pages = 1024, paged.max_pages_per_seq = 16;
  const auto plan = plan_decode(paged, kSm90a, 132);
  CHECK(shape(plan) == Shape{32, 2, 3});
  CHECK(plan.split.column_groups == 2);
  CHECK(plan.split.page_size == 16);
  CHECK(plan.splits.num_splits == 1);
  CHECK(flashjit::shared_memory_bytes(plan.split) == 53248);
  paged.max_seqlen_k = 128;
  CHECK(flashjit::shared_memory_bytes(plan_decode(paged, kSm90a, 132).split) == 36864);
  // sm_80 and sm_120 (100 KB of shared memory per SM, not measured): neither.
  CHECK(std::get<1>(shape(plan_decode(decode_problem(64, 32), flashjit::Arch{80, false}, 108))) == 4);
  CHECK(std::get<1>(shape(plan_decode(decode_problem(64, 32), flashjit::Arch{120, false}, 84))) == 4);
  CHECK(std::get<1>(shape(plan_decode(d64, flashjit::Arch{120, false}, 84))) == 4);
}

TEST_CASE("decode plan: at most 64 keys over up to two CTAs per SM take one tile in two stages, four column groups "
          "up to 32 keys, key slices beyond", "[dispatch][decode]") {
  using flashjit::dispatch::plan_decode;
  auto shape = [](const flashjit::dispatch::DecodePlan& plan) {
    return std::tuple{plan.split.block_n, plan.split.warps, plan.split.column_groups, plan.split.stages};
  };
  using Shape = std::tuple<int, int, int, int>;
  for (int d : {64, 128})
    for (int page : {0, 1, 16, 64})
      for (int batch : {1, 4, 16, 17, 33})  // 8 to 264 CTAs
        for (int keys : {1, 32, 33, 64}) {
          auto p = page > 0 ? with_pages(decode_problem(batch, keys), page) : decode_problem(batch, keys);
          p.head_dim = d;
          INFO("d" << d << " page " << page << " B" << batch << " Sk " << keys);
          const auto plan = plan_decode(p, kSm90a, 132);
          // One tile of every key: 32 keys or 64, two stages.
          const int block_n = keys <= 32 ? 32 : 64;
          CHECK(shape(plan) == Shape{block_n, 4, keys <= 32 ? 4 : 1, 2});
          CHECK(plan.splits.num_splits == 1);
          CHECK(validate(plan.split).empty());
          CHECK(flashjit::shared_memory_bytes(plan.split) == 16 * d * 2 + 2 * 2 * block_n * d * 2);
        }
  CHECK(shape(plan_decode(decode_problem(16, 65), kSm90a, 132)) == Shape{64, 4, 1, 3});  // 65 keys: the default
  CHECK(std::get<2>(shape(plan_decode(decode_problem(34, 32), kSm90a, 132))) == 1);     // 272 CTAs
  CHECK(std::get<2>(shape(plan_decode(decode_problem(16, 32, 8), kSm90a, 132))) == 1);  // 32 rows
  // A window bounds the visible keys by window + q_len + 63 (contiguous d128: 64-key default tiles): window 0
  // counts as short.
  CHECK(shape(plan_decode(decode_problem(16, 32768, 1, 0), kSm90a, 132)) == Shape{64, 4, 1, 2});
  auto d96 = decode_problem(16, 32);  // 24 columns per warp: not whole 16-column groups
  d96.head_dim = 96;
  CHECK(std::get<2>(shape(plan_decode(d96, kSm90a, 132))) == 1);
  CHECK(std::get<2>(shape(plan_decode(decode_problem(16, 32), flashjit::Arch{80, false}, 108))) == 1);
}

TEST_CASE("decode plan: paged d128 short caches between one and two CTAs per SM take 64-key tiles on four warps in "
          "two stages, as contiguous ones",
          "[dispatch][decode]") {
  using flashjit::dispatch::plan_decode;
  auto shape = [](const flashjit::dispatch::DecodePlan& plan) {
    return std::tuple{plan.split.block_n, plan.split.warps, plan.split.column_groups, plan.split.stages};
  };
  using Shape = std::tuple<int, int, int, int>;
  auto paged = [](int batch, int keys, int page) { return with_pages(decode_problem(batch, keys), page); };
  for (int page : {0, 1, 16, 64, 256})
    for (int batch : {17, 24, 33})  // 136 to 264 CTAs
      for (int keys : {65, 128, 512}) {
        INFO("page " << page << " B" << batch << " Sk " << keys);
        const auto plan = plan_decode(page > 0 ? paged(batch, keys, page) : decode_problem(batch, keys), kSm90a, 132);
        CHECK(shape(plan) == Shape{64, 4, 1, 2});
        CHECK(plan.splits.num_splits == 1);
        CHECK(validate(plan.split).empty());
        CHECK(flashjit::ctas_per_sm(plan.split) == 2);
      }
  CHECK(shape(plan_decode(paged(16, 128, 16), kSm90a, 132)) == Shape{128, 4, 1, 3});  // 128 CTAs: the 200 KB kernel
  // Beyond two CTAs per SM: two column groups, in three stages over more than 128 keys; d80: key slices.
  CHECK(shape(plan_decode(paged(34, 128, 16), kSm90a, 132)) == Shape{32, 2, 2, 2});
  CHECK(shape(plan_decode(paged(34, 512, 1), kSm90a, 132)) == Shape{32, 2, 2, 3});
  CHECK(shape(plan_decode(paged(256, 512, 1), kSm90a, 132)) == Shape{32, 2, 2, 2});  // 2048 CTAs
  auto d80 = paged(34, 300, 16);
  d80.head_dim = 80;
  CHECK(shape(plan_decode(d80, kSm90a, 132)) == Shape{32, 2, 1, 3});
  CHECK(std::get<2>(shape(plan_decode(paged(24, 513, 16), kSm90a, 132))) == 1);  // a longer cache
  auto d64 = paged(24, 128, 16);
  d64.head_dim = 64;
  CHECK(std::get<2>(shape(plan_decode(d64, kSm90a, 132))) == 1);
}

TEST_CASE("decode plan: longer contiguous d128 caches over more CTAs than SMs take 64-key tiles in two stages, "
          "three up to one CTA per SM",
          "[dispatch][decode]") {
  using flashjit::dispatch::plan_decode;
  using Shape = std::tuple<int, int, int>;
  auto shape = [](const flashjit::dispatch::DecodePlan& plan) {
    return Shape{plan.split.block_n, plan.split.warps, plan.split.stages};
  };
  for (int batch : {17, 20, 33, 64, 256})  // 136 to 2048 CTAs
    for (int keys : {513, 8192, 32768}) {
      INFO("B" << batch << " Sk " << keys);
      const auto plan = plan_decode(decode_problem(batch, keys), kSm90a, 132);
      CHECK(shape(plan) == Shape{64, 4, 2});
      CHECK(flashjit::ctas_per_sm(plan.split) == 2);
      CHECK(validate(plan.split).empty());
    }
  CHECK(shape(plan_decode(decode_problem(16, 8192), kSm90a, 132)) == Shape{64, 4, 3});  // 128 CTAs
  CHECK(shape(plan_decode(decode_problem(1, 32768), kSm90a, 132)) == Shape{64, 4, 3});  // split
  CHECK(shape(plan_decode(decode_problem(20, 8192, 1, 1000), kSm90a, 132)) == Shape{64, 4, 2});  // a long window
  // Not measured, unchanged: two m-tiles (q_len 8, 32 rows), other head dims, sm_80.
  CHECK(shape(plan_decode(decode_problem(20, 8192, 8), kSm90a, 132)) == Shape{64, 4, 3});
  auto d64 = decode_problem(20, 8192);
  d64.head_dim = 64;
  CHECK(plan_decode(d64, kSm90a, 132).split.stages == 3);
  CHECK(plan_decode(decode_problem(20, 8192), flashjit::Arch{80, false}, 108).split.stages != 2);
}

TEST_CASE("decode plan: paged caches between one and two CTAs per SM take 64-key tiles in two stages, two CTAs per "
          "SM, unsplit",
          "[dispatch][decode]") {
  using flashjit::dispatch::plan_decode;
  auto paged = [](int batch, int keys, int page) { return with_pages(decode_problem(batch, keys), page); };
  for (int page : {1, 16, 64, 256})
    for (int batch : {17, 20, 24, 33})  // 136 to 264 CTAs
      for (int keys : {513, 8192, 32768}) {
        INFO("page " << page << " B" << batch << " Sk " << keys);
        const auto plan = plan_decode(paged(batch, keys, page), kSm90a, 132);
        CHECK(plan.split.block_n == 64);
        CHECK(plan.split.warps == 4);
        CHECK(plan.split.stages == 2);
        CHECK(flashjit::ctas_per_sm(plan.split) == 2);
        CHECK(plan.splits.num_splits == 1);
        CHECK(validate(plan.split).empty());
      }
  // Up to one CTA per SM and beyond two: 128-key tiles (one 200 KB CTA per SM).
  CHECK(plan_decode(paged(16, 8192, 16), kSm90a, 132).split.block_n == 128);
  CHECK(plan_decode(paged(34, 8192, 16), kSm90a, 132).split.block_n == 128);
  // d64: the 128-key tiles' CTAs already fit two per SM; d96 (also 200 KB CTAs) and two m-tiles (q_len 8): not
  // measured, unchanged.
  auto d64 = paged(20, 8192, 16);
  d64.head_dim = 64;
  CHECK(plan_decode(d64, kSm90a, 132).split.block_n == 128);
  auto d96 = paged(20, 8192, 16);
  d96.head_dim = 96;
  CHECK(plan_decode(d96, kSm90a, 132).split.block_n == 128);
  CHECK(flashjit::ctas_per_sm(plan_decode(d96, kSm90a, 132).split) == 1);
  auto rows32 = paged(20, 8192, 16);
  rows32.q_len = 8;  // group 4 x 8 tokens
  CHECK(plan_decode(rows32, kSm90a, 132).split.rows == 32);
  CHECK(plan_decode(rows32, kSm90a, 132).split.block_n == 128);
}

TEST_CASE("decode plan: every planned split kernel passes validate(), on the 99 KB archs too",
          "[dispatch][decode]") {
  using flashjit::dispatch::plan_decode;
  int checked = 0;
  const flashjit::Arch archs[] = {kSm90a,
                                  flashjit::Arch{80, false},
                                  flashjit::Arch{86, false},
                                  flashjit::Arch{89, false},
                                  flashjit::Arch{100, true},
                                  flashjit::Arch{120, false}};
  // Forced cluster merges too: a cluster-merge kernel only where its buffer fits the CTA's shared memory (the
  // stages were sized without it: on sm_120 several would not).
  for (const flashjit::Arch arch : archs)
    for (auto merge : {flashjit::SplitMerge::automatic, flashjit::SplitMerge::cluster})
    for (int d : {64, 96, 128, 256})
      for (int page : {0, 1, 16, 256})
        for (int group : {1, 3, 4, 8})
          for (int q_len = 1; q_len <= 16; ++q_len)
            for (auto [batch, keys] : {std::pair{1, 32768}, {64, 300}, {100, 5000}, {300, 5000}})
              for (int window : {-1, 100}) {
                auto p = decode_problem(batch, keys, q_len, window);
                if (page > 0) p = with_pages(p, page);
                p.heads_kv = 2, p.heads_q = 2 * group, p.head_dim = d, p.split_merge = merge;
                const auto plan = plan_decode(p, arch, arch.sm >= 90 ? 132 : 108);
                INFO(flashjit::readable_name(plan.split));
                const auto issues = validate(plan.split);
                // d256 with 112 or 128 rows on sm_80: Q (rows x 512 bytes) and the stages fit 163 KB because
                // one key group (one warp per m-tile) keeps no fp32 merge buffer (it took 132 KB at 128 rows).
                CHECK(issues.empty());
                if (arch.sm == 80 && d == 256 && plan.split.rows == 128) CHECK(plan.split.warps == 8);
                CHECK(plan.splits.keys_per_split % flashjit::dispatch::decode_split_granule(
                          {0, 0, 0, 0, page, plan.split.block_n, 1}) == 0);
                ++checked;
              }
  CHECK(checked == 6 * 2 * 4 * 4 * 4 * 16 * 4 * 2);
  // A forced cluster on sm_120 where the buffer does not fit (d128, 64 rows, 16-token pages): the combine
  // kernel's plan, which decode then refuses (the runtime's check).
  auto p = with_pages(decode_problem(1, 32768, 8), 16);
  p.heads_q = 64, p.split_merge = flashjit::SplitMerge::cluster;
  const auto plan = plan_decode(p, flashjit::Arch{120, false}, 132);
  CHECK(plan.splits.num_splits > 1);
  CHECK_FALSE(plan.split.cluster_merge);
  auto with_cluster = plan.split;
  with_cluster.cluster_merge = true;
  CHECK_FALSE(validate(with_cluster).empty());
}

TEST_CASE("decode workspace: prepare's reserve covers every smaller batch and every max_seqlen_k",
          "[dispatch][decode]") {
  using flashjit::dispatch::decode_workspace_reserve;
  using flashjit::dispatch::plan_decode;
  for (const flashjit::Arch arch : {kSm90a, flashjit::Arch{80, false}})
    for (auto merge : {flashjit::SplitMerge::automatic, flashjit::SplitMerge::combine_kernel})
    for (int sms : {16, 78, 108, 132})
      for (auto [heads_q, q_len, layout] :
           {std::tuple{32, 1, 0}, {32, 1, 16}, {64, 2, 0}, {64, 4, 0}, {64, 8, 0}, {64, 16, 0}}) {
        auto prepared = decode_problem(64, 131072, q_len);
        prepared.heads_q = heads_q, prepared.split_merge = merge;
        auto paged = [&](flashjit::DecodeProblem& p) {
          if (layout == 0) return;
          p.layout = flashjit::KvLayout::paged, p.page_size = layout;
          p.max_pages_per_seq = (p.max_seqlen_k + layout - 1) / layout, p.num_pages = p.batch * p.max_pages_per_seq;
        };
        paged(prepared);
        const std::size_t reserve = decode_workspace_reserve(prepared, arch, sms);
        for (int batch = 1; batch <= 64; ++batch)
          for (int keys : {128, 256, 512, 600, 768, 1000, 4096, 8192, 24320, 32768, 131072, 1 << 20}) {
            auto p = decode_problem(batch, keys, q_len);
            p.heads_q = heads_q, p.split_merge = merge;
            paged(p);
            const auto plan = plan_decode(p, arch, sms);
            INFO(arch.to_string() << " sms " << sms << " Hq " << heads_q << " q_len " << q_len << " page " << layout
                                  << " B" << batch << " Sk " << keys << ": " << plan.splits.num_splits << " splits");
            REQUIRE(plan.workspace_bytes <= reserve);
          }
      }
  // Forced splits: the problem's own (its batch needs the most).
  auto forced = decode_problem(4, 1000);
  forced.num_splits = 7;
  CHECK(decode_workspace_reserve(forced, kSm90a, 132) == plan_decode(forced, kSm90a, 132).workspace_bytes);
  CHECK(decode_workspace_reserve(forced, kSm90a, 132) > 0);
  // A GPU where nothing can split (8 KV heads on one SM): nothing reserved.
  CHECK(decode_workspace_reserve(decode_problem(4, 1 << 20), kSm90a, 1) == 0);
  // A forced cluster merge on sm_90: nothing, whatever the batch and length.
  auto cluster = decode_problem(64, 131072);
  cluster.split_merge = flashjit::SplitMerge::cluster;
  CHECK(decode_workspace_reserve(cluster, kSm90a, 132) == 0);
}

TEST_CASE("decode prepare: the kernels loaded cover every smaller batch and every max_seqlen_k", "[dispatch][decode]") {
  using flashjit::dispatch::decode_prepare_kernels;
  using flashjit::dispatch::plan_decode;
  int checked = 0;
  using flashjit::SplitMerge;
  for (const flashjit::Arch arch : {kSm90a, flashjit::Arch{80, false}, flashjit::Arch{100, true}})
    for (SplitMerge merge : {SplitMerge::automatic, SplitMerge::combine_kernel, SplitMerge::cluster})
    for (int forced : {0, 3})
    for (int d : {64, 128})
      for (int page : {0, 1, 16})
        for (int window : {-1, 40})
          for (int sms : {132, 100}) {
            auto p = decode_problem(70, 1 << 20, 1, window);
            p.head_dim = d, p.split_merge = merge, p.num_splits = forced;
            if (page > 0) p.layout = flashjit::KvLayout::paged, p.page_size = page;
            const auto kernels = decode_prepare_kernels(p, arch, sms);
            INFO("sm_" << arch.sm << " merge " << flashjit::to_string(merge) << " splits " << forced << " d" << d
                       << " page " << page << " window " << window << " SMs " << sms);
            for (std::size_t i = 0; i < kernels.size(); ++i)
              for (std::size_t j = 0; j < i; ++j) CHECK_FALSE(kernels[i] == kernels[j]);
            for (int batch = 1; batch <= p.batch; ++batch)
              for (int keys : {1, 2, 31, 32, 33, 50, 64, 65, 100, 128, 129, 300, 512, 513, 1000, 4096, 123457}) {
                auto q = p;
                q.batch = batch, q.max_seqlen_k = keys;
                const auto split = plan_decode(q, arch, sms).split;
                INFO("B" << batch << " Sk " << keys << ": " << flashjit::readable_name(split));
                CHECK(std::find(kernels.begin(), kernels.end(), split) != kernels.end());
                ++checked;
              }
          }
  CHECK(checked == 3 * 3 * 2 * 2 * 3 * 2 * 2 * 70 * 17);
  // A batch of one on sm_90: the column-group kernels of 32 and 64 keys (one tile: never split) and the
  // long-cache kernel; with a forced cluster merge also the long-cache kernel's cluster variant (which one
  // runs depends on the split count as well), but not below sm_90.
  const auto kernels = decode_prepare_kernels(decode_problem(1, 32768), kSm90a, 132);
  CHECK(kernels.size() == 3);
  for (const auto& c : kernels) CHECK_FALSE(c.cluster_merge);
  auto cluster = decode_problem(1, 32768);
  cluster.split_merge = flashjit::SplitMerge::cluster;
  const auto with_cluster = decode_prepare_kernels(cluster, kSm90a, 132);
  CHECK(with_cluster.size() == 4);
  CHECK(std::count_if(with_cluster.begin(), with_cluster.end(), [](const auto& c) { return c.cluster_merge; }) == 1);
  for (const auto& c : decode_prepare_kernels(cluster, flashjit::Arch{80, false}, 132)) CHECK_FALSE(c.cluster_merge);
}
