// What a compiled kernel is known by: ptxas's resource report and what Runtime::compile returns. Shared by
// the compiler, the cache, the runtime and the tools.
#pragma once

#include <cstdint>
#include <string>

namespace flashjit {

// ptxas resource report of a compiled kernel.
struct PtxasStats {
  int registers = -1;
  int spill_stores = 0;  // bytes
  int spill_loads = 0;   // bytes
  int stack_frame = 0;   // bytes
  int static_smem = 0;   // bytes
  bool setmaxnreg_ignored = false;  // ptxas warning C7508
};

// What compile() reports about a kernel.
struct KernelInfo {
  std::string name;       // readable name
  std::string key;        // cache key (hex)
  bool cache_hit = false; // found on disk (or in memory)
  double compile_ms = 0;  // NVRTC time when compiled now, else the time recorded in the cache entry
  PtxasStats ptxas;
  int dynamic_smem = 0;   // bytes requested at launch
  std::string log;        // NVRTC log
};

// What the disk cache holds.
struct CacheStats {
  std::uint64_t entries = 0;
  std::uint64_t bytes = 0;
  std::uint64_t max_bytes = 0;  // size cap, 0: none
};

}  // namespace flashjit
