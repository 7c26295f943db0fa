// Options of the commands that compile through the worker pool (precompile, autotune): -j and --timeout,
// and the worker command line (this binary, with the cache folder, running `compile-worker`).
#pragma once

#include <CLI/CLI.hpp>

#include <filesystem>

#include "flashjit/error.hpp"
#include "tune/compile_pool.hpp"

namespace flashjit::cli {

struct PoolArgs {
  int jobs = 0;           // 0: the number of cores
  double timeout_s = 120;
};

void add_pool_options(CLI::App& app, PoolArgs& args);

// The pool's options: workers are this executable with `--cache-dir cache_dir`.
Result<tune::PoolOptions> pool_options(const PoolArgs& args, const std::filesystem::path& cache_dir);

}  // namespace flashjit::cli
