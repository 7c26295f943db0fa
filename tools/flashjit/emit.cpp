// `flashjit emit [--ptx] CONFIG...`: the generated CUDA source of each config (prefill, decode or combine), or
// the PTX NVRTC makes of it (no GPU needed).
#include <fmt/format.h>

#include <limits>

#include "cli.hpp"
#include "config_args.hpp"

namespace flashjit::cli {
namespace {

int run_emit(const std::vector<std::string>& tokens, bool ptx) {
  auto args = load_configs(tokens, std::numeric_limits<std::size_t>::max());
  if (args.exit_code != kOk) return args.exit_code;
  int rc = kOk;
  for (const auto& c : args.configs) {
    auto text = ptx ? Runtime::emit_ptx(c.config) : Runtime::emit(c.config);
    if (!text.ok()) {
      rc = report(text.error());
      continue;
    }
    if (args.configs.size() > 1) fmt::print("// ===== {} ({}) =====\n", readable_name(c.config), c.origin);
    fmt::print("{}", *text);
  }
  return rc;
}

}  // namespace

Command add_emit(CLI::App& parent, const Globals&) {
  CLI::App* app = parent.add_subcommand("emit", "Print the generated CUDA source of each config");
  auto tokens = std::make_shared<std::vector<std::string>>();
  auto ptx = std::make_shared<bool>(false);
  app->add_flag("--ptx", *ptx, "Print the PTX NVRTC makes of it instead (no GPU needed)");
  app->add_option("config", *tokens, "key=value pairs (one config) or .json files")->required();
  return {app, [tokens, ptx] { return run_emit(*tokens, *ptx); }};
}

}  // namespace flashjit::cli
