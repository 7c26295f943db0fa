// Code generation: a small, readable translation unit per config of any kind (constants from the config,
// the mask policy, one extern "C" entry); all logic lives in the embedded templates. One generator per kind:
// prefill in generate.cpp, decode and combine in decode_generate.cpp, append in append_generate.cpp, block_mask in
// block_mask_generate.cpp.
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
Result<GeneratedSource> generate(const DecodeKernelConfig& config);
Result<GeneratedSource> generate(const CombineKernelConfig& config);
Result<GeneratedSource> generate(const AppendKernelConfig& config);
Result<GeneratedSource> generate(const BlockMaskKernelConfig& config);
Result<GeneratedSource> generate(const AnyKernelConfig& config);

}  // namespace flashjit::codegen
