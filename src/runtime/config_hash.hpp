// Hashing of (device, KernelConfig) for the in-process table of loaded kernels: no JSON, no SHA on the
// launch path.
#pragma once

#include <cstddef>
#include <functional>

#include "flashjit/config.hpp"

namespace flashjit::runtime {

struct DeviceConfig {
  int device = 0;
  KernelConfig config;
  bool operator==(const DeviceConfig&) const = default;
};

struct DeviceConfigHash {
  std::size_t operator()(const DeviceConfig& k) const {
    const KernelConfig& c = k.config;
    const int fields[] = {k.device, static_cast<int>(c.algorithm), c.arch.sm, c.arch.accelerated,
                          static_cast<int>(c.dtype), c.head_dim, c.block_m, c.block_n, c.stages, c.warps,
                          static_cast<int>(c.mask), static_cast<int>(c.scheduler)};
    std::size_t h = 1469598103934665603ull;
    for (int f : fields) h = (h ^ static_cast<std::size_t>(f)) * 1099511628211ull;
    return h;
  }
};

}  // namespace flashjit::runtime
