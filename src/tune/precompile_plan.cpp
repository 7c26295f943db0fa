#include "tune/precompile_plan.hpp"

#include <set>
#include <string>

#include "dispatch/heuristics.hpp"
#include "tune/candidates.hpp"

namespace flashjit::tune {

PrecompilePlan precompile_plan(const Sweep& sweep, const std::vector<Arch>& archs, const TunedTables& tables,
                               bool all_candidates) {
  PrecompilePlan plan;
  std::set<std::string> seen, seen_invalid;
  auto add = [&](const KernelConfig& c) {
    if (seen.insert(to_json(c)).second) plan.configs.push_back(c);
  };
  for (const Arch& arch : archs) {
    std::vector<TunedTables> per_gpu;
    for (const auto& gpu : tables.gpus(arch)) per_gpu.push_back(tables.for_device(gpu, arch));
    for (const ProblemShape& shape : sweep.problems) {
      const AttentionProblem p = to_problem(shape);
      if (auto c = dispatch::choose(p, arch); c.ok()) add(*c);
      for (const auto& t : per_gpu)
        if (auto c = dispatch::choose(p, arch, Algorithm::automatic, &t); c.ok()) add(*c);
      if (!all_candidates) continue;
      const Candidates candidates = enumerate(shape, sweep.candidates, arch);
      for (const auto& c : candidates.valid) add(c);
      for (const auto& c : candidates.invalid) seen_invalid.insert(to_json(c));
    }
  }
  plan.invalid = static_cast<int>(seen_invalid.size());
  return plan;
}

}  // namespace flashjit::tune
