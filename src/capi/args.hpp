// The C ABI's inputs as C++ values: versioned structs (struct_size checks, defaults for the fields a shorter
// struct from an older header lacks), enum range checks, and explicit configs from JSON.
#pragma once

#include <optional>

#include "common/log.hpp"
#include "flashjit/flashjit.h"
#include "flashjit/runtime.hpp"

namespace flashjit::capi {

struct CreateOptions {
  RuntimeOptions runtime;
  std::optional<log::Level> log_level;  // nullopt: keep FLASHJIT_LOG
};

// NULL: every default.
Result<CreateOptions> read_options(const flashjit_runtime_options* options);

struct ForwardArgs {
  AttentionProblem problem;
  const char* config_json = nullptr;  // NULL: the dispatcher picks
};

Result<ForwardArgs> read_args(const flashjit_attention_args* args);

// A config from JSON (fields the object lacks keep KernelConfig's defaults).
Result<KernelConfig> read_config(const char* json);

// An explicit config for a problem: the fields the JSON object lacks among dtype, head_dim and mask are taken
// from the problem, and arch from the problem's device.
Result<KernelConfig> read_config_for(const char* json, const AttentionProblem& problem, const Runtime& runtime);

}  // namespace flashjit::capi
