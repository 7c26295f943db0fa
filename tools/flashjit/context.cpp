// The runtime, the disk cache and error reporting as every subcommand uses them.
#include <fmt/format.h>

#include <cstdio>

#include "cli.hpp"

namespace flashjit::cli {

RuntimeOptions runtime_options(const Globals& globals) {
  RuntimeOptions options;
  if (!globals.cache_dir.empty()) options.cache_dir = globals.cache_dir;
  if (globals.verbose) options.log_level = LogLevel::debug;
  return options;
}

Result<std::unique_ptr<Runtime>> make_runtime(const Globals& globals) { return Runtime::create(runtime_options(globals)); }

Result<cache::DiskCache> open_cache(const Globals& globals) {
  auto disk = cache::DiskCache::open(runtime::cache_options(globals.settings));
  if (!disk.ok()) return std::move(disk).error().with("while opening the kernel cache");
  return disk;
}

int report(const Error& error) {
  std::string text = error.to_string();
  if (text.empty() || text.back() != '\n') text += '\n';
  std::fflush(stdout);  // keep what was printed so far before the error
  std::fputs(("flashjit: " + text).c_str(), stderr);
  return kFailure;
}

int report_input(const Error& error) {
  report(error);
  return kUsage;
}

int exit_code_of(const Error& error) {
  switch (error.code) {
    case ErrorCode::invalid_argument:
    case ErrorCode::invalid_config:
    case ErrorCode::unsupported:
      return kUsage;
    default:
      return kFailure;
  }
}

int Output::finish(int rc) {
  if (json_) {
    if (data_.is_object()) data_["ok"] = rc == kOk;
    fmt::print("{}\n", data_.dump(2));
  }
  std::fflush(stdout);
  return rc;
}

void add_json_flag(CLI::App& app, bool& json) {
  app.add_flag("--json", json, "Print one JSON document on stdout instead of text (errors stay on stderr)");
}

namespace {
CLI::Validator integer_at_least(long long least, const char* what) {
  return CLI::Validator(
      [least, what](std::string& value) -> std::string {
        long long v = 0;
        std::size_t used = 0;
        try {
          v = std::stoll(value, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == 0 || used != value.size() || v < least) return fmt::format("'{}' is not {}", value, what);
        return {};
      },
      what);
}
}  // namespace

CLI::Validator positive() { return integer_at_least(1, "a positive integer"); }
CLI::Validator non_negative() { return integer_at_least(0, "a non-negative integer"); }

int report_usage(const std::string& message) {
  std::fflush(stdout);
  std::fputs(fmt::format("flashjit: {}\nRun with --help for more information.\n", message).c_str(), stderr);
  return kUsage;
}

std::string human_bytes(std::uint64_t bytes) {
  if (bytes < 1024) return fmt::format("{} B", bytes);
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes) / 1024;
  int u = 0;
  while (v >= 1024 && u < 3) v /= 1024, ++u;
  return fmt::format("{:.1f} {}", v, units[u]);
}

}  // namespace flashjit::cli
