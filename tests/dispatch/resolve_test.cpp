// Tests of Runtime::resolve / dispatch::resolve: a config a text gives in part, completed by the dispatcher
// for its arch (the heuristic tiles of its algorithm and head dim; algorithm auto resolved).
#include "dispatch/resolve.hpp"

#include <vector>

#include "dispatch/heuristics.hpp"
#include "flashjit/runtime.hpp"
#include "support/catch.hpp"

using flashjit::Algorithm;
using flashjit::Arch;
using flashjit::DType;
using flashjit::KernelConfig;
using flashjit::MaskKind;
using flashjit::Scheduler;

namespace {

KernelConfig resolved(const std::vector<std::string>& pairs) {
  auto p = flashjit::parse_config_pairs(pairs);
  REQUIRE(p.ok());
  const auto any = flashjit::Runtime::resolve(*p);
  REQUIRE(any.get_if<KernelConfig>() != nullptr);
  return *any.get_if<KernelConfig>();
}

const Arch kSm90a{90, true}, kSm80{80, false};

}  // namespace

TEST_CASE("resolve: fields left out take the heuristic tiles of the algorithm and head dim", "[dispatch][resolve]") {
  for (int d : {64, 128, 256}) {
    const KernelConfig c = resolved({"algorithm=fa3", "head_dim=" + std::to_string(d), "mask=causal"});
    CHECK(c == flashjit::dispatch::fa3_heuristic(DType::bf16, d, MaskKind::causal, kSm90a));
    CHECK(validate(c).empty());
  }
  // d64: three consumer warpgroups of 64 rows (not the defaults' two).
  CHECK(resolved({"algorithm=fa3", "head_dim=64"}).consumer_warpgroups == 3);
  CHECK(resolved({"algorithm=fa2", "head_dim=256", "arch=sm_80"}) ==
        flashjit::dispatch::fa2_heuristic(DType::bf16, 256, MaskKind::none, kSm80));
  CHECK(resolved({"algorithm=naive", "head_dim=72"}) ==
        flashjit::dispatch::naive_config(DType::bf16, 72, MaskKind::none, kSm90a));
}

TEST_CASE("resolve: given fields are kept over the heuristic's", "[dispatch][resolve]") {
  const KernelConfig c = resolved({"algorithm=fa3", "head_dim=128", "block_n=96", "scheduler=grid", "varlen=true"});
  CHECK(c.block_n == 96);
  CHECK(c.scheduler == Scheduler::grid);
  CHECK(c.varlen);
  CHECK(c.consumer_warpgroups == 2);  // the heuristic's
  CHECK(validate(c).empty());
}

TEST_CASE("resolve: algorithm auto is the dispatcher's pick for the arch and head dim", "[dispatch][resolve]") {
  CHECK(resolved({"algorithm=auto", "head_dim=128"}).algorithm == Algorithm::fa3);
  CHECK(resolved({"algorithm=auto", "head_dim=128", "arch=sm_80"}).algorithm == Algorithm::fa2);
  CHECK(resolved({"algorithm=auto", "head_dim=96"}).algorithm == Algorithm::fa3);
  CHECK(resolved({"algorithm=auto", "head_dim=72", "head_dim_v=136"}).algorithm == Algorithm::fa3);
  CHECK(resolved({"algorithm=auto", "head_dim=72", "arch=sm_80"}).algorithm == Algorithm::fa2);
  CHECK(resolved({"algorithm=auto", "head_dim=72", "arch=sm_75"}).algorithm == Algorithm::naive);
  const KernelConfig c = resolved({"algorithm=auto", "head_dim=64", "arch=sm_80", "warps=8", "block_m=128"});
  CHECK(c.algorithm == Algorithm::fa2);
  CHECK(c.warps == 8);
  CHECK(validate(c).empty());
}

TEST_CASE("resolve: decode and combine configs keep their defaults beside the given fields", "[dispatch][resolve]") {
  auto p = flashjit::parse_config_pairs({"kernel=decode", "head_dim=64", "mask=sliding_window"});
  REQUIRE(p.ok());
  const auto any = flashjit::Runtime::resolve(*p);
  const auto* d = any.get_if<flashjit::DecodeKernelConfig>();
  REQUIRE(d != nullptr);
  flashjit::DecodeKernelConfig expected;
  expected.head_dim = 64, expected.mask = MaskKind::sliding_window;
  CHECK(*d == expected);
  CHECK(validate(any).empty());
}
