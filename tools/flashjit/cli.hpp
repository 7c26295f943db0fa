// Shared plumbing of the flashjit command-line tool: global options, exit codes, how subcommands register.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "cache/disk_cache.hpp"
#include "flashjit/error.hpp"
#include "flashjit/runtime.hpp"
#include "runtime/settings.hpp"

namespace flashjit::cli {

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
Command add_compile_worker(CLI::App& parent, const Globals& globals);  // hidden: the compile pool's worker

// The global options as RuntimeOptions (--cache-dir; --verbose: debug logging).
RuntimeOptions runtime_options(const Globals& globals);
// The runtime and the disk cache as the global options configure them.
Result<std::unique_ptr<Runtime>> make_runtime(const Globals& globals);
Result<cache::DiskCache> open_cache(const Globals& globals);

// Prints an error (Error::to_string()) on stderr; returns kFailure.
int report(const Error& error);
// Prints a usage problem found after parsing (with a pointer to --help) on stderr; returns kUsage.
int report_usage(const std::string& message);

// "1.5 MiB", "512 B".
std::string human_bytes(std::uint64_t bytes);

}  // namespace flashjit::cli
