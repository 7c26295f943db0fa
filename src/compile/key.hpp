// Cache keys: SHA-256 of the canonical config JSON, the generated source (the frame the generator wraps
// around the templates: launch bounds, entry), the templates hash, the NVRTC version, the compile options
// and the flashjit version. Any change to any of them gives a new key.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "flashjit/config.hpp"

namespace flashjit::compile {

// Any kernel by its canonical config JSON (prefill, decode, combine: each JSON names its kernel kind).
// `source`: the generated translation unit (codegen::generate's text).
std::string kernel_key(std::string_view config_json, std::string_view source, const std::vector<std::string>& options);
// A config's key over its generated source (an empty source when the config does not generate).
std::string kernel_key(const AnyKernelConfig& config, const std::vector<std::string>& options);

}  // namespace flashjit::compile
