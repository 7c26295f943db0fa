// Text -> value of each field type, shared by every config kind's parser.
#include "config/fields.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace flashjit::config {

Error bad_field(const std::string& field, const std::string& why) {
  return Error(ErrorCode::invalid_config, fmt::format("config field '{}': {}", field, why));
}

Status as_status(const std::vector<ConfigIssue>& issues, const std::string& name) {
  if (issues.empty()) return {};
  std::string msg = fmt::format("config {} is invalid:", name);
  for (const auto& i : issues) msg += fmt::format("\n  {}: {}", i.field, i.message);
  return Error(ErrorCode::invalid_config, msg);
}

Status parse_value(const std::string& key, const std::string& text, int& out) {
  try {
    std::size_t used = 0;
    const int v = std::stoi(text, &used);
    if (used != text.size()) return bad_field(key, fmt::format("'{}' is not an integer", text));
    out = v;
    return {};
  } catch (const std::exception&) {
    return bad_field(key, fmt::format("'{}' is not an integer", text));
  }
}

Status parse_value(const std::string&, const std::string& text, std::string& out) {
  out = text;
  return {};
}

std::string json_value(const std::string& v) { return nlohmann::json(v).dump(); }

Status parse_value(const std::string& key, const std::string& text, bool& out) {
  if (text == "true" || text == "1") {
    out = true;
  } else if (text == "false" || text == "0") {
    out = false;
  } else {
    return bad_field(key, fmt::format("'{}' is not one of true, false", text));
  }
  return {};
}

Status parse_value(const std::string& key, const std::string& text, Arch& out) {
  auto a = Arch::parse(text);
  if (!a) return bad_field(key, fmt::format("'{}' is not a CUDA target like sm_80 or sm_90a", text));
  out = *a;
  return {};
}

namespace {

template <class E>
Status parse_enum(const std::string& key, const std::string& text, E& out, std::optional<E> (*parse)(std::string_view),
                  const char* choices) {
  auto v = parse(text);
  if (!v) return bad_field(key, fmt::format("'{}' is not one of {}", text, choices));
  out = *v;
  return {};
}

}  // namespace

Status parse_value(const std::string& key, const std::string& text, Algorithm& out) {
  return parse_enum(key, text, out, parse_algorithm, "naive, fa2, fa3, auto");
}
Status parse_value(const std::string& key, const std::string& text, DType& out) {
  return parse_enum(key, text, out, parse_dtype, "bf16, fp16");
}
Status parse_value(const std::string& key, const std::string& text, MaskKind& out) {
  return parse_enum(key, text, out, parse_mask, "none, causal, sliding_window, chunked, chunked_causal");
}
Status parse_value(const std::string& key, const std::string& text, Scheduler& out) {
  return parse_enum(key, text, out, parse_scheduler, "grid, persistent");
}
Status parse_value(const std::string& key, const std::string& text, KvLayout& out) {
  return parse_enum(key, text, out, parse_kv_layout, "contiguous, paged");
}
Status parse_value(const std::string& key, const std::string& text, BiasType& out) {
  return parse_enum(key, text, out, parse_bias_type, "none, fp32, bf16, fp16, bool");
}

}  // namespace flashjit::config
