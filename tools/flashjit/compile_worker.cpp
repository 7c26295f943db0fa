// `flashjit compile-worker CONFIG_JSON` (hidden): the compile pool's worker. Compiles one config (of any
// kernel kind: prefill, decode or combine, told apart by the JSON's "kernel" field) into the
// cache and prints the result line of tune/worker_protocol.hpp. Its own process, so that a compiler crash
// or hang takes down this kernel only.
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "cli.hpp"
#include "compile/subprocess.hpp"
#include "flashjit/config.hpp"
#include "tune/compile_pool.hpp"
#include "tune/worker_protocol.hpp"

namespace flashjit::cli {

void inject_worker_fault(const std::string& name) {
  const char* env = std::getenv(tune::kWorkerFaultVariable);
  if (!env) return;
  std::string_view list(env);
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    const std::string_view item = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    const std::size_t colon = item.find(':');
    if (colon == std::string_view::npos || colon + 1 == item.size()) continue;
    if (name.find(item.substr(colon + 1)) == std::string::npos) continue;
    const std::string_view kind = item.substr(0, colon);
    if (kind == "crash") {  // killed by SIGSEGV, whatever handler is installed (ASan's exits with status 1)
      std::signal(SIGSEGV, SIG_DFL);
      std::raise(SIGSEGV);
    }
    if (kind == "hang")
      for (;;) ::pause();
  }
}

namespace {

Result<KernelInfo> compile_one(const Globals& globals, const std::string& json) {
  auto config = any_config_from_json(json);  // prefill, decode or combine (by its "kernel" field)
  if (!config.ok()) return std::move(config).error();
  inject_worker_fault(readable_name(*config));
  // jit: the worker's whole purpose, whatever FLASHJIT_JIT says.
  return tune::compile_in_cache(runtime::cache_options(globals.settings), *config, /*jit=*/true);
}

}  // namespace

Command add_compile_worker(CLI::App& parent, const Globals& globals) {
  CLI::App* app = parent.add_subcommand(tune::kWorkerCommand, "Compile one config for the compile pool (internal)");
  app->group("");  // hidden from --help
  auto json = std::make_shared<std::string>();
  auto parent_pid = std::make_shared<int>(0);
  app->add_option("--parent", *parent_pid, "The pool's pid: the worker dies with it");
  app->add_option("config", *json, "Canonical config JSON")->required();
  return {app, [&globals, json, parent_pid] {
            if (!compile::die_with_parent(*parent_pid)) return kFailure;
            auto result = compile_one(globals, *json);
            std::fputs((tune::encode_result(result) + "\n").c_str(), stdout);
            return result.ok() ? kOk : kFailure;
          }};
}

}  // namespace flashjit::cli
