#include "runtime/settings.hpp"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <initializer_list>
#include <cstdlib>
#include <system_error>

#include "compile/subprocess.hpp"

namespace flashjit::runtime {
namespace fs = std::filesystem;
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

// FLASHJIT_LOG: debug, info or error; anything else (warn, unset, unknown) is warn (an unknown value is
// warned about: warn_unknown()).
log::Level level_of(const std::string& v) {
  if (v == "debug") return log::Level::debug;
  if (v == "info") return log::Level::info;
  if (v == "error") return log::Level::error;
  return log::Level::warn;
}

// FLASHJIT_CACHE_MAX_MB in bytes; 0 when unset or not a whole number of MiB (said through `logger`).
std::uint64_t max_bytes_of(const std::string& v, const log::Logger& logger) {
  if (v.empty()) return 0;
  std::uint64_t mb = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), mb);
  if (ec != std::errc() || end != v.data() + v.size() || mb > (UINT64_MAX >> 20)) {
    logger.warn("ignoring FLASHJIT_CACHE_MAX_MB='{}': not a whole number of MiB", v);
    return 0;
  }
  return mb << 20;
}

// Values of the FLASHJIT_* variables that are neither empty nor one the variable takes, said once per resolve.
void warn_unknown(const Environment& env, const log::Logger& logger) {
  auto check = [&](const char* name, const std::string& v, std::initializer_list<const char*> known) {
    if (v.empty()) return;
    for (const char* k : known)
      if (v == k) return;
    std::string list;
    for (const char* k : known) list += std::string(list.empty() ? "" : ", ") + k;
    logger.warn("ignoring {}='{}': not one of {}", name, v, list);
  };
  check("FLASHJIT_LOG", env.log, {"debug", "info", "warn", "error"});
  check("FLASHJIT_JIT", env.jit, {"0", "1"});
  check("FLASHJIT_PDL", env.pdl, {"0", "1"});
  check("FLASHJIT_CHECK_PAGES", env.check_pages, {"0", "1"});
  check("FLASHJIT_CHECK_SEQLENS", env.check_seqlens, {"0", "1"});
  check("FLASHJIT_COMPILE_IN_PROCESS", env.compile_in_process, {"0", "1"});
}

// FLASHJIT_COMPILE_TIMEOUT in seconds; the default when unset or not a positive number (said through `logger`).
double seconds_of(const std::string& v, const log::Logger& logger) {
  constexpr double fallback = 600;
  if (v.empty()) return fallback;
  char* end = nullptr;
  const double s = std::strtod(v.c_str(), &end);
  if (end != v.c_str() + v.size() || !(s > 0)) {
    logger.warn("ignoring FLASHJIT_COMPILE_TIMEOUT='{}': not a positive number of seconds", v);
    return fallback;
  }
  return s;
}

}  // namespace

Environment Environment::current() {
  Environment e;
  e.cache_dir = env("FLASHJIT_CACHE_DIR");
  e.xdg_cache_home = env("XDG_CACHE_HOME");
  e.home = env("HOME");
  e.cache_max_mb = env("FLASHJIT_CACHE_MAX_MB");
  e.jit = env("FLASHJIT_JIT");
  e.tuned = env("FLASHJIT_TUNED");
  e.pdl = env("FLASHJIT_PDL");
  e.check_pages = env("FLASHJIT_CHECK_PAGES");
  e.check_seqlens = env("FLASHJIT_CHECK_SEQLENS");
  e.compile_in_process = env("FLASHJIT_COMPILE_IN_PROCESS");
  e.compile_worker = env("FLASHJIT_COMPILE_WORKER");
  e.compile_timeout = env("FLASHJIT_COMPILE_TIMEOUT");
  e.log = env("FLASHJIT_LOG");
  return e;
}

Settings resolve(const RuntimeOptions& options, const Environment& env) {
  Settings s;
  s.logger = log::Logger(options.log_level.value_or(level_of(env.log)), options.log_callback);
  warn_unknown(env, s.logger);
  s.cache_dir = options.cache_dir.value_or(default_cache_dir(env));
  // A cap past 2^64 bytes is no cap at all, never a product wrapped to a tiny one.
  s.cache_max_bytes = !options.cache_max_mb                 ? max_bytes_of(env.cache_max_mb, s.logger)
                      : *options.cache_max_mb > (UINT64_MAX >> 20) ? UINT64_MAX
                                                                   : *options.cache_max_mb << 20;
  s.jit = options.jit.value_or(env.jit != "0");
  s.tuned_tables = options.tuned_tables.value_or(split_paths(env.tuned));
  s.pdl = options.pdl.value_or(env.pdl != "0");
  s.check_pages = options.check_pages.value_or(env.check_pages == "1");
  s.check_seqlens = options.check_seqlens.value_or(env.check_seqlens == "1");
  s.compile_in_process = options.compile_in_process.value_or(env.compile_in_process == "1");
  s.compile_worker = options.compile_worker.value_or(fs::path(env.compile_worker));
  s.compile_timeout = compile::timeout_of(options.compile_timeout_s ? *options.compile_timeout_s
                                                           : seconds_of(env.compile_timeout, s.logger));
  return s;
}

Settings resolve(const RuntimeOptions& options) { return resolve(options, Environment::current()); }

fs::path default_cache_dir(const Environment& env) {
  if (!env.cache_dir.empty()) return env.cache_dir;
  if (!env.xdg_cache_home.empty() && fs::path(env.xdg_cache_home).is_absolute())
    return fs::path(env.xdg_cache_home) / "flashjit";
  std::string home = env.home;
  if (home.empty()) {
    struct passwd pw {}, *res = nullptr;
    char buf[4096];
    if (::getpwuid_r(::geteuid(), &pw, buf, sizeof buf, &res) == 0 && res && res->pw_dir) home = res->pw_dir;
  }
  if (home.empty()) return {};
  return fs::path(home) / ".cache" / "flashjit";
}

std::vector<fs::path> split_paths(std::string_view list) {
  std::vector<fs::path> out;
  while (!list.empty()) {
    const std::size_t colon = list.find(':');
    const std::string_view item = list.substr(0, colon);
    if (!item.empty()) out.emplace_back(item);
    list = colon == std::string_view::npos ? std::string_view() : list.substr(colon + 1);
  }
  return out;
}

cache::CacheOptions cache_options(const Settings& settings) {
  return cache::CacheOptions{settings.cache_dir, settings.cache_max_bytes, settings.logger};
}

}  // namespace flashjit::runtime
