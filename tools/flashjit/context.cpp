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
