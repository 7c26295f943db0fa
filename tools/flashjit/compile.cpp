// `flashjit compile CONFIG... [--json]`: compile each config (prefill, decode or combine; or find it in the
// cache) and report ptxas's resource usage. Needs no GPU.
#include <fmt/format.h>

#include <limits>
#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "config_args.hpp"
#include "tune/compile_pool.hpp"

namespace flashjit::cli {
namespace {

struct Outcome {
  const NamedConfig* config;
  Result<KernelInfo> info;
};

void print_table(const std::vector<Outcome>& outcomes) {
  std::size_t width = 6;
  for (const auto& o : outcomes) width = std::max(width, readable_name(o.config->config).size());
  fmt::print("{:<{}}  {:>9}  {:>13}  {:>10}  {:>11}  {}\n", "KERNEL", width, "REGISTERS", "SPILLS (ST/LD)",
             "SMEM (B)", "COMPILE", "CACHE");
  for (const auto& o : outcomes) {
    const std::string name = readable_name(o.config->config);
    if (!o.info.ok()) {
      fmt::print("{:<{}}  failed: {}\n", name, width, o.info.error().message);
      continue;
    }
    const KernelInfo& k = *o.info;
    fmt::print("{:<{}}  {:>9}  {:>13}  {:>10}  {:>8.1f} ms  {}\n", name, width, k.ptxas.registers,
               fmt::format("{}/{}", k.ptxas.spill_stores, k.ptxas.spill_loads), k.dynamic_smem, k.compile_ms,
               k.cache_hit ? "hit" : "miss");
  }
}

void print_json(const std::vector<Outcome>& outcomes) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& o : outcomes) {
    nlohmann::ordered_json j = {{"origin", o.config->origin},
                        {"name", readable_name(o.config->config)},
                        {"config", nlohmann::ordered_json::parse(to_json(o.config->config))}};
    if (o.info.ok()) {
      const KernelInfo& k = *o.info;
      j.update({{"ok", true},
                {"key", k.key},
                {"cache_hit", k.cache_hit},
                {"compile_ms", k.compile_ms},
                {"registers", k.ptxas.registers},
                {"spill_stores", k.ptxas.spill_stores},
                {"spill_loads", k.ptxas.spill_loads},
                {"stack_frame", k.ptxas.stack_frame},
                {"static_smem", k.ptxas.static_smem},
                {"dynamic_smem", k.dynamic_smem}});
    } else {
      j.update({{"ok", false}, {"error", o.info.error().to_string()}});
    }
    out.push_back(std::move(j));
  }
  fmt::print("{}\n", out.dump(2));
}

int run_compile(const Globals& globals, const std::vector<std::string>& tokens, bool json) {
  auto args = load_configs(tokens, std::numeric_limits<std::size_t>::max());
  if (args.exit_code != kOk) return args.exit_code;
  auto runtime = make_runtime(globals);
  if (!runtime.ok()) return report(runtime.error());
  std::vector<Outcome> outcomes;
  int rc = kOk;
  for (const auto& c : args.configs) {
    // Prefill configs through the Runtime; decode and combine kernels through the same artifact store that
    // Runtime::decode and merge use (the cache, or NVRTC when JIT is on).
    const KernelConfig* prefill = c.config.get_if<KernelConfig>();
    outcomes.push_back({&c, prefill ? (*runtime)->compile(*prefill)
                                    : tune::compile_in_cache(runtime::cache_options(globals.settings), c.config,
                                                             globals.settings.jit)});
    if (!outcomes.back().info.ok()) rc = report(outcomes.back().info.error());  // the full error, NVRTC log too
  }
  if (json) {
    print_json(outcomes);
  } else {
    print_table(outcomes);
    fmt::print("cache: {}\n", (*runtime)->cache_dir().string());
  }
  return rc;
}

}  // namespace

Command add_compile(CLI::App& parent, const Globals& globals) {
  CLI::App* app = parent.add_subcommand("compile", "Compile configs (or find them in the cache); no GPU needed");
  auto tokens = std::make_shared<std::vector<std::string>>();
  auto json = std::make_shared<bool>(false);
  app->add_option("config", *tokens, "key=value pairs (one config) or .json files")->required();
  app->add_flag("--json", *json, "Print a JSON array instead of a table");
  return {app, [&globals, tokens, json] { return run_compile(globals, *tokens, *json); }};
}

}  // namespace flashjit::cli
