// Cache keys: SHA-256 of the canonical config JSON, the templates hash, the NVRTC version, the compile
// options and the flashjit version. Any change to any of them gives a new key.
#pragma once

#include <string>
#include <vector>

#include "flashjit/config.hpp"

namespace flashjit::compile {

std::string kernel_key(const KernelConfig& config, const std::vector<std::string>& options);

}  // namespace flashjit::compile
