// Kernel artifacts: config -> generated source -> cubin, through the disk cache (or NVRTC on a miss).
// Concurrent requests for the same kernel compile it once. Every kernel kind goes through it: its canonical
// JSON and generated source key the cache (compile/key.hpp).
#pragma once

#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "cache/disk_cache.hpp"
#include "codegen/generate.hpp"
#include "common/log.hpp"
#include "flashjit/config.hpp"
#include "flashjit/kernel_info.hpp"

namespace flashjit::cache {

struct Artifact {
  std::string cubin;
  std::string entry;  // kernel symbol
  KernelInfo info;
};

class ArtifactStore {
 public:
  // Compiles and cache hits are logged through `logger` (info, debug).
  ArtifactStore(DiskCache disk, bool jit, log::Logger logger)
      : disk_(std::move(disk)), jit_(jit), logger_(std::move(logger)) {}

  // The cubin of a valid config: from the disk cache, or compiled now (and stored). Concurrent calls for one
  // kernel build it once.
  Result<std::shared_ptr<const Artifact>> get(const AnyKernelConfig& config);

  const cache::DiskCache& disk() const { return disk_; }

 private:
  Result<std::shared_ptr<const Artifact>> build(const AnyKernelConfig& config, const codegen::GeneratedSource& source,
                                                const std::string& key, const std::vector<std::string>& options);
  std::string save_failed_source(const std::string& name, const std::string& text) const;

  DiskCache disk_;
  bool jit_;
  log::Logger logger_;
  std::mutex mutex_;
  std::unordered_map<std::string, std::shared_future<Result<std::shared_ptr<const Artifact>>>> builds_;
};

}  // namespace flashjit::cache
