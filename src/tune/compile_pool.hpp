// The compile pool: each kernel compiled in its own worker process (the protocol is in worker_protocol.hpp),
// at most `jobs` workers alive at once, each killed at the timeout. A worker that crashes (NVRTC can
// segfault) or hangs fails its own kernel, with its log; the others go on. Any kernel kind (prefill, decode,
// combine) goes through it. Used by `flashjit precompile` and `flashjit autotune`.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "cache/disk_cache.hpp"
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
  AnyKernelConfig config;
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
  std::vector<CompileOutcome> run(const std::vector<AnyKernelConfig>& configs,
                                  const std::function<void(const PoolEvent&)>& on_event = {},
                                  const std::atomic<bool>* cancel = nullptr) const;
  // The same for a list of one kind (KernelConfig, DecodeKernelConfig, CombineKernelConfig).
  template <class Config>
  std::vector<CompileOutcome> run(const std::vector<Config>& configs,
                                  const std::function<void(const PoolEvent&)>& on_event = {},
                                  const std::atomic<bool>* cancel = nullptr) const {
    return run(std::vector<AnyKernelConfig>(configs.begin(), configs.end()), on_event, cancel);
  }

 private:
  PoolOptions options_;
};

// Configs already in the cache `cache` opens (with their info, read without compiling) and those that are not.
template <class Config>
struct CacheSplitOf {
  std::vector<std::pair<Config, KernelInfo>> cached;
  std::vector<Config> missing;
};
using CacheSplit = CacheSplitOf<KernelConfig>;
Result<CacheSplit> split_cached(const cache::CacheOptions& cache, const std::vector<KernelConfig>& configs);
Result<CacheSplitOf<AnyKernelConfig>> split_cached(const cache::CacheOptions& cache,
                                                   const std::vector<AnyKernelConfig>& configs);

// One kernel of any kind compiled into (jit) or looked up in (jit false: a miss is not_found) the disk cache
// `cache` opens (runtime::cache_options of the settings), through the runtime's artifact store, which logs
// through cache.logger: what Runtime::compile does for a KernelConfig, and what Runtime::decode / merge find
// for decode and combine kernels. The worker's compile, and `flashjit compile`.
Result<KernelInfo> compile_in_cache(const cache::CacheOptions& cache, const AnyKernelConfig& config, bool jit);

}  // namespace flashjit::tune
