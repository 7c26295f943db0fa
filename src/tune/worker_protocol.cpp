#include "tune/worker_protocol.hpp"

#include <nlohmann/json.hpp>

#include "common/json_depth.hpp"
#include "compile/worker.hpp"

namespace flashjit::tune {
using nlohmann::json;

std::string encode_result(const Result<KernelInfo>& result) {
  if (!result.ok()) {
    const Error& e = result.error();
    return json{{"ok", false}, {"error", compile::error_to_json(e)}}.dump();
  }
  const KernelInfo& k = *result;
  return json{{"ok", true},
              {"name", k.name},
              {"key", k.key},
              {"cache_hit", k.cache_hit},
              {"compile_ms", k.compile_ms},
              {"dynamic_smem", k.dynamic_smem},
              {"ptxas", compile::ptxas_to_json(k.ptxas)},
              {"log", k.log}}
      .dump();
}

std::optional<Result<KernelInfo>> decode_result(std::string_view line) {
  if (!check_json_depth(line)) return std::nullopt;
  json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("ok") || !j["ok"].is_boolean()) return std::nullopt;
  try {
    if (!j["ok"].get<bool>()) {
      const json& e = j.at("error");
      if (!e.is_object()) return std::nullopt;
      return Result<KernelInfo>(compile::error_from_json(e));
    }
    KernelInfo k;
    k.name = j.at("name").get<std::string>();
    k.key = j.at("key").get<std::string>();
    k.cache_hit = j.at("cache_hit").get<bool>();
    k.compile_ms = j.at("compile_ms").get<double>();
    k.dynamic_smem = j.at("dynamic_smem").get<int>();
    k.log = j.value("log", "");
    k.ptxas = compile::ptxas_from_json(j.at("ptxas"));
    return Result<KernelInfo>(std::move(k));
  } catch (const json::exception&) {  // a field missing or of the wrong type
    return std::nullopt;
  }
}

}  // namespace flashjit::tune
