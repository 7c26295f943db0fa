// Settings are read once: RuntimeOptions, with the environment filling what they leave unset, resolved into
// one Settings value in Runtime::create (and by the CLI from its global options), then passed down. This is the
// only place that reads the environment variables of README "Caches and environment".
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "cache/disk_cache.hpp"
#include "common/log.hpp"
#include "flashjit/runtime.hpp"

namespace flashjit::runtime {

struct Settings {
  std::filesystem::path cache_dir;  // empty when no folder was found (DiskCache::open says so)
  std::uint64_t cache_max_bytes = 0;  // 0: no cap
  bool jit = true;
  std::vector<std::filesystem::path> tuned_tables;  // read before <cache_dir>/tuned (TunedTables::default_sources)
  bool pdl = true;                                  // programmatic dependent launch of decode and merge (sm_90+)
  bool check_pages = false;                         // check every decode's page table on the host
  bool check_seqlens = false;                       // check every ragged forward's cu_seqlens on the host
  bool compile_in_process = false;                  // NVRTC in this process rather than in a worker
  std::filesystem::path compile_worker;             // empty: runtime::find_compile_worker()
  std::chrono::milliseconds compile_timeout{600000};
  log::Logger logger;
};

// The environment variables Settings reads; an empty value counts as unset.
struct Environment {
  std::string cache_dir;       // FLASHJIT_CACHE_DIR
  std::string xdg_cache_home;  // XDG_CACHE_HOME
  std::string home;            // HOME
  std::string cache_max_mb;    // FLASHJIT_CACHE_MAX_MB
  std::string jit;             // FLASHJIT_JIT
  std::string tuned;           // FLASHJIT_TUNED
  std::string pdl;             // FLASHJIT_PDL
  std::string check_pages;     // FLASHJIT_CHECK_PAGES
  std::string check_seqlens;   // FLASHJIT_CHECK_SEQLENS
  std::string compile_in_process;  // FLASHJIT_COMPILE_IN_PROCESS
  std::string compile_worker;  // FLASHJIT_COMPILE_WORKER
  std::string compile_timeout; // FLASHJIT_COMPILE_TIMEOUT
  std::string log;             // FLASHJIT_LOG

  // This process's environment, now.
  static Environment current();
};

// The options, with `env` filling what they leave unset. A FLASHJIT_CACHE_MAX_MB that is not a whole number of
// MiB is ignored (no cap), and a FLASHJIT_COMPILE_TIMEOUT that is not a positive number of seconds takes the
// default, each with a warning through the resolved logger. Timeouts are clamped to [1 ms, a week].
Settings resolve(const RuntimeOptions& options, const Environment& env);
// resolve(options, Environment::current()).
Settings resolve(const RuntimeOptions& options);

// FLASHJIT_CACHE_DIR, else $XDG_CACHE_HOME/flashjit (when absolute), else $HOME/.cache/flashjit, else the
// passwd entry's home folder /.cache/flashjit; empty when there is none.
std::filesystem::path default_cache_dir(const Environment& env);
// A ':'-separated list of paths (FLASHJIT_TUNED, the C ABI's tuned_tables); empty items are skipped.
std::vector<std::filesystem::path> split_paths(std::string_view list);

// What DiskCache::open needs of the settings.
cache::CacheOptions cache_options(const Settings& settings);

}  // namespace flashjit::runtime
