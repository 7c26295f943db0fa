// Resuming an interrupted autotune run: results are checkpointed to OUTPUT.partial after each problem; a
// later run with the same output continues from there (or from OUTPUT itself) and skips what was measured.
#pragma once

#include <cstddef>
#include <filesystem>
#include <vector>

#include "dispatch/problem_shape.hpp"
#include "dispatch/tuned_table.hpp"
#include "flashjit/error.hpp"

namespace flashjit::tune {

// OUTPUT.partial
std::filesystem::path partial_path(const std::filesystem::path& output);

// The results to continue from: OUTPUT.partial, else OUTPUT, else an empty table; stamped with `system`
// either way (the driver version is refreshed). A file measured elsewhere (a different GPU, arch, NVRTC or
// flashjit) is an error naming it.
Result<dispatch::TunedTable> resume_table(const std::filesystem::path& output, const dispatch::Stamp& system);

// Indices of the problems that `done` has no entry for, in order.
std::vector<std::size_t> pending_problems(const std::vector<dispatch::ProblemShape>& problems,
                                         const dispatch::TunedTable& done);

}  // namespace flashjit::tune
