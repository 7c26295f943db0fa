// CONFIG arguments: inline key=value pairs (all of them together form one config) or paths of .json files
// (one config each). A config of any kernel kind: prefill by default, decode or combine when its "kernel"
// field (kernel=decode) says so.
#pragma once

#include <string>
#include <vector>

#include "flashjit/config.hpp"

namespace flashjit::cli {

struct NamedConfig {
  std::string origin;  // the file, or the pairs joined by spaces
  AnyKernelConfig config;
};

struct ConfigArgs {
  std::vector<NamedConfig> configs;
  int exit_code = 0;  // non-zero: the problem was printed, exit with this code
};

// Parses and validates the CONFIG tokens. Every problem is invalid input (exit code 2): a token neither
// key=value nor *.json, more than `max_configs` configs, an unreadable file, JSON that does not parse (with
// its line and column), a bad field or value, a config failing validate() (each issue naming its field).
ConfigArgs load_configs(const std::vector<std::string>& tokens, std::size_t max_configs);

}  // namespace flashjit::cli
