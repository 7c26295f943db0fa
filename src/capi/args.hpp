// The C ABI's inputs as C++ values: versioned structs of attention, decode, append and merge (struct_size checks,
// defaults for the fields a shorter struct from an older header lacks), enum range checks, and explicit
// configs from JSON.
#pragma once

#include "flashjit/flashjit.h"
#include "flashjit/runtime.hpp"

namespace flashjit::capi {

// NULL: every default. A log_callback becomes a LogCallback that calls it with log_user.
Result<RuntimeOptions> read_options(const flashjit_runtime_options* options);

struct ForwardArgs {
  AttentionProblem problem;
  const char* config_json = nullptr;  // NULL: the dispatcher picks
};

Result<ForwardArgs> read_args(const flashjit_attention_args* args);

// A decode problem from flashjit_decode_args (struct_size and enum checks here; the problem's own checks are
// the runtime's).
Result<DecodeProblem> read_decode_args(const flashjit_decode_args* args);

// The fused append's fields of flashjit_decode_args (k_new .. seqlens_out), where the caller's struct has them.
void read_fused_append(const flashjit_decode_args& args, DecodeProblem& problem);

// An append problem from flashjit_append_args (struct_size and enum checks here; the problem's own checks are the
// runtime's).
Result<AppendProblem> read_append_args(const flashjit_append_args* args);

// The block mask's fields of flashjit_attention_args (bm_*), where the caller's struct has them.
void read_block_mask(const flashjit_attention_args& args, BlockMask& mask);

// A block-mask problem from flashjit_block_mask_args (struct_size and enum checks here; the problem's own checks
// are the runtime's).
Result<BlockMaskProblem> read_block_mask_args(const flashjit_block_mask_args* args);

// A merge problem from flashjit_merge_args: num_states is checked before the o_in and lse_in arrays are read.
Result<MergeProblem> read_merge_args(const flashjit_merge_args* args);

// A target from flashjit_target (struct_size, the arch's name, sms >= 0 with 0 the default).
Result<Target> read_target(const flashjit_target* target);

// A config of any kind from JSON, completed by Runtime::resolve (fields the object lacks take the
// dispatcher's choice for its arch).
Result<AnyKernelConfig> read_config(const char* json);

// An explicit prefill config for a problem: the fields the JSON object lacks among dtype, head_dim, mask, varlen,
// page_size and the variants are taken from the problem, arch from the problem's device, and the rest by
// Runtime::resolve.
Result<KernelConfig> read_config_for(const char* json, const AttentionProblem& problem, const Runtime& runtime);

}  // namespace flashjit::capi
