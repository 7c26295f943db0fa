// Tests of what precompile compiles: the dispatcher's picks per problem and arch (deduplicated), the picks
// with each GPU's tuned tables, and the whole candidate space.
#include <algorithm>

#include "dispatch/heuristics.hpp"
#include "support/catch.hpp"
#include "tune/candidates.hpp"
#include "tune/precompile_plan.hpp"

using flashjit::Algorithm;
using flashjit::Arch;
using flashjit::KernelConfig;
using flashjit::MaskKind;
using namespace flashjit::tune;

namespace {

const Arch kSm90a{90, true};
const Arch kSm80{80, false};

Sweep llama_like() {
  auto s = parse_sweep(R"({"problems": [{"heads_q": 32, "heads_kv": 8, "head_dim": 128,
                                         "seqlen": [512, 4096], "mask": ["none", "causal"]}]})", "llama.json");
  REQUIRE(s.ok());
  return *s;
}

}  // namespace

TEST_CASE("precompile plan: the dispatcher's picks, once each", "[tune][plan]") {
  const Sweep sweep = llama_like();
  const auto plan = precompile_plan(sweep, {kSm90a}, {}, false);
  REQUIRE(plan.configs.size() == 2);  // one kernel per mask serves every length
  CHECK(plan.configs[0] == *flashjit::dispatch::choose(to_problem(sweep.problems[0]), kSm90a));
  CHECK(plan.configs[1].mask == MaskKind::causal);
  const auto two_archs = precompile_plan(sweep, {kSm90a, kSm80}, {}, false);
  REQUIRE(two_archs.configs.size() == 4);
  CHECK(two_archs.configs[2].algorithm == Algorithm::fa2);
  CHECK(two_archs.configs[2].arch == kSm80);
}

TEST_CASE("precompile plan: tuned picks of every GPU of the arch", "[tune][plan]") {
  const Sweep sweep = llama_like();
  KernelConfig tuned = *flashjit::dispatch::choose(to_problem(sweep.problems[1]), kSm90a);
  tuned.block_n = 144;
  TunedEntry e;
  e.problem = sweep.problems[1];
  e.best = tuned;
  TunedTables tables;
  REQUIRE(tables.add(TunedTable{system_stamp("NVIDIA H200", kSm90a, 0), "llama", {e}}, "t.json"));
  const auto plan = precompile_plan(sweep, {kSm90a}, tables, false);
  REQUIRE(plan.configs.size() == 3);
  CHECK(std::find(plan.configs.begin(), plan.configs.end(), tuned) != plan.configs.end());
  CHECK(precompile_plan(sweep, {kSm80}, tables, false).configs.size() == 2);  // the table is for sm_90a
}

TEST_CASE("precompile plan: all candidates", "[tune][plan]") {
  const Sweep sweep = llama_like();
  const auto plan = precompile_plan(sweep, {kSm90a}, {}, true);
  const auto per_mask = enumerate(sweep.problems[0], sweep.candidates, kSm90a);
  CHECK(plan.configs.size() == 2 * per_mask.valid.size());
  CHECK(plan.invalid == static_cast<int>(2 * per_mask.invalid.size()));
  for (const auto& c : plan.configs) CHECK(validate(c).empty());
}
