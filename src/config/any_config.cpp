#include "config/any_config.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace flashjit {
namespace {

Error bad_kind(const std::string& value) {
  return Error(ErrorCode::invalid_config,
               fmt::format("config field 'kernel': '{}' is not one of prefill, decode, combine", value));
}

// A parsed config of one kind as an AnyKernelConfig, or its parse error.
template <class Config>
Result<AnyKernelConfig> as_any(Result<Config> c) {
  if (!c.ok()) return std::move(c).error();
  return AnyKernelConfig(*c);
}

}  // namespace

const char* to_string(KernelKind kind) {
  switch (kind) {
    case KernelKind::prefill: return "prefill";
    case KernelKind::decode: return "decode";
    case KernelKind::combine: return "combine";
  }
  return "?";
}

const Arch& AnyKernelConfig::arch() const {
  return std::visit([](const auto& c) -> const Arch& { return c.arch; }, config_);
}

std::string to_json(const AnyKernelConfig& config) {
  return config.visit([](const auto& c) { return to_json(c); });
}

std::string readable_name(const AnyKernelConfig& config) {
  return config.visit([](const auto& c) { return readable_name(c); });
}

std::vector<ConfigIssue> validate(const AnyKernelConfig& config) {
  return config.visit([](const auto& c) { return validate(c); });
}

Result<AnyKernelConfig> any_config_from_json(std::string_view text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Error(ErrorCode::invalid_config, "config is not valid JSON");
  if (!j.is_object()) return Error(ErrorCode::invalid_config, "config JSON must be an object");
  auto it = j.find("kernel");
  if (it == j.end()) return as_any(config_from_json(text));
  if (!it->is_string())
    return Error(ErrorCode::invalid_config, fmt::format("config field 'kernel': expected a string, got {}", it->dump()));
  const std::string kind = it->get<std::string>();
  if (kind == "decode") return as_any(decode_config_from_json(text));
  if (kind == "combine") return as_any(combine_config_from_json(text));
  if (kind != "prefill") return bad_kind(kind);
  j.erase("kernel");  // KernelConfig's JSON has no "kernel" field
  return as_any(config_from_json(j.dump()));
}

Result<AnyKernelConfig> any_config_from_pairs(const std::vector<std::string>& pairs) {
  std::string kind = "prefill";
  std::vector<std::string> rest;
  for (const auto& p : pairs) {
    if (p.rfind("kernel=", 0) == 0)
      kind = p.substr(7);
    else
      rest.push_back(p);
  }
  if (kind == "decode") return as_any(decode_config_from_pairs(rest));
  if (kind == "combine") return as_any(combine_config_from_pairs(rest));
  if (kind != "prefill") return bad_kind(kind);
  return as_any(config_from_pairs(rest));
}

}  // namespace flashjit
