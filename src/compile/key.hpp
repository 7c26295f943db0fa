// Cache keys: SHA-256 of the canonical config JSON, the templates hash, the NVRTC version, the compile
// options and the flashjit version. Any change to any of them gives a new key.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "flashjit/config.hpp"

namespace flashjit::compile {

// Any kernel by its canonical config JSON (prefill, decode, combine: each JSON names its kernel kind).
std::string kernel_key(std::string_view config_json, const std::vector<std::string>& options);
std::string kernel_key(const KernelConfig& config, const std::vector<std::string>& options);

}  // namespace flashjit::compile
