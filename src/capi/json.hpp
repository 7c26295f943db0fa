// The JSON texts the C ABI returns.
#pragma once

#include <string>

#include "flashjit/runtime.hpp"

namespace flashjit::capi {

// name, key, config, cache_hit, compile_ms, registers, spill_stores, spill_loads, stack_frame, static_smem,
// dynamic_smem.
std::string kernel_info_json(const AnyKernelConfig& config, const KernelInfo& info);

// split, num_splits, keys_per_split, combine (null when none), workspace_bytes.
std::string decode_selection_json(const DecodeSelection& selection);

// dir, writable, entries, bytes, max_bytes.
std::string cache_info_json(const Runtime& runtime, const CacheStats& stats);

}  // namespace flashjit::capi
