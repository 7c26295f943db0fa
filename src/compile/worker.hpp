// Compiles out of process: the NVRTC step of a cache miss in a worker process (`flashjit nvrtc-worker`, the
// CLI's hidden command), so that a compiler that crashes or hangs fails that kernel with a clear error and the
// host process lives. The runtime does this by default (runtime/compiler.hpp); the compile pool's workers
// (tune/) do the whole artifact-store step, this one NVRTC only, so the host keeps its own cache rules.
//
// Protocol: the request is one JSON object on the worker's stdin:
//   {"build":STAMP,"name":...,"entry":...,"text":...,"options":[...]}
// the reply one line of JSON on its stdout, then exit 0 (compiled) or 1 (failed):
//   {"ok":true,"cubin":BASE64,"log":...,"compile_ms":...,"ptxas":{...},"messages":[[LEVEL,TEXT],...]}
//   {"ok":false,"error":{"code":...,"message":...,"context":[...],"details":...},"messages":[...]}
// `messages` are what the worker logged (at every level); the host passes those its logger's level admits on.
// STAMP names the build (flashjit version, templates hash, NVRTC version): a worker of another build refuses the
// request (its templates would make another cubin), and the host then compiles in process.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "codegen/generate.hpp"
#include "common/log.hpp"
#include "compile/nvrtc.hpp"
#include "flashjit/error.hpp"

namespace flashjit::compile {

inline constexpr const char* kNvrtcWorkerCommand = "nvrtc-worker";
// The default time limit of one out-of-process compile.
inline constexpr std::chrono::milliseconds kDefaultCompileTimeout{600000};

struct WorkerOptions {
  std::vector<std::string> command;  // the flashjit executable (argv[0] a path), and options before the command
  std::chrono::milliseconds timeout = kDefaultCompileTimeout;
};

// Compiles in a new worker process. ErrorCode::compile: NVRTC failed (its log in details), or the worker crashed
// (how it ended and its stderr) or ran past the time limit (and was killed). An error for which
// worker_unusable() holds means no compile was tried (the worker could not start, or is another build).
Result<CompiledKernel> compile_in_worker(const WorkerOptions& worker, const codegen::GeneratedSource& source,
                                         const std::vector<std::string>& options, const log::Logger& logger);
bool worker_unusable(const Error& e);

// The worker's side. A request, decoded; its `build` is compared with build_stamp() by serve_request.
struct WorkerRequest {
  std::string build;
  codegen::GeneratedSource source;
  std::vector<std::string> options;
};
std::string build_stamp();
std::string encode_request(const codegen::GeneratedSource& source, const std::vector<std::string>& options);
Result<WorkerRequest> decode_request(std::string_view text);
// The reply line (no newline) of a compile with what the worker logged, and its decoding (nullopt: not a
// reply line; `messages`, when given, receives the logged lines).
using LogLines = std::vector<std::pair<log::Level, std::string>>;
std::string encode_reply(const Result<CompiledKernel>& result, const LogLines& messages = {});
std::optional<Result<CompiledKernel>> decode_reply(std::string_view line, LogLines* messages = nullptr);
// The reply for a request from another build.
Result<CompiledKernel> build_mismatch(const std::string& requested);

// ptxas stats as JSON, both ways (from_json throws nlohmann::json::exception on a missing or mistyped field).
nlohmann::json ptxas_to_json(const PtxasStats& p);
PtxasStats ptxas_from_json(const nlohmann::json& j);

// Errors as JSON, both ways (also the compile pool's protocol). Unknown codes read as ErrorCode::internal.
nlohmann::json error_to_json(const Error& e);
Error error_from_json(const nlohmann::json& j);

}  // namespace flashjit::compile
