// Kernel artifacts: config -> generated source -> cubin, through the disk cache (or NVRTC on a miss).
// Concurrent requests for the same kernel compile it once.
#pragma once

#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "cache/disk_cache.hpp"
#include "flashjit/config.hpp"
#include "flashjit/runtime.hpp"

namespace flashjit::runtime {

struct Artifact {
  std::string cubin;
  std::string entry;  // kernel symbol
  KernelInfo info;
};

class ArtifactStore {
 public:
  ArtifactStore(cache::DiskCache disk, bool jit) : disk_(std::move(disk)), jit_(jit) {}

  // The cubin of a valid config: from memory, the disk cache, or compiled now (and stored).
  Result<std::shared_ptr<const Artifact>> get(const KernelConfig& config);

  const cache::DiskCache& disk() const { return disk_; }

 private:
  Result<std::shared_ptr<const Artifact>> build(const KernelConfig& config, const std::string& key,
                                                const std::vector<std::string>& options);
  std::string save_failed_source(const std::string& name, const std::string& text) const;

  cache::DiskCache disk_;
  bool jit_;
  std::mutex mutex_;
  std::unordered_map<std::string, std::shared_future<Result<std::shared_ptr<const Artifact>>>> builds_;
};

}  // namespace flashjit::runtime
