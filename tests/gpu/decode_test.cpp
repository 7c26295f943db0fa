// Decode (split-KV attention against a KV cache) and merge of attention states, against float64 CPU
// references on the same bf16/fp16-rounded inputs: fresh random data per case, poisoned outputs with guards
// behind them, unused cache slots and pages full of garbage (huge, inf, NaN), shuffled page tables, ragged
// lengths (including sequences shorter than q_len and empty ones), contiguous and paged caches (pages of 1,
// 8, 16, 32, 64, 256 tokens), q_len 1 / 4 / 16, GQA groups 1 / 4 / 8, head dims 64 / 128 / 256, bf16 and
// fp16, sliding windows, chunked-causal masks, LSE on and off, forced and planned split counts (empty trailing
// splits) merged by the combine kernel or in thread-block clusters, caller and runtime-owned workspaces, strided
// q / o / cache, many short sequences, chains of calls each reading the one before's output, inputs written by a
// kernel that lets the decode (or merge) start before it ends, FlashInfer's CSR page tables; merges of 1, 2, 3, 5 and
// 32 states.
//
// Only these: flashjit_gpu_tests "[decode],[merge]"
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "config/half.hpp"
#include "decode_harness.hpp"
#include "dispatch/decode_heuristics.hpp"
#include "harness.hpp"
#include "late_writer.hpp"
#include "support/catch.hpp"

using namespace flashjit;
using namespace flashjit::test;

namespace {

SeedSequence fresh_seed{0xdec0de};

// The split kernel the runtime plans for a shape's problem on device 0, and whether that device is the one the
// planner's short- and paged-cache rules were measured on (sm_90 with 132 SMs: H100 SXM, H200). Elsewhere the
// tests still check the results, not which kernel produced them.
dispatch::DecodePlan planned_split_plan(const DecodeShape& s) {
  auto device = cuda::device_info(0);
  REQUIRE(device.ok());
  DecodeProblem p;
  p.batch = s.batch(), p.q_len = s.q_len, p.heads_q = s.heads_q, p.heads_kv = s.heads_kv, p.head_dim = s.head_dim;
  p.max_seqlen_k = s.max_seqlen_k();
  p.window_left = s.window_left, p.chunk_size = s.chunk_size, p.num_splits = s.num_splits;
  p.split_merge = s.split_merge;
  p.layout = s.layout, p.page_size = s.layout == KvLayout::paged ? s.page_size : 0;
  // Fake, aligned variant tables: the planner reads only whether they are there.
  p.softcap = s.softcap;
  if (s.alibi) p.alibi_slopes = reinterpret_cast<const float*>(std::uintptr_t{0x1000});
  if (s.sinks) p.sinks = reinterpret_cast<const float*>(std::uintptr_t{0x2000});
  return dispatch::plan_decode(p, device->arch, device->sms);
}
DecodeKernelConfig planned_split(const DecodeShape& s) { return planned_split_plan(s).split; }
bool planner_rules_apply() {
  auto device = cuda::device_info(0);
  return device.ok() && device->arch.sm == 90 && device->sms == 132;
}

enum class Workspace { runtime_owned, caller };
const char* to_string(Workspace w) { return w == Workspace::caller ? "caller workspace" : "runtime workspace"; }

// The O / LSE check of check_sequences, and no stray write (output padding and the guards behind O and LSE
// stay poisoned).
void expect_close(const Shape& out, const std::vector<float>& o, const std::vector<float>& lse,
                  const std::vector<double>& ref_o, const std::vector<double>& ref_lse, double o_tol, double lse_tol,
                  std::int64_t stray_writes) {
  const SequenceCheck r = check_sequences(out, o, lse, ref_o, ref_lse, o_tol, lse_tol);
  INFO("per sequence:\n" << r.summary);
  CHECK(r.failures.empty());
  CHECK(stray_writes == 0);
}

// The decode that just ran on `c` (outputs on the device) against its float64 reference.
void expect_matches_reference(const DecodeCase& c, const DecodeShape& s) {
  std::vector<float> o, lse;
  std::int64_t stray = 0;
  REQUIRE(c.read_outputs(o, lse, stray).ok());
  std::vector<double> ref_o, ref_lse;
  c.reference(ref_o, ref_lse);
  expect_close(s.output_shape(), o, lse, ref_o, ref_lse, tolerance(s.dtype), kLseTolerance, stray);
}

// Runs the case's decode (optionally through a caller workspace sized by decode_workspace_bytes, poisoned,
// with a guard behind it) and checks it against float64.
void check_decode(const DecodeShape& shape, Workspace workspace = Workspace::runtime_owned) {
  ensure_context();
  const std::uint64_t seed = fresh_seed();
  INFO(shape.to_string() << ", " << to_string(workspace) << ", seed " << seed);
  auto c = DecodeCase::make(shape, seed);
  if (!c.ok()) FAIL(c.error().to_string());
  DecodeProblem p = c->problem();

  constexpr std::size_t kGuard = 4096;
  cuda::DeviceBuffer ws;
  std::size_t ws_bytes = 0;
  if (workspace == Workspace::caller) {
    auto bytes = runtime().decode_workspace_bytes(p);
    if (!bytes.ok()) FAIL(bytes.error().to_string());
    ws_bytes = *bytes;
  }
  INFO("caller workspace bytes " << ws_bytes);
  if (workspace == Workspace::caller) {
    const bool cluster = planned_split(shape).cluster_merge;
    if (shape.num_splits == 1 || cluster) CHECK(ws_bytes == 0);  // a cluster merges in shared memory
    if (shape.num_splits > 1 && !cluster) {
      // At least the fp32 partial O and LSE of every split (params.cuh).
      const std::size_t partials = static_cast<std::size_t>(shape.num_splits) * shape.batch() * shape.q_len *
                                   shape.heads_q * (shape.head_dim + 1) * 4;
      CHECK(ws_bytes >= partials);
    }
    if (ws_bytes > 0) {
      auto buf = cuda::DeviceBuffer::allocate(ws_bytes + kGuard);
      REQUIRE(buf.ok());
      ws = std::move(*buf);
      REQUIRE(ws.fill_bytes(0xff).ok());  // NaN: nothing may depend on the workspace's previous contents
      p.workspace = ws.get(), p.workspace_bytes = ws_bytes;
    }
  }
  auto st = runtime().decode(p);
  if (!st.ok()) FAIL(st.error().to_string());
  expect_matches_reference(*c, shape);
  if (ws_bytes > 0) {
    std::vector<unsigned char> bytes(ws_bytes + kGuard);
    REQUIRE(ws.download(bytes.data(), bytes.size()).ok());
    std::size_t touched = 0;
    for (std::size_t i = ws_bytes; i < bytes.size(); ++i) touched += bytes[i] != 0xff;
    INFO("workspace guard bytes written: " << touched);
    CHECK(touched == 0);  // the kernels stay inside workspace_bytes
  }
}

struct Layout {
  KvLayout kind;
  int page_size;
};
constexpr Layout kContiguous{KvLayout::contiguous, 0};
// Every regime of templates/decode/kv_loads.cuh: per-row gather (1, 8), one page-table read per page with
// several pages per tile (16, 32), one per tile (64), a tile inside a larger page (256).
constexpr Layout kPaged1{KvLayout::paged, 1}, kPaged8{KvLayout::paged, 8}, kPaged16{KvLayout::paged, 16},
    kPaged32{KvLayout::paged, 32}, kPaged64{KvLayout::paged, 64}, kPaged256{KvLayout::paged, 256};

DecodeShape make_shape(DType dtype, int head_dim, int group, int q_len, std::vector<int> seqlens, Layout layout) {
  DecodeShape s;
  s.dtype = dtype, s.head_dim = head_dim, s.q_len = q_len, s.seqlens = std::move(seqlens);
  // Group 1 with an odd head count; groups 4 and 8 over two KV heads.
  s.heads_kv = group == 1 ? 3 : 2;
  s.heads_q = s.heads_kv * group;
  s.layout = layout.kind;
  if (layout.kind == KvLayout::paged) s.page_size = layout.page_size;
  return s;
}

bool all_poisoned(const std::vector<unsigned char>& bytes) {
  for (unsigned char b : bytes)
    if (b != 0xff) return false;
  return true;
}

}  // namespace

TEST_CASE("decode: ragged batches on contiguous and paged caches match float64", "[decode][gpu]") {
  // Every layout meets every (group, q_len) pair; every head dim meets every group across the layouts.
  const int layout_index = GENERATE(0, 1, 2, 3, 4, 5, 6);
  const DType dtype = GENERATE(DType::bf16, DType::fp16);
  const int hd_index = GENERATE(0, 1, 2);
  const Layout layouts[] = {kContiguous, kPaged1, kPaged8, kPaged16, kPaged32, kPaged64, kPaged256};
  const int head_dims[] = {64, 128, 256}, groups[] = {1, 4, 8};
  const int i = (dtype == DType::fp16 ? 3 : 0) + hd_index;
  const std::vector<int> ragged[] = {
      {1, 7, 300, 4097}, {300, 4097, 7, 1, 64}, {7, 1, 4097, 300}, {2, 129, 1000, 65, 3}};
  DecodeShape s = make_shape(dtype, head_dims[hd_index], groups[(hd_index + layout_index) % 3], i < 3 ? 1 : 4,
                             ragged[(layout_index + i) % 4], layouts[layout_index]);
  s.with_lse = (layout_index + i) % 5 != 4;
  check_decode(s);
}

TEST_CASE("decode: at most 64 keys in one tile (four column groups up to 32 keys, key slices beyond) match float64",
          "[decode][gpu]") {
  // Column groups: every warp computes the whole tile's scores and a quarter of O's columns, writing its rows'
  // columns from registers (the LSE from the first group); splits write the same rows' partials. Key slices: the
  // four warps' states of one 64-key tile merged through shared memory.
  struct Run {
    int head_dim, group, q_len, max_keys, splits, window;
    Layout layout;
  };
  const Run run = GENERATE(Run{128, 4, 1, 64, 0, -1, kContiguous}, Run{128, 4, 1, 32, 2, -1, kContiguous},
                           Run{128, 8, 2, 64, 3, 0, kContiguous}, Run{128, 16, 1, 32, 0, 5, kPaged1},
                           Run{64, 4, 1, 64, 2, -1, kPaged16}, Run{64, 8, 1, 32, 0, 3, kContiguous},
                           Run{128, 4, 1, 64, 0, -1, kPaged64});
  std::vector<int> lens(24);
  for (int b = 0; b < 24; ++b) lens[b] = (b * 29) % (run.max_keys + 1);  // 0 to max_keys keys
  lens[1] = run.max_keys;
  DecodeShape s = make_shape(run.group == 16 ? DType::fp16 : DType::bf16, run.head_dim, run.group, run.q_len, lens,
                             run.layout);
  s.num_splits = run.splits, s.window_left = run.window;
  if (planner_rules_apply()) {
    const DecodeKernelConfig split = planned_split(s);
    CHECK(split.column_groups == (run.max_keys <= 32 ? 4 : 1));
    CHECK(split.block_n == (run.max_keys <= 32 ? 32 : 64));
    CHECK(split.stages == 2);
  }
  check_decode(s);
}

TEST_CASE("decode: many short sequences (one warp for contiguous d128, two column groups else) match float64",
          "[decode][gpu]") {
  const Layout layout = GENERATE(kContiguous, kPaged1, kPaged16, kPaged64);
  const int head_dim = GENERATE(64, 128);
  const int splits = GENERATE(0, 2);
  // 140 sequences of 0 to 300 keys over 2 KV heads: 280 CTAs, more than two per SM of an H200 (column groups:
  // three stages, more than 128 keys).
  std::vector<int> lens(140);
  for (int b = 0; b < 140; ++b) lens[b] = (b * 37) % 301;
  DecodeShape s = make_shape(head_dim == 64 ? DType::fp16 : DType::bf16, head_dim, 4, 1, lens, layout);
  s.num_splits = splits;
  if (planner_rules_apply()) {
    const DecodeKernelConfig split = planned_split(s);
    if (layout.kind == KvLayout::contiguous && head_dim == 128) {
      CHECK(split.warps == 1);
    } else {
      CHECK(split.column_groups == 2);
      CHECK(split.stages == 3);
    }
  }
  check_decode(s);
}

TEST_CASE("decode: caches over one to two CTAs per SM (64-key tiles in two stages, warps on their own key slices) "
          "match float64", "[decode][gpu]") {
  // Over 2 KV heads: 100 sequences of 0 to 512 keys (200 CTAs; the short-cache rule, up to eight tiles;
  // contiguous and on 1-, 16- and 64-token pages) and 80 of 0 to 2000 keys (160 CTAs, up to 32 tiles; paged
  // caches take these instead of their 128-key tiles, so that two CTAs fit an SM). Every warp copies and reads
  // only its 16-key slice of a tile (1-token pages gather, a 16-token page is one slice, 64- and 256-token pages
  // span slices and tiles); with forced splits the same kernel writes partials.
  struct Run {
    int sequences, max_keys;
    Layout layout;
  };
  const Run run = GENERATE(Run{100, 512, kContiguous}, Run{100, 512, kPaged1}, Run{100, 512, kPaged16},
                           Run{100, 512, kPaged64}, Run{80, 2000, kContiguous}, Run{80, 2000, kPaged1},
                           Run{80, 2000, kPaged16}, Run{80, 2000, kPaged64}, Run{80, 2000, kPaged256});
  const int splits = GENERATE(0, 3);
  std::vector<int> lens(run.sequences);
  for (int b = 0; b < run.sequences; ++b) lens[b] = (b * 389) % (run.max_keys + 1);
  lens[3] = run.max_keys;
  DecodeShape s = make_shape(DType::bf16, 128, 4, 1, lens, run.layout);
  s.num_splits = splits;
  if (planner_rules_apply()) {
    const DecodeKernelConfig split = planned_split(s);
    CHECK(split.block_n == 64);
    CHECK(split.warps == 4);
    CHECK(split.column_groups == 1);
    CHECK(split.stages == 2);
  }
  check_decode(s);
}

TEST_CASE("decode: d256 with 112 and 128 rows (one warp per m-tile, no merge buffer) matches float64",
          "[decode][gpu]") {
  // The largest Q tiles: shared memory holds Q and the K/V stages only (the one-key-group epilogue writes
  // from registers), with and without splits, contiguous and paged.
  const bool paged = GENERATE(false, true);
  const int q_len = GENERATE(14, 16);
  DecodeShape s = make_shape(paged ? DType::fp16 : DType::bf16, 256, 8, q_len, {16, 7, 300, 1000},
                             paged ? kPaged16 : kContiguous);
  s.num_splits = paged ? 0 : 3;
  check_decode(s);
}

TEST_CASE("decode: odd m-tile counts (48, 80, 112 rows) and head dim 96, with splits, match float64",
          "[decode][gpu]") {
  // Three, five and seven warps (the K/V copies use a power of two of rows per pass, the other threads
  // idle), and twelve 16-byte chunks per row (four threads per row; the combine kernel's rounds of 16).
  struct Run {
    int group, q_len, head_dim;
    Layout layout;
    int splits;
  };
  const Run run = GENERATE(Run{4, 12, 128, kContiguous, 0}, Run{4, 12, 64, kPaged16, 2},
                           Run{8, 10, 128, kPaged16, 0}, Run{8, 10, 64, kContiguous, 3},
                           Run{8, 14, 128, kContiguous, 2}, Run{8, 14, 128, kPaged64, 0},
                           Run{4, 1, 96, kContiguous, 3}, Run{4, 4, 96, kPaged16, 2});
  DecodeShape s = make_shape(DType::bf16, run.head_dim, run.group, run.q_len, {1, 7, 300, 1000}, run.layout);
  s.num_splits = run.splits;
  check_decode(s);
}

TEST_CASE("decode: sliding window (window_left 100, 0 and wider than the cache) matches float64",
          "[decode][gpu]") {
  struct Run {
    int window;
    Layout layout;
    int splits;
  };
  const Run run = GENERATE(Run{100, kContiguous, 0}, Run{100, kContiguous, 1}, Run{100, kContiguous, 2},
                           Run{100, kContiguous, 7}, Run{100, kPaged16, 0}, Run{100, kPaged16, 1},
                           Run{100, kPaged16, 2}, Run{100, kPaged16, 7}, Run{100, kPaged256, 0},
                           Run{100, kPaged256, 1}, Run{100, kPaged256, 2}, Run{100, kPaged256, 7},
                           Run{0, kContiguous, 0}, Run{0, kPaged64, 7}, Run{5000, kContiguous, 0},
                           Run{5000, kPaged64, 7});
  // 4071 and 231: the first visible key of the first new token (a - 100) is the last of a 64-key tile, so
  // a split range that starts at that tile must still reach a + q_len - 1; 104: the window starts at key 0.
  DecodeShape s = make_shape(run.layout.page_size == 256 ? DType::fp16 : DType::bf16, 128, 4, 4,
                             {1, 7, 104, 231, 300, 4071, 4097}, run.layout);
  s.window_left = run.window;
  s.num_splits = run.splits;
  check_decode(s);
}

TEST_CASE("decode: chunked causal (chunk_size 1, 64, 100, 300 and larger than the cache) matches float64",
          "[decode][gpu]") {
  // Token a sees keys floor(a / chunk) * chunk .. a. Every chunk size meets q_len 1, 4 and 16, a contiguous
  // cache and 16- and 1-token pages, forced splits (1, 3) and the planner's, bf16 and fp16.
  struct Run {
    int chunk, q_len;
    Layout layout;
    int splits;
    DType dtype;
  };
  constexpr DType bf = DType::bf16, fp = DType::fp16;
  const Run run = GENERATE(
      Run{1, 1, kContiguous, 0, bf}, Run{1, 4, kPaged16, 3, fp}, Run{1, 16, kPaged1, 1, bf},
      Run{64, 1, kPaged16, 0, fp}, Run{64, 4, kContiguous, 3, bf}, Run{64, 16, kContiguous, 0, fp},
      Run{64, 4, kPaged1, 1, bf}, Run{100, 4, kContiguous, 0, bf}, Run{100, 4, kContiguous, 1, fp},
      Run{100, 4, kContiguous, 3, bf}, Run{100, 4, kPaged16, 0, fp}, Run{100, 4, kPaged16, 1, bf},
      Run{100, 4, kPaged16, 3, fp}, Run{100, 16, kPaged16, 3, bf}, Run{100, 16, kContiguous, 1, fp},
      Run{100, 1, kPaged1, 3, fp}, Run{100, 1, kPaged1, 0, bf}, Run{300, 1, kContiguous, 3, fp},
      Run{300, 4, kPaged1, 0, fp}, Run{300, 16, kPaged16, 0, bf}, Run{300, 4, kPaged16, 1, bf},
      Run{5000, 4, kContiguous, 0, bf}, Run{5000, 16, kPaged16, 3, fp}, Run{5000, 1, kPaged1, 1, bf});
  // The new tokens of one sequence (one CTA's rows) straddle a chunk boundary: 66 (positions 62..65 with
  // q_len 4, 50..65 with 16: chunk 64), 102 and 1010 (98..101, 994..1009: chunk 100), 302 (298..301: chunk 300),
  // 4097 (4081..4096 with q_len 16: chunk 64); 1 is shorter than q_len 4 and 16 (rows without a key).
  DecodeShape s = make_shape(run.dtype, 128, 4, run.q_len, {1, 17, 66, 102, 302, 1000, 1010, 4097}, run.layout);
  s.chunk_size = run.chunk;
  s.num_splits = run.splits;
  INFO("chunk_size " << run.chunk);
  CHECK(planned_split(s).mask == MaskKind::chunked_causal);
  if (run.chunk == 1 || run.chunk == 5000) {
    // The reference itself: a chunk of one key is the token's own value; a chunk longer than the cache is causal.
    DecodeImage image;
    const DecodeCase h = DecodeCase::host_only(s, 7, nullptr, image);
    std::vector<double> ref_o, ref_lse, causal_o, causal_lse;
    h.reference(ref_o, ref_lse);
    DecodeShape causal = s;
    causal.chunk_size = 0;
    reference_decode(causal, h.q(), h.kv(), causal_o, causal_lse);
    if (run.chunk == 5000) {
      CHECK(ref_o == causal_o);
      CHECK(ref_lse == causal_lse);
    } else {
      double worst = 0;
      for (int b = 0; b < s.batch(); ++b)
        for (int t = 0; t < s.q_len; ++t) {
          const int a = s.seqlens[b] - s.q_len + t;
          if (a < 0) continue;
          for (int h_q = 0; h_q < s.heads_q; ++h_q) {
            const float* v = h.kv().v_row(b, a, h_q / s.group(), s.heads_kv, s.head_dim);
            const std::size_t row = ((static_cast<std::size_t>(b) * s.q_len + t) * s.heads_q + h_q) * s.head_dim;
            for (int d = 0; d < s.head_dim; ++d) worst = std::max(worst, std::abs(ref_o[row + d] - v[d]));
          }
        }
      CHECK(worst < 1e-12);
      CHECK(ref_o != causal_o);
    }
  }
  check_decode(s, run.splits == 3 && run.layout.kind == KvLayout::paged ? Workspace::caller : Workspace::runtime_owned);
}

TEST_CASE("decode: forced split counts (1, 2, 7, 32) and the planner's, with caller and runtime workspaces",
          "[decode][gpu]") {
  const int splits = GENERATE(1, 2, 7, 32, 0);
  const Workspace workspace = GENERATE(Workspace::runtime_owned, Workspace::caller);
  const bool paged = GENERATE(false, true);
  // Contiguous: the 4097-key sequence fills the splits, the short ones leave trailing splits empty. Paged:
  // a host bound 300 keys above the longest sequence, so every sequence has empty trailing splits, and an
  // empty sequence.
  DecodeShape s = paged ? make_shape(DType::bf16, 64, 8, 4, {3, 40, 0, 100, 700}, kPaged64)
                        : make_shape(DType::fp16, 128, 8, 4, {1, 7, 300, 4097}, kContiguous);
  if (paged) s.bound_slack = 300;
  s.num_splits = splits;
  s.with_lse = !(splits == 7 && workspace == Workspace::caller);  // the combine pass without LSE, once per layout
  check_decode(s, workspace);
}

TEST_CASE("decode: head dims 16, 48, 80, 192 and 240 in 3 and 32 splits (combine lanes, merge-buffer swizzle)",
          "[decode][gpu]") {
  // The combine kernel's lane layouts besides d64 / d128 / d256: one column per lane with idle lanes (d16,
  // d48, d80, d240), two-column vectors three to a lane (d192, eight rounds of four states at 32 splits); the
  // key groups' merge buffer at head dims of 16 mod 32 (its one-bit row swizzle) and at d192.
  const int head_dim = GENERATE(16, 48, 80, 192, 240);
  const int splits = GENERATE(3, 32);
  DecodeShape s = make_shape(head_dim % 32 == 0 ? DType::bf16 : DType::fp16, head_dim, 4, 2, {1, 700, 3000},
                             head_dim == 48 || head_dim == 192 ? kPaged16 : kContiguous);
  s.num_splits = splits;
  s.with_lse = splits == 3;
  check_decode(s);
}

TEST_CASE("decode: splits merged in thread-block clusters and by the combine kernel match float64",
          "[decode][gpu]") {
  // Each merge for 2, 7 and 16 forced splits (the largest cluster) and the planner's count: ragged lengths
  // (the short sequences' trailing splits empty, one sequence without keys), every kernel shape the cluster
  // buffer meets (key groups merged in shared memory first; one key group or column groups writing from
  // registers; several m-tiles; d256), contiguous and paged caches, windows, LSE on and off.
  ensure_context();
  auto device = cuda::device_info(0);
  REQUIRE(device.ok());
  const SplitMerge merge = GENERATE(SplitMerge::combine_kernel, SplitMerge::cluster);
  const int splits = GENERATE(2, 7, 16, 0);
  struct Run {
    int head_dim, group, q_len;
    Layout layout;
    int window;
    std::vector<int> lens;
  };
  const Run run = GENERATE(Run{128, 4, 1, kContiguous, -1, {4097, 1, 0, 300}}, Run{64, 8, 4, kPaged16, -1, {7, 1000}},
                           Run{128, 8, 8, kContiguous, 200, {2000, 5}}, Run{256, 4, 1, kPaged64, -1, {3000}},
                           Run{128, 1, 1, kPaged1, -1, {40, 17}}, Run{128, 4, 1, kContiguous, -1, {50, 64}},
                           Run{256, 8, 16, kContiguous, -1, {300, 40}});  // 128 rows: beyond the K/V stages
  DecodeShape s = make_shape(run.group == 8 ? DType::fp16 : DType::bf16, run.head_dim, run.group, run.q_len, run.lens,
                             run.layout);
  s.num_splits = splits, s.split_merge = merge, s.window_left = run.window;
  s.with_lse = splits != 7 || run.head_dim != 128;
  if (merge == SplitMerge::cluster && device->arch.sm < 90) {
    // Below sm_90 a forced cluster merge of a problem that splits is an error, not a silent fallback.
    auto c = DecodeCase::make(s, fresh_seed());
    REQUIRE(c.ok());
    if (dispatch::plan_decode(c->problem(), device->arch, device->sms).splits.num_splits > 1) {
      CHECK_FALSE(runtime().decode(c->problem()).ok());
      CHECK_FALSE(runtime().decode_workspace_bytes(c->problem()).ok());
      return;
    }
  }
  if (splits > 1 && device->arch.sm >= 90)
    CHECK(planned_split(s).cluster_merge == (merge == SplitMerge::cluster));
  check_decode(s);
}

TEST_CASE("decode: variants (softcap, ALiBi, sinks) match float64 in one split, the combine kernel and clusters",
          "[decode][variant][gpu]") {
  // Sinks join each row once, where its splits merge: in the split kernel (one split; key groups merged in shared
  // memory or not), the combine kernel or the cluster; sequences without keys get O = 0 and LSE = the sink.
  ensure_context();
  struct Variant {
    float softcap;
    int alibi;
    bool sinks;
  };
  const Variant v = GENERATE(Variant{0.7f, 0, false}, Variant{0.f, 2, false}, Variant{0.f, 0, true},
                             Variant{0.9f, 1, true});
  const int splits = GENERATE(1, 5, 0);
  const SplitMerge merge = GENERATE(SplitMerge::combine_kernel, SplitMerge::cluster);
  struct Run {
    int head_dim, group, q_len;
    Layout layout;
    int window;
    std::vector<int> lens;
  };
  const Run run = GENERATE(Run{128, 4, 1, kContiguous, -1, {4097, 1, 0, 300}}, Run{64, 8, 4, kPaged16, -1, {7, 1000}},
                           Run{128, 8, 8, kContiguous, 200, {2000, 5}}, Run{128, 4, 1, kContiguous, -1, {50, 64}});
  DecodeShape s = make_shape(run.group == 8 ? DType::fp16 : DType::bf16, run.head_dim, run.group, run.q_len, run.lens,
                             run.layout);
  s.num_splits = splits, s.split_merge = merge, s.window_left = run.window;
  s.softcap = v.softcap, s.alibi = v.alibi, s.sinks = v.sinks;
  auto device = cuda::device_info(0);
  REQUIRE(device.ok());
  if (merge == SplitMerge::cluster && device->arch.sm < 90) return;  // refused below sm_90 (the test above)
  const dispatch::DecodePlan plan = planned_split_plan(s);
  CHECK(plan.split.softcap == (v.softcap > 0));
  CHECK(plan.split.alibi == (v.alibi != 0));
  CHECK(plan.split.sinks == v.sinks);
  CHECK(plan.combine.sinks == v.sinks);
  check_decode(s);
}

TEST_CASE("decode: B5-B8 in two and three splits (clusters of two or three fit the H200) match float64, either merge",
          "[decode][gpu]") {
  // 8 KV heads: B8 in 2 splits (128 CTAs, contiguous and 16-token pages), B5 in 3 (120 CTAs); ragged, with an
  // empty sequence; through a caller workspace, which the cluster does not need. The planner merges them in
  // the combine kernel; a cluster where forced (sm_90+).
  ensure_context();
  auto device = cuda::device_info(0);
  REQUIRE(device.ok());
  struct Run {
    std::vector<int> lens;
    Layout layout;
    int splits;
  };
  const Run run = GENERATE(Run{{4096, 4000, 17, 0, 4096, 1, 2500, 4096}, kContiguous, 2},
                           Run{{2048, 5, 2048, 1999, 0, 2048, 700, 2048}, kPaged16, 2},
                           Run{{4096, 3000, 1, 0, 4096}, kContiguous, 3});
  const SplitMerge merge = GENERATE(SplitMerge::automatic, SplitMerge::cluster);
  if (merge == SplitMerge::cluster && device->arch.sm < 90) return;  // refused there (the test above)
  DecodeShape s = make_shape(DType::bf16, 128, 4, 1, run.lens, run.layout);
  s.heads_kv = 8, s.heads_q = 32, s.split_merge = merge;
  if (planner_rules_apply()) {
    s.split_merge = SplitMerge::automatic;
    CHECK_FALSE(planned_split(s).cluster_merge);
    s.split_merge = merge;
    CHECK(planned_split(s).cluster_merge == (merge == SplitMerge::cluster));
  }
  check_decode(s, Workspace::caller);
}

TEST_CASE("decode: back-to-back calls where each reads the output of the one before and overwrites its input",
          "[decode][gpu]") {
  // Programmatic dependent launch (sm_90) lets each decode launch while the one before it finishes: its
  // kernels must wait before their first global access. Call 2 takes call 1's O as its Q (read after write),
  // call 3 takes call 2's O as Q and writes into call 1's O, which call 2 read (write after read); no
  // synchronization in between, with and without the combine pass in the chain, and with the splits merged in
  // a cluster (sm_90+), whose trigger for the next kernel comes after the merge.
  ensure_context();
  auto device = cuda::device_info(0);
  REQUIRE(device.ok());
  const int splits = GENERATE(1, 3);
  const SplitMerge merge = GENERATE(SplitMerge::combine_kernel, SplitMerge::cluster);
  if (merge == SplitMerge::cluster && device->arch.sm < 90) return;  // refused there
  DecodeShape s = make_shape(DType::bf16, 128, 4, 4, {300, 4097, 7}, kContiguous);
  s.num_splits = splits, s.split_merge = merge;
  if (splits == 3) CHECK(planned_split(s).cluster_merge == (merge == SplitMerge::cluster));
  const std::uint64_t seed = fresh_seed();
  INFO(s.to_string() << ", seed " << seed);
  auto c = DecodeCase::make(s, seed);
  if (!c.ok()) FAIL(c.error().to_string());
  const std::size_t elems = std::size_t(s.batch()) * s.q_len * s.heads_q * s.head_dim;
  auto middle = cuda::DeviceBuffer::allocate(elems * 2);
  REQUIRE(middle.ok());
  REQUIRE(middle->fill_bytes(0xff).ok());

  const DecodeProblem first = c->problem();
  DecodeProblem second = first, third = first;
  second.q = first.o, second.o = middle->get(), second.lse = nullptr;
  third.q = middle->get();
  for (const DecodeProblem* p : std::vector<const DecodeProblem*>{&first, &second, &third}) {
    auto st = runtime().decode(*p);
    if (!st.ok()) FAIL(st.error().to_string());
  }

  std::vector<std::uint16_t> bits(elems);
  REQUIRE(middle->download(bits.data(), bits.size() * 2).ok());  // synchronous: after the whole chain
  std::vector<float> o2(elems);
  for (std::size_t i = 0; i < elems; ++i) o2[i] = from_half_bits(s.dtype, bits[i]);
  // Call 2 against float64 over call 1's reference output rounded to bf16 (the device's own call 1 output
  // is gone: call 3 overwrote it), call 3 against float64 over call 2's output as read back.
  std::vector<double> ref_o, ref_lse;
  reference_decode(s, c->q(), c->kv(), ref_o, ref_lse);
  std::vector<float> q1(elems);
  for (std::size_t i = 0; i < elems; ++i)
    q1[i] = from_half_bits(s.dtype, to_half_bits(s.dtype, static_cast<float>(ref_o[i])));
  reference_decode(s, q1, c->kv(), ref_o, ref_lse);
  expect_close(s.output_shape(), o2, {}, ref_o, ref_lse, tolerance(s.dtype), kLseTolerance, 0);

  std::vector<float> o3, lse3;
  std::int64_t stray = 0;
  REQUIRE(c->read_outputs(o3, lse3, stray).ok());
  reference_decode(s, o2, c->kv(), ref_o, ref_lse);
  expect_close(s.output_shape(), o3, lse3, ref_o, ref_lse, tolerance(s.dtype), kLseTolerance, stray);
}

TEST_CASE("decode: behind a kernel that lets it start early, lengths, page table and Q are read after that "
          "kernel's writes",
          "[decode][gpu]") {
  // Programmatic dependent launch (sm_90): the decode's kernels may start as soon as the kernel before them
  // triggers, so nothing that kernel writes may be read before their griddepcontrol.wait. The writer triggers at
  // once, sleeps 200 µs, then writes the real lengths, page table and Q over stale ones: Q and the table zero
  // (uniform weights, every key from page 0), the lengths zero (empty sequences) or max_seqlen_k (every key of
  // the cache). ptxas hoisted the __ldg of seqlens_k above the wait in 17 of 19 decode kernels: on the H200 this
  // case then failed every contiguous and 16-token-page run.
  ensure_context();
  const Layout layout = GENERATE(kContiguous, kPaged1, kPaged16);
  const int splits = GENERATE(0, 1, 3);
  const bool stale_max = GENERATE(false, true);
  DecodeShape s = make_shape(DType::bf16, 128, 4, 1, {300, 4097, 7, 1000}, layout);
  s.num_splits = splits;
  const std::uint64_t seed = fresh_seed();
  INFO(s.to_string() << ", seed " << seed << ", stale lengths " << (stale_max ? "max_seqlen_k" : "0"));
  auto c = DecodeCase::make(s, seed);
  if (!c.ok()) FAIL(c.error().to_string());
  auto writer = LateWriter::make();
  if (!writer.ok()) FAIL(writer.error().to_string());
  const DecodeProblem p = c->problem();
  // Kernels loaded and workspace reserved now: the decode then launches within microseconds of the writer.
  REQUIRE(runtime().prepare_decode(p).ok());
  const std::vector<int> stale_lengths(s.batch(), stale_max ? p.max_seqlen_k : 0);
  REQUIRE(writer->stage(p.seqlens_k, std::size_t(s.batch()) * 4, stale_lengths.data()).ok());
  if (s.layout == KvLayout::paged)
    REQUIRE(writer->stage(p.page_table, std::size_t(s.batch()) * c->max_pages_per_seq() * 4).ok());
  REQUIRE(writer->stage(p.q, std::size_t(s.batch()) * s.q_len * s.heads_q * s.head_dim * 2).ok());
  REQUIRE(writer->launch(static_cast<CUstream>(p.stream), 200).ok());
  auto st = runtime().decode(p);
  if (!st.ok()) FAIL(st.error().to_string());
  expect_matches_reference(*c, s);
}

TEST_CASE("decode: q_len 16 and sequences shorter than q_len (rows without a key: O = 0, LSE = -inf)",
          "[decode][gpu]") {
  const int splits = GENERATE(0, 1, 3);
  SECTION("q_len 16, group 8: 128 rows per KV head, paged") {
    DecodeShape s = make_shape(DType::bf16, 128, 8, 16, {0, 3, 16, 17, 300, 1000}, kPaged16);
    s.heads_kv = 1, s.heads_q = 8;
    s.num_splits = splits;
    check_decode(s);
  }
  SECTION("q_len 4, lengths 0 to 5, contiguous") {
    DecodeShape s = make_shape(DType::fp16, 64, 4, 4, {0, 1, 2, 3, 4, 5}, kContiguous);
    s.num_splits = splits;
    std::vector<double> ref_o, ref_lse;
    DecodeImage image;
    DecodeCase::host_only(s, 1, nullptr, image).reference(ref_o, ref_lse);
    int empty = 0;
    for (double l : ref_lse) empty += std::isinf(l);
    CHECK(empty == (4 + 3 + 2 + 1) * s.heads_q);  // the reference agrees with decode.hpp's positions
    check_decode(s);
  }
}

TEST_CASE("decode: strided q, o ([B, H, q_len, D] order) and cache, explicit softmax scale", "[decode][gpu]") {
  const Layout layout = GENERATE(kContiguous, kPaged16);
  const int splits = GENERATE(1, 0);
  DecodeShape s = make_shape(DType::bf16, 128, 4, 4, {1, 7, 300, 4097}, layout);
  s.strided = true;
  s.softmax_scale = 0.05f;
  s.num_splits = splits;
  check_decode(s);
}

TEST_CASE("decode: 16k keys with the planner's splits, bitwise repeatable", "[decode][gpu]") {
  ensure_context();
  const Layout layout = GENERATE(kContiguous, kPaged256);
  DecodeShape s = make_shape(DType::bf16, 128, 8, 1, {16411, 9000}, layout);
  check_decode(s);

  // Same inputs twice, after prepare_decode: bitwise identical outputs (a moving result would be a race).
  auto c = DecodeCase::make(s, fresh_seed());
  REQUIRE(c.ok());
  const DecodeProblem p = c->problem();
  auto prepared = runtime().prepare_decode(p);
  if (!prepared.ok()) FAIL(prepared.error().to_string());
  std::vector<unsigned char> first, second;
  REQUIRE(runtime().decode(p).ok());
  REQUIRE(c->read_raw(first).ok());
  REQUIRE(c->poison_outputs().ok());
  REQUIRE(runtime().decode(p).ok());
  REQUIRE(c->read_raw(second).ok());
  CHECK(first == second);
}

TEST_CASE("decode: release_decode_workspace, then a decode on the same stream allocates again", "[decode][gpu]") {
  ensure_context();
  DecodeShape s = make_shape(DType::bf16, 128, 4, 1, {3000, 17}, kContiguous);
  s.num_splits = 5;  // the runtime's workspace holds the partials
  auto c = DecodeCase::make(s, fresh_seed());
  REQUIRE(c.ok());
  const DecodeProblem p = c->problem();
  REQUIRE(runtime().decode(p).ok());
  std::vector<unsigned char> first, second;
  REQUIRE(c->read_raw(first).ok());
  auto released = runtime().release_decode_workspace(p.stream);
  if (!released.ok()) FAIL(released.error().to_string());
  REQUIRE(c->poison_outputs().ok());
  REQUIRE(runtime().decode(p).ok());
  REQUIRE(c->read_raw(second).ok());
  CHECK(first == second);
}

TEST_CASE("decode: two runs with forced splits on a paged cache are bitwise identical", "[decode][gpu]") {
  ensure_context();
  DecodeShape s = make_shape(DType::fp16, 256, 4, 4, {1, 7, 300, 4097}, kPaged64);
  s.num_splits = 7;
  auto c = DecodeCase::make(s, fresh_seed());
  REQUIRE(c.ok());
  DecodeProblem p = c->problem();
  auto bytes = runtime().decode_workspace_bytes(p);
  if (!bytes.ok()) FAIL(bytes.error().to_string());
  REQUIRE(*bytes > 0);
  auto ws = cuda::DeviceBuffer::allocate(*bytes);
  REQUIRE(ws.ok());
  p.workspace = ws->get(), p.workspace_bytes = *bytes;
  std::vector<unsigned char> first, second;
  REQUIRE(ws->fill_bytes(0xff).ok());
  REQUIRE(runtime().decode(p).ok());
  REQUIRE(c->read_raw(first).ok());
  REQUIRE(c->poison_outputs().ok());
  REQUIRE(ws->fill_bytes(0x00).ok());  // different stale workspace contents, same result
  REQUIRE(runtime().decode(p).ok());
  REQUIRE(c->read_raw(second).ok());
  CHECK(first == second);
}

TEST_CASE("decode: FlashInfer's CSR page tables (counts from seqlens_k or last_page_len) match float64",
          "[decode][gpu][csr]") {
  // Shuffled pages, mixed lengths (last pages partly full, an empty sequence: no pages), every regime of
  // kv_loads.cuh (pages of 1, 16, 64, 256 tokens), the planner's splits and forced ones (combine kernel),
  // masks with a lower bound (their page-table reads follow the length), q_len 1 and 4, a loose host bound.
  // With seqlens_k each sequence owns a garbage page past the ones it uses.
  const Layout layout = GENERATE(kPaged1, kPaged16, kPaged64, kPaged256);
  const auto table = GENERATE(DecodeShape::Table::csr_seqlens, DecodeShape::Table::csr_last_page);
  const int variant = GENERATE(0, 1, 2, 3);
  DecodeShape s = make_shape(variant % 2 ? DType::fp16 : DType::bf16, 128, 4, variant < 2 ? 1 : 4,
                             {1, 7, 300, 4097, 0, 65}, layout);
  s.table = table;
  if (variant == 1) s.num_splits = 3, s.split_merge = SplitMerge::combine_kernel;
  if (variant == 2) s.window_left = 100, s.bound_slack = 300;
  if (variant == 3) s.chunk_size = 64, s.num_splits = 5;
  check_decode(s, variant == 1 ? Workspace::caller : Workspace::runtime_owned);
}

TEST_CASE("decode: a CSR page table gives the dense table's output bit for bit, and passes check_pages",
          "[decode][gpu][csr]") {
  ensure_context();
  const Layout layout = GENERATE(kPaged8, kPaged32);
  const int splits = GENERATE(1, 4);
  DecodeShape dense = make_shape(DType::bf16, 64, 8, 2, {1, 7, 300, 4097}, layout);
  dense.num_splits = splits;
  const std::uint64_t seed = fresh_seed();
  INFO(dense.to_string() << ", seed " << seed);
  std::vector<unsigned char> want;
  {
    auto c = DecodeCase::make(dense, seed);
    REQUIRE(c.ok());
    REQUIRE(runtime().decode(c->problem()).ok());
    REQUIRE(c->read_raw(want).ok());
  }
  for (auto table : {DecodeShape::Table::csr_seqlens, DecodeShape::Table::csr_last_page}) {
    DecodeShape s = dense;
    s.table = table;
    INFO(s.to_string());
    auto c = DecodeCase::make(s, seed);  // the same data and pages
    REQUIRE(c.ok());
    DecodeProblem p = c->problem();
    p.check_pages = true;  // the host check reads the offsets, the counts and the pages in use
    auto st = runtime().decode(p);
    if (!st.ok()) FAIL(st.error().to_string());
    std::vector<unsigned char> got;
    REQUIRE(c->read_raw(got).ok());
    CHECK(got == want);
  }
}

TEST_CASE("decode: behind a kernel that lets it start early, a CSR table's offsets, counts and pages are read after "
          "that kernel's writes",
          "[decode][gpu][csr]") {
  // As the test above for the dense table: stale zeros (no pages, no keys, page 0) until the writer restores them.
  ensure_context();
  const Layout layout = GENERATE(kPaged1, kPaged16);
  const int splits = GENERATE(0, 3);
  const auto table = GENERATE(DecodeShape::Table::csr_seqlens, DecodeShape::Table::csr_last_page);
  DecodeShape s = make_shape(DType::bf16, 128, 4, 1, {300, 4097, 7, 1000}, layout);
  s.num_splits = splits, s.table = table;
  const std::uint64_t seed = fresh_seed();
  INFO(s.to_string() << ", seed " << seed);
  auto c = DecodeCase::make(s, seed);
  if (!c.ok()) FAIL(c.error().to_string());
  auto writer = LateWriter::make();
  if (!writer.ok()) FAIL(writer.error().to_string());
  const DecodeProblem p = c->problem();
  REQUIRE(runtime().prepare_decode(p).ok());
  const std::size_t batch = static_cast<std::size_t>(s.batch());
  REQUIRE(writer->stage(p.page_indptr, (batch + 1) * 4).ok());
  REQUIRE(writer->stage(p.page_table, c->csr_entries() * 4).ok());
  if (p.last_page_len != nullptr) REQUIRE(writer->stage(p.last_page_len, batch * 4).ok());
  else REQUIRE(writer->stage(p.seqlens_k, batch * 4).ok());
  REQUIRE(writer->launch(static_cast<CUstream>(p.stream), 200).ok());
  auto st = runtime().decode(p);
  if (!st.ok()) FAIL(st.error().to_string());
  expect_matches_reference(*c, s);
}

TEST_CASE("decode: a seqlens_k entry above max_seqlen_k is clamped to it", "[decode][gpu]") {
  ensure_context();
  // Contiguous cache of 1037 slots, max_seqlen_k 1000; slots 1000.. hold garbage. The middle sequence's
  // device length says 5000: the kernels clamp it to 1000 (decode.hpp), never reading past the bound.
  DecodeShape s = make_shape(DType::bf16, 64, 4, 4, {300, 1000, 200}, kContiguous);
  s.num_splits = GENERATE(1, 0);
  INFO(s.to_string());
  auto c = DecodeCase::make(s, fresh_seed());
  REQUIRE(c.ok());
  REQUIRE(c->upload_seqlens({300, 5000, 200}).ok());
  auto st = runtime().decode(c->problem());
  if (!st.ok()) FAIL(st.error().to_string());
  expect_matches_reference(*c, s);
}

TEST_CASE("decode: bad arguments are rejected before any launch", "[decode][gpu]") {
  ensure_context();
  DecodeShape s = make_shape(DType::bf16, 128, 4, 4, {1, 7, 300, 1000}, kPaged16);
  s.num_splits = 7;
  auto c = DecodeCase::make(s, fresh_seed());
  REQUIRE(c.ok());
  auto expect_untouched = [&] {
    std::vector<unsigned char> raw;
    REQUIRE(c->read_raw(raw).ok());
    CHECK(all_poisoned(raw));  // O and LSE still 0xFF: nothing ran
  };
  SECTION("caller workspace one byte short") {
    DecodeProblem p = c->problem();
    auto bytes = runtime().decode_workspace_bytes(p);
    if (!bytes.ok()) FAIL(bytes.error().to_string());
    REQUIRE(*bytes > 0);
    auto ws = cuda::DeviceBuffer::allocate(*bytes);
    REQUIRE(ws.ok());
    p.workspace = ws->get(), p.workspace_bytes = *bytes - 1;
    auto st = runtime().decode(p);
    REQUIRE_FALSE(st.ok());
    INFO(st.error().to_string());
    CHECK(st.error().code == ErrorCode::invalid_argument);
    CHECK(st.error().message.find("workspace") != std::string::npos);
    expect_untouched();
  }
  SECTION("host pointer for the key cache") {
    DecodeProblem p = c->problem();
    std::vector<std::uint16_t> host(1 << 16);
    p.k_cache = host.data();
    auto st = runtime().decode(p);
    REQUIRE_FALSE(st.ok());
    INFO(st.error().to_string());
    CHECK(st.error().code == ErrorCode::invalid_argument);
    CHECK(st.error().message.find("k_cache") != std::string::npos);
    expect_untouched();
  }
  SECTION("chunk_size below 0, and chunk_size with a sliding window") {
    struct Bad {
      int chunk, window;
      std::vector<const char*> fields;
    };
    for (const Bad& bad : {Bad{-1, -1, {"chunk_size"}}, Bad{-64, 100, {"chunk_size"}},
                           Bad{64, 100, {"chunk_size", "window_left"}}, Bad{1, 0, {"chunk_size", "window_left"}}}) {
      DecodeProblem p = c->problem();
      p.chunk_size = bad.chunk, p.window_left = bad.window;
      INFO("chunk_size " << bad.chunk << ", window_left " << bad.window);
      auto st = runtime().decode(p);
      REQUIRE_FALSE(st.ok());
      INFO(st.error().to_string());
      CHECK(st.error().code == ErrorCode::invalid_argument);
      for (const char* field : bad.fields) CHECK(st.error().message.find(field) != std::string::npos);
      auto bytes = runtime().decode_workspace_bytes(p);
      REQUIRE_FALSE(bytes.ok());
      CHECK(bytes.error().code == ErrorCode::invalid_argument);
      CHECK(bytes.error().message.find("chunk_size") != std::string::npos);
      auto prepared = runtime().prepare_decode(p);
      REQUIRE_FALSE(prepared.ok());
      CHECK(prepared.error().code == ErrorCode::invalid_argument);
      expect_untouched();
    }
  }
  SECTION("check_pages: a page index past num_pages") {
    REQUIRE(c->set_page_entry(3, 10, c->num_pages()).ok());  // sequence 3 (1000 keys) uses 63 pages
    DecodeProblem p = c->problem();
    p.check_pages = true;
    auto st = runtime().decode(p);
    REQUIRE_FALSE(st.ok());
    INFO(st.error().to_string());
    CHECK(st.error().code == ErrorCode::invalid_argument);
    CHECK(st.error().to_string().find("page") != std::string::npos);
    expect_untouched();
  }
  SECTION("check_pages: a valid table passes and decodes") {
    DecodeProblem p = c->problem();
    p.check_pages = true;
    auto st = runtime().decode(p);
    if (!st.ok()) FAIL(st.error().to_string());
    expect_matches_reference(*c, s);
  }
}

// Merge ---------------------------------------------------------------------------------------------------
namespace {

// Output rounding alone: relative error at most the dtype's unit roundoff (bf16 2^-8, fp16 2^-11).
double rounding_tolerance(DType d) { return d == DType::bf16 ? 5e-3 : 7e-4; }

// late_inputs: the states reach the device through a LateWriter's kernel right before the merge (zeros until
// then), which the merge must wait for.
void check_merge(const MergeShape& shape, bool late_inputs = false) {
  ensure_context();
  const std::uint64_t seed = fresh_seed();
  INFO(shape.to_string() << ", seed " << seed << (late_inputs ? ", states written by the kernel before" : ""));
  auto c = MergeCase::make(shape, seed);
  if (!c.ok()) FAIL(c.error().to_string());
  const MergeProblem p = c->problem();
  if (late_inputs) {
    REQUIRE(!shape.strided);
    // A first merge loads the kernel, so that the second launches within microseconds of the writer.
    REQUIRE(runtime().merge(p).ok());
    REQUIRE(c->poison_outputs().ok());
    auto writer = LateWriter::make();
    if (!writer.ok()) FAIL(writer.error().to_string());
    const std::size_t rows = std::size_t(shape.batch()) * shape.seqlen * shape.heads;
    for (int i = 0; i < shape.num_states; ++i) {
      REQUIRE(writer->stage(p.o_in[i], rows * shape.head_dim * 2).ok());
      REQUIRE(writer->stage(p.lse_in[i], rows * 4).ok());
    }
    REQUIRE(writer->launch(static_cast<CUstream>(p.stream), 200).ok());
  }
  auto st = runtime().merge(p);
  if (!st.ok()) FAIL(st.error().to_string());
  std::vector<float> o, lse;
  std::int64_t stray = 0;
  REQUIRE(c->read_outputs(o, lse, stray).ok());
  INFO("rows with some empty states " << c->partly_empty_rows() << ", rows empty in every state " << c->empty_rows());
  {
    INFO("against float64 attention over the union of the key sets");
    expect_close(shape.output_shape(), o, lse, c->union_o(), c->union_lse(), tolerance(shape.dtype), kLseTolerance,
                 stray);
  }
  {
    INFO("against the float64 merge of the rounded input states");
    expect_close(shape.output_shape(), o, lse, c->merged_o(), c->merged_lse(), rounding_tolerance(shape.dtype), 1e-4,
                 stray);
  }
}

}  // namespace

TEST_CASE("merge: 2 and 3 states over disjoint key sets match float64 over their union", "[merge][gpu]") {
  const int states = GENERATE(2, 3);
  const DType dtype = GENERATE(DType::bf16, DType::fp16);
  const int head_dim = GENERATE(64, 128, 256);
  MergeShape s;
  s.dtype = dtype, s.head_dim = head_dim, s.num_states = states;
  // Sequence 0 has 4 keys for 6 positions: its first two rows see no key at all, and its last state starts
  // 3 keys from the end (empty for its first positions); random cuts elsewhere, some states may be empty.
  s.seqlen = 6, s.heads = 3, s.keys = {4, 300, 1000, 17};
  ensure_context();
  auto probe = MergeCase::make(s, 7);
  REQUIRE(probe.ok());
  REQUIRE(probe->partly_empty_rows() > 0);
  REQUIRE(probe->empty_rows() > 0);
  check_merge(s);
}

TEST_CASE("merge: behind a kernel that lets it start early, the states are read after that kernel's writes",
          "[merge][gpu]") {
  // The merge's combine kernel is launched with programmatic dependent launch (sm_90), like decode's.
  MergeShape s;
  s.num_states = GENERATE(2, 3);
  s.seqlen = 4, s.heads = 4, s.keys = {100, 3000, 9};
  check_merge(s, true);
}

TEST_CASE("merge: 1, 5 and 32 states, strided inputs and output, without LSE output", "[merge][gpu]") {
  struct Run {
    int states;
    DType dtype;
    int head_dim;
    bool strided, lse;
  };
  const Run run = GENERATE(Run{1, DType::bf16, 128, true, true}, Run{1, DType::fp16, 64, false, false},
                           Run{5, DType::bf16, 256, true, false}, Run{32, DType::fp16, 128, false, true},
                           Run{32, DType::bf16, 64, true, false});
  MergeShape s;
  s.dtype = run.dtype, s.head_dim = run.head_dim, s.num_states = run.states;
  s.strided = run.strided, s.with_lse = run.lse;
  s.seqlen = 5, s.heads = 4, s.keys = {2, 64, 900};
  check_merge(s);
}

TEST_CASE("merge: decode states over a prefix cache and a suffix cache merge into decode over both",
          "[decode][merge][gpu]") {
  ensure_context();
  const DType dtype = GENERATE(DType::bf16, DType::fp16);
  // q_len 1: the new token sees every key of each cache, so the two states cover disjoint key sets whose
  // union is the concatenated cache. Sequence 2 has no suffix keys (its second state is empty).
  DecodeShape prefix = make_shape(dtype, 128, 4, 1, {500, 1, 64}, kContiguous);
  DecodeShape suffix = make_shape(dtype, 128, 4, 1, {700, 33, 0}, kPaged16);
  prefix.num_splits = 2;  // a split decode's LSE must merge like any other
  INFO(prefix.to_string() << " + " << suffix.to_string());
  auto a = DecodeCase::make(prefix, fresh_seed());
  REQUIRE(a.ok());
  auto b = DecodeCase::make(suffix, fresh_seed(), &a->q());
  REQUIRE(b.ok());
  auto st = runtime().decode(a->problem());
  if (!st.ok()) FAIL(st.error().to_string());
  st = runtime().decode(b->problem());
  if (!st.ok()) FAIL(st.error().to_string());

  const int B = prefix.batch(), H = prefix.heads_q, D = prefix.head_dim;
  auto out = cuda::DeviceBuffer::allocate(std::size_t(B) * H * D * 2);
  auto out_lse = cuda::DeviceBuffer::allocate(std::size_t(B) * H * 4);
  REQUIRE(out.ok());
  REQUIRE(out_lse.ok());
  REQUIRE(out->fill_bytes(0xff).ok());
  REQUIRE(out_lse->fill_bytes(0xff).ok());
  MergeProblem m;
  m.dtype = dtype, m.batch = B, m.seqlen = 1, m.heads = H, m.head_dim = D, m.num_states = 2;
  m.o_in[0] = a->problem().o, m.lse_in[0] = a->problem().lse;
  m.o_in[1] = b->problem().o, m.lse_in[1] = b->problem().lse;
  m.o = out->get(), m.lse = static_cast<float*>(out_lse->get());
  st = runtime().merge(m);
  if (!st.ok()) FAIL(st.error().to_string());
  REQUIRE(cuda::check((*cuda::api())->cuCtxSynchronize(), "cuCtxSynchronize").ok());

  std::vector<std::uint16_t> bits(std::size_t(B) * H * D);
  std::vector<float> o(bits.size()), lse(std::size_t(B) * H);
  REQUIRE(out->download(bits.data(), bits.size() * 2).ok());
  REQUIRE(out_lse->download(lse.data(), lse.size() * 4).ok());
  for (std::size_t i = 0; i < bits.size(); ++i) o[i] = from_half_bits(dtype, bits[i]);

  DecodeShape both = prefix;
  both.seqlens = {1200, 34, 64};
  std::vector<double> ref_o, ref_lse;
  reference_decode(both, a->q(), concat(a->kv(), b->kv(), prefix.heads_kv, D), ref_o, ref_lse);
  expect_close(both.output_shape(), o, lse, ref_o, ref_lse, tolerance(dtype), kLseTolerance, 0);
}

TEST_CASE("merge: bad arguments are rejected before any launch", "[merge][gpu]") {
  ensure_context();
  MergeShape s;
  s.num_states = 3, s.seqlen = 4, s.heads = 2, s.head_dim = 64, s.keys = {50};
  auto c = MergeCase::make(s, fresh_seed());
  REQUIRE(c.ok());
  auto expect_rejected = [&](const MergeProblem& p, const char* field) {
    auto st = runtime().merge(p);
    REQUIRE_FALSE(st.ok());
    INFO(st.error().to_string());
    CHECK(st.error().code == ErrorCode::invalid_argument);
    CHECK(st.error().message.find(field) != std::string::npos);
    std::vector<float> o, lse;
    std::int64_t stray = 0;
    REQUIRE(c->read_outputs(o, lse, stray).ok());
    for (float x : o) REQUIRE(std::isnan(x));  // still poisoned: nothing ran
    for (float x : lse) REQUIRE(std::isnan(x));
    CHECK(stray == 0);
  };
  SECTION("no state") {
    MergeProblem p = c->problem();
    p.num_states = 0;
    expect_rejected(p, "num_states");
  }
  SECTION("more states than the kernel merges") {
    MergeProblem p = c->problem();
    p.num_states = kMaxMergeStates + 1;
    expect_rejected(p, "num_states");
  }
  SECTION("a null state") {
    MergeProblem p = c->problem();
    p.o_in[1] = nullptr;
    expect_rejected(p, "o_in");
  }
  SECTION("the output aliasing an input") {
    MergeProblem p = c->problem();
    p.o_in[0] = p.o;
    expect_rejected(p, "alias");
  }
  SECTION("a null LSE input") {
    MergeProblem p = c->problem();
    p.lse_in[2] = nullptr;
    expect_rejected(p, "lse_in");
  }
}

TEST_CASE("decode: a score_mod snippet (ALiBi from device slopes) matches the built-in ALiBi", "[decode][variant][gpu]") {
  // q_idx counts the new tokens and ctx's lengths place them (seqlen_k - seqlen_q + q_idx); splits and merges as
  // the planner and forced counts give them.
  ensure_context();
  const int splits = GENERATE(1, 4, 0);
  DecodeShape s = make_shape(DType::bf16, 128, 4, 2, {4097, 1, 0, 300}, kContiguous);
  s.num_splits = splits;
  s.alibi = 1;  // the reference's
  DecodeShape run = s;
  run.alibi = 0;
  auto c = DecodeCase::make(run, fresh_seed());
  REQUIRE(c.ok());
  DecodeProblem p = c->problem();
  std::vector<float> host;
  const Shape vs = s.variant_shape();
  for (int h = 0; h < s.heads_q; ++h) host.push_back(static_cast<float>(alibi_slope(vs, 0, h)));
  auto slopes = cuda::DeviceBuffer::allocate(host.size() * 4);
  REQUIRE(slopes.ok());
  REQUIRE(slopes->upload(host.data(), host.size() * 4).ok());
  p.score_mod = R"(
__device__ float score_mod(float score, int b, int h, int q_idx, int kv_idx, const flashjit::ModContext& ctx) {
  const int a = ctx.seqlen_k - ctx.seqlen_q + q_idx;
  return score - ctx.pointer<float>(0)[h] * fabsf(float(a - kv_idx));
})";
  p.aux.pointers[0] = slopes->get();
  INFO(s.to_string() << " as a score_mod");
  auto st = runtime().decode(p);
  if (!st.ok()) FAIL(st.error().to_string());
  std::vector<float> o, lse;
  std::int64_t stray = 0;
  REQUIRE(c->read_outputs(o, lse, stray).ok());
  std::vector<double> ref_o, ref_lse;
  reference_decode(s, c->q(), c->kv(), ref_o, ref_lse);
  expect_close(s.output_shape(), o, lse, ref_o, ref_lse, tolerance(s.dtype), kLseTolerance, stray);
}
