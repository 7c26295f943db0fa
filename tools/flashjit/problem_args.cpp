#include "problem_args.hpp"

#include <fmt/format.h>

#include "cli.hpp"
#include "dispatch/problem_shape.hpp"

namespace flashjit::cli {
namespace {

dispatch::ProblemShape shape_of(const AttentionProblem& p) {
  dispatch::ProblemShape s;
  s.dtype = p.dtype, s.batch = p.batch, s.seqlen_q = p.seqlen_q, s.seqlen_k = p.seqlen_k;
  s.heads_q = p.heads_q, s.heads_kv = p.heads_kv, s.head_dim = p.head_dim, s.mask = p.mask;
  s.window_left = p.window_left, s.window_right = p.window_right, s.chunk_size = p.chunk_size;
  s.softcap = p.softcap > 0.f, s.alibi = p.alibi_slopes != nullptr, s.sinks = p.sinks != nullptr;
  s.rel_bias = p.rel_bias != nullptr, s.seqused_k = p.seqused_k != nullptr && !p.paged();
  return s;
}

// The option of a shape field and the value given: "--head-dim 512".
std::string option_of(const std::string& field, const AttentionProblem& p) {
  std::string option = "--" + field;
  for (char& c : option)
    if (c == '_') c = '-';
  const auto s = dispatch::to_json(dispatch::normalized(shape_of(p)));
  if (auto it = s.find(field); it != s.end())
    return fmt::format("{} {}", option, it->is_string() ? it->get<std::string>() : it->dump());
  return option;
}

}  // namespace

void add_problem_options(CLI::App& app, ProblemArgs& args) {
  AttentionProblem& p = args.problem;
  app.add_option("--batch", p.batch, "Batch size")->capture_default_str()->check(positive());
  app.add_option("--seqlen-q", p.seqlen_q, "Query length")->capture_default_str()->check(positive());
  app.add_option("--seqlen-k", p.seqlen_k, "Key/value length")->capture_default_str()->check(positive());
  app.add_option("--heads-q", p.heads_q, "Query heads")->capture_default_str()->check(positive());
  app.add_option("--heads-kv", p.heads_kv, "Key/value heads (GQA)")->capture_default_str()->check(positive());
  args.head_dim_opt = app.add_option("--head-dim", p.head_dim, "Head dimension")->capture_default_str()->check(positive());
  args.dtype_opt = app.add_option("--dtype", args.dtype, "Element type")
                       ->capture_default_str()->check(CLI::IsMember({"bf16", "fp16"}));
  args.mask_opt = app.add_option("--mask", args.mask, "Mask")->capture_default_str()->check(
      CLI::IsMember({"none", "causal", "sliding_window", "chunked", "chunked_causal"}));
  app.add_option("--window-left", p.window_left, "sliding_window: keys to the left (-1: unbounded)")
      ->capture_default_str()->check(CLI::Range(-1, 1 << 30));
  app.add_option("--window-right", p.window_right, "sliding_window: keys to the right (-1: unbounded)")
      ->capture_default_str()->check(CLI::Range(-1, 1 << 30));
  app.add_option("--chunk-size", p.chunk_size, "chunked masks: chunk length")->capture_default_str()
      ->check(non_negative());
}

AttentionProblem problem_of(const ProblemArgs& args) {
  AttentionProblem p = args.problem;
  p.dtype = *parse_dtype(args.dtype);  // IsMember checked both
  p.mask = *parse_mask(args.mask);
  return p;
}

int check_problem(const AttentionProblem& problem) {
  const auto issues = dispatch::check_shape(shape_of(problem));
  if (issues.empty()) return kOk;
  std::fflush(stdout);
  for (const auto& issue : issues)
    std::fputs(fmt::format("flashjit: {}: {}\n", option_of(issue.field, problem), issue.message).c_str(), stderr);
  return kUsage;
}

nlohmann::ordered_json problem_json(const AttentionProblem& problem) {
  return dispatch::to_json(dispatch::normalized(shape_of(problem)));
}

}  // namespace flashjit::cli
