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
#include "compile/nvrtc.hpp"
#include "common/log.hpp"
#include "flashjit/config.hpp"
#include "flashjit/kernel_info.hpp"

namespace flashjit::cache {

struct Artifact {
  std::string cubin;
  std::string entry;  // kernel symbol
  KernelInfo info;
};

// Saves the generated source of a failed compile as NAME.cu: in <cache>/failed when the cache is writable, else
// in a private folder of the temporary folder ($TMPDIR/flashjit-failed-UID, or a fresh one when that is not a
// private folder of ours). Written atomically (a planted symbolic link is replaced, not followed). The path,
// or "(nowhere: why)".
std::string save_failed_source(const DiskCache& disk, const std::string& name, const std::string& text);

class ArtifactStore {
 public:
  // How a cache miss is compiled; empty: NVRTC in this process (compile::compile). The runtime passes the
  // out-of-process worker (compile/worker.hpp) unless told to compile in process.
  using Compiler = std::function<Result<compile::CompiledKernel>(const codegen::GeneratedSource&,
                                                                 const std::vector<std::string>& options)>;

  // Compiles and cache hits are logged through `logger` (info, debug).
  ArtifactStore(DiskCache disk, bool jit, log::Logger logger, Compiler compiler = {})
      : disk_(std::move(disk)), jit_(jit), logger_(std::move(logger)), compiler_(std::move(compiler)) {}

  // The cubin of a valid config: from the disk cache, or compiled now (and stored). Concurrent calls for one
  // kernel build it once.
  Result<std::shared_ptr<const Artifact>> get(const AnyKernelConfig& config);

  const cache::DiskCache& disk() const { return disk_; }

 private:
  Result<std::shared_ptr<const Artifact>> build(const AnyKernelConfig& config, const codegen::GeneratedSource& source,
                                                const std::string& key, const std::vector<std::string>& options);

  DiskCache disk_;
  bool jit_;
  log::Logger logger_;
  Compiler compiler_;
  std::mutex mutex_;
  std::unordered_map<std::string, std::shared_future<Result<std::shared_ptr<const Artifact>>>> builds_;
};

}  // namespace flashjit::cache
