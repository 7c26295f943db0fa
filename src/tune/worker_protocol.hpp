// The compile worker's protocol. The pool runs `flashjit --cache-dir DIR compile-worker CONFIG_JSON` once
// per kernel (CONFIG_JSON: the canonical JSON of a prefill, decode or combine config; the latter two carry a
// "kernel" field): the worker compiles the config into the cache through the runtime's artifact store
// (compile_in_cache, as Runtime::compile) and prints one line of JSON on stdout, then exits 0 (compiled or
// found) or 1 (failed):
//   {"ok":true,"name":...,"key":...,"cache_hit":...,"compile_ms":...,"dynamic_smem":...,"ptxas":{...},"log":...}
//   {"ok":false,"error":{"code":"compile","message":...,"context":[...],"details":...}}
// No line, or death by a signal, is a crashed worker; the pool reports it with the worker's stderr.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "flashjit/error.hpp"
#include "flashjit/runtime.hpp"

namespace flashjit::tune {

inline constexpr const char* kWorkerCommand = "compile-worker";

// Test hook, read by the worker alone: FLASHJIT_WORKER_FAULT=crash:SUBSTRING,hang:SUBSTRING makes a worker
// whose kernel name contains SUBSTRING raise SIGSEGV (crash) or sleep until killed (hang) before compiling.
inline constexpr const char* kWorkerFaultVariable = "FLASHJIT_WORKER_FAULT";

// The result line (no trailing newline).
std::string encode_result(const Result<KernelInfo>& result);
// The worker's info or its error; nullopt when `line` is not a result line.
std::optional<Result<KernelInfo>> decode_result(std::string_view line);

}  // namespace flashjit::tune
