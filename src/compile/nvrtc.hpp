// NVRTC: generated source -> cubin, with the embedded templates as in-memory headers. Options come from the
// config's arch; -Xptxas=-v output is parsed into registers, spills and shared memory.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "codegen/generate.hpp"
#include "common/log.hpp"
#include "flashjit/config.hpp"
#include "flashjit/kernel_info.hpp"

namespace flashjit::compile {

// The NVRTC options used for an arch (part of the cache key).
std::vector<std::string> options_for(const Arch& arch);

// "13.0"
const std::string& nvrtc_version();

struct CompiledKernel {
  std::string cubin;
  std::string log;
  PtxasStats ptxas;
  double compile_ms = 0;
};

// Compiles; on failure the error carries the NVRTC log (the caller adds where the source was saved). The options
// and the time go to `logger` at debug level.
Result<CompiledKernel> compile(const codegen::GeneratedSource& source, const std::vector<std::string>& options,
                               const log::Logger& logger);

// The PTX of the source for the arch's virtual architecture (compute_90a for sm_90a): what ptxas then turns
// into the cubin, for inspection (flashjit emit --ptx, tests).
Result<std::string> compile_ptx(const codegen::GeneratedSource& source, const Arch& arch, const log::Logger& logger);

// Parses ptxas -v lines of the log for one entry point.
PtxasStats parse_ptxas(std::string_view log, std::string_view entry);

}  // namespace flashjit::compile
