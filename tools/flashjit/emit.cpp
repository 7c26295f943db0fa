// `flashjit emit [--ptx] CONFIG...`: the generated CUDA source of each config (prefill, decode or combine), or
// the PTX NVRTC makes of it (no GPU needed).
#include <fmt/format.h>

#include <limits>

#include "cli.hpp"
#include "codegen/decode_generate.hpp"
#include "codegen/generate.hpp"
#include "compile/nvrtc.hpp"
#include "config_args.hpp"

namespace flashjit::cli {
namespace {

int run_emit(const std::vector<std::string>& tokens, bool ptx, const log::Logger& logger) {
  auto args = load_configs(tokens, std::numeric_limits<std::size_t>::max());
  if (args.exit_code != kOk) return args.exit_code;
  int rc = kOk;
  for (const auto& c : args.configs) {
    auto source = c.config.visit([](const auto& config) { return codegen::generate(config); });
    if (!source.ok()) {
      rc = report(source.error());
      continue;
    }
    std::string text = source->text;
    if (ptx) {
      const Arch arch = c.config.visit([](const auto& config) { return config.arch; });
      auto compiled = compile::compile_ptx(*source, arch, logger);
      if (!compiled.ok()) {
        rc = report(compiled.error());
        continue;
      }
      text = std::move(*compiled);
    }
    if (args.configs.size() > 1) fmt::print("// ===== {} ({}) =====\n", source->name, c.origin);
    fmt::print("{}", text);
  }
  return rc;
}

}  // namespace

Command add_emit(CLI::App& parent, const Globals& globals) {
  CLI::App* app = parent.add_subcommand("emit", "Print the generated CUDA source of each config");
  auto tokens = std::make_shared<std::vector<std::string>>();
  auto ptx = std::make_shared<bool>(false);
  app->add_flag("--ptx", *ptx, "Print the PTX NVRTC makes of it instead (no GPU needed)");
  app->add_option("config", *tokens, "key=value pairs (one config) or .json files")->required();
  return {app, [&globals, tokens, ptx] { return run_emit(*tokens, *ptx, globals.settings.logger); }};
}

}  // namespace flashjit::cli
