// The compile pool: each kernel compiled in its own worker process (the protocol is in worker_protocol.hpp),
// at most `jobs` workers alive at once, each killed at the timeout. A worker that crashes (NVRTC can
// segfault) or hangs fails its own kernel, with its log; the others go on. Used by `flashjit precompile` and
// `flashjit autotune`.
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "flashjit/config.hpp"
#include "flashjit/error.hpp"
#include "flashjit/runtime.hpp"

namespace flashjit::tune {

struct PoolOptions {
  std::vector<std::string> worker;  // the flashjit binary and its global options (--cache-dir DIR)
  int jobs = 1;                     // workers alive at once
  std::chrono::milliseconds timeout{120000};
  std::vector<std::string> env;     // extra VAR=value for the workers (tests set the fault hook here)
};

struct CompileOutcome {
  KernelConfig config;
  std::string name;  // readable name
  Result<KernelInfo> info = Error(ErrorCode::internal, "not compiled");
  std::string worker_log;  // what the worker wrote on stderr
  double wall_ms = 0;      // worker start to end
};

struct PoolProgress {
  int total = 0;
  int done = 0;
  int failed = 0;
  std::vector<std::string> running;  // kernels compiling now, oldest first
};

struct PoolEvent {
  enum Kind { started, finished };
  Kind kind;
  const CompileOutcome& outcome;  // on `started`: config and name only
  const PoolProgress& progress;   // after the event
};

class CompilePool {
 public:
  explicit CompilePool(PoolOptions options) : options_(std::move(options)) {}

  // Compiles the configs, started in the given order; `on_event` (called on this thread) sees each start and
  // finish. One outcome per config, in the given order. Once *cancel is true no worker starts and the
  // running ones are killed; their outcomes say so.
  std::vector<CompileOutcome> run(const std::vector<KernelConfig>& configs,
                                  const std::function<void(const PoolEvent&)>& on_event = {},
                                  const std::atomic<bool>* cancel = nullptr) const;

 private:
  PoolOptions options_;
};

// Configs already in the cache at `cache_dir` (with their info, read without compiling) and those that are not.
struct CacheSplit {
  std::vector<std::pair<KernelConfig, KernelInfo>> cached;
  std::vector<KernelConfig> missing;
};
Result<CacheSplit> split_cached(const std::filesystem::path& cache_dir, const std::vector<KernelConfig>& configs);

}  // namespace flashjit::tune
