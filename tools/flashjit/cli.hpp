// Shared plumbing of the flashjit command-line tool: global options, exit codes, how subcommands register,
// and --json output.
#pragma once

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "cache/disk_cache.hpp"
#include "flashjit/error.hpp"
#include "flashjit/runtime.hpp"
#include "runtime/settings.hpp"

namespace flashjit::cli {

// Exit codes: 0 ok; 1 a failure (NVRTC, the driver, the cache, a check); 2 invalid input (usage, a config or
// sweep that does not parse or validate, a problem no kernel supports, an unreadable input file).
inline constexpr int kOk = 0;
inline constexpr int kFailure = 1;
inline constexpr int kUsage = 2;

// Options of the top-level command, filled in by the parser before any subcommand runs.
struct Globals {
  std::string cache_dir;  // --cache-dir; empty: the library's default
  bool verbose = false;   // --verbose
  // The options above with the environment filling the rest, as a Runtime resolves them (main(), after parsing):
  // the CLI's own cache, JIT mode, tuned tables and logger.
  runtime::Settings settings;
};

// A registered subcommand: its parser and what runs when it was selected (returns the exit code).
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

Command add_info(CLI::App& parent, const Globals& globals);
Command add_emit(CLI::App& parent, const Globals& globals);
Command add_compile(CLI::App& parent, const Globals& globals);
Command add_cache(CLI::App& parent, const Globals& globals);
Command add_run(CLI::App& parent, const Globals& globals);
Command add_precompile(CLI::App& parent, const Globals& globals);
Command add_autotune(CLI::App& parent, const Globals& globals);
Command add_select(CLI::App& parent, const Globals& globals);
Command add_compile_worker(CLI::App& parent, const Globals& globals);  // hidden: the compile pool's worker
Command add_nvrtc_worker(CLI::App& parent, const Globals& globals);    // hidden: the runtime's compile worker
// The test hook of both workers (FLASHJIT_WORKER_FAULT=crash:SUBSTRING,hang:SUBSTRING): a kernel whose name holds
// SUBSTRING makes the worker crash (SIGSEGV) or hang, as a broken compiler would.
void inject_worker_fault(const std::string& name);

// What a subcommand reports on stdout: text lines, or with --json one JSON document printed by finish() (with
// "ok": exit code 0 when it is an object). Errors go to stderr either way.
class Output {
 public:
  explicit Output(bool json) : json_(json) {}
  bool json() const { return json_; }
  template <class... A>
  void text(fmt::format_string<A...> format, A&&... args) {
    if (!json_) fmt::print(format, std::forward<A>(args)...);
  }
  nlohmann::ordered_json& data() { return data_; }
  int finish(int rc);

 private:
  bool json_;
  nlohmann::ordered_json data_ = nlohmann::ordered_json::object();
};
// Adds --json to a subcommand.
void add_json_flag(CLI::App& app, bool& json);

// Option checks whose messages name the option and the value: "--jobs: 0 is not a positive integer".
CLI::Validator positive();
CLI::Validator non_negative();

// The global options as RuntimeOptions (--cache-dir; --verbose: debug logging).
RuntimeOptions runtime_options(const Globals& globals);
// The runtime and the disk cache as the global options configure them.
Result<std::unique_ptr<Runtime>> make_runtime(const Globals& globals);
Result<cache::DiskCache> open_cache(const Globals& globals);

// Prints an error (Error::to_string()) on stderr; returns kFailure.
int report(const Error& error);
// The same for an error in what the user gave (a config, a sweep, a problem): returns kUsage.
int report_input(const Error& error);
// The exit code of an error: kUsage for invalid input (invalid_argument, invalid_config, unsupported), else kFailure.
int exit_code_of(const Error& error);
// Prints a usage problem found after parsing (with a pointer to --help) on stderr; returns kUsage.
int report_usage(const std::string& message);

// "1.5 MiB", "512 B".
std::string human_bytes(std::uint64_t bytes);

}  // namespace flashjit::cli
