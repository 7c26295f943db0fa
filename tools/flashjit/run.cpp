// `flashjit run [CONFIG] [problem options] [--json]`: run one attention problem, checked against the reference
// kernel and timed. Without a GPU it compiles the kernel that would run on sm_90a and says so.
#include <fmt/format.h>

#include "cli.hpp"
#include "config_args.hpp"
#include "cuda/driver.hpp"
#include "dispatch/heuristics.hpp"
#include "problem_args.hpp"
#include "run.hpp"

namespace flashjit::cli {
namespace {

struct RunArgs {
  std::vector<std::string> tokens;
  ProblemArgs problem;
  int iters = 50;
  bool no_check = false;
  bool json = false;
};

void print_problem(Output& out, const AttentionProblem& p) {
  out.data()["problem"] = problem_json(p);
  std::string mask = to_string(p.mask);
  if (p.mask == MaskKind::sliding_window) mask += fmt::format(" (left {}, right {})", p.window_left, p.window_right);
  if (p.mask == MaskKind::chunked || p.mask == MaskKind::chunked_causal) mask += fmt::format(" (chunk {})", p.chunk_size);
  out.text("problem:  batch {}, seqlen_q {}, seqlen_k {}, heads_q {}, heads_kv {}, head_dim {}, {}, mask {}\n",
             p.batch, p.seqlen_q, p.seqlen_k, p.heads_q, p.heads_kv, p.head_dim, to_string(p.dtype), mask);
}

// No GPU: compile what would run on an sm_90a device (or the explicit config) and report it.
int compile_only(Runtime& runtime, const RunPlan& plan, const std::string& reason) {
  Output& out = *plan.out;
  const Arch target{90, true};
  KernelConfig config;
  std::string how = "explicit config";
  if (plan.config) {
    config = *plan.config;
    if (auto st = dispatch::supports(config, plan.problem, config.arch); !st.ok()) return report_input(st.error());
  } else {
    auto chosen = dispatch::choose(plan.problem, target);
    if (!chosen.ok()) return report_input(chosen.error());
    config = *chosen;
    how = fmt::format("dispatcher's choice for {}", target.to_string());
    if (config.algorithm == Algorithm::naive)
      how += ": the reference kernel (fp32, slow): " + dispatch::reference_fallback_reason(plan.problem, target);
  }
  auto info = runtime.compile(config);
  if (!info.ok()) return report(info.error());
  print_kernel(out, *info, how);
  out.text("cache:    {}\n", runtime.cache_dir().string());
  out.text("no GPU found: {}; compiled only\n", reason);
  out.data()["ran"] = false;
  out.data()["no_gpu"] = reason;
  return out.finish(kOk);
}

int run_run(const Globals& globals, RunArgs& args) {
  auto configs = load_configs(args.tokens, 1);
  if (configs.exit_code != kOk) return configs.exit_code;
  Output out(args.json);
  RunPlan plan;
  plan.out = &out;
  plan.problem = problem_of(args.problem);
  if (!configs.configs.empty()) {
    // The explicit config's dtype, head dim and mask describe the problem unless given as options.
    const KernelConfig* prefill = configs.configs.front().config.get_if<KernelConfig>();
    if (!prefill)
      return report_usage(fmt::format("run takes a prefill config; {} is a {} kernel (decode kernels run through "
                                      "Runtime::decode)",
                                      readable_name(configs.configs.front().config),
                                      to_string(configs.configs.front().config.kind())));
    const KernelConfig& c = *prefill;
    plan.config = c;
    if (args.problem.dtype_opt->count() == 0) plan.problem.dtype = c.dtype;
    if (args.problem.mask_opt->count() == 0) plan.problem.mask = c.mask;
    if (args.problem.head_dim_opt->count() == 0) plan.problem.head_dim = c.head_dim;
  }
  if (int rc = check_problem(plan.problem); rc != kOk) return rc;
  plan.iters = args.iters;
  plan.check = !args.no_check;

  auto runtime = make_runtime(globals);
  if (!runtime.ok()) return report(runtime.error());
  print_problem(out, plan.problem);
  auto devices = cuda::device_count();
  if (!devices.ok()) return compile_only(**runtime, plan, devices.error().message);
  if (*devices == 0) return compile_only(**runtime, plan, "the CUDA driver reports no devices");
  return run_on_device(**runtime, plan);
}

}  // namespace

void print_kernel(Output& out, const KernelInfo& info, const std::string& how) {
  out.data()["kernel"] = {{"name", info.name}, {"how", how}, {"key", info.key}, {"registers", info.ptxas.registers},
                          {"spill_stores", info.ptxas.spill_stores}, {"spill_loads", info.ptxas.spill_loads},
                          {"dynamic_smem", info.dynamic_smem}, {"compile_ms", info.compile_ms},
                          {"cache_hit", info.cache_hit}};
  out.text("kernel:   {} ({})\n", info.name, how);
  out.text("compile:  {} registers, {}/{} spill bytes (stores/loads), {} B dynamic shared memory, {:.1f} ms ({})\n",
             info.ptxas.registers, info.ptxas.spill_stores, info.ptxas.spill_loads, info.dynamic_smem,
             info.compile_ms, info.cache_hit ? "cache hit" : "cache miss, compiled now");
}

Command add_run(CLI::App& parent, const Globals& globals) {
  CLI::App* app = parent.add_subcommand(
      "run", "Run one attention problem on GPU 0: check against the reference kernel, then time it "
             "(without a GPU: compile only)");
  auto args = std::make_shared<RunArgs>();
  AttentionProblem& p = args->problem.problem;
  p.batch = 1, p.seqlen_q = 4096, p.seqlen_k = 4096, p.heads_q = 32, p.heads_kv = 8, p.head_dim = 128;
  app->add_option("config", args->tokens, "Explicit config (key=value pairs or a .json file); default: the dispatcher's");
  add_problem_options(*app, args->problem);
  app->add_option("--iters", args->iters, "Timed launches")->capture_default_str()->check(positive());
  app->add_flag("--no-check", args->no_check, "Skip the comparison against the reference kernel");
  add_json_flag(*app, args->json);
  return {app, [&globals, args] { return run_run(globals, *args); }};
}

}  // namespace flashjit::cli
