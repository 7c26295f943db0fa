// The kernels a Runtime has loaded: one map over every kind, keyed by (device, config). A miss compiles or
// reads the cubin from the artifact store and loads it in the device's context, which cannot happen while
// the stream captures a CUDA graph (an error then says what to run first).
#pragma once

#include <memory>
#include <shared_mutex>
#include <unordered_map>

#include "cache/artifact_store.hpp"
#include "flashjit/config.hpp"
#include "runtime/devices.hpp"

namespace flashjit::runtime {

class LoadedKernels {
 public:
  // The kernel of a valid config on a device whose context is current.
  Result<CUfunction> function(const AnyKernelConfig& config, const Device& dev, CUstream stream,
                              cache::ArtifactStore& artifacts);
  // Unloads a device's kernels (its context current).
  void unload(int device);

 private:
  struct Key {
    int device = 0;
    AnyKernelConfig config;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    std::size_t operator()(const Key& k) const { return hash_of(k.config) * 31 + static_cast<std::size_t>(k.device); }
  };
  struct Loaded {
    cuda::Module module;
    CUfunction function = nullptr;
  };

  std::shared_mutex mutex_;
  std::unordered_map<Key, std::unique_ptr<Loaded>, KeyHash> loaded_;
};

}  // namespace flashjit::runtime
