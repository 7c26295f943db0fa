// Code generation: a small, readable translation unit per KernelConfig (constants from the config, the
// mask policy, one extern "C" entry); all logic lives in the embedded templates.
#pragma once

#include <string>

#include "flashjit/config.hpp"
#include "flashjit/error.hpp"

namespace flashjit::codegen {

struct GeneratedSource {
  std::string name;   // readable name of the config
  std::string entry;  // extern "C" kernel symbol
  std::string text;   // CUDA source
};

// The config must be valid (check(config) is called and its error returned).
Result<GeneratedSource> generate(const KernelConfig& config);

}  // namespace flashjit::codegen
