// The field machinery every config kind shares. A kind declares its fields once (kinds.hpp): name, member,
// and for prefill the algorithms that have it. From that list follow the canonical JSON, setting a field
// from its text (JSON values and key=value pairs parse the same way, with one error per field), the list
// of known fields in error messages, equality and the hash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "flashjit/config.hpp"

namespace flashjit::config {

// The declaration of a config kind: `fields`, a tuple of Field, and `tag`, the "kernel" value its JSON
// starts with (nullptr: none, prefill). Specialized in kinds.hpp.
template <class Config>
struct Kind;

// "config field 'KEY': WHY" (ErrorCode::invalid_config).
Error bad_field(const std::string& field, const std::string& why);

// validate()'s issues as a Status: "config NAME is invalid:" and one line per issue (invalid_config).
Status as_status(const std::vector<ConfigIssue>& issues, const std::string& name);

// Text -> value of each field type; the error names the field and what it takes.
Status parse_value(const std::string& key, const std::string& text, int& out);
Status parse_value(const std::string& key, const std::string& text, bool& out);
Status parse_value(const std::string& key, const std::string& text, Arch& out);
Status parse_value(const std::string& key, const std::string& text, Algorithm& out);
Status parse_value(const std::string& key, const std::string& text, DType& out);
Status parse_value(const std::string& key, const std::string& text, MaskKind& out);
Status parse_value(const std::string& key, const std::string& text, Scheduler& out);
Status parse_value(const std::string& key, const std::string& text, KvLayout& out);
Status parse_value(const std::string& key, const std::string& text, BiasType& out);
Status parse_value(const std::string& key, const std::string& text, std::string& out);  // the snippets

// Value -> JSON value text.
inline std::string json_value(int v) { return std::to_string(v); }
inline std::string json_value(bool v) { return v ? "true" : "false"; }
std::string json_value(const std::string& v);  // a JSON string, escaped
inline std::string json_value(const Arch& a) { return '"' + a.to_string() + '"'; }
template <class E>
std::string json_value(E e) requires std::is_enum_v<E> { return std::string("\"") + to_string(e) + '"'; }

// Value -> hash input.
inline std::uint64_t hash_value(int v) { return static_cast<std::uint64_t>(static_cast<std::uint32_t>(v)); }
inline std::uint64_t hash_value(bool v) { return v ? 1 : 0; }
inline std::uint64_t hash_value(const std::string& v) { return std::hash<std::string>{}(v); }
inline std::uint64_t hash_value(const Arch& a) { return static_cast<std::uint64_t>(a.sm) * 2 + a.accelerated; }
template <class E>
std::uint64_t hash_value(E e) requires std::is_enum_v<E> { return static_cast<std::uint64_t>(e); }

// One field of a config kind. `has`, when set, says whether a config has the field at all (prefill: by
// its algorithm); a field a config does not have is not in its JSON, its equality or its hash, and naming it
// in a text is an error. A `sparse` field (the variants) is written into the JSON only when it is not the
// default value T{}, so adding one leaves the JSON, and so the cache keys, of every existing config as it was.
template <class Config, class T>
struct Field {
  const char* name;
  T Config::*member;
  bool (*has)(const Config&) = nullptr;
  bool sparse = false;

  bool in(const Config& c) const { return has == nullptr || has(c); }
};

// Calls f(field) for each field of Config's declaration (Kind<Config>::fields).
template <class Config, class F>
void for_each_field(F&& f) {
  std::apply([&](const auto&... field) { (f(field), ...); }, Kind<Config>::fields);
}

// Copies into `to` each field of `from` whose name is in `names`.
template <class Config, class Names>
void copy_fields(Config& to, const Config& from, const Names& names) {
  for_each_field<Config>([&](const auto& f) {
    for (const auto& n : names)
      if (n == f.name) to.*f.member = from.*f.member;
  });
}

}  // namespace flashjit::config
