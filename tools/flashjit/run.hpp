// `flashjit run`: what the command-line part (run.cpp) hands to the device part (run_device.cpp).
#pragma once

#include <optional>

#include "flashjit/config.hpp"
#include "flashjit/problem.hpp"
#include "cli.hpp"
#include "flashjit/runtime.hpp"

namespace flashjit::cli {

struct RunPlan {
  AttentionProblem problem;             // shape, dtype and mask; no tensors yet
  std::optional<KernelConfig> config;   // explicit config, else the dispatcher's choice
  int iters = 50;                       // timed launches
  bool check = true;                    // compare against the naive reference kernel
  Output* out = nullptr;                // text or --json
};

// Allocates and fills the tensors on device 0, runs, checks against the reference and times the kernel.
int run_on_device(Runtime& runtime, const RunPlan& plan);

// "kernel:" and "compile:" lines of a compiled kernel; `how` says where its config came from.
void print_kernel(Output& out, const KernelInfo& info, const std::string& how);

}  // namespace flashjit::cli
