// A config's fields as (key, text) pairs, from a JSON object or from key=value pairs: what every config
// kind's parser (serialize.cpp for KernelConfig, decode_config.cpp for the decode kinds) sets its fields from.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flashjit/error.hpp"

namespace flashjit::config {

using TextFields = std::vector<std::pair<std::string, std::string>>;

// "config field 'KEY': WHY" (ErrorCode::invalid_config).
Error bad_field(const std::string& field, const std::string& why);

// A JSON object's fields in order: strings as they are, integers and booleans printed.
Result<TextFields> json_text_fields(std::string_view json);
// "key=value" strings split at their first '='.
Result<TextFields> pair_text_fields(const std::vector<std::string>& pairs);

}  // namespace flashjit::config
