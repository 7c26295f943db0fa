#include "tune/worker_protocol.hpp"

#include <nlohmann/json.hpp>

namespace flashjit::tune {
namespace {

using nlohmann::json;

constexpr ErrorCode kCodes[] = {ErrorCode::invalid_argument, ErrorCode::invalid_config, ErrorCode::unsupported,
                                ErrorCode::no_device,        ErrorCode::driver,         ErrorCode::compile,
                                ErrorCode::cache,            ErrorCode::not_found,      ErrorCode::io,
                                ErrorCode::internal};

ErrorCode code_from(const std::string& name) {
  for (ErrorCode c : kCodes)
    if (name == to_string(c)) return c;
  return ErrorCode::internal;
}

}  // namespace

std::string encode_result(const Result<KernelInfo>& result) {
  if (!result.ok()) {
    const Error& e = result.error();
    return json{{"ok", false},
                {"error", {{"code", to_string(e.code)}, {"message", e.message}, {"context", e.context}, {"details", e.details}}}}
        .dump();
  }
  const KernelInfo& k = *result;
  const PtxasStats& p = k.ptxas;
  return json{{"ok", true},
              {"name", k.name},
              {"key", k.key},
              {"cache_hit", k.cache_hit},
              {"compile_ms", k.compile_ms},
              {"dynamic_smem", k.dynamic_smem},
              {"ptxas",
               {{"registers", p.registers}, {"spill_stores", p.spill_stores}, {"spill_loads", p.spill_loads},
                {"stack_frame", p.stack_frame}, {"static_smem", p.static_smem},
                {"setmaxnreg_ignored", p.setmaxnreg_ignored}}},
              {"log", k.log}}
      .dump();
}

std::optional<Result<KernelInfo>> decode_result(std::string_view line) {
  json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("ok") || !j["ok"].is_boolean()) return std::nullopt;
  try {
    if (!j["ok"].get<bool>()) {
      const json& e = j.at("error");
      Error error(code_from(e.value("code", "")), e.value("message", ""), e.value("details", ""));
      error.context = e.value("context", std::vector<std::string>{});
      return Result<KernelInfo>(std::move(error));
    }
    KernelInfo k;
    k.name = j.at("name").get<std::string>();
    k.key = j.at("key").get<std::string>();
    k.cache_hit = j.at("cache_hit").get<bool>();
    k.compile_ms = j.at("compile_ms").get<double>();
    k.dynamic_smem = j.at("dynamic_smem").get<int>();
    k.log = j.value("log", "");
    const json& p = j.at("ptxas");
    k.ptxas.registers = p.at("registers").get<int>();
    k.ptxas.spill_stores = p.at("spill_stores").get<int>();
    k.ptxas.spill_loads = p.at("spill_loads").get<int>();
    k.ptxas.stack_frame = p.at("stack_frame").get<int>();
    k.ptxas.static_smem = p.at("static_smem").get<int>();
    k.ptxas.setmaxnreg_ignored = p.at("setmaxnreg_ignored").get<bool>();
    return Result<KernelInfo>(std::move(k));
  } catch (const json::exception&) {  // a field missing or of the wrong type
    return std::nullopt;
  }
}

}  // namespace flashjit::tune
