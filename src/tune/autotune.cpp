#include "tune/autotune.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace flashjit::tune {

using dispatch::CandidateCounts;
using dispatch::ProblemShape;
using dispatch::TunedEntry;

namespace {

struct Timed {
  KernelConfig config;
  double ms;
};

double tflops_of(const ProblemShape& shape, double ms) { return attention_flops(to_problem(shape)) / (ms * 1e-3) / 1e12; }

}  // namespace

double check_tolerance(DType dtype) { return dtype == DType::bf16 ? 2e-2 : 4e-3; }

ProblemReport tune_problem(const ProblemShape& shape, const Candidates& candidates, const KernelConfig& heuristic,
                           const CompiledFn& compiled, ProblemBench& bench) {
  ProblemReport report;
  CandidateCounts& n = report.counts;
  std::vector<KernelConfig> valid = candidates.valid;
  if (std::find(valid.begin(), valid.end(), heuristic) == valid.end()) valid.push_back(heuristic);
  n.enumerated = static_cast<int>(valid.size() + candidates.invalid.size());
  n.invalid = static_cast<int>(candidates.invalid.size());

  std::vector<Timed> timed;
  for (const auto& c : valid) {
    const std::string name = readable_name(c);
    auto info = compiled(c);
    if (!info.ok()) {
      ++n.failed;
      report.notes.push_back(fmt::format("{}: compile failed: {}", name, info.error().message));
      continue;
    }
    if (spills(info->ptxas)) {
      ++n.spilling;
      continue;
    }
    auto ms = bench.median_ms(c);
    if (!ms.ok()) {
      ++n.failed;
      report.notes.push_back(fmt::format("{}: run failed: {}", name, ms.error().to_string()));
      continue;
    }
    ++n.timed;
    timed.push_back({c, *ms});
  }
  std::stable_sort(timed.begin(), timed.end(), [](const Timed& a, const Timed& b) { return a.ms < b.ms; });

  // The fastest that passes the check against the reference.
  const double limit = check_tolerance(shape.dtype);
  for (std::size_t i = 0; i < timed.size(); ++i) {
    const std::string name = readable_name(timed[i].config);
    auto err = bench.rel_l2(timed[i].config);
    if (!err.ok()) {
      ++n.failed;
      report.notes.push_back(fmt::format("{}: check failed to run: {}", name, err.error().to_string()));
      continue;
    }
    if (*err && !(**err <= limit)) {
      ++n.failed;
      report.notes.push_back(fmt::format("{}: relative L2 error {:.3e} exceeds {:.0e}", name, **err, limit));
      continue;
    }
    TunedEntry e;
    e.problem = normalized(shape);
    e.best = timed[i].config;
    e.median_ms = timed[i].ms;
    e.tflops = tflops_of(shape, timed[i].ms);
    e.rel_l2 = *err;
    if (i + 1 < timed.size()) e.runner_up = timed[i + 1].config, e.runner_up_tflops = tflops_of(shape, timed[i + 1].ms);
    for (const auto& t : timed)
      if (t.config == heuristic) e.heuristic = t.config, e.heuristic_tflops = tflops_of(shape, t.ms);
    report.entry = std::move(e);
    break;
  }
  if (report.entry) report.entry->candidates = n;
  return report;
}

}  // namespace flashjit::tune
