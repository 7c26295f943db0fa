// Hashing of (device, kernel config) for the in-process tables of loaded kernels: no JSON, no SHA on the
// launch path. One table per config type (prefill, decode split, combine).
#pragma once

#include <cstddef>
#include <initializer_list>

#include "config/decode_config.hpp"
#include "flashjit/config.hpp"

namespace flashjit::runtime {

template <class Config>
struct DeviceKernel {
  int device = 0;
  Config config;
  bool operator==(const DeviceKernel&) const = default;
};

inline std::size_t fnv1a(std::initializer_list<int> fields) {
  std::size_t h = 1469598103934665603ull;
  for (int f : fields) h = (h ^ static_cast<std::size_t>(f)) * 1099511628211ull;
  return h;
}

inline std::size_t hash_of(int device, const KernelConfig& c) {
  return fnv1a({device, static_cast<int>(c.algorithm), c.arch.sm, c.arch.accelerated, static_cast<int>(c.dtype),
                c.head_dim, c.block_m, c.block_n, c.stages, c.warps, static_cast<int>(c.mask),
                static_cast<int>(c.scheduler), c.varlen});
}
inline std::size_t hash_of(int device, const DecodeKernelConfig& c) {
  return fnv1a({device, c.arch.sm, c.arch.accelerated, static_cast<int>(c.dtype), c.head_dim, c.rows, c.block_n,
                c.stages, c.warps, c.column_groups, static_cast<int>(c.layout), c.page_size, c.window,
                c.cluster_merge});
}
inline std::size_t hash_of(int device, const CombineKernelConfig& c) {
  return fnv1a({device, c.arch.sm, c.arch.accelerated, static_cast<int>(c.dtype), c.fp32_inputs, c.head_dim, c.warps});
}

struct DeviceKernelHash {
  template <class Config>
  std::size_t operator()(const DeviceKernel<Config>& k) const { return hash_of(k.device, k.config); }
};

}  // namespace flashjit::runtime
