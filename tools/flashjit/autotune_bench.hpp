// `flashjit autotune` on the GPU: one problem's tensors on device 0 and the measurements the autotuner makes
// on them (tune::ProblemBench).
#pragma once

#include <memory>

#include "dispatch/problem_shape.hpp"
#include "flashjit/config.hpp"
#include "flashjit/runtime.hpp"
#include "tune/autotune.hpp"

namespace flashjit::cli {

struct BenchSettings {
  int iters = 20;   // timed samples; the median is kept
  int warmup = 5;   // untimed launches first
};

// Allocates the problem's tensors (enough input sets to rotate past the L2) in the current context; the
// reference output is computed on the first check. `arch` is the device's.
Result<std::unique_ptr<tune::ProblemBench>> make_device_bench(Runtime& runtime, const dispatch::ProblemShape& shape,
                                                               const Arch& arch, const BenchSettings& settings);

}  // namespace flashjit::cli
