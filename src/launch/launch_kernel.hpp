// The one launch helper every kind of kernel goes through: grid, block, dynamic shared memory, thread-block
// clusters and programmatic dependent launch on the caller's stream.
#pragma once

#include <cuda.h>

#include "cuda/driver.hpp"

namespace flashjit::launch {

inline constexpr float kLog2e = 1.4426950408889634f;  // softmax in base 2: scale_log2 = softmax_scale * log2(e)

struct Grid {
  unsigned x = 1, y = 1, z = 1;
};

struct Geometry {
  Grid grid;
  int threads = 0;
  int smem = 0;             // dynamic shared memory, bytes
  unsigned cluster_x = 0;   // > 0: thread-block clusters of (cluster_x, 1, 1) CTAs
  // Programmatic dependent launch (sm_90+): the kernel may start while the previous one on the stream runs
  // and waits for it in-kernel (ptx/griddep.cuh), which hides the launch latency. A driver or stream that
  // refuses it gets a plain launch.
  bool after_previous = false;
};

// Launches `function` with `args` (its parameters' addresses); `what` names it in errors.
Status launch_kernel(const cuda::Api& api, CUfunction function, const Geometry& geometry, CUstream stream,
                     void** args, const char* what);

}  // namespace flashjit::launch
