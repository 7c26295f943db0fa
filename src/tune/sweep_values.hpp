// The value forms of sweep files' fields (configs/README.md): an integer, a list, {"values": [...]} or a range
// {"from", "to", "step"}; names of an enum; a variant's flags. Errors carry their location ("problems[2].seqlen_q").
#pragma once

#include <fmt/format.h>

#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flashjit/error.hpp"

namespace flashjit::tune::sweep_values {

inline constexpr std::size_t kMaxValues = 10000;  // per field

// An invalid_argument error at `where`; parse_sweep prefixes the origin.
Error at(const std::string& where, const std::string& why);
// An error naming the first key of `object` not in `known`.
Status only_keys(const nlohmann::json& object, std::initializer_list<const char*> known, const std::string& where);
// An integer field's values: an integer, a list, {"values": [...]} or {"from", "to", "step"}.
Result<std::vector<int>> ints(const nlohmann::json& v, const std::string& where);
// A variant's values: true, false, for softcap also a cap > 0, or a list of them, or {"values": [...]}; 1 on, 0 off.
Result<std::vector<int>> flags(const nlohmann::json& v, const std::string& where, bool cap);

// "text", ["a", "b"] or {"values": ["a", "b"]}, each parsed by `parse` into an int (an enum's value).
template <class E>
Result<std::vector<int>> names(const nlohmann::json& v, const std::string& where, std::optional<E> (*parse)(std::string_view),
                               const char* choices) {
  nlohmann::json list = v;
  std::string list_where = where;
  if (v.is_string()) {
    list = nlohmann::json::array({v});
  } else if (v.is_object() && v.contains("values")) {
    FLASHJIT_TRY(only_keys(v, {"values"}, where));
    list = v["values"], list_where = where + ".values";
  }
  if (!list.is_array()) return at(where, fmt::format("expected a string or a list of strings, got {}", v.dump()));
  if (list.empty()) return at(list_where, "the list is empty");
  std::vector<int> out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string w = v.is_string() ? where : fmt::format("{}[{}]", list_where, i);
    if (!list[i].is_string()) return at(w, fmt::format("expected a string, got {}", list[i].dump()));
    auto e = parse(list[i].get<std::string>());
    if (!e) return at(w, fmt::format("'{}' is not one of {}", list[i].get<std::string>(), choices));
    out.push_back(static_cast<int>(*e));
  }
  return out;
}

}  // namespace flashjit::tune::sweep_values
