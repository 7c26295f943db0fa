// Tests of the dispatcher: which config choose() picks, what supports() accepts, and that every heuristic
// config is valid.
#include <cstdint>
#include <initializer_list>
#include <string>

#include "dispatch/heuristics.hpp"
#include "flashjit/config.hpp"
#include "flashjit/problem.hpp"
#include "support/catch.hpp"

using flashjit::Algorithm;
using flashjit::Arch;
using flashjit::AttentionProblem;
using flashjit::DType;
using flashjit::ErrorCode;
using flashjit::KernelConfig;
using flashjit::MaskKind;
using flashjit::dispatch::choose;
using flashjit::dispatch::fa2_heuristic;
using flashjit::dispatch::fa3_heuristic;
using flashjit::dispatch::naive_config;
using flashjit::dispatch::supports;

namespace {

const Arch kSm75{75, false};
const Arch kSm80{80, false};
const Arch kSm86{86, false};
const Arch kSm89{89, false};
const Arch kSm90{90, false};
const Arch kSm90a{90, true};

const MaskKind kMasks[] = {MaskKind::none, MaskKind::causal, MaskKind::sliding_window, MaskKind::chunked,
                           MaskKind::chunked_causal};

// A problem that passes check(): fake, 16-byte aligned device pointers (never dereferenced here).
AttentionProblem problem(DType dtype, int head_dim, MaskKind mask) {
  AttentionProblem p;
  p.dtype = dtype;
  p.batch = 2;
  p.seqlen_q = 100;
  p.seqlen_k = 300;
  p.heads_q = 8;
  p.heads_kv = 2;
  p.head_dim = head_dim;
  p.q = reinterpret_cast<const void*>(std::uintptr_t{0x100000});
  p.k = reinterpret_cast<const void*>(std::uintptr_t{0x200000});
  p.v = reinterpret_cast<const void*>(std::uintptr_t{0x300000});
  p.o = reinterpret_cast<void*>(std::uintptr_t{0x400000});
  p.mask = mask;
  if (mask == MaskKind::sliding_window) p.window_left = 64, p.window_right = 0;
  if (mask == MaskKind::chunked || mask == MaskKind::chunked_causal) p.chunk_size = 128;
  return p;
}

std::string issues_text(const KernelConfig& c) {
  std::string s;
  for (const auto& i : validate(c)) s += i.field + ": " + i.message + "\n";
  return s;
}

// choose() must pick fa2_heuristic's config (and explicitly asking for fa2 must give the same).
void check_chooses_fa2(std::initializer_list<int> head_dims, std::initializer_list<Arch> arches) {
  for (int d : head_dims)
    for (MaskKind mask : kMasks)
      for (DType dtype : {DType::bf16, DType::fp16})
        for (Arch a : arches) {
          auto p = problem(dtype, d, mask);
          REQUIRE(check(p).ok());
          auto r = choose(p, a);
          INFO(a.to_string() << " d" << d << " " << to_string(mask) << " " << to_string(dtype));
          REQUIRE(r.ok());
          INFO("chose " << readable_name(*r));
          CHECK(r->algorithm == Algorithm::fa2);
          CHECK(*r == fa2_heuristic(dtype, d, mask, a));
          CHECK(r->arch == a);
          CHECK(r->dtype == dtype);
          CHECK(r->head_dim == d);
          CHECK(r->mask == mask);
          auto explicit_fa2 = choose(p, a, Algorithm::fa2);
          CHECK(explicit_fa2.ok());
          if (explicit_fa2.ok()) CHECK(*explicit_fa2 == *r);
        }
}

}  // namespace

TEST_CASE("choose: fa2 for head_dim 64 96 128 256 on sm_90", "[dispatch]") {
  check_chooses_fa2({64, 96, 128, 256}, {kSm90});
}

// On sm_90a fa3 takes every head dim (multiples of 8 up to 256, head_dim_v too); fa2 stays available on
// request.
TEST_CASE("choose: fa3 for every head dim and head_dim_v on sm_90a", "[dispatch]") {
  for (int d = 8; d <= 256; d += 8)
    for (int dv : {0, 128, 72})
      for (MaskKind mask : kMasks)
        for (DType dtype : {DType::bf16, DType::fp16}) {
          auto p = problem(dtype, d, mask);
          p.head_dim_v = dv;
          auto r = choose(p, kSm90a);
          INFO("d" << d << " dv" << dv << " " << to_string(mask) << " " << to_string(dtype));
          REQUIRE(r.ok());
          INFO("chose " << readable_name(*r));
          CHECK(r->algorithm == Algorithm::fa3);
          CHECK(validate(*r).empty());
          CHECK(supports(*r, p, kSm90a).ok());
          KernelConfig expected = flashjit::dispatch::fa3_config(p, kSm90a);
          flashjit::dispatch::fit_pack_gqa(expected, p);  // short windows (this problem's 64 keys), group 4
          CHECK(*r == expected);
          CHECK(r->pack_gqa == (mask == MaskKind::sliding_window));
          CHECK(value_head_dim(*r) == value_head_dim(p));
          CHECK(r->head_dim_v == (dv == d ? 0 : dv));  // normalized: 0 when V's head dim is Q's
          auto explicit_fa3 = choose(p, kSm90a, Algorithm::fa3);
          REQUIRE(explicit_fa3.ok());
          CHECK(*explicit_fa3 == *r);
          auto explicit_fa2 = choose(p, kSm90a, Algorithm::fa2);
          REQUIRE(explicit_fa2.ok());
          CHECK(*explicit_fa2 == fa2_heuristic(dtype, d, mask, kSm90a, dv));
        }
}

TEST_CASE("choose: fa2 for head_dim 64 96 128 on sm_80 sm_86 sm_89", "[dispatch]") {
  check_chooses_fa2({64, 96, 128}, {kSm80, kSm86, kSm89});
}

// Before Hopper the head_dim 256 tile must fit the smaller shared memory, or choose() would silently fall
// back to the reference kernel (and choose(..., Algorithm::fa2) would fail with invalid_config).
TEST_CASE("choose: fa2 for head_dim 256 on sm_80 sm_86 sm_89", "[dispatch]") {
  check_chooses_fa2({256}, {kSm80, kSm86, kSm89});
}

TEST_CASE("choose: fa2 for odd multiples of 8 before Hopper, naive for sm_75", "[dispatch]") {
  auto mask = GENERATE(MaskKind::none, MaskKind::causal, MaskKind::sliding_window, MaskKind::chunked,
                       MaskKind::chunked_causal);
  auto dtype = GENERATE(DType::bf16, DType::fp16);
  SECTION("head_dim 40 (and other multiples of 8 that are not of 16)") {
    for (int d : {8, 24, 40, 72, 136, 248}) {
      for (Arch a : {kSm80, kSm86}) {
        auto r = choose(problem(dtype, d, mask), a);
        INFO(a.to_string() << " d" << d);
        REQUIRE(r.ok());
        CHECK(r->algorithm == Algorithm::fa2);
        CHECK(*r == fa2_heuristic(dtype, d, mask, a));
      }
    }
  }
  SECTION("sm_75: fa2 needs sm_80") {
    for (int d : {64, 128, 256}) {
      auto r = choose(problem(dtype, d, mask), kSm75);
      INFO("d" << d);
      REQUIRE(r.ok());
      CHECK(r->algorithm == Algorithm::naive);
      CHECK(*r == naive_config(dtype, d, mask, kSm75));
    }
  }
}

TEST_CASE("choose: explicit algorithms", "[dispatch]") {
  SECTION("naive when asked, even where fa2 would do") {
    auto p = problem(DType::bf16, 128, MaskKind::causal);
    auto r = choose(p, kSm90a, Algorithm::naive);
    REQUIRE(r.ok());
    CHECK(*r == naive_config(DType::bf16, 128, MaskKind::causal, kSm90a));
  }
  SECTION("fa2 for a head dim it does not support is invalid_config") {
    auto r = choose(problem(DType::bf16, 264, MaskKind::none), kSm90a, Algorithm::fa2);
    REQUIRE(!r.ok());
    CHECK(r.error().code == ErrorCode::invalid_config);
    CHECK(r.error().message.find("head_dim") != std::string::npos);
  }
  SECTION("fa2 on sm_75 is invalid_config naming the arch") {
    auto r = choose(problem(DType::bf16, 128, MaskKind::none), kSm75, Algorithm::fa2);
    REQUIRE(!r.ok());
    CHECK(r.error().code == ErrorCode::invalid_config);
    CHECK(r.error().message.find("arch") != std::string::npos);
  }
  SECTION("fa3 where it cannot run is invalid_config") {
    auto r = choose(problem(DType::bf16, 128, MaskKind::none), kSm80, Algorithm::fa3);
    REQUIRE(!r.ok());
    CHECK(r.error().code == ErrorCode::invalid_config);
    CHECK(r.error().message.find("arch") != std::string::npos);
    r = choose(problem(DType::bf16, 264, MaskKind::none), kSm90a, Algorithm::fa3);
    REQUIRE(!r.ok());
    CHECK(r.error().code == ErrorCode::invalid_config);
    CHECK(r.error().message.find("head_dim") != std::string::npos);
  }
}

TEST_CASE("choose: for every valid problem the choice is a valid config that supports it", "[dispatch]") {
  auto dtype = GENERATE(DType::bf16, DType::fp16);
  for (Arch a : {kSm75, kSm80, kSm86, kSm89, kSm90a})
    for (MaskKind m : kMasks)
      for (int d = 8; d <= 256; d += 8) {
        auto p = problem(dtype, d, m);
        REQUIRE(check(p).ok());
        auto r = choose(p, a);
        INFO(a.to_string() << " d" << d << " " << to_string(m));
        REQUIRE(r.ok());
        INFO(readable_name(*r) << "\n" << issues_text(*r));
        CHECK(validate(*r).empty());
        CHECK(supports(*r, p, a).ok());
      }
}

// fa2 covers every multiple of 8 up to 256 on sm_80 and newer, so a fast kernel (fa2, or fa3 on sm_90a)
// should be chosen for all of them.
TEST_CASE("choose: a fast kernel whenever fa2 can run the problem", "[dispatch]") {
  for (Arch a : {kSm75, kSm80, Arch{87, false}, kSm86, kSm89, kSm90a})
    for (MaskKind m : kMasks)
      for (int d = 8; d <= 256; d += 8) {
        auto r = choose(problem(DType::bf16, d, m), a);
        INFO(a.to_string() << " d" << d << " " << to_string(m));
        REQUIRE(r.ok());
        CHECK((r->algorithm != Algorithm::naive) == (a.sm >= 80));
      }
}

namespace {

void check_heuristic_valid(int d_min, int d_max, std::initializer_list<Arch> arches) {
  for (DType dtype : {DType::bf16, DType::fp16})
    for (Arch a : arches)
      for (MaskKind m : kMasks)
        for (int d = d_min; d <= d_max; d += 8) {
          auto c = fa2_heuristic(dtype, d, m, a);
          INFO(readable_name(c) << "\n" << issues_text(c));
          CHECK(validate(c).empty());
          CHECK(c.algorithm == Algorithm::fa2);
          CHECK(c.arch == a);
          CHECK(c.dtype == dtype);
          CHECK(c.head_dim == d);
          CHECK(c.mask == m);
        }
}

}  // namespace

TEST_CASE("fa2_heuristic: every config for sm_90 and newer is valid (sm_120: 99 KB of shared memory)", "[dispatch]") {
  check_heuristic_valid(8, 256, {kSm90, kSm90a, Arch{100, true}, Arch{120, false}, Arch{121, false}});
}

TEST_CASE("fa2_heuristic: every config up to head_dim 128 is valid on sm_80 sm_86 sm_87 sm_89", "[dispatch]") {
  check_heuristic_valid(8, 128, {kSm80, kSm86, Arch{87, false}, kSm89});
}

// Above head_dim 128 the sm_90 tile (block_m 128, block_n 64, 2 stages) needs 768 * round_up(head_dim, 64)
// bytes of shared memory: over 101376 (sm_86 / sm_89) from head_dim 144 and over 166912 (sm_80 / sm_87)
// from head_dim 208; older archs get a smaller tile.
TEST_CASE("fa2_heuristic: every config above head_dim 128 is valid on sm_80 sm_86 sm_87 sm_89",
          "[dispatch]") {
  check_heuristic_valid(136, 256, {kSm80, kSm86, Arch{87, false}, kSm89});
}

TEST_CASE("fa3_heuristic: valid on sm_90a for every head dim and head_dim_v; invalid elsewhere", "[dispatch]") {
  for (DType dtype : {DType::bf16, DType::fp16})
    for (MaskKind m : kMasks)
      for (int d = 8; d <= 256; d += 8)
        for (int dv : {0, 8, 128, 256}) {
          auto c = fa3_heuristic(dtype, d, m, kSm90a, dv);
          INFO(readable_name(c) << "\n" << issues_text(c));
          CHECK(validate(c).empty());
          CHECK(c.algorithm == Algorithm::fa3);
          CHECK(c.head_dim == d);
          CHECK(value_head_dim(c) == (dv == 0 ? d : dv));
          CHECK(c.mask == m);
          CHECK(c.dtype == dtype);
          for (Arch other : {kSm80, kSm90}) CHECK(!validate(fa3_heuristic(dtype, d, m, other, dv)).empty());
        }
}

TEST_CASE("naive_config: valid for every multiple of 8 up to 256", "[dispatch]") {
  for (Arch a : {kSm75, kSm80, kSm90a})
    for (MaskKind m : kMasks)
      for (int d = 8; d <= 256; d += 8) {
        auto c = naive_config(DType::fp16, d, m, a);
        INFO(readable_name(c) << "\n" << issues_text(c));
        CHECK(validate(c).empty());
        CHECK(c.algorithm == Algorithm::naive);
      }
}

TEST_CASE("supports: a matching config", "[dispatch]") {
  auto p = problem(DType::fp16, 128, MaskKind::sliding_window);
  CHECK(supports(fa2_heuristic(DType::fp16, 128, MaskKind::sliding_window, kSm90a), p, kSm90a).ok());
  CHECK(supports(naive_config(DType::fp16, 128, MaskKind::sliding_window, kSm80), p, kSm80).ok());
}

TEST_CASE("supports: rejects dtype / head_dim / mask mismatches", "[dispatch]") {
  auto p = problem(DType::bf16, 128, MaskKind::causal);
  auto c = fa2_heuristic(DType::bf16, 128, MaskKind::causal, kSm90a);
  std::string what;
  SECTION("dtype") {
    c.dtype = DType::fp16;
    what = "dtype";
  }
  SECTION("head_dim") {
    c = fa2_heuristic(DType::bf16, 64, MaskKind::causal, kSm90a);
    what = "head_dim";
  }
  SECTION("mask") {
    c.mask = MaskKind::none;
    what = "mask";
  }
  SECTION("mask: chunked vs chunked_causal") {
    p = problem(DType::bf16, 128, MaskKind::chunked);
    c.mask = MaskKind::chunked_causal;
    what = "mask";
  }
  auto st = supports(c, p, kSm90a);
  REQUIRE(!st.ok());
  INFO(st.error().message);
  CHECK(st.error().code == ErrorCode::invalid_argument);
  CHECK(st.error().message.find(what) != std::string::npos);
  CHECK(st.error().message.find(readable_name(c)) != std::string::npos);
}

TEST_CASE("supports: every mismatch is listed", "[dispatch]") {
  auto p = problem(DType::bf16, 128, MaskKind::causal);
  auto c = fa2_heuristic(DType::fp16, 64, MaskKind::none, kSm90a);
  auto st = supports(c, p, kSm80);
  REQUIRE(!st.ok());
  const auto& msg = st.error().message;
  INFO(msg);
  for (const char* part : {"dtype", "head_dim", "mask", "sm_90a", "sm_80"}) CHECK(msg.find(part) != std::string::npos);
}

TEST_CASE("supports: which architectures can load a kernel", "[dispatch]") {
  auto p = problem(DType::bf16, 128, MaskKind::none);
  auto on = [&](Arch kernel, Arch device) {
    return supports(fa2_heuristic(DType::bf16, 128, MaskKind::none, kernel), p, device).ok();
  };
  SECTION("sm_90a kernels run only on sm_90 devices") {
    CHECK_FALSE(on(kSm90a, kSm80));
    CHECK_FALSE(on(kSm90a, kSm86));
    CHECK_FALSE(on(kSm90a, Arch{100, true}));
    CHECK(on(kSm90a, kSm90a));
    CHECK(on(kSm90a, kSm90));
    auto st = supports(fa2_heuristic(DType::bf16, 128, MaskKind::none, kSm90a), p, kSm80);
    REQUIRE(!st.ok());
    CHECK(st.error().message.find("sm_90a") != std::string::npos);
    CHECK(st.error().message.find("sm_80") != std::string::npos);
  }
  SECTION("sm_80 kernels run on sm_80, sm_86, sm_87, sm_89") {
    CHECK(on(kSm80, kSm80));
    CHECK(on(kSm80, kSm86));
    CHECK(on(kSm80, Arch{87, false}));
    CHECK(on(kSm80, kSm89));
  }
  SECTION("not on an older minor version nor on another major version") {
    CHECK_FALSE(on(kSm86, kSm80));
    CHECK_FALSE(on(kSm89, kSm86));
    CHECK_FALSE(on(kSm80, kSm90a));
    CHECK_FALSE(on(kSm80, kSm90));
    CHECK_FALSE(on(kSm80, kSm75));
    CHECK_FALSE(on(kSm90, Arch{100, true}));
  }
  SECTION("a plain sm_90 kernel runs on an sm_90 device") { CHECK(on(kSm90, kSm90a)); }
}

namespace {

// problem() as a ragged batch: packed q/k/v, device offsets (fake), max lengths 100 / 300.
AttentionProblem varlen_problem(DType dtype, int head_dim, MaskKind mask) {
  AttentionProblem p = problem(dtype, head_dim, mask);
  p.cu_seqlens_q = reinterpret_cast<const int*>(std::uintptr_t{0x500000});
  p.cu_seqlens_k = reinterpret_cast<const int*>(std::uintptr_t{0x500100});
  p.total_q = 150, p.total_k = 420;
  return p;
}

}  // namespace

TEST_CASE("choose: a varlen problem gets the fixed-length choice with varlen set", "[dispatch][varlen]") {
  for (Arch a : {kSm75, kSm80, kSm86, kSm90a})
    for (MaskKind m : kMasks)
      for (int d : {40, 64, 96, 128, 256})
        for (auto algorithm : {Algorithm::automatic, Algorithm::naive}) {
          const auto vp = varlen_problem(DType::bf16, d, m);
          REQUIRE(check(vp).ok());
          auto fixed = choose(problem(DType::bf16, d, m), a, algorithm);
          auto r = choose(vp, a, algorithm);
          INFO(a.to_string() << " d" << d << " " << to_string(m));
          REQUIRE(fixed.ok());
          REQUIRE(r.ok());
          INFO("chose " << readable_name(*r));
          CHECK(r->varlen);
          CHECK_FALSE(fixed->varlen);
          KernelConfig expected = *fixed;
          expected.varlen = true;
          CHECK(*r == expected);
          CHECK(validate(*r).empty());
          CHECK(supports(*r, vp, a).ok());
          CHECK_FALSE(supports(*fixed, vp, a).ok());
        }
}

TEST_CASE("supports: varlen kernels for varlen problems only", "[dispatch][varlen]") {
  auto c = fa3_heuristic(DType::bf16, 128, MaskKind::causal, kSm90a);
  SECTION("a fixed-length kernel for a varlen problem") {
    auto st = supports(c, varlen_problem(DType::bf16, 128, MaskKind::causal), kSm90a);
    REQUIRE(!st.ok());
    INFO(st.error().message);
    CHECK(st.error().code == ErrorCode::invalid_argument);
    CHECK(st.error().message.find("varlen") != std::string::npos);
  }
  SECTION("a varlen kernel for a fixed-length problem") {
    c.varlen = true;
    auto st = supports(c, problem(DType::bf16, 128, MaskKind::causal), kSm90a);
    REQUIRE(!st.ok());
    INFO(st.error().message);
    CHECK(st.error().message.find("varlen") != std::string::npos);
    CHECK(st.error().message.find(readable_name(c)) != std::string::npos);
  }
  SECTION("matching") {
    c.varlen = true;
    CHECK(supports(c, varlen_problem(DType::bf16, 128, MaskKind::causal), kSm90a).ok());
  }
}

TEST_CASE("fa3_config: 64-row tiles when 128-row tiles fill less than half the SMs", "[dispatch]") {
  using flashjit::dispatch::fa3_config;
  AttentionProblem p = problem(DType::bf16, 128, MaskKind::causal);
  p.batch = 1, p.heads_q = 32, p.heads_kv = 8;
  p.seqlen_q = p.seqlen_k = 256;  // 2 m-blocks x 32 heads = 64 CTAs of 128 rows
  KernelConfig c = fa3_config(p, kSm90a);
  CHECK(c.block_m == 64);
  CHECK(c.consumer_warpgroups == 1);
  CHECK(c.scheduler == flashjit::Scheduler::grid);
  CHECK(validate(c).empty());
  p.seqlen_q = p.seqlen_k = 512;  // 128 CTAs: the heuristic's tile
  CHECK(fa3_config(p, kSm90a) == fa3_heuristic(DType::bf16, 128, MaskKind::causal, kSm90a));
  CHECK(fa3_heuristic(DType::bf16, 128, MaskKind::none, kSm90a).scheduler == flashjit::Scheduler::persistent);
  p.head_dim = 64;  // other head dims keep their tiles
  CHECK(fa3_config(p, kSm90a) == fa3_heuristic(DType::bf16, 64, MaskKind::causal, kSm90a));
}

TEST_CASE("fa3_config: short sliding windows take 64-key persistent tiles (three warpgroups up to d64)", "[dispatch]") {
  using flashjit::dispatch::fa3_config;
  AttentionProblem p = problem(DType::bf16, 64, MaskKind::sliding_window);
  p.seqlen_q = p.seqlen_k = 8192;
  p.window_left = 128, p.window_right = 0;
  KernelConfig c = fa3_config(p, kSm90a);
  CHECK(c.block_m == 192);
  CHECK(c.consumer_warpgroups == 3);
  CHECK(c.block_n == 64);
  CHECK(c.scheduler == flashjit::Scheduler::persistent);
  CHECK(validate(c).empty());
  p.head_dim = 128;  // up to d128: two warpgroups
  c = fa3_config(p, kSm90a);
  CHECK(c.block_m == 128);
  CHECK(c.consumer_warpgroups == 2);
  CHECK(c.block_n == 64);
  CHECK(c.scheduler == flashjit::Scheduler::persistent);
  CHECK(validate(c).empty());
  p.head_dim = 64, p.window_left = 512;  // wider windows keep the heuristic's tiles
  CHECK(fa3_config(p, kSm90a) == fa3_heuristic(DType::bf16, 64, MaskKind::sliding_window, kSm90a));
}

TEST_CASE("choose: variants are compiled in exactly when the problem has them", "[dispatch][variant]") {
  AttentionProblem p = problem(DType::bf16, 128, MaskKind::causal);
  auto plain = choose(p, kSm90a);
  REQUIRE(plain.ok());
  CHECK_FALSE(plain->softcap);
  CHECK_FALSE(plain->alibi);
  CHECK_FALSE(plain->sinks);
  p.softcap = 50.f;
  p.alibi_slopes = reinterpret_cast<const float*>(std::uintptr_t{0x60000});
  p.sinks = reinterpret_cast<const float*>(std::uintptr_t{0x70000});
  for (Algorithm a : {Algorithm::automatic, Algorithm::fa3, Algorithm::fa2, Algorithm::naive}) {
    auto c = choose(p, kSm90a, a);
    REQUIRE(c.ok());
    INFO(readable_name(*c));
    CHECK(c->softcap);
    CHECK(c->alibi);
    CHECK(c->sinks);
    CHECK(validate(*c).empty());
    CHECK(supports(*c, p, kSm90a).ok());
    CHECK(readable_name(*c).find("_softcap_alibi_sinks_") != std::string::npos);
  }
}

TEST_CASE("choose: fa3 tiles with a variant narrow where the heuristic's would spill", "[dispatch][variant]") {
  for (int d = 8; d <= 256; d += 8) {
    AttentionProblem p = problem(DType::bf16, d, MaskKind::causal);
    auto plain = choose(p, kSm90a, Algorithm::fa3);
    p.softcap = 30.f;
    auto with = choose(p, kSm90a, Algorithm::fa3);
    REQUIRE(plain.ok());
    REQUIRE(with.ok());
    INFO("d" << d << ": " << readable_name(*plain) << " -> " << readable_name(*with));
    CHECK(validate(*with).empty());
    CHECK(with->block_m == plain->block_m);
    CHECK(with->consumer_warpgroups == plain->consumer_warpgroups);
    if (plain->consumer_warpgroups == 3 && d > 80) CHECK(with->block_n == std::min(plain->block_n, 80));
    else if (d > 240) CHECK(with->block_n == std::min(plain->block_n, 64));
    else CHECK(with->block_n == plain->block_n);
  }
}

TEST_CASE("choose and supports: snippets go into the config; a kernel serves only its own text", "[dispatch][variant]") {
  AttentionProblem p = problem(DType::bf16, 128, MaskKind::causal);
  const char* mod = "__device__ float score_mod(float s, int, int, int, int, const flashjit::ModContext&) { return s; }";
  p.score_mod = mod;
  p.mask_mod = "__device__ bool mask_mod(int, int, int, int, const flashjit::ModContext&) { return true; }";
  auto c = choose(p, kSm90a);
  REQUIRE(c.ok());
  CHECK(c->score_mod == mod);
  CHECK(c->mask_mod == p.mask_mod);
  CHECK(supports(*c, p, kSm90a).ok());
  AttentionProblem other = p;
  const std::string changed = std::string(mod) + " ";
  other.score_mod = changed.c_str();
  auto st = supports(*c, other, kSm90a);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message.find("score_mod is not the problem's") != std::string::npos);
  other = p;
  other.mask_mod = nullptr;
  CHECK_FALSE(supports(*c, other, kSm90a).ok());
}

TEST_CASE("supports: a variant kernel for the problems with that variant only", "[dispatch][variant]") {
  const AttentionProblem plain = problem(DType::bf16, 128, MaskKind::none);
  AttentionProblem capped = plain;
  capped.softcap = 20.f;
  AttentionProblem alibi = plain;
  alibi.alibi_slopes = reinterpret_cast<const float*>(std::uintptr_t{0x60000});
  AttentionProblem sinks = plain;
  sinks.sinks = reinterpret_cast<const float*>(std::uintptr_t{0x70000});
  const KernelConfig c = fa3_heuristic(DType::bf16, 128, MaskKind::none, kSm90a);
  struct Case {
    const AttentionProblem* p;
    const char* word;
  };
  for (const Case& k : {Case{&capped, "softcap"}, Case{&alibi, "alibi"}, Case{&sinks, "sinks"}}) {
    auto st = supports(c, *k.p, kSm90a);
    REQUIRE_FALSE(st.ok());
    INFO(st.error().message);
    CHECK(st.error().message.find(k.word) != std::string::npos);
  }
  KernelConfig with = c;
  with.softcap = true;
  auto st = supports(with, plain, kSm90a);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message.find("softcap kernel needs") != std::string::npos);
  CHECK(supports(with, capped, kSm90a).ok());
}

TEST_CASE("choose: short sliding windows with grouped heads pack the group's query heads into the rows",
          "[dispatch]") {
  AttentionProblem p = problem(DType::bf16, 64, MaskKind::sliding_window);  // H8/2, window 64
  p.seqlen_q = p.seqlen_k = 8192;
  p.heads_q = 64, p.heads_kv = 8, p.window_left = 128;  // gpt-oss
  auto c = choose(p, kSm90a);
  REQUIRE(c.ok());
  INFO(readable_name(*c));
  CHECK(c->pack_gqa);
  CHECK(c->block_m == 192);
  CHECK(readable_name(*c).find("_packgqa_") != std::string::npos);
  CHECK(supports(*c, p, kSm90a).ok());
  p.sinks = reinterpret_cast<const float*>(std::uintptr_t{0x70000});  // sinks pack (per row's head)
  CHECK(choose(p, kSm90a)->pack_gqa);
  p.softcap = 30.f;
  CHECK(choose(p, kSm90a)->pack_gqa);
  p.alibi_slopes = reinterpret_cast<const float*>(std::uintptr_t{0x60000});  // ALiBi does not
  CHECK_FALSE(choose(p, kSm90a)->pack_gqa);
  p.alibi_slopes = nullptr, p.sinks = nullptr, p.softcap = 0.f;

  p.head_dim = 128;  // up to d128: 192-row tiles of 64 keys, packed
  c = choose(p, kSm90a);
  CHECK(c->pack_gqa);
  CHECK(c->block_m == 192);
  CHECK(c->block_n == 64);
  p.heads_q = 24;  // group 3 divides 192 rows
  CHECK(choose(p, kSm90a)->pack_gqa);
  p.heads_q = 8 * 128;  // group 128 does not: the 128-row short-window tile, packed
  c = choose(p, kSm90a);
  CHECK(c->pack_gqa);
  CHECK(c->block_m == 128);
  p.heads_q = 40;  // group 5 divides neither
  CHECK_FALSE(choose(p, kSm90a)->pack_gqa);
  p.head_dim = 256, p.heads_q = 64;  // above d128: the short-window rule's tiles, packed (128 rows)
  c = choose(p, kSm90a);
  CHECK(c->pack_gqa);
  CHECK(c->block_m == 128);
  p.head_dim = 64;

  p.heads_q = p.heads_kv;  // MHA: nothing to pack
  CHECK_FALSE(choose(p, kSm90a)->pack_gqa);
  p.heads_q = 64, p.window_left = 512;  // up to 512 keys, up to d128
  CHECK(choose(p, kSm90a)->pack_gqa);
  p.head_dim = 256;
  CHECK_FALSE(choose(p, kSm90a)->pack_gqa);
  p.head_dim = 64, p.window_left = 1024;  // wider windows: not measured to pay
  CHECK_FALSE(choose(p, kSm90a)->pack_gqa);
  p.mask = MaskKind::causal, p.window_left = p.window_right = -1;
  CHECK_FALSE(choose(p, kSm90a)->pack_gqa);
  p.mask = MaskKind::sliding_window, p.window_left = 128, p.window_right = 0;
  CHECK_FALSE(choose(p, kSm90a, Algorithm::fa2)->pack_gqa);  // fa3 only
}

TEST_CASE("supports and validate: packed GQA needs a group that divides block_m and no per-tile-head variant",
          "[dispatch]") {
  AttentionProblem p = problem(DType::bf16, 128, MaskKind::none);  // H8/2: group 4
  KernelConfig c = fa3_heuristic(DType::bf16, 128, MaskKind::none, kSm90a);
  c.pack_gqa = true;
  CHECK(validate(c).empty());
  CHECK(supports(c, p, kSm90a).ok());
  p.heads_q = 6;  // group 3 on 128 rows
  auto st = supports(c, p, kSm90a);
  REQUIRE_FALSE(st.ok());
  INFO(st.error().message);
  CHECK(st.error().message.find("pack_gqa needs the group (heads_q / heads_kv = 3) to divide block_m (128)") !=
        std::string::npos);
  c.alibi = true;
  const std::string issues = issues_text(c);
  INFO(issues);
  CHECK(issues.find("pack_gqa: pack_gqa does not take alibi") != std::string::npos);
  c.alibi = false, c.score_mod = "x";
  CHECK(issues_text(c).find("pack_gqa:") != std::string::npos);
}
