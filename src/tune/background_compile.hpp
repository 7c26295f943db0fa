// A CompilePool on a thread of its own, so that the autotuner times the kernels compiled first while the
// rest still compile.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <set>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tune/compile_pool.hpp"

namespace flashjit::tune {

class BackgroundCompiles {
 public:
  // Starts compiling `configs` in order; `known` (cache hits, say) are answered without compiling.
  BackgroundCompiles(PoolOptions options, std::vector<KernelConfig> configs,
                     std::vector<std::pair<KernelConfig, KernelInfo>> known);
  ~BackgroundCompiles();  // kills the workers still running and joins
  BackgroundCompiles(const BackgroundCompiles&) = delete;
  BackgroundCompiles& operator=(const BackgroundCompiles&) = delete;

  // Blocks until the config is compiled: its info, or why it failed. A config never given is an error.
  Result<KernelInfo> wait(const KernelConfig& config);

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, Result<KernelInfo>> results_;  // by canonical JSON
  std::set<std::string> pending_;                      // given, not finished
  std::atomic<bool> cancel_{false};
  std::thread thread_;
};

}  // namespace flashjit::tune
