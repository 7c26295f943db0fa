// Code generation of the decode kernels: one extern "C" entry per config over templates/decode.
#pragma once

#include "codegen/generate.hpp"
#include "config/decode_config.hpp"

namespace flashjit::codegen {

// The config must be valid (its check() error is returned otherwise).
Result<GeneratedSource> generate(const DecodeKernelConfig& config);
Result<GeneratedSource> generate(const CombineKernelConfig& config);

}  // namespace flashjit::codegen
