// `flashjit select [problem options] [--softcap C] [--alibi] [--sinks] [--rel-bias] [--seqused-k] [--arch A]
// [--sms N] [--gpu NAME] [--decode ...] [--json]`: which kernel a problem gets on a device of that arch and SM count, without a GPU. Prefill: the dispatcher's config (the
// tuned tables of --gpu when given, as a Runtime on that GPU would use them). Decode (--decode): the split
// planner's split kernel, split count and combine kernel.
#include <fmt/format.h>

#include "cli.hpp"
#include "dispatch/decode_heuristics.hpp"
#include "dispatch/heuristics.hpp"
#include "dispatch/tuned_table.hpp"
#include "problem_args.hpp"

namespace flashjit::cli {
namespace {

struct SelectArgs {
  ProblemArgs problem;
  std::string arch = "sm_90a";
  int sms = 132;
  std::string gpu;
  bool decode = false;
  int q_len = 1;
  int page_size = 0;
  float softcap = 0.f;  // the variants
  bool alibi = false;
  bool sinks = false;
  bool rel_bias = false;   // prefill: a relative-logits table
  bool seqused_k = false;  // prefill: seqused_k over contiguous keys
  bool json = false;
};

// What the problem's variant arrays point at: the dispatcher only asks whether they are there.
const float kStandIn[1] = {0.f};
const int kStandInInts[1] = {0};

nlohmann::ordered_json config_json(const AnyKernelConfig& c) {
  return {{"name", readable_name(c)}, {"config", nlohmann::ordered_json::parse(to_json(c))}};
}

int select_prefill(const Globals& globals, const SelectArgs& args, const Arch& arch, Output& out) {
  AttentionProblem p = problem_of(args.problem);
  p.softcap = args.softcap;
  if (args.alibi) p.alibi_slopes = kStandIn;
  if (args.sinks) p.sinks = kStandIn;
  if (args.rel_bias) p.rel_bias = kStandIn, p.rel_bias_extent = 1;
  if (args.seqused_k) p.seqused_k = kStandInInts;
  if (int rc = check_problem(p); rc != kOk) return rc;
  dispatch::TunedTables tables;
  if (!args.gpu.empty()) {
    auto cache = open_cache(globals);
    const auto dir = cache.ok() ? cache->dir() : globals.settings.cache_dir;
    tables = dispatch::TunedTables::load(dispatch::TunedTables::default_sources(globals.settings.tuned_tables, dir),
                                         globals.settings.logger)
                 .for_device(args.gpu, arch);
  }
  auto chosen = dispatch::choose(p, arch, Algorithm::automatic, args.gpu.empty() ? nullptr : &tables);
  if (!chosen.ok()) return report_input(std::move(chosen).error().with(fmt::format("for {}", arch.to_string())));
  out.data()["problem"] = problem_json(p);
  out.data()["arch"] = arch.to_string();
  out.data()["tuned_entries"] = tables.entry_count();
  out.data()["kernel"] = config_json(AnyKernelConfig(*chosen));
  out.text("kernel:   {}\n", readable_name(AnyKernelConfig(*chosen)));
  out.text("config:   {}\n", to_json(AnyKernelConfig(*chosen)));
  out.text("by:       {} on {}\n", args.gpu.empty() ? "the heuristics" : fmt::format("the tuned tables of {} ({} entries), else the heuristics", args.gpu, tables.entry_count()),
           arch.to_string());
  return out.finish(kOk);
}

int select_decode(const SelectArgs& args, const Arch& arch, Output& out) {
  if (args.rel_bias || args.seqused_k)
    return report_usage("--rel-bias and --seqused-k are prefill options: decode takes neither (its cache_seqlens "
                        "count each sequence's keys)");
  const AttentionProblem a = problem_of(args.problem);
  DecodeProblem p;
  p.dtype = a.dtype, p.batch = a.batch, p.q_len = args.q_len, p.heads_q = a.heads_q, p.heads_kv = a.heads_kv;
  p.head_dim = a.head_dim, p.max_seqlen_k = a.seqlen_k;
  if (a.mask == MaskKind::sliding_window) p.window_left = a.window_left;
  if (a.mask == MaskKind::chunked_causal) p.chunk_size = a.chunk_size;
  if (args.page_size > 0) {
    p.layout = KvLayout::paged, p.page_size = args.page_size;
    p.max_pages_per_seq = (a.seqlen_k + args.page_size - 1) / args.page_size;
  }
  p.softcap = args.softcap;
  if (args.alibi) p.alibi_slopes = kStandIn;
  if (args.sinks) p.sinks = kStandIn;
  // The shape checks check(DecodeProblem) makes on the fields given here (it also wants the tensors).
  std::vector<std::string> issues;
  if (args.q_len < 1 || args.q_len > kMaxDecodeQueryLen)
    issues.push_back(fmt::format("--q-len {}: must be in [1, {}]", args.q_len, kMaxDecodeQueryLen));
  if (args.page_size < 0 || args.page_size > kMaxDecodePageSize || (args.page_size & (args.page_size - 1)) != 0)
    issues.push_back(fmt::format("--page-size {}: must be 0 (contiguous) or a power of two up to {}", args.page_size,
                                 kMaxDecodePageSize));
  if (a.mask != MaskKind::none && a.mask != MaskKind::causal && a.mask != MaskKind::sliding_window &&
      a.mask != MaskKind::chunked_causal)
    issues.push_back(fmt::format("--mask {}: decode takes none, causal, sliding_window or chunked_causal", to_string(a.mask)));
  if (a.head_dim % 16 != 0)
    issues.push_back(fmt::format("--head-dim {}: decode needs a multiple of 16 in [16, 256]", a.head_dim));
  if (a.heads_kv > 0 && a.heads_q % a.heads_kv == 0 && args.q_len >= 1 &&
      (a.heads_q / a.heads_kv) * args.q_len > kMaxDecodeRows)
    issues.push_back(fmt::format("--heads-q {} --heads-kv {} --q-len {}: group x q_len = {} query rows per KV head, at most {}",
                                 a.heads_q, a.heads_kv, args.q_len, (a.heads_q / a.heads_kv) * args.q_len, kMaxDecodeRows));
  if (a.seqlen_k > kMaxDecodeSeqlen)
    issues.push_back(fmt::format("--seqlen-k {}: at most {}", a.seqlen_k, kMaxDecodeSeqlen));
  AttentionProblem shape = a;  // heads, head dim, batch as for prefill
  shape.seqlen_q = 1, shape.mask = MaskKind::none;
  if (int rc = check_problem(shape); rc != kOk) return rc;
  if (!issues.empty()) {
    std::fflush(stdout);
    for (const auto& i : issues) std::fputs(("flashjit: " + i + "\n").c_str(), stderr);
    return kUsage;
  }
  const dispatch::DecodePlan plan = dispatch::plan_decode(p, arch, args.sms);
  out.data()["problem"] = {{"dtype", to_string(p.dtype)}, {"batch", p.batch}, {"q_len", p.q_len},
                           {"seqlen_k", p.max_seqlen_k}, {"heads_q", p.heads_q}, {"heads_kv", p.heads_kv},
                           {"head_dim", p.head_dim}, {"page_size", p.page_size}, {"window_left", p.window_left},
                           {"chunk_size", p.chunk_size}};
  for (auto [field, on] : {std::pair{"softcap", p.softcap > 0.f}, {"alibi", p.alibi_slopes != nullptr},
                           {"sinks", p.sinks != nullptr}})
    if (on) out.data()["problem"][field] = true;
  out.data()["arch"] = arch.to_string();
  out.data()["sms"] = args.sms;
  out.data()["split_kernel"] = config_json(AnyKernelConfig(plan.split));
  out.data()["num_splits"] = plan.splits.num_splits;
  out.data()["keys_per_split"] = plan.splits.keys_per_split;
  const bool combine = plan.splits.num_splits > 1 && !plan.split.cluster_merge;
  out.data()["combine_kernel"] = combine ? config_json(AnyKernelConfig(plan.combine)) : nullptr;
  out.data()["workspace_bytes"] = plan.workspace_bytes;
  out.text("split kernel:   {}\n", readable_name(AnyKernelConfig(plan.split)));
  out.text("splits:         {} x {} keys{}\n", plan.splits.num_splits, plan.splits.keys_per_split,
           plan.split.cluster_merge && plan.splits.num_splits > 1 ? " (merged in a cluster)" : "");
  out.text("combine kernel: {}\n", combine ? readable_name(AnyKernelConfig(plan.combine)) : std::string("none"));
  out.text("workspace:      {}\n", human_bytes(plan.workspace_bytes));
  out.text("on:             {} with {} SMs\n", arch.to_string(), args.sms);
  return out.finish(kOk);
}

int run_select(const Globals& globals, const SelectArgs& args) {
  auto arch = Arch::parse(args.arch);
  if (!arch) return report_usage(fmt::format("--arch '{}' is not a CUDA target like sm_80 or sm_90a", args.arch));
  Output out(args.json);
  return args.decode ? select_decode(args, *arch, out) : select_prefill(globals, args, *arch, out);
}

}  // namespace

Command add_select(CLI::App& parent, const Globals& globals) {
  CLI::App* app = parent.add_subcommand(
      "select", "Which kernel a problem gets on a device of an arch and SM count (no GPU needed)");
  auto args = std::make_shared<SelectArgs>();
  AttentionProblem& p = args->problem.problem;
  p.batch = 1, p.seqlen_q = 4096, p.seqlen_k = 4096, p.heads_q = 32, p.heads_kv = 8, p.head_dim = 128;
  add_problem_options(*app, args->problem);
  app->add_option("--arch", args->arch, "CUDA target of the device")->capture_default_str();
  app->add_option("--sms", args->sms, "Multiprocessors of the device (decode split plans; 132: H100 SXM, H200)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app->add_option("--gpu", args->gpu, "GPU name as `flashjit info` shows it: use the tuned tables stamped with it");
  app->add_flag("--decode", args->decode,
                "A decode problem: --seqlen-k keys in the cache, --q-len new tokens, --page-size (0: contiguous)");
  app->add_option("--q-len", args->q_len, "--decode: new tokens per sequence")->capture_default_str();
  app->add_option("--page-size", args->page_size, "--decode: tokens per page of a paged cache (0: contiguous)")
      ->capture_default_str();
  app->add_option("--softcap", args->softcap, "Variant: scores become C * tanh(scores / C) (0: off)")
      ->capture_default_str()
      ->check(CLI::Range(0.0f, 3.4e38f));
  app->add_flag("--alibi", args->alibi, "Variant: ALiBi slopes (the kernel for alibi_slopes)");
  app->add_flag("--sinks", args->sinks, "Variant: learnable sinks, one logit per query head (gpt-oss)");
  app->add_flag("--rel-bias", args->rel_bias, "Variant (prefill): a relative-logits table (the kernel for rel_bias)");
  app->add_flag("--seqused-k", args->seqused_k,
                "Prefill: per-sequence key counts over contiguous keys (the kernel for seqused_k)");
  add_json_flag(*app, args->json);
  return {app, [&globals, args] { return run_select(globals, *args); }};
}

}  // namespace flashjit::cli
