// The C ABI entry points (include/flashjit/flashjit.h): each one reads its arguments, calls the C++ runtime,
// and turns an Error into a status code plus this thread's last-error text. No exception leaves this file.
#include "flashjit/flashjit.h"

#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>

#include "capi/args.hpp"
#include "capi/json.hpp"

struct flashjit_runtime {
  std::unique_ptr<flashjit::Runtime> impl;
};

namespace flashjit::capi {
namespace {

thread_local std::string last_error;

void set_last_error(const std::string& text) noexcept {
  try {
    last_error = text;
  } catch (...) {  // out of memory: an empty text beats a stale one
    last_error.clear();
  }
}

constexpr ErrorCode kErrorCodes[] = {ErrorCode::invalid_argument, ErrorCode::invalid_config, ErrorCode::unsupported,
                                     ErrorCode::no_device,        ErrorCode::driver,         ErrorCode::compile,
                                     ErrorCode::cache,            ErrorCode::not_found,      ErrorCode::io,
                                     ErrorCode::internal};

int status_of(ErrorCode code) {
  switch (code) {
    case ErrorCode::invalid_argument: return FLASHJIT_ERROR_INVALID_ARGUMENT;
    case ErrorCode::invalid_config: return FLASHJIT_ERROR_INVALID_CONFIG;
    case ErrorCode::unsupported: return FLASHJIT_ERROR_UNSUPPORTED;
    case ErrorCode::no_device: return FLASHJIT_ERROR_NO_DEVICE;
    case ErrorCode::driver: return FLASHJIT_ERROR_DRIVER;
    case ErrorCode::compile: return FLASHJIT_ERROR_COMPILE;
    case ErrorCode::cache: return FLASHJIT_ERROR_CACHE;
    case ErrorCode::not_found: return FLASHJIT_ERROR_NOT_FOUND;
    case ErrorCode::io: return FLASHJIT_ERROR_IO;
    case ErrorCode::internal: return FLASHJIT_ERROR_INTERNAL;
  }
  return FLASHJIT_ERROR_INTERNAL;
}

int fail(const Error& error) noexcept {
  try {
    set_last_error(error.to_string());
  } catch (...) {
    set_last_error("out of memory while describing an error");
  }
  return status_of(error.code);
}

// Runs `body` (returning an Error-carrying value) with every exception turned into an internal error.
template <class Body>
auto guarded(const char* function, Body&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return Error(ErrorCode::internal, fmt::format("{}: out of memory", function));
  } catch (const std::exception& e) {
    return Error(ErrorCode::internal, fmt::format("{}: unexpected exception: {}", function, e.what()));
  } catch (...) {
    return Error(ErrorCode::internal, fmt::format("{}: unexpected non-standard exception", function));
  }
}

// Building the Error above may throw too (out of memory): then the status is all that is left to report.
int run_status(const char* function, auto&& body) noexcept {
  try {
    Status st = guarded(function, body);
    return st.ok() ? FLASHJIT_OK : fail(st.error());
  } catch (...) {
    set_last_error("out of memory");
    return FLASHJIT_ERROR_INTERNAL;
  }
}

// For the functions returning text: its length, copied into `out` when it fits; minus the status on failure.
std::int64_t run_text(const char* function, char* out, std::size_t cap, auto&& body) noexcept {
  try {
    if (out == nullptr && cap != 0)
      return -fail(Error(ErrorCode::invalid_argument, fmt::format("{}: out is NULL but cap is {}", function, cap)));
    Result<std::string> text = guarded(function, body);
    if (!text.ok()) return -fail(text.error());
    const std::size_t n = text->size();
    if (n < cap) {
      std::memcpy(out, text->data(), n);
      out[n] = '\0';
    } else if (cap > 0) {
      out[0] = '\0';
    }
    return static_cast<std::int64_t>(n);
  } catch (...) {
    set_last_error("out of memory");
    return -FLASHJIT_ERROR_INTERNAL;
  }
}

// For the functions returning a count: the count (>= 0), or minus the status on failure.
std::int64_t run_count(const char* function, auto&& body) noexcept {
  try {
    Result<std::int64_t> count = guarded(function, body);
    return count.ok() ? *count : -fail(count.error());
  } catch (...) {
    set_last_error("out of memory");
    return -FLASHJIT_ERROR_INTERNAL;
  }
}

Result<Runtime*> runtime_of(flashjit_runtime* runtime) {
  if (runtime == nullptr || !runtime->impl) return Error(ErrorCode::invalid_argument, "runtime is NULL");
  return runtime->impl.get();
}

// forward and prepare share the reading of the arguments and of the explicit config.
struct Call {
  Runtime* runtime = nullptr;
  ForwardArgs args;
  std::optional<KernelConfig> config;  // explicit
};

Result<Call> read_call(flashjit_runtime* runtime, const flashjit_attention_args* args) {
  Call call;
  auto rt = runtime_of(runtime);
  if (!rt.ok()) return std::move(rt).error();
  call.runtime = *rt;
  auto read = read_args(args);
  if (!read.ok()) return std::move(read).error();
  call.args = std::move(*read);
  if (call.args.config_json != nullptr) {
    auto config = read_config_for(call.args.config_json, call.args.problem, *call.runtime);
    if (!config.ok()) return std::move(config).error();
    call.config = *config;
  }
  return call;
}

}  // namespace
}  // namespace flashjit::capi

using namespace flashjit;
using namespace flashjit::capi;

extern "C" {

const char* flashjit_version(void) { return flashjit::version(); }
int flashjit_abi_version(void) { return FLASHJIT_ABI_VERSION; }

const char* flashjit_status_string(int status) {
  if (status == FLASHJIT_OK) return "ok";
  for (ErrorCode code : kErrorCodes)
    if (status_of(code) == status) return flashjit::to_string(code);
  return "unknown status";
}

const char* flashjit_last_error(void) { return last_error.c_str(); }

int flashjit_runtime_create(const flashjit_runtime_options* options, flashjit_runtime** out) {
  return run_status("flashjit_runtime_create", [&]() -> Status {
    if (out == nullptr) return Error(ErrorCode::invalid_argument, "out is NULL");
    *out = nullptr;
    auto read = read_options(options);
    if (!read.ok()) return std::move(read).error();
    auto rt = Runtime::create(*read);
    if (!rt.ok()) return std::move(rt).error();
    *out = new flashjit_runtime{std::move(*rt)};
    return {};
  });
}

void flashjit_runtime_destroy(flashjit_runtime* runtime) { delete runtime; }

int flashjit_forward(flashjit_runtime* runtime, const flashjit_attention_args* args) {
  return run_status("flashjit_forward", [&]() -> Status {
    auto call = read_call(runtime, args);
    if (!call.ok()) return std::move(call).error();
    return call->config ? call->runtime->forward(call->args.problem, *call->config)
                        : call->runtime->forward(call->args.problem);
  });
}

int64_t flashjit_prepare(flashjit_runtime* runtime, const flashjit_attention_args* args, char* info_json_out,
                         size_t cap) {
  return run_text("flashjit_prepare", info_json_out, cap, [&]() -> Result<std::string> {
    auto call = read_call(runtime, args);
    if (!call.ok()) return std::move(call).error();
    auto config = call->config ? call->runtime->prepare(call->args.problem, *call->config)
                               : call->runtime->prepare(call->args.problem);
    if (!config.ok()) return std::move(config).error();
    auto info = call->runtime->compile(*config);  // an in-memory hit by now
    if (!info.ok()) return std::move(info).error();
    return kernel_info_json(*config, *info);
  });
}

int flashjit_decode(flashjit_runtime* runtime, const flashjit_decode_args* args) {
  return run_status("flashjit_decode", [&]() -> Status {
    auto rt = runtime_of(runtime);
    if (!rt.ok()) return std::move(rt).error();
    auto problem = read_decode_args(args);
    if (!problem.ok()) return std::move(problem).error();
    return (*rt)->decode(*problem);
  });
}

int flashjit_prepare_decode(flashjit_runtime* runtime, const flashjit_decode_args* args) {
  return run_status("flashjit_prepare_decode", [&]() -> Status {
    auto rt = runtime_of(runtime);
    if (!rt.ok()) return std::move(rt).error();
    auto problem = read_decode_args(args);
    if (!problem.ok()) return std::move(problem).error();
    return (*rt)->prepare_decode(*problem);
  });
}

int flashjit_release_decode_workspace(flashjit_runtime* runtime, void* stream) {
  return run_status("flashjit_release_decode_workspace", [&]() -> Status {
    auto rt = runtime_of(runtime);
    if (!rt.ok()) return std::move(rt).error();
    return (*rt)->release_decode_workspace(stream);
  });
}

int64_t flashjit_decode_workspace_bytes(flashjit_runtime* runtime, const flashjit_decode_args* args) {
  return run_count("flashjit_decode_workspace_bytes", [&]() -> Result<std::int64_t> {
    auto rt = runtime_of(runtime);
    if (!rt.ok()) return std::move(rt).error();
    auto problem = read_decode_args(args);
    if (!problem.ok()) return std::move(problem).error();
    auto bytes = (*rt)->decode_workspace_bytes(*problem);
    if (!bytes.ok()) return std::move(bytes).error();
    return static_cast<std::int64_t>(*bytes);
  });
}

int flashjit_merge(flashjit_runtime* runtime, const flashjit_merge_args* args) {
  return run_status("flashjit_merge", [&]() -> Status {
    auto rt = runtime_of(runtime);
    if (!rt.ok()) return std::move(rt).error();
    auto problem = read_merge_args(args);
    if (!problem.ok()) return std::move(problem).error();
    return (*rt)->merge(*problem);
  });
}

int flashjit_append_kv(flashjit_runtime* runtime, const flashjit_append_args* args) {
  return run_status("flashjit_append_kv", [&]() -> Status {
    auto rt = runtime_of(runtime);
    if (!rt.ok()) return std::move(rt).error();
    auto problem = read_append_args(args);
    if (!problem.ok()) return std::move(problem).error();
    return (*rt)->append_kv(*problem);
  });
}

int flashjit_prepare_append_kv(flashjit_runtime* runtime, const flashjit_append_args* args) {
  return run_status("flashjit_prepare_append_kv", [&]() -> Status {
    auto rt = runtime_of(runtime);
    if (!rt.ok()) return std::move(rt).error();
    auto problem = read_append_args(args);
    if (!problem.ok()) return std::move(problem).error();
    return (*rt)->prepare_append_kv(*problem);
  });
}

int flashjit_make_block_mask(flashjit_runtime* runtime, const flashjit_block_mask_args* args) {
  return run_status("flashjit_make_block_mask", [&]() -> Status {
    auto rt = runtime_of(runtime);
    if (!rt.ok()) return std::move(rt).error();
    auto problem = read_block_mask_args(args);
    if (!problem.ok()) return std::move(problem).error();
    return (*rt)->make_block_mask(*problem);
  });
}

int64_t flashjit_select(flashjit_runtime* runtime, const flashjit_attention_args* args, char* config_json_out,
                        size_t cap) {
  return flashjit_select_target(runtime, args, nullptr, config_json_out, cap);
}

int64_t flashjit_select_target(flashjit_runtime* runtime, const flashjit_attention_args* args,
                               const flashjit_target* target, char* config_json_out, size_t cap) {
  return run_text("flashjit_select_target", config_json_out, cap, [&]() -> Result<std::string> {
    auto rt = runtime_of(runtime);
    if (!rt.ok()) return std::move(rt).error();
    auto read = read_args(args);
    if (!read.ok()) return std::move(read).error();
    auto config = [&]() -> Result<KernelConfig> {
      if (target == nullptr) return (*rt)->select(read->problem);
      auto t = read_target(target);
      if (!t.ok()) return std::move(t).error();
      return (*rt)->select(read->problem, *t);
    }();
    if (!config.ok()) return std::move(config).error();
    return to_json(*config);
  });
}

int64_t flashjit_select_decode(flashjit_runtime* runtime, const flashjit_decode_args* args,
                               const flashjit_target* target, char* json_out, size_t cap) {
  return run_text("flashjit_select_decode", json_out, cap, [&]() -> Result<std::string> {
    auto rt = runtime_of(runtime);
    if (!rt.ok()) return std::move(rt).error();
    auto problem = read_decode_args(args);
    if (!problem.ok()) return std::move(problem).error();
    auto selection = [&]() -> Result<DecodeSelection> {
      if (target == nullptr) return (*rt)->select_decode(*problem);
      auto t = read_target(target);
      if (!t.ok()) return std::move(t).error();
      return (*rt)->select_decode(*problem, *t);
    }();
    if (!selection.ok()) return std::move(selection).error();
    return decode_selection_json(*selection);
  });
}

int64_t flashjit_compile(flashjit_runtime* runtime, const char* config_json, char* info_json_out, size_t cap) {
  return run_text("flashjit_compile", info_json_out, cap, [&]() -> Result<std::string> {
    auto rt = runtime_of(runtime);
    if (!rt.ok()) return std::move(rt).error();
    auto config = read_config(config_json);
    if (!config.ok()) return std::move(config).error();
    auto info = (*rt)->compile(*config);
    if (!info.ok()) return std::move(info).error();
    return kernel_info_json(*config, *info);
  });
}

int64_t flashjit_emit(const char* config_json, char* out, size_t cap) {
  return run_text("flashjit_emit", out, cap, [&]() -> Result<std::string> {
    auto config = read_config(config_json);
    if (!config.ok()) return std::move(config).error();
    return Runtime::emit(*config);
  });
}

int64_t flashjit_cache_info(flashjit_runtime* runtime, char* json_out, size_t cap) {
  return run_text("flashjit_cache_info", json_out, cap, [&]() -> Result<std::string> {
    auto rt = runtime_of(runtime);
    if (!rt.ok()) return std::move(rt).error();
    auto stats = (*rt)->cache_stats();
    if (!stats.ok()) return std::move(stats).error();
    return cache_info_json(**rt, *stats);
  });
}

}  // extern "C"
