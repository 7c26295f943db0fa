// Tests of tuning one problem against a fake GPU: the fastest candidate that passes the check wins, spilling
// and failing candidates are pruned and counted, the runner-up and the heuristic's figure are recorded.
#include <algorithm>
#include <limits>
#include <map>
#include <string>

#include "support/catch.hpp"
#include "tune/autotune.hpp"

using flashjit::Algorithm;
using flashjit::Arch;
using flashjit::DType;
using flashjit::Error;
using flashjit::ErrorCode;
using flashjit::KernelConfig;
using flashjit::KernelInfo;
using flashjit::MaskKind;
using flashjit::Result;
using namespace flashjit::dispatch;
using namespace flashjit::tune;

namespace {

KernelConfig fa3(int block_n) {
  KernelConfig c;
  c.algorithm = Algorithm::fa3, c.arch = Arch{90, true}, c.head_dim = 128, c.mask = MaskKind::causal;
  c.block_m = 128, c.consumer_warpgroups = 2, c.block_n = block_n, c.stages = 2;
  return c;
}

ProblemShape llama(int seqlen) {
  ProblemShape s;
  s.seqlen_q = s.seqlen_k = seqlen, s.heads_q = 32, s.heads_kv = 8, s.head_dim = 128, s.mask = MaskKind::causal;
  return s;
}

// Times and errors by block_n; a missing time is a run failure.
class FakeBench : public ProblemBench {
 public:
  std::map<int, double> ms;
  std::map<int, double> error;  // rel L2; default 1e-3
  bool too_large = false;
  int checks = 0;

  Result<double> median_ms(const KernelConfig& c) override {
    if (!ms.count(c.block_n)) return Error(ErrorCode::driver, "cuLaunchKernelEx failed");
    return ms[c.block_n];
  }
  Result<std::optional<double>> rel_l2(const KernelConfig& c) override {
    ++checks;
    if (too_large) return std::optional<double>();
    return std::optional<double>(error.count(c.block_n) ? error[c.block_n] : 1e-3);
  }
};

// Compiles everything, with ptxas spills for the block_n listed.
CompiledFn compiler(std::vector<int> spilling = {}, std::vector<int> failing = {}) {
  return [=](const KernelConfig& c) -> Result<KernelInfo> {
    if (std::find(failing.begin(), failing.end(), c.block_n) != failing.end())
      return Error(ErrorCode::compile, "worker killed by signal 11 (SIGSEGV)");
    KernelInfo k;
    k.name = readable_name(c);
    k.ptxas.registers = 200;
    if (std::find(spilling.begin(), spilling.end(), c.block_n) != spilling.end()) k.ptxas.spill_stores = 8;
    return k;
  };
}

}  // namespace

TEST_CASE("autotune: the fastest candidate wins; runner-up and heuristic recorded", "[tune][autotune]") {
  Candidates c;
  c.valid = {fa3(64), fa3(96), fa3(128), fa3(144), fa3(160)};
  c.invalid = {fa3(72)};
  FakeBench bench;
  bench.ms = {{64, 2.0}, {96, 1.5}, {128, 1.2}, {144, 1.0}};  // 160 fails to run
  const ProblemReport r = tune_problem(llama(4096), c, fa3(128), compiler({96}, {64}), bench);
  REQUIRE(r.entry);
  const TunedEntry& e = *r.entry;
  CHECK(e.best == fa3(144));
  CHECK(e.median_ms == 1.0);
  CHECK(e.tflops == Approx(flashjit::attention_flops(to_problem(llama(4096))) / 1e-3 / 1e12));
  CHECK(e.runner_up == fa3(128));
  CHECK(e.runner_up_tflops == Approx(e.tflops / 1.2));
  CHECK(e.heuristic == fa3(128));
  CHECK(e.heuristic_tflops == Approx(e.runner_up_tflops));
  CHECK(e.rel_l2 == 1e-3);
  CHECK(e.problem == llama(4096));
  CHECK(r.counts.enumerated == 6);
  CHECK(r.counts.invalid == 1);
  CHECK(r.counts.spilling == 1);  // 96
  CHECK(r.counts.failed == 2);    // 64 did not compile, 160 did not run
  CHECK(r.counts.timed == 2);     // 128, 144
  CHECK(e.candidates.timed == 2);
  CHECK(r.notes.size() == 2);
  CHECK(bench.checks == 1);  // only the winner is checked
}

TEST_CASE("autotune: a winner failing the check gives way to the next", "[tune][autotune]") {
  Candidates c;
  c.valid = {fa3(64), fa3(128), fa3(144)};
  FakeBench bench;
  bench.ms = {{64, 3.0}, {128, 2.0}, {144, 1.0}};
  bench.error = {{144, 0.5}};  // wrong results
  const ProblemReport r = tune_problem(llama(1024), c, fa3(128), compiler(), bench);
  REQUIRE(r.entry);
  CHECK(r.entry->best == fa3(128));
  CHECK(r.entry->runner_up == fa3(64));
  CHECK(r.counts.failed == 1);
  REQUIRE(r.notes.size() == 1);
  CHECK(r.notes[0].find("relative L2 error") != std::string::npos);

  // NaN fails too.
  FakeBench nan;
  nan.ms = {{128, 1.0}};
  nan.error = {{128, std::numeric_limits<double>::quiet_NaN()}};
  CHECK_FALSE(tune_problem(llama(1024), Candidates{{fa3(128)}, {}}, fa3(128), compiler(), nan).entry);
}

TEST_CASE("autotune: the heuristic is timed even outside the space; large problems skip the check", "[tune][autotune]") {
  FakeBench bench;
  bench.ms = {{64, 2.0}, {128, 1.0}};
  bench.too_large = true;
  const ProblemReport r = tune_problem(llama(16384), Candidates{{fa3(64)}, {}}, fa3(128), compiler(), bench);
  REQUIRE(r.entry);
  CHECK(r.entry->best == fa3(128));
  CHECK(r.entry->heuristic == fa3(128));
  CHECK_FALSE(r.entry->rel_l2);
  CHECK(r.counts.enumerated == 2);

  // Nothing ran: no entry, the reasons in the notes.
  FakeBench none;
  const ProblemReport empty = tune_problem(llama(64), Candidates{{fa3(64)}, {}}, fa3(128), compiler(), none);
  CHECK_FALSE(empty.entry);
  CHECK(empty.counts.failed == 2);
  CHECK(empty.notes.size() == 2);
  CHECK(check_tolerance(DType::bf16) == 2e-2);
  CHECK(check_tolerance(DType::fp16) == 4e-3);
}
