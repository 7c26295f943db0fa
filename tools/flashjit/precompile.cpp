// `flashjit precompile --sweep FILE [--arch A ...] [--sms N] [-j N] [--all-candidates] [--timeout S] [--json]`: compile
// every kernel a sweep needs into the disk cache (prefill kernels, for decode problems the split, combine and
// merge kernels, for append problems and fused decodes the append kernels), without a GPU, each in a worker
// process of its own; then FLASHJIT_JIT=0 runs the sweep's problems from the cache alone.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "cli.hpp"
#include "dispatch/tuned_table.hpp"
#include "pool_args.hpp"
#include "progress.hpp"
#include "tune/compile_pool.hpp"
#include "tune/precompile_plan.hpp"
#include "tune/sweep.hpp"

namespace flashjit::cli {
namespace {

struct PrecompileArgs {
  std::string sweep;
  std::vector<std::string> archs{"sm_90a"};
  int sms = tune::kDefaultPrecompileSms;
  bool all_candidates = false;
  bool json = false;
  PoolArgs pool;
};

struct Totals {
  int compiled = 0, cached = 0, failed = 0;
  double nvrtc_ms = 0;
};

void print_summary(Output& out, const tune::Sweep& sweep, const PrecompileArgs& args, const tune::PrecompilePlan& plan,
                   const Totals& t, double seconds, const std::filesystem::path& cache) {
  out.data().update({{"sweep", sweep.name},
                     {"problems", {{"prefill", sweep.problems.size()}, {"decode", sweep.decode.size()},
                                   {"append", sweep.append.size()}}},
                     {"archs", args.archs},
                     {"sms", args.sms},
                     {"kernels", {{"total", plan.kernels().size()}, {"prefill", plan.configs.size()},
                                  {"decode", plan.decode.size()}, {"combine", plan.combine.size()},
                                  {"merge", plan.merge.size()}, {"append", plan.append.size()},
                                  {"block_mask", plan.block_mask.size()}}},
                     {"compiled", t.compiled},
                     {"cached", t.cached},
                     {"failed", t.failed},
                     {"nvrtc_s", t.nvrtc_ms / 1000},
                     {"seconds", seconds},
                     {"cache", cache.string()}});
  if (out.json()) return;
  const std::size_t problems = sweep.problems.size() + sweep.decode.size() + sweep.append.size();
  std::string kinds, decode_kernels;
  if (!sweep.decode.empty() || !sweep.append.empty()) {
    kinds = fmt::format(" ({} prefill, {} decode{})", sweep.problems.size(), sweep.decode.size(),
                        sweep.append.empty() ? "" : fmt::format(", {} append", sweep.append.size()));
    decode_kernels = fmt::format("   prefill {}, decode {}, combine {}, merge {}{}", plan.configs.size(),
                                 plan.decode.size(), plan.combine.size(), plan.merge.size(),
                                 plan.append.empty() ? "" : fmt::format(", append {}", plan.append.size()));
  }
  fmt::print("precompile {}: {} problem{}{} for {}{}\n", sweep.name, problems, problems == 1 ? "" : "s", kinds,
             fmt::join(args.archs, ", "), sweep.decode.empty() ? "" : fmt::format(", decode planned for {} SMs", args.sms));
  if (!plan.block_mask.empty())  // the kernels that make block-sparse problems' block masks
    decode_kernels += fmt::format("{}block_mask {}", decode_kernels.empty() ? "   " : ", ", plan.block_mask.size());
  fmt::print("  kernels   {:>6}{}\n", plan.kernels().size(), decode_kernels);
  fmt::print("  compiled  {:>6}{}\n", t.compiled,
             t.compiled ? fmt::format("   NVRTC {:.1f} s in all", t.nvrtc_ms / 1000) : std::string());
  fmt::print("  cached    {:>6}\n", t.cached);
  fmt::print("  failed    {:>6}{}\n", t.failed, t.failed ? "   (each above; -v prints their logs)" : "");
  fmt::print("  time      {:>6.1f} s\n", seconds);
  fmt::print("cache: {}\n", cache.string());
}

int run_precompile(const Globals& globals, const PrecompileArgs& args) {
  std::vector<Arch> archs;
  for (const auto& a : args.archs) {
    auto arch = Arch::parse(a);
    if (!arch) return report_usage(fmt::format("--arch '{}' is not a CUDA target like sm_80 or sm_90a", a));
    archs.push_back(*arch);
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto sweep = tune::load_sweep(args.sweep);
  if (!sweep.ok()) return report_input(sweep.error());
  auto runtime = make_runtime(globals);
  if (!runtime.ok()) return report(runtime.error());
  const std::filesystem::path cache = (*runtime)->cache_dir();
  if (!(*runtime)->cache_writable())
    return report(Error(ErrorCode::cache, fmt::format("the kernel cache {} is read-only: nothing could be stored", cache.string())));

  const auto tables = dispatch::TunedTables::load(
      dispatch::TunedTables::default_sources(globals.settings.tuned_tables, cache), globals.settings.logger);
  const tune::PrecompilePlan plan = tune::precompile_plan(*sweep, archs, tables, args.all_candidates, args.sms);
  const std::vector<AnyKernelConfig> kernels = plan.kernels();
  auto split = tune::split_cached(runtime::cache_options(globals.settings), kernels);
  if (!split.ok()) return report(split.error());
  auto options = pool_options(args.pool, cache);
  if (!options.ok()) return report(options.error());

  std::string pruned = args.all_candidates ? fmt::format(", {} candidates pruned by validate()", plan.invalid) : "";
  fmt::print(stderr, "precompile {}: {} kernels{}; {} in the cache, compiling {} with {} worker{}\n", sweep->name,
             kernels.size(), pruned, split->cached.size(), split->missing.size(), options->jobs,
             options->jobs == 1 ? "" : "s");
  std::fflush(stderr);
  ProgressLine progress(stderr, ::isatty(STDERR_FILENO) != 0);
  const auto outcomes = tune::CompilePool(*options).run(split->missing, std::ref(progress));
  progress.finish();

  // What the workers compiled must be in the cache now: a store that failed (a full disk, a shard folder refused)
  // or an eviction (a cap smaller than the sweep) would only show at run time, in a FLASHJIT_JIT=0 server.
  std::vector<AnyKernelConfig> compiled;
  for (const auto& o : outcomes)
    if (o.info.ok()) compiled.push_back(o.config);
  auto kept = tune::split_cached(runtime::cache_options(globals.settings), compiled);
  if (!kept.ok()) return report(kept.error());
  auto lost = [&](const AnyKernelConfig& c) {
    return std::find(kept->missing.begin(), kept->missing.end(), c) != kept->missing.end();
  };

  // Each failure had its line in the progress output; the full error (context, NVRTC log) with --verbose.
  Output out(args.json);
  auto failures = nlohmann::ordered_json::array();
  Totals totals;
  totals.cached = static_cast<int>(split->cached.size());
  for (const auto& o : outcomes) {
    if (o.info.ok() && lost(o.config)) {
      ++totals.failed;
      // Not in the progress output (the worker succeeded): always said.
      const Error e(ErrorCode::cache,
                    fmt::format("{} compiled, but the cache did not keep it (a failed store, or evicted by the cap): "
                                "a FLASHJIT_JIT=0 run would miss it",
                                o.name),
                    o.worker_log);
      report(e);
      failures.push_back({{"name", o.name}, {"error", e.message}, {"details", e.to_string()}});
    } else if (!o.info.ok()) {
      ++totals.failed;
      Error e = o.info.error();
      if (e.details.empty()) e.details = o.worker_log;
      if (globals.verbose) report(e);
      failures.push_back({{"name", o.name}, {"error", e.message}, {"details", e.to_string()}});
    } else if (o.info->cache_hit) {
      ++totals.cached;  // compiled meanwhile by another process
    } else {
      ++totals.compiled;
      totals.nvrtc_ms += o.info->compile_ms;
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  print_summary(out, *sweep, args, plan, totals, seconds, cache);
  out.data()["failures"] = std::move(failures);
  return out.finish(totals.failed == 0 ? kOk : kFailure);
}

}  // namespace

Command add_precompile(CLI::App& parent, const Globals& globals) {
  CLI::App* app = parent.add_subcommand(
      "precompile", "Compile every kernel a sweep file needs into the cache, in parallel worker processes; no GPU needed");
  auto args = std::make_shared<PrecompileArgs>();
  app->add_option("--sweep", args->sweep, "Sweep file (configs/*.json; schema in configs/README.md)")->required();
  app->add_option("--arch", args->archs, "CUDA targets (repeatable)")->capture_default_str();
  app->add_option("--sms", args->sms,
                  "Multiprocessors of the target GPU, for the decode split plans (132: H100 SXM, H200; "
                  "114: H100 PCIe; 108: A100); `flashjit info` shows a device's count")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app->add_flag("--all-candidates", args->all_candidates,
                "Compile the whole candidate space (after validate()), not only the dispatcher's picks");
  add_pool_options(*app, args->pool);
  add_json_flag(*app, args->json);
  return {app, [&globals, args] { return run_precompile(globals, *args); }};
}

}  // namespace flashjit::cli
