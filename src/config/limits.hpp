// Per-architecture limits the config checks and the heuristics share.
#pragma once

#include "flashjit/config.hpp"

namespace flashjit::config {

// Bytes of dynamic shared memory a block may use after opting in (CUDA C++ Programming Guide, compute
// capabilities: 163 KB on sm_80 / sm_87, 227 KB from sm_90, 99 KB on sm_86, sm_89 and others).
inline int max_shared_memory_per_block(const Arch& arch) {
  if (arch.sm == 80 || arch.sm == 87) return 163 * 1024;
  if (arch.sm >= 90) return 227 * 1024;
  return 99 * 1024;
}

}  // namespace flashjit::config
