#include "tune/sweep_values.hpp"

#include <algorithm>
#include <cstdint>

namespace flashjit::tune::sweep_values {

using nlohmann::json;

namespace {

Result<int> one_int(const json& v, const std::string& where) {
  if (!v.is_number_integer()) return at(where, fmt::format("expected an integer, got {}", v.dump()));
  // An unsigned value past INT64_MAX read as long long would wrap (2^64 - 1 to -1).
  const long long x = v.is_number_unsigned() && v.get<std::uint64_t>() > (1ULL << 31) ? (1LL << 31) : v.get<long long>();
  if (x < -(1LL << 30) || x > (1LL << 30)) return at(where, fmt::format("{} is out of range", v.dump()));
  return static_cast<int>(x);
}

Result<std::vector<int>> int_list(const json& list, const std::string& where) {
  if (list.empty()) return at(where, "the list is empty");
  if (list.size() > kMaxValues) return at(where, fmt::format("more than {} values", kMaxValues));
  std::vector<int> out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    auto v = one_int(list[i], fmt::format("{}[{}]", where, i));
    if (!v.ok()) return std::move(v).error();
    out.push_back(*v);
  }
  return out;
}

// {"from": A, "to": B, "step": S} (S defaults to 1) or {"from": A, "to": B, "factor": F}; B is included when
// reached.
Result<std::vector<int>> int_range(const json& r, const std::string& where) {
  FLASHJIT_TRY(only_keys(r, {"from", "to", "step", "factor"}, where));
  if (!r.contains("to")) return at(where, "a range needs \"from\" and \"to\"");
  if (r.contains("step") && r.contains("factor")) return at(where, "a range takes \"step\" or \"factor\", not both");
  auto from = one_int(r["from"], where + ".from");
  if (!from.ok()) return std::move(from).error();
  auto to = one_int(r["to"], where + ".to");
  if (!to.ok()) return std::move(to).error();
  if (*from > *to) return at(where, fmt::format("\"from\" ({}) is greater than \"to\" ({})", *from, *to));
  const bool geometric = r.contains("factor");
  auto by = r.contains("step") ? one_int(r["step"], where + ".step")
                               : geometric ? one_int(r["factor"], where + ".factor") : Result<int>(1);
  if (!by.ok()) return std::move(by).error();
  if (geometric && (*by < 2 || *from < 1))
    return at(where, fmt::format("a geometric range needs \"factor\" >= 2 and \"from\" >= 1, got factor {} from {}",
                                 *by, *from));
  if (!geometric && *by < 1) return at(where + ".step", fmt::format("must be >= 1, got {}", *by));
  std::vector<int> out;
  for (long long v = *from; v <= *to; v = geometric ? v * *by : v + *by) {
    if (out.size() == kMaxValues) return at(where, fmt::format("the range has more than {} values", kMaxValues));
    out.push_back(static_cast<int>(v));
  }
  return out;
}

}  // namespace

// Errors carry their location ("problems[2].seqlen_q"); parse_sweep prefixes the origin.
Error at(const std::string& where, const std::string& why) {
  return Error(ErrorCode::invalid_argument, fmt::format("{}: {}", where, why));
}

Status only_keys(const json& object, std::initializer_list<const char*> known, const std::string& where) {
  for (const auto& [key, value] : object.items())
    if (std::none_of(known.begin(), known.end(), [&](const char* k) { return key == k; }))
      return at(where.empty() ? key : where + "." + key,
                fmt::format("unknown field (known: {})", fmt::join(known.begin(), known.end(), ", ")));
  return {};
}

// N, [N, ...], {"values": [...]} or a range.
Result<std::vector<int>> ints(const json& v, const std::string& where) {
  if (v.is_number_integer()) {
    auto x = one_int(v, where);
    if (!x.ok()) return std::move(x).error();
    return std::vector<int>{*x};
  }
  if (v.is_array()) return int_list(v, where);
  if (v.is_object() && v.contains("values")) {
    FLASHJIT_TRY(only_keys(v, {"values"}, where));
    if (!v["values"].is_array()) return at(where + ".values", fmt::format("expected a list, got {}", v["values"].dump()));
    return int_list(v["values"], where + ".values");
  }
  if (v.is_object() && v.contains("from")) return int_range(v, where);
  return at(where, fmt::format("expected an integer, a list, {{\"values\": [...]}} or {{\"from\", \"to\", \"step\"}}, "
                               "got {}",
                               v.dump()));
}

// A variant's values: true, false, for softcap also a cap > 0 (on: the cap itself is a run-time argument), or a
// list of them ([false, true]: both kernels), or {"values": [...]}; 1 for on, 0 for off.
Result<std::vector<int>> flags(const json& v, const std::string& where, bool cap) {
  json list = json::array({v});
  std::string list_where = where;
  if (v.is_array()) {
    list = v;
  } else if (v.is_object() && v.contains("values")) {
    FLASHJIT_TRY(only_keys(v, {"values"}, where));
    list = v["values"], list_where = where + ".values";
    if (!list.is_array()) return at(list_where, fmt::format("expected a list, got {}", list.dump()));
  }
  if (list.empty()) return at(list_where, "the list is empty");
  std::vector<int> out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string w = v.is_array() || v.is_object() ? fmt::format("{}[{}]", list_where, i) : where;
    const json& x = list[i];
    if (x.is_boolean()) {
      out.push_back(x.get<bool>() ? 1 : 0);
    } else if (cap && x.is_number() && x.get<double>() > 0 && x.get<double>() <= 3.4e38) {
      out.push_back(1);
    } else {
      return at(w, fmt::format("expected {}, got {}", cap ? "a cap > 0, true or false" : "true or false", x.dump()));
    }
  }
  return out;
}

}  // namespace flashjit::tune::sweep_values
