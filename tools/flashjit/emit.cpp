// `flashjit emit CONFIG...`: the generated CUDA source of each config (prefill, decode or combine).
#include <fmt/format.h>

#include <limits>

#include "cli.hpp"
#include "codegen/decode_generate.hpp"
#include "codegen/generate.hpp"
#include "config_args.hpp"

namespace flashjit::cli {
namespace {

int run_emit(const std::vector<std::string>& tokens) {
  auto args = load_configs(tokens, std::numeric_limits<std::size_t>::max());
  if (args.exit_code != kOk) return args.exit_code;
  int rc = kOk;
  for (const auto& c : args.configs) {
    auto source = c.config.visit([](const auto& config) { return codegen::generate(config); });
    if (!source.ok()) {
      rc = report(source.error());
      continue;
    }
    if (args.configs.size() > 1) fmt::print("// ===== {} ({}) =====\n", source->name, c.origin);
    fmt::print("{}", source->text);
  }
  return rc;
}

}  // namespace

Command add_emit(CLI::App& parent, const Globals&) {
  CLI::App* app = parent.add_subcommand("emit", "Print the generated CUDA source of each config");
  auto tokens = std::make_shared<std::vector<std::string>>();
  app->add_option("config", *tokens, "key=value pairs (one config) or .json files")->required();
  return {app, [tokens] { return run_emit(*tokens); }};
}

}  // namespace flashjit::cli
