// FA3, FA2 and reference kernels against a float64 CPU reference (and, for long sequences, against the
// reference kernel, itself checked against float64 below): fresh random data, poisoned outputs, odd lengths,
// Sk < Sq, GQA groups 1/4/8, every mask, bf16 and fp16, head dims 64/96/128/256 and, for every kernel, odd
// multiples of 8 and of 16 from 8 to 248 and head_dim_v != head_dim.
#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

#include "checks.hpp"
#include "dispatch/heuristics.hpp"
#include "harness.hpp"
#include "support/catch.hpp"

using namespace flashjit;
using namespace flashjit::test;

namespace {

constexpr Arch kSm90a{90, true};

struct Lengths {
  int sq, sk, group, batch;
};
// Odd lengths, Sk < Sq (rows with no visible key under causal masks), single rows and keys.
const Lengths kLengths[] = {{1, 1, 1, 1},     {17, 17, 4, 2},   {128, 1000, 8, 1}, {1000, 128, 1, 1},
                            {17, 4097, 4, 1}, {1000, 1000, 4, 1}, {128, 17, 8, 2}, {1, 1000, 8, 2},
                            {300, 301, 1, 1}};

SeedSequence fresh_seed{0x5eed};

// Runs `config` on a fresh case and checks it against float64; returns the comparison for reporting.
void check_against_fp64(const Shape& shape, const KernelConfig& config) {
  ensure_context();
  INFO(shape.to_string() << " with " << readable_name(config));
  auto c = Case::make(shape, fresh_seed());
  REQUIRE(c.ok());
  auto st = runtime().forward(c->problem(), config);
  if (!st.ok()) FAIL(st.error().to_string());
  std::vector<float> o, lse;
  REQUIRE(c->read_outputs(o, lse).ok());
  std::vector<double> ref_o, ref_lse;
  reference_attention(shape, c->q(), c->k(), c->v(), ref_o, ref_lse);
  check_ok(compare(shape, o, lse, ref_o, ref_lse), shape.dtype);
}

Shape make_shape(const Lengths& l, const MaskCase& m, DType dtype, int head_dim, int head_dim_v = 0) {
  Shape s;
  s.batch = l.batch, s.seqlen_q = l.sq, s.seqlen_k = l.sk, s.heads_q = 8, s.heads_kv = 8 / l.group;
  s.head_dim = head_dim, s.head_dim_v = head_dim_v, s.dtype = dtype;
  s.mask = m.kind, s.window_left = m.left, s.window_right = m.right, s.chunk_size = m.chunk;
  return s;
}

}  // namespace

KernelConfig heuristic(Algorithm algorithm, DType dtype, int head_dim, MaskKind mask, int head_dim_v = 0) {
  switch (algorithm) {
    case Algorithm::fa3: return dispatch::fa3_heuristic(dtype, head_dim, mask, kSm90a, head_dim_v);
    case Algorithm::fa2: return dispatch::fa2_heuristic(dtype, head_dim, mask, kSm90a, head_dim_v);
    default: return dispatch::naive_config(dtype, head_dim, mask, kSm90a, head_dim_v);
  }
}

namespace {

// One heuristic config per mask at this algorithm, dtype and head dim, each on three length sets (rotating, so
// that every set meets every mask). One test case per algorithm below (tools/gpu_tests.sh runs them at once).
void check_heuristic_configs(Algorithm algorithm, DType dtype, int head_dim, int head_dim_v = 0) {
  // FLASHJIT_TEST_ALGORITHMS=fa3,naive limits this sweep (quick device runs after a kernel change).
  if (const char* only = std::getenv("FLASHJIT_TEST_ALGORITHMS"))
    if (std::string(only).find(to_string(algorithm)) == std::string::npos) return;
  int index = 0;
  for (const auto& m : kMasks) {
    const KernelConfig config = heuristic(algorithm, dtype, head_dim, m.kind, head_dim_v);
    for (int r = 0; r < 3; ++r) {
      const auto& l = kLengths[(index++ * 3 + head_dim / 32 + r) % std::size(kLengths)];
      check_against_fp64(make_shape(l, m, dtype, head_dim, head_dim_v), config);
    }
  }
}

}  // namespace

TEST_CASE("fa3 heuristic kernels match float64 on every mask, head dim and dtype", "[fa3][gpu]") {
  const DType dtype = GENERATE(DType::bf16, DType::fp16);
  const int head_dim = GENERATE(64, 128, 256);
  check_heuristic_configs(Algorithm::fa3, dtype, head_dim);
}

// Sliding windows whose work tiles' warpgroups see different key tiles (fa3/consumer.cuh: each computes only
// its own, and a warpgroup past the last row or before the first key computes none, yet keeps its turns): the
// tiles the dispatcher takes for short windows, three warpgroups, grid and persistent, narrow to wide windows,
// rows before the first key (Sq > Sk) and a last m-block with one warpgroup's rows.
TEST_CASE("fa3 sliding windows: per-warpgroup key tiles match float64", "[fa3][gpu]") {
  struct Tiles {
    int head_dim, consumers, bm, bn, stages;
  };
  const Tiles t = GENERATE(Tiles{64, 2, 128, 64, 2}, Tiles{128, 2, 128, 128, 2}, Tiles{64, 3, 192, 64, 2},
                           Tiles{64, 3, 192, 64, 4}, Tiles{64, 3, 192, 96, 2}, Tiles{40, 3, 192, 64, 3});
  const Scheduler scheduler = GENERATE(Scheduler::grid, Scheduler::persistent);
  KernelConfig config = dispatch::fa3_heuristic(DType::bf16, t.head_dim, MaskKind::sliding_window, kSm90a);
  config.consumer_warpgroups = t.consumers, config.block_m = t.bm, config.block_n = t.bn, config.stages = t.stages;
  config.scheduler = scheduler;
  const MaskCase windows[] = {{MaskKind::sliding_window, 128, 0, 0},
                              {MaskKind::sliding_window, 0, 0, 0},
                              {MaskKind::sliding_window, 5, 37, 0},
                              {MaskKind::sliding_window, 200, 64, 0}};
  const Lengths lengths[] = {{1000, 1000, 8, 1}, {300, 1000, 4, 2}, {1000, 300, 1, 1}, {129, 129, 8, 1}};
  for (const auto& m : windows)
    for (const auto& l : lengths) check_against_fp64(make_shape(l, m, DType::bf16, t.head_dim), config);
}

// Packed GQA rows (templates/fa3/rows.cuh): a tile holds the group's query heads at block_m / group positions,
// so a tile's last positions, the masks' row tests, LSE and O's scattered rows all go through the packed map.
// Every mask on odd lengths, groups 2, 4 and 8 (3 with 192-row tiles: a warpgroup's rows split a position),
// two- and three-warpgroup tiles, grid and persistent, narrow head dims (16- and 32-column blocks), fp16, and
// softcap + sinks (the sink is per row's head).
namespace {
struct PackedTiles {
  int head_dim, consumers, bn;
  Scheduler scheduler;
  DType dtype;
};
void check_packed_gqa(const PackedTiles& t, bool variants) {
  int index = 0;
  for (const auto& m : kMasks) {
    KernelConfig config = dispatch::fa3_heuristic(t.dtype, t.head_dim, m.kind, kSm90a);
    config.consumer_warpgroups = t.consumers, config.block_m = 64 * t.consumers, config.block_n = t.bn;
    config.scheduler = t.scheduler, config.pack_gqa = true;
    config.softcap = config.sinks = variants;
    for (const int group : {2, 4, 8, t.consumers == 3 ? 3 : 1}) {
      const Lengths l = kLengths[(index++ * 2 + t.head_dim / 8) % std::size(kLengths)];
      Shape s = make_shape(l, m, t.dtype, t.head_dim);
      s.heads_kv = group == 3 ? 2 : 8 / group, s.heads_q = s.heads_kv * group;
      if (variants) s.softcap = 30.f, s.sinks = true;
      check_against_fp64(s, config);
    }
  }
}
}  // namespace

TEST_CASE("fa3 packed GQA rows match float64 on every mask, group and tile", "[fa3][gpu]") {
  const PackedTiles t = GENERATE(PackedTiles{64, 3, 64, Scheduler::persistent, DType::bf16},
                                 PackedTiles{128, 3, 64, Scheduler::persistent, DType::bf16},
                                 PackedTiles{128, 2, 64, Scheduler::persistent, DType::bf16},
                                 PackedTiles{128, 2, 128, Scheduler::grid, DType::fp16},
                                 PackedTiles{40, 3, 96, Scheduler::grid, DType::bf16},
                                 PackedTiles{256, 2, 64, Scheduler::persistent, DType::bf16});
  check_packed_gqa(t, false);
}

TEST_CASE("fa3 packed GQA rows with softcap and sinks match float64 on every mask", "[fa3][variant][gpu]") {
  const PackedTiles t = GENERATE(PackedTiles{64, 3, 64, Scheduler::persistent, DType::bf16},
                                 PackedTiles{128, 3, 64, Scheduler::persistent, DType::fp16},
                                 PackedTiles{96, 3, 80, Scheduler::grid, DType::bf16});
  check_packed_gqa(t, true);
}

TEST_CASE("fa2 heuristic kernels match float64 on every mask, head dim and dtype", "[fa2][gpu]") {
  const DType dtype = GENERATE(DType::bf16, DType::fp16);
  const int head_dim = GENERATE(64, 96, 128, 256);
  check_heuristic_configs(Algorithm::fa2, dtype, head_dim);
}

// Head dims with narrow column blocks (fa3/columns.cuh: 16-, 32-column blocks, padding to 16) and
// head_dim_v != head_dim (DeepSeek's 192 / 128, and O wider than Q).
struct Dims {
  int d, dv;
};
// Split in four test cases so that tools/gpu_tests.sh runs them side by side (their time is NVRTC).
TEST_CASE("fa3 heuristic kernels match float64 at narrow head dims (16- and 32-column blocks)", "[fa3][gpu]") {
  const DType dtype = GENERATE(DType::bf16, DType::fp16);
  const Dims dims = GENERATE(Dims{8, 0}, Dims{24, 0}, Dims{40, 0});
  check_heuristic_configs(Algorithm::fa3, dtype, dims.d, dims.dv);
}
TEST_CASE("fa3 heuristic kernels match float64 at head dims 72 to 112", "[fa3][gpu]") {
  const DType dtype = GENERATE(DType::bf16, DType::fp16);
  const Dims dims = GENERATE(Dims{72, 0}, Dims{80, 0}, Dims{96, 0}, Dims{112, 0});
  check_heuristic_configs(Algorithm::fa3, dtype, dims.d, dims.dv);
}
TEST_CASE("fa3 heuristic kernels match float64 at head dims 136 to 248", "[fa3][gpu]") {
  const DType dtype = GENERATE(DType::bf16, DType::fp16);
  const Dims dims = GENERATE(Dims{136, 0}, Dims{160, 0}, Dims{192, 0}, Dims{200, 0}, Dims{248, 0});
  check_heuristic_configs(Algorithm::fa3, dtype, dims.d, dims.dv);
}
TEST_CASE("fa3 heuristic kernels match float64 with head_dim_v != head_dim", "[fa3][gpu]") {
  const DType dtype = GENERATE(DType::bf16, DType::fp16);
  const Dims dims = GENERATE(Dims{192, 128}, Dims{128, 192}, Dims{72, 96}, Dims{64, 256}, Dims{256, 40});
  check_heuristic_configs(Algorithm::fa3, dtype, dims.d, dims.dv);
}

TEST_CASE("fa2 and reference kernels match float64 at odd multiples of 8 and head_dim_v", "[fa2][reference][gpu]") {
  const Algorithm algorithm = GENERATE(Algorithm::fa2, Algorithm::naive);
  const Dims dims = GENERATE(Dims{8, 0}, Dims{72, 0}, Dims{200, 0}, Dims{192, 128}, Dims{72, 96});
  check_heuristic_configs(algorithm, DType::bf16, dims.d, dims.dv);
}

TEST_CASE("top-left alignment (torch SDPA's is_causal) matches float64 on every mask and kernel",
          "[fa3][fa2][reference][gpu]") {
  // Sq < Sk and Sq > Sk, where the two alignments differ: top-left, query i sees keys <= i under causal, so
  // with Sq > Sk no row is empty (bottom-right empties the first Sq - Sk), and with Sq < Sk the last keys are
  // seen by no query.
  const Algorithm algorithm = GENERATE(Algorithm::fa3, Algorithm::fa2, Algorithm::naive);
  int index = 0;
  for (const auto& m : kMasks) {
    if (m.kind == MaskKind::none) continue;
    for (const Lengths& l : {Lengths{128, 1000, 8, 1}, Lengths{1000, 128, 1, 1}, Lengths{300, 17, 4, 2}}) {
      Shape s = make_shape(l, m, ++index % 2 ? DType::bf16 : DType::fp16, algorithm == Algorithm::fa2 ? 96 : 128);
      s.top_left = true;
      check_against_fp64(s, heuristic(algorithm, s.dtype, s.head_dim, s.mask));
    }
  }
}

TEST_CASE("reference kernels match float64 on every mask, head dim and dtype", "[reference][gpu]") {
  const DType dtype = GENERATE(DType::bf16, DType::fp16);
  const int head_dim = GENERATE(64, 96, 128, 256);
  check_heuristic_configs(Algorithm::naive, dtype, head_dim);
}

namespace {

// Each config (FIELD=VALUE pairs for sm_90a) with three masks, in bf16 and fp16, on two length sets.
void check_configs(std::initializer_list<const char*> configs) {
  for (const char* text : configs) {
    std::vector<std::string> pairs;
    std::string s(text);
    for (std::size_t pos = 0; pos < s.size();) {
      auto end = s.find(' ', pos);
      if (end == std::string::npos) end = s.size();
      pairs.push_back(s.substr(pos, end - pos));
      pos = end + 1;
    }
    pairs.push_back("arch=sm_90a");
    for (const auto& m : {kMasks[0], kMasks[1], kMasks[4]}) {
      auto parsed = config_from_pairs(pairs);
      REQUIRE(parsed.ok());
      KernelConfig config = *parsed;
      config.mask = m.kind;
      check_against_fp64(make_shape({300, 1000, 4, 1}, m, DType::bf16, config.head_dim, config.head_dim_v), config);
      config.dtype = DType::fp16;
      check_against_fp64(make_shape({257, 129, 1, 1}, m, DType::fp16, config.head_dim, config.head_dim_v), config);
    }
  }
}

}  // namespace

TEST_CASE("non-heuristic fa2 configs (tiles, warps, stages) match float64", "[fa2][gpu]") {
  check_configs({
      "head_dim=128 block_m=128 warps=4 block_n=32 stages=2",
      "head_dim=128 block_m=128 warps=4 block_n=64 stages=3",
      "head_dim=128 block_m=64 warps=4 block_n=64 stages=4",
      "head_dim=128 block_m=128 warps=8 block_n=32 stages=5",
      "head_dim=64 block_m=64 warps=2 block_n=128 stages=2",
      "head_dim=64 block_m=16 warps=1 block_n=16 stages=2",
      "head_dim=32 block_m=64 warps=4 block_n=64 stages=3",
      "head_dim=192 block_m=64 warps=4 block_n=32 stages=2",
      "head_dim=256 block_m=64 warps=4 block_n=64 stages=2",
  });
}

TEST_CASE("non-heuristic fa3 configs (tiles, consumer warpgroups, stages, scheduler) match float64", "[fa3][gpu]") {
  check_configs({
      "algorithm=fa3 head_dim=128 block_m=128 consumer_warpgroups=2 block_n=176 stages=2",
      "algorithm=fa3 head_dim=128 block_m=128 consumer_warpgroups=2 block_n=64 stages=4",
      "algorithm=fa3 head_dim=128 block_m=64 consumer_warpgroups=1 block_n=128 stages=3",
      "algorithm=fa3 head_dim=64 block_m=192 consumer_warpgroups=3 block_n=96 stages=2",
      "algorithm=fa3 head_dim=256 block_m=128 consumer_warpgroups=2 block_n=64 stages=2",
      "algorithm=fa3 head_dim=128 block_m=128 consumer_warpgroups=2 block_n=128 scheduler=persistent",
      "algorithm=fa3 head_dim=64 block_m=192 consumer_warpgroups=3 block_n=96 stages=3 scheduler=persistent",
      "algorithm=fa3 head_dim=96 block_m=192 consumer_warpgroups=3 block_n=96 stages=2 scheduler=persistent",
      "algorithm=fa3 head_dim=192 head_dim_v=128 block_m=128 consumer_warpgroups=2 block_n=128 scheduler=persistent",
      "algorithm=fa3 head_dim=40 block_m=64 consumer_warpgroups=1 block_n=176 stages=3",
  });
}

TEST_CASE("the dispatcher's kernel on long sequences matches the reference kernel", "[fa3][fa2][gpu]") {
  ensure_context();
  const MaskCase m = GENERATE(MaskCase{MaskKind::none, -1, -1, 0}, MaskCase{MaskKind::causal, -1, -1, 0},
                              MaskCase{MaskKind::sliding_window, 1024, 0, 0});
  const Shape shape = make_shape({4097, 4097, 4, 1}, m, DType::bf16, 128);
  INFO(shape.to_string());
  auto c = Case::make(shape, fresh_seed());
  REQUIRE(c.ok());
  REQUIRE(runtime().forward(c->problem(), dispatch::naive_config(DType::bf16, 128, m.kind, kSm90a)).ok());
  std::vector<float> ref_o, ref_lse, o, lse;
  REQUIRE(c->read_outputs(ref_o, ref_lse).ok());
  REQUIRE(c->poison_outputs().ok());
  auto st = runtime().forward(c->problem());  // the dispatcher's choice
  if (!st.ok()) FAIL(st.error().to_string());
  REQUIRE(c->read_outputs(o, lse).ok());
  Comparison cmp = compare(shape, o, lse, ref_o, ref_lse);
  INFO(cmp.to_string());
  CHECK(cmp.nan_count == 0);
  CHECK(cmp.rel_l2 <= tolerance(DType::bf16));
  CHECK(cmp.lse_max_abs <= kPrefillLseTolerance);

  // Same inputs, same kernel: bitwise identical (a moving result would mean a race).
  REQUIRE(c->poison_outputs().ok());
  REQUIRE(runtime().forward(c->problem()).ok());
  std::vector<float> o2, lse2;
  REQUIRE(c->read_outputs(o2, lse2).ok());
  CHECK(std::memcmp(o.data(), o2.data(), o.size() * sizeof(float)) == 0);
}

TEST_CASE("the persistent fa3 scheduler over more work tiles than SMs matches the reference kernel",
          "[fa3][gpu]") {
  ensure_context();
  const MaskCase m = GENERATE(MaskCase{MaskKind::none, -1, -1, 0}, MaskCase{MaskKind::causal, -1, -1, 0});
  Shape shape = make_shape({4097, 3001, 4, 2}, m, DType::bf16, 128);  // 33 m-blocks x 8 heads x 2 batches
  INFO(shape.to_string());
  auto c = Case::make(shape, fresh_seed());
  REQUIRE(c.ok());
  REQUIRE(runtime().forward(c->problem(), dispatch::naive_config(DType::bf16, 128, m.kind, kSm90a)).ok());
  std::vector<float> ref_o, ref_lse, o, lse;
  REQUIRE(c->read_outputs(ref_o, ref_lse).ok());
  REQUIRE(c->poison_outputs().ok());
  KernelConfig config = dispatch::fa3_heuristic(DType::bf16, 128, m.kind, kSm90a);
  config.scheduler = Scheduler::persistent;
  auto st = runtime().forward(c->problem(), config);
  if (!st.ok()) FAIL(st.error().to_string());
  REQUIRE(c->read_outputs(o, lse).ok());
  Comparison cmp = compare(shape, o, lse, ref_o, ref_lse);
  INFO(cmp.to_string());
  CHECK(cmp.nan_count == 0);
  CHECK(cmp.empty_row_violations == 0);
  CHECK(cmp.rel_l2 <= tolerance(DType::bf16));
}

// Sized for compute-sanitizer (tools/soak/sanitize.sh): racecheck runs each shared-memory access through its
// checker, and the two cases above (4097 x 3001 through the reference kernel, every heuristic reference config)
// outlast its time limit there. The same kernels on shapes a tenth of the work, against the float64 host reference.
TEST_CASE("sanitizer-sized: the persistent fa3 scheduler over more work tiles than SMs matches float64",
          "[fa3][gpu][sanitize]") {
  const MaskCase m = GENERATE(MaskCase{MaskKind::none, -1, -1, 0}, MaskCase{MaskKind::causal, -1, -1, 0});
  KernelConfig config = dispatch::fa3_heuristic(DType::bf16, 128, m.kind, kSm90a);
  config.scheduler = Scheduler::persistent;
  REQUIRE(config.block_m == 128);
  check_against_fp64(make_shape({1100, 700, 4, 2}, m, DType::bf16, 128), config);  // 9 m-blocks x 8 heads x 2
}

TEST_CASE("sanitizer-sized: the reference kernels match float64", "[reference][gpu][sanitize]") {
  for (const auto& m : {kMasks[0], kMasks[1], kMasks[2]})
    for (int head_dim : {64, 128})
      check_against_fp64(make_shape({130, 200, 2, 1}, m, DType::bf16, head_dim),
                         dispatch::naive_config(DType::bf16, head_dim, m.kind, kSm90a));
}

TEST_CASE("bad arguments are rejected before any launch", "[runtime][gpu]") {
  ensure_context();
  Shape shape = make_shape({17, 17, 4, 1}, kMasks[0], DType::bf16, 64);
  auto c = Case::make(shape, fresh_seed());
  REQUIRE(c.ok());
  std::vector<float> host(1024);
  auto expect_untouched = [&] {
    std::vector<float> o, lse;
    REQUIRE(c->read_outputs(o, lse).ok());
    for (float x : o) REQUIRE(std::isnan(x));  // still poisoned: nothing ran
  };
  SECTION("host pointer") {
    AttentionProblem p = c->problem();
    p.k = host.data();
    auto st = runtime().forward(p);
    REQUIRE_FALSE(st.ok());
    CHECK(st.error().code == ErrorCode::invalid_argument);
    CHECK(st.error().message.find("k (") != std::string::npos);
    expect_untouched();
  }
  SECTION("misaligned pointer") {
    AttentionProblem p = c->problem();
    p.q = static_cast<const char*>(p.q) + 2;
    auto st = runtime().forward(p);
    REQUIRE_FALSE(st.ok());
    CHECK(st.error().message.find("16-byte aligned") != std::string::npos);
    expect_untouched();
  }
  SECTION("explicit config for another head dim") {
    auto st = runtime().forward(c->problem(), dispatch::fa2_heuristic(DType::bf16, 128, MaskKind::none, kSm90a));
    REQUIRE_FALSE(st.ok());
    CHECK(st.error().message.find("head_dim") != std::string::npos);
    expect_untouched();
  }
  SECTION("explicit config for another architecture") {
    auto device = cuda::device_info(0);
    REQUIRE(device.ok());
    const Arch other = device->arch.sm >= 90 ? Arch{80, false} : Arch{90, true};
    auto st = runtime().forward(c->problem(), dispatch::fa2_heuristic(DType::bf16, 64, MaskKind::none, other));
    REQUIRE_FALSE(st.ok());
    CHECK(st.error().message.find("cannot run") != std::string::npos);
    expect_untouched();
  }
}
