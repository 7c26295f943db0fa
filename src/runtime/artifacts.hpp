// Kernel artifacts: config -> generated source -> cubin, through the disk cache (or NVRTC on a miss).
// Concurrent requests for the same kernel compile it once. Any kernel kind (prefill, decode, combine) goes
// through the same store as a KernelSpec: its canonical JSON keys the cache, its generator makes the source.
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
#include "config/decode_config.hpp"
#include "flashjit/config.hpp"
#include "flashjit/runtime.hpp"

namespace flashjit::runtime {

struct Artifact {
  std::string cubin;
  std::string entry;  // kernel symbol
  KernelInfo info;
};

// What the store needs of a kernel: built from a valid config by spec_of().
struct KernelSpec {
  Arch arch;
  std::string json;  // canonical config JSON (names the kernel kind)
  int dynamic_smem = 0;
  std::function<Result<codegen::GeneratedSource>()> generate;
};
KernelSpec spec_of(const KernelConfig& config);
KernelSpec spec_of(const DecodeKernelConfig& config);
KernelSpec spec_of(const CombineKernelConfig& config);

class ArtifactStore {
 public:
  // Compiles and cache hits are logged through `logger` (info, debug).
  ArtifactStore(cache::DiskCache disk, bool jit, log::Logger logger)
      : disk_(std::move(disk)), jit_(jit), logger_(std::move(logger)) {}

  // The cubin of a valid config: from memory, the disk cache, or compiled now (and stored).
  template <class Config>
  Result<std::shared_ptr<const Artifact>> get(const Config& config) {
    FLASHJIT_TRY(check(config));
    return get(spec_of(config));
  }
  Result<std::shared_ptr<const Artifact>> get(const KernelSpec& spec);

  const cache::DiskCache& disk() const { return disk_; }

 private:
  Result<std::shared_ptr<const Artifact>> build(const KernelSpec& spec, const codegen::GeneratedSource& source,
                                                const std::string& key, const std::vector<std::string>& options);
  std::string save_failed_source(const std::string& name, const std::string& text) const;

  cache::DiskCache disk_;
  bool jit_;
  log::Logger logger_;
  std::mutex mutex_;
  std::unordered_map<std::string, std::shared_future<Result<std::shared_ptr<const Artifact>>>> builds_;
};

}  // namespace flashjit::runtime
