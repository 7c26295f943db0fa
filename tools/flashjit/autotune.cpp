// `flashjit autotune --sweep FILE -o OUT [--iters N] [-j N] [--quick] [--json]`: for each problem of a sweep, time
// every candidate config on GPU 0 and write a tuned table (dispatch/tuned_table.hpp) that the runtime's dispatcher
// then uses on this GPU. Candidates compile in worker processes while the GPU times those compiled first.
// Results are checkpointed to OUT.partial after each problem; a rerun skips what was measured. Decode and append
// problems of the sweep are skipped (one line per kind says so); a sweep without prefill problems is an error.
#include <fmt/format.h>

#include <chrono>
#include <set>
#include <string>
#include <vector>

#include "autotune_bench.hpp"
#include "cli.hpp"
#include "cuda/driver.hpp"
#include "dispatch/heuristics.hpp"
#include "pool_args.hpp"
#include "tune/autotune.hpp"
#include "tune/background_compile.hpp"
#include "tune/candidates.hpp"
#include "tune/resume.hpp"
#include "tune/sweep.hpp"

namespace flashjit::cli {
namespace {

struct AutotuneArgs {
  std::string sweep;
  std::string output;
  BenchSettings bench;
  bool quick = false;
  bool json = false;
  PoolArgs pool;
};

// One problem still to measure and its candidates.
struct Planned {
  dispatch::ProblemShape shape;
  tune::Candidates candidates;
  KernelConfig heuristic;
};

std::string entry_line(const dispatch::TunedEntry& e, const dispatch::CandidateCounts& n) {
  std::string line = fmt::format("{} {:.1f} TFLOP/s", readable_name(e.best), e.tflops);
  if (e.runner_up) line += fmt::format(", runner-up {} {:.1f}", readable_name(*e.runner_up), e.runner_up_tflops);
  if (e.heuristic) line += fmt::format(", heuristic {:.1f}", e.heuristic_tflops);
  line += fmt::format("; {} candidates: {} invalid, {} spilling, {} failed, {} timed; check {}", n.enumerated,
                      n.invalid, n.spilling, n.failed, n.timed,
                      e.rel_l2 ? fmt::format("{:.2e}", *e.rel_l2) : std::string("skipped (large)"));
  return line;
}

// Where the GPU comes from; an error saying why there is none.
Result<cuda::DeviceInfo> gpu() {
  auto count = cuda::device_count();
  if (!count.ok()) return Error(ErrorCode::no_device, fmt::format("autotune needs a GPU: {}", count.error().message));
  if (*count == 0) return Error(ErrorCode::no_device, "autotune needs a GPU: the CUDA driver reports no devices");
  return cuda::device_info(0);
}

int run_autotune(const Globals& globals, const AutotuneArgs& args) {
  const auto t0 = std::chrono::steady_clock::now();
  Output out(args.json);
  auto results = nlohmann::ordered_json::array();
  auto sweep = tune::load_sweep(args.sweep);
  if (!sweep.ok()) return report_input(sweep.error());
  // Decode problems have no candidate space (their kernels come from the split planner), nor have append
  // problems (one kernel per size class, picked by the problem's size); precompile compiles them, autotune leaves
  // them out.
  struct Skipped {
    std::size_t count;
    const char* kind;
    const char* why;
  };
  std::vector<std::string> only, whys;
  for (const Skipped& k : {Skipped{sweep->decode.size(), "decode", "decode problems are not autotuned"},
                           Skipped{sweep->append.size(), "append",
                                   "append problems are not autotuned (an append kernel has no tiles to tune: its "
                                   "size class follows the problem's size)"}}) {
    if (k.count == 0) continue;
    only.push_back(fmt::format("{} problems ({})", k.kind, k.count));
    whys.push_back(k.why);
    if (!sweep->problems.empty())
      out.text("autotune {}: skipping {} {} problem{}: {}\n", sweep->name, k.count, k.kind, k.count == 1 ? "" : "s",
               k.why);
  }
  if (sweep->problems.empty())
    return report_input(Error(ErrorCode::invalid_argument,
                              fmt::format("sweep {} has only {}, and {} (`flashjit precompile` compiles their kernels)",
                                          sweep->name, fmt::join(only, " and "), fmt::join(whys, "; "))));
  std::fflush(stdout);
  // Paged prefill problems take the tiles of their contiguous twins (the tuned tables hold contiguous problems;
  // the dispatcher fits the tiles to the pages): precompile compiles their kernels, autotune refuses them.
  for (const auto& shape : sweep->problems)
    if (shape.page_size > 0)
      return report_input(Error(ErrorCode::invalid_argument,
                                fmt::format("sweep {}: {} is paged, and paged problems are not autotuned (tune its "
                                            "contiguous twin, without page_size; `flashjit precompile` compiles the "
                                            "paged kernels)",
                                            sweep->name, dispatch::describe(shape))));
    else if (shape.bias != BiasType::none || shape.block_size > 0)
      return report_input(Error(ErrorCode::invalid_argument,
                                fmt::format("sweep {}: {} has a {}, and such problems are not autotuned yet (the "
                                            "autotuner makes no bias tensors or block masks; `flashjit precompile` "
                                            "compiles their kernels)",
                                            sweep->name, dispatch::describe(shape),
                                            shape.bias != BiasType::none ? "bias" : "block mask")));
  auto device = gpu();
  if (!device.ok()) return report(device.error());
  auto scope = cuda::ContextScope::enter(0);
  if (!scope.ok()) return report(scope.error());
  auto runtime = make_runtime(globals);
  if (!runtime.ok()) return report(runtime.error());
  const std::filesystem::path output = args.output, partial = tune::partial_path(output);

  const dispatch::Stamp stamp = dispatch::system_stamp(device->name, device->arch, device->driver_version);
  auto table = tune::resume_table(output, stamp);
  if (!table.ok()) return report(table.error());
  table->sweep = sweep->name;
  const auto pending = tune::pending_problems(sweep->problems, *table);
  out.text("autotune {}: {} problems on {} ({}), {} already measured, {} to go\n", sweep->name,
             sweep->problems.size(), device->name, device->arch.to_string(), sweep->problems.size() - pending.size(),
             pending.size());

  // Candidates of every pending problem, compiled in problem order (with the reference kernel first).
  const tune::Density density = args.quick ? tune::Density::reduced : tune::Density::full;
  std::vector<Planned> plan;
  std::vector<KernelConfig> configs;
  std::set<std::string> seen;
  auto add = [&](const KernelConfig& c) {
    if (seen.insert(to_json(c)).second) configs.push_back(c);
  };
  for (std::size_t i : pending) {
    const dispatch::ProblemShape& shape = sweep->problems[i];
    auto heuristic = dispatch::choose(dispatch::to_problem(shape), device->arch);
    if (!heuristic.ok()) return report(heuristic.error());
    Planned p{shape, tune::enumerate(shape, sweep->candidates, device->arch, density), *heuristic};
    add(tune::reference_config(shape, device->arch));
    add(p.heuristic);
    for (const auto& c : p.candidates.valid) add(c);
    plan.push_back(std::move(p));
  }
  auto split = tune::split_cached(runtime::cache_options(globals.settings), configs);
  if (!split.ok()) return report(split.error());
  auto options = pool_options(args.pool, (*runtime)->cache_dir());
  if (!options.ok()) return report(options.error());
  if (!plan.empty())
    out.text("{} kernels: {} in the cache, compiling {} with {} workers while the GPU times\n", configs.size(),
               split->cached.size(), split->missing.size(), options->jobs);
  std::fflush(stdout);
  tune::BackgroundCompiles compiles(*options, std::move(split->missing), std::move(split->cached));

  int without_result = 0;
  const int width = static_cast<int>(fmt::formatted_size("{}", plan.size()));
  for (std::size_t n = 0; n < plan.size(); ++n) {
    const Planned& p = plan[n];
    const std::string head = fmt::format("[{:>{}}/{}] {}", n + 1, width, plan.size(), dispatch::describe(p.shape));
    auto bench = make_device_bench(**runtime, p.shape, device->arch, args.bench);
    if (!bench.ok()) {
      ++without_result;
      out.text("{}: no result\n", head);
      report(bench.error());
      results.push_back({{"problem", dispatch::describe(p.shape)}, {"ok", false}, {"error", bench.error().message}});
      continue;
    }
    const tune::ProblemReport r = tune::tune_problem(
        p.shape, p.candidates, p.heuristic, [&](const KernelConfig& c) { return compiles.wait(c); }, **bench);
    std::fflush(stdout);
    for (const auto& note : r.notes) fmt::print(stderr, "flashjit: {}: {}\n", dispatch::describe(p.shape), note);
    if (!r.entry) {
      ++without_result;
      out.text("{}: no result ({} candidates, {} failed)\n", head, r.counts.enumerated, r.counts.failed);
      results.push_back({{"problem", dispatch::describe(p.shape)}, {"ok", false}, {"candidates", r.counts.enumerated},
                         {"failed", r.counts.failed}});
      continue;
    }
    out.text("{}: {}\n", head, entry_line(*r.entry, r.counts));
    results.push_back({{"problem", dispatch::describe(p.shape)}, {"ok", true}, {"best", readable_name(r.entry->best)},
                       {"tflops", r.entry->tflops},
                       {"runner_up", r.entry->runner_up ? nlohmann::ordered_json(readable_name(*r.entry->runner_up)) : nullptr},
                       {"heuristic_tflops", r.entry->heuristic ? nlohmann::ordered_json(r.entry->heuristic_tflops) : nullptr},
                       {"candidates", {{"enumerated", r.counts.enumerated}, {"invalid", r.counts.invalid},
                                       {"spilling", r.counts.spilling}, {"failed", r.counts.failed},
                                       {"timed", r.counts.timed}}}});
    std::fflush(stdout);
    table->entries.push_back(*r.entry);
    if (auto st = dispatch::save_table(*table, partial); !st.ok()) return report(st.error());
  }

  if (auto st = dispatch::save_table(*table, output); !st.ok()) return report(st.error());
  std::error_code ec;
  std::filesystem::remove(partial, ec);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out.text("wrote {}: {} entries in {:.0f} s{}\n", output.string(), table->entries.size(), seconds,
             without_result ? fmt::format("; {} problems without a result (run again to retry them)", without_result)
                            : std::string());
  out.text("use it: FLASHJIT_TUNED={} (or copy it into {})\n", output.string(),
             ((*runtime)->cache_dir() / "tuned").string());
  out.data()["results"] = std::move(results);
  out.data().update({{"sweep", sweep->name}, {"output", output.string()}, {"entries", table->entries.size()},
                     {"without_result", without_result}, {"seconds", seconds}});
  return out.finish(without_result == 0 ? kOk : kFailure);
}

}  // namespace

Command add_autotune(CLI::App& parent, const Globals& globals) {
  CLI::App* app = parent.add_subcommand(
      "autotune", "Time every candidate config of a sweep's problems on GPU 0 and write a tuned table (needs a GPU)");
  auto args = std::make_shared<AutotuneArgs>();
  app->add_option("--sweep", args->sweep, "Sweep file (configs/*.json; schema in configs/README.md)")->required();
  app->add_option("-o,--output", args->output, "Tuned table to write (e.g. configs/tuned/h200.json); resumed if present")
      ->required();
  app->add_option("--iters", args->bench.iters, "Timed samples per candidate (the median is kept)")
      ->capture_default_str()
      ->check(positive());
  app->add_option("--warmup", args->bench.warmup, "Untimed launches per candidate")
      ->capture_default_str()
      ->check(non_negative());
  app->add_flag("--quick", args->quick,
                "Reduced default candidate space (fa3: block_n step 32, 2 stages; fa2: block_n 32/64, 2 stages)");
  add_pool_options(*app, args->pool);
  add_json_flag(*app, args->json);
  return {app, [&globals, args] { return run_autotune(globals, *args); }};
}

}  // namespace flashjit::cli
