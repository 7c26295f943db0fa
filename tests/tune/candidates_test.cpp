// Tests of candidate enumeration: each algorithm's default space, the sweep's space overriding it, pruning
// by validate(), and the ptxas spill rule.
#include <algorithm>
#include <chrono>
#include <set>
#include <string>

#include "dispatch/heuristics.hpp"
#include "support/catch.hpp"
#include "tune/candidates.hpp"

using flashjit::Algorithm;
using flashjit::Arch;
using flashjit::KernelConfig;
using flashjit::MaskKind;
using flashjit::PtxasStats;
using flashjit::dispatch::ProblemShape;
using flashjit::tune::CandidateSpace;
using flashjit::tune::Density;
using flashjit::tune::enumerate;

namespace {

const Arch kSm90a{90, true};
const Arch kSm80{80, false};
const Arch kSm86{86, false};

ProblemShape shape(int head_dim, MaskKind mask = MaskKind::causal) {
  ProblemShape s;
  s.batch = 1, s.seqlen_q = s.seqlen_k = 4096, s.heads_q = 32, s.heads_kv = 8, s.head_dim = head_dim, s.mask = mask;
  return s;
}

bool has(const std::vector<KernelConfig>& list, const KernelConfig& c) {
  return std::find(list.begin(), list.end(), c) != list.end();
}

}  // namespace

TEST_CASE("candidates: fa3 default space on sm_90a", "[tune][candidates]") {
  const auto c = enumerate(shape(128), {}, kSm90a);
  // 3 warpgroup counts x 13 block_n (64..256 step 16) x 2 stages x 2 schedulers, before pruning.
  CHECK(c.valid.size() + c.invalid.size() == 3 * 13 * 2 * 2);
  // 14 tiles with one warpgroup, 13 with two, 2 with three (register and smem budgets), each scheduler.
  CHECK(c.valid.size() == 2 * 29);
  std::set<std::string> distinct;
  for (const auto& k : c.valid) {
    INFO(readable_name(k));
    CHECK(validate(k).empty());
    CHECK(k.algorithm == Algorithm::fa3);
    CHECK(k.block_m == 64 * k.consumer_warpgroups);
    CHECK(k.block_n % 16 == 0);
    CHECK(k.head_dim == 128);
    CHECK(k.mask == MaskKind::causal);
    CHECK(k.arch == kSm90a);
    distinct.insert(to_json(k));
  }
  CHECK(distinct.size() == c.valid.size());
  for (const auto& k : c.invalid) CHECK_FALSE(validate(k).empty());
  // The heuristic's pick is among the candidates.
  CHECK(has(c.valid, flashjit::dispatch::fa3_heuristic(flashjit::DType::bf16, 128, MaskKind::causal, kSm90a)));

  const auto reduced = enumerate(shape(128), {}, kSm90a, Density::reduced);
  CHECK(reduced.valid.size() + reduced.invalid.size() == 3 * 7 * 2);
  CHECK(reduced.valid.size() == 2 * 10);
  for (const auto& k : reduced.valid) CHECK((k.block_n % 32 == 0 && k.stages == 2));
}

TEST_CASE("candidates: fa2 default space where the dispatcher picks fa2", "[tune][candidates]") {
  const auto c = enumerate(shape(96, MaskKind::none), {}, kSm86);  // no fa3 before sm_90a
  CHECK(c.valid.size() + c.invalid.size() == 2 * 2 * 3 * 2);  // warps {4,8} x rows/warp {16,32} x block_n x stages
  REQUIRE_FALSE(c.valid.empty());
  for (const auto& k : c.valid) {
    CHECK(k.algorithm == Algorithm::fa2);
    CHECK((k.block_m == 16 * k.warps || k.block_m == 32 * k.warps));
  }
  // On sm_80, smaller shared memory: the same space prunes more.
  const auto sm80 = enumerate(shape(256, MaskKind::none), {}, kSm80);
  CHECK_FALSE(sm80.invalid.empty());
  for (const auto& k : sm80.valid) CHECK(k.arch == kSm80);
}

TEST_CASE("candidates: the sweep's space overrides the defaults", "[tune][candidates]") {
  CandidateSpace space;
  space.algorithms = {Algorithm::fa3, Algorithm::fa2};
  space.block_n = {64, 128};
  space.stages = {2};
  space.warps = {2, 4};
  const auto c = enumerate(shape(128), space, kSm90a);
  // fa3 with 2 warpgroups (4 is invalid), fa2 with 4 warps at 16 or 32 rows per warp (2 warps too).
  for (const auto& k : c.valid) {
    CHECK((k.block_n == 64 || k.block_n == 128));
    CHECK(k.stages == 2);
  }
  CHECK(has(c.invalid, [] {
    KernelConfig k;
    k.algorithm = Algorithm::fa3, k.arch = kSm90a, k.head_dim = 128, k.mask = MaskKind::causal;
    k.consumer_warpgroups = 4, k.block_m = 256, k.block_n = 64, k.stages = 2;
    return k;
  }()));
  const auto algorithms = std::count_if(c.valid.begin(), c.valid.end(), [](const KernelConfig& k) { return k.algorithm == Algorithm::fa2; });
  CHECK(algorithms > 0);

  CandidateSpace fixed_m;
  fixed_m.block_m = {128};
  for (const auto& k : enumerate(shape(128), fixed_m, kSm90a).valid) CHECK((k.block_m == 128 && k.consumer_warpgroups == 2));
}

TEST_CASE("candidates: spills and stack frames disqualify", "[tune][candidates]") {
  PtxasStats p;
  p.registers = 240;
  CHECK_FALSE(flashjit::tune::spills(p));
  p.spill_stores = 4;
  CHECK(flashjit::tune::spills(p));
  p.spill_stores = 0, p.spill_loads = 8;
  CHECK(flashjit::tune::spills(p));
  p.spill_loads = 0, p.stack_frame = 16;
  CHECK(flashjit::tune::spills(p));
}

// Issue 29: a space given in code (not through a sweep file, which is refused beyond the cap) is enumerated up
// to kMaxCandidates configs, deduplicated in a hash set: seconds at most, not hours.
TEST_CASE("candidates: a huge space stops at the cap, quickly", "[tune][candidates]") {
  CandidateSpace space;
  space.algorithms = {Algorithm::fa2};
  for (int i = 1; i <= 1000; ++i) space.block_n.push_back(i);
  for (int i = 1; i <= 1000; ++i) space.stages.push_back(i % 7);  // duplicates: 7 distinct values
  space.warps = {4, 8};
  const auto t0 = std::chrono::steady_clock::now();
  const auto c = enumerate(shape(128), space, kSm90a);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(c.capped);
  CHECK(c.valid.size() + c.invalid.size() <= flashjit::tune::kMaxCandidates);
  CHECK(s < 30);
  CHECK_FALSE(enumerate(shape(128), {}, kSm90a).capped);
}
