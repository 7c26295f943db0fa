// Autotuning one problem: time every candidate that compiled without spills, check the fastest against the
// reference kernel (passing to the next when it fails) and make the table entry. The GPU side is behind
// ProblemBench (implemented over the CUDA driver by the CLI, faked in the tests).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "dispatch/problem_shape.hpp"
#include "dispatch/tuned_table.hpp"
#include "flashjit/config.hpp"
#include "flashjit/error.hpp"
#include "flashjit/runtime.hpp"
#include "tune/candidates.hpp"

namespace flashjit::tune {

// One problem's tensors on a GPU and what can be measured on them.
class ProblemBench {
 public:
  virtual ~ProblemBench() = default;
  // Median time of one launch in milliseconds (CUDA events, after warm-up, inputs rotated past the L2).
  virtual Result<double> median_ms(const KernelConfig& config) = 0;
  // Relative L2 error of the output against the reference kernel's; nullopt when the problem is too large to
  // check.
  virtual Result<std::optional<double>> rel_l2(const KernelConfig& config) = 0;
};

// A candidate's compile result (blocks until it is known).
using CompiledFn = std::function<Result<KernelInfo>(const KernelConfig&)>;

struct ProblemReport {
  std::optional<dispatch::TunedEntry> entry;  // none when no candidate was timed and passed the check
  dispatch::CandidateCounts counts;
  std::vector<std::string> notes;   // one line per candidate that failed (compile, run, check)
};

// The relative L2 limit of the check for a dtype (bf16 2e-2, fp16 4e-3, as `flashjit run`).
double check_tolerance(DType dtype);

// Tunes one problem over `candidates` (the dispatcher's pick `heuristic` is timed too, for comparison).
ProblemReport tune_problem(const dispatch::ProblemShape& shape, const Candidates& candidates,
                           const KernelConfig& heuristic, const CompiledFn& compiled, ProblemBench& bench);

}  // namespace flashjit::tune
