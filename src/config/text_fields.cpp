#include "config/text_fields.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace flashjit::config {

Error bad_field(const std::string& field, const std::string& why) {
  return Error(ErrorCode::invalid_config, fmt::format("config field '{}': {}", field, why));
}

Result<TextFields> json_text_fields(std::string_view text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Error(ErrorCode::invalid_config, "config is not valid JSON");
  if (!j.is_object()) return Error(ErrorCode::invalid_config, "config JSON must be an object");
  TextFields out;
  for (const auto& [key, value] : j.items()) {
    if (value.is_string()) {
      out.emplace_back(key, value.get<std::string>());
    } else if (value.is_number_integer()) {
      out.emplace_back(key, std::to_string(value.get<long long>()));
    } else if (value.is_boolean()) {
      out.emplace_back(key, value.get<bool>() ? "true" : "false");
    } else {
      return bad_field(key, fmt::format("expected a string, an integer or a boolean, got {}", value.dump()));
    }
  }
  return out;
}

Result<TextFields> pair_text_fields(const std::vector<std::string>& pairs) {
  TextFields out;
  for (const auto& p : pairs) {
    auto eq = p.find('=');
    if (eq == std::string::npos || eq == 0)
      return Error(ErrorCode::invalid_config, fmt::format("'{}' is not a key=value pair", p));
    out.emplace_back(p.substr(0, eq), p.substr(eq + 1));
  }
  return out;
}

}  // namespace flashjit::config
