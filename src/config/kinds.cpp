// What follows from the declarations in kinds.hpp for every kind: canonical JSON, parsing (JSON objects and
// key=value pairs), equality and hashing; and the any-kind forms of the kinds' functions.
#include "config/kinds.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <type_traits>

namespace flashjit {
namespace config {
namespace {

using TextFields = std::vector<std::pair<std::string, std::string>>;

// The JSON type a field's value must have: an integer for an int field, a boolean for a bool one, a string
// for the rest (enums, arch, "kernel"). Unknown keys: none (set_field names them).
enum class JsonType { string, integer, boolean };
const char* describe(JsonType t) {
  return t == JsonType::integer ? "an integer" : t == JsonType::boolean ? "a boolean (true/false)" : "a string";
}
template <class T>
constexpr JsonType json_type_of() {
  if constexpr (std::is_same_v<T, int>) return JsonType::integer;
  else if constexpr (std::is_same_v<T, bool>) return JsonType::boolean;
  else return JsonType::string;
}
std::optional<JsonType> field_json_type(const std::string& key) {
  if (key == "kernel") return JsonType::string;
  std::optional<JsonType> type;
  auto scan = [&]<class Config>(const Config*) {
    for_each_field<Config>([&]<class T>(const Field<Config, T>& f) {
      if (!type && key == f.name) type = json_type_of<T>();
    });
  };
  scan(static_cast<const KernelConfig*>(nullptr));
  scan(static_cast<const DecodeKernelConfig*>(nullptr));
  scan(static_cast<const CombineKernelConfig*>(nullptr));
  scan(static_cast<const AppendKernelConfig*>(nullptr));
  scan(static_cast<const BlockMaskKernelConfig*>(nullptr));
  return type;
}

// A JSON object's fields in order: strings as they are, integers and booleans printed; each of the JSON type
// its field takes ("head_dim": "64" is refused). Syntax errors say where (line and column).
Result<TextFields> json_text_fields(std::string_view text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for 1e9999
    // what(): "[json.exception.parse_error.101] parse error at line 1, column 5: syntax error ..."
    std::string why = e.what();
    if (auto p = why.find("] "); p != std::string::npos) why = why.substr(p + 2);
    return Error(ErrorCode::invalid_config, fmt::format("config is not valid JSON: {}", why));
  }
  if (!j.is_object()) return Error(ErrorCode::invalid_config, "config JSON must be an object");
  TextFields out;
  for (const auto& [key, value] : j.items()) {
    const auto want = field_json_type(key);
    const JsonType got = value.is_string()           ? JsonType::string
                         : value.is_number_integer() ? JsonType::integer
                                                     : JsonType::boolean;
    if (!value.is_string() && !value.is_number_integer() && !value.is_boolean())
      return bad_field(key, fmt::format("expected {}, got {}", describe(want.value_or(JsonType::string)),
                                        value.is_structured() ? std::string(value.type_name()) : value.dump()));
    if (want && *want != got)
      return bad_field(key, fmt::format("expected {}, got {} {}", describe(*want),
                                        got == JsonType::string ? "the string" : value.is_boolean() ? "the boolean" : "the integer",
                                        value.dump()));
    if (got == JsonType::string) out.emplace_back(key, value.get<std::string>());
    else if (got == JsonType::integer)  // as written: 2^64 - 1 must not read as -1
      out.emplace_back(key, value.is_number_unsigned() ? std::to_string(value.get<unsigned long long>())
                                                       : std::to_string(value.get<long long>()));
    else out.emplace_back(key, value.get<bool>() ? "true" : "false");
  }
  return out;
}

// "key=value" strings split at their first '='.
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

const char* kind_name(const KernelConfig&) { return "prefill"; }
const char* kind_name(const DecodeKernelConfig&) { return "decode"; }
const char* kind_name(const CombineKernelConfig&) { return "combine"; }
const char* kind_name(const AppendKernelConfig&) { return "append"; }
const char* kind_name(const BlockMaskKernelConfig&) { return "block_mask"; }
// Who a field belongs to in messages: "fa3 kernels", "decode configs".
std::string owner(const KernelConfig& c) { return fmt::format("{} kernels", to_string(c.algorithm)); }
template <class Config>
std::string owner(const Config& c) { return fmt::format("{} configs", kind_name(c)); }

template <class Config>
std::string field_names(const Config& c, bool only_present) {
  std::string out = Kind<Config>::tag ? "kernel" : "";
  for_each_field<Config>([&](const auto& f) {
    if (only_present && !f.in(c)) return;
    out += out.empty() ? "" : ", ";
    out += f.name;
  });
  return out;
}

template <class Config>
Status set_field(Config& c, const std::string& key, const std::string& text) {
  bool found = false;
  Status st;
  for_each_field<Config>([&](const auto& f) {
    if (found || key != f.name) return;
    found = true;
    if (!f.in(c)) {
      st = bad_field(key, fmt::format("{} have no {} (their fields: {})", owner(c), key, field_names(c, true)));
      return;
    }
    st = parse_value(key, text, c.*f.member);
  });
  if (!found)
    return bad_field(key, fmt::format("unknown field of {} {} config (known: {})", kind_name(c)[0] == 'a' ? "an" : "a",
                                      kind_name(c), field_names(c, false)));
  return st;
}

// The config a text starts from: the kind's defaults; for prefill those of the algorithm it names.
template <class Config>
Result<Config> initial(const TextFields&) { return Config{}; }
template <>
Result<KernelConfig> initial<KernelConfig>(const TextFields& fields) {
  Algorithm a = Algorithm::fa2;
  for (const auto& [key, value] : fields)
    if (key == "algorithm") FLASHJIT_TRY(parse_value(key, value, a));
  return KernelConfig::defaults(a);
}

template <class Config>
Result<PartialConfig> parse_fields(const TextFields& fields) {
  auto c = initial<Config>(fields);
  if (!c.ok()) return std::move(c).error();
  PartialConfig out;
  for (const auto& [key, value] : fields) {
    if (key == "kernel") continue;
    FLASHJIT_TRY(set_field(*c, key, value));
    out.given.push_back(key);
  }
  out.config = *c;
  return out;
}

Result<PartialConfig> parse_any(Result<TextFields> fields) {
  if (!fields.ok()) return std::move(fields).error();
  std::string kind = "prefill";
  for (const auto& [key, value] : *fields)
    if (key == "kernel") kind = value;
  if (kind == "prefill") return parse_fields<KernelConfig>(*fields);
  if (kind == "decode") return parse_fields<DecodeKernelConfig>(*fields);
  if (kind == "combine") return parse_fields<CombineKernelConfig>(*fields);
  if (kind == "append") return parse_fields<AppendKernelConfig>(*fields);
  if (kind == "block_mask") return parse_fields<BlockMaskKernelConfig>(*fields);
  return bad_field("kernel", fmt::format("'{}' is not one of prefill, decode, combine, append, block_mask", kind));
}

// One kind: "kernel", when named, must name it.
template <class Config>
Result<Config> parse_one(Result<TextFields> fields) {
  if (!fields.ok()) return std::move(fields).error();
  const char* want = kind_name(Config{});
  for (const auto& [key, value] : *fields)
    if (key == "kernel" && value != want)
      return bad_field("kernel", fmt::format("'{}' is not '{}' (this parses {} kernel configs)", value, want, want));
  auto parsed = parse_fields<Config>(*fields);
  if (!parsed.ok()) return std::move(parsed).error();
  return *parsed->config.template get_if<Config>();
}

template <class Config>
std::string json_of(const Config& c) {
  std::string out = "{";
  if (Kind<Config>::tag) out += fmt::format(R"("kernel":"{}")", Kind<Config>::tag);
  for_each_field<Config>([&](const auto& f) {
    if (!f.in(c)) return;
    if (f.sparse && c.*f.member == std::remove_cvref_t<decltype(c.*f.member)>{}) return;
    if (out.size() > 1) out += ',';
    out += fmt::format(R"("{}":{})", f.name, json_value(c.*f.member));
  });
  return out + "}";
}

template <class Config>
std::uint64_t hash_fields(const Config& c) {
  std::uint64_t h = 1469598103934665603ull;
  for_each_field<Config>([&](const auto& f) {
    if (f.in(c)) h = (h ^ hash_value(c.*f.member)) * 1099511628211ull;
  });
  return h;
}

}  // namespace
}  // namespace config

KernelConfig KernelConfig::defaults(Algorithm algorithm) {
  KernelConfig c;
  c.algorithm = algorithm;
  if (algorithm == Algorithm::fa3) {
    c.block_m = 128, c.block_n = 128, c.stages = 2, c.consumer_warpgroups = 2;
  } else if (algorithm == Algorithm::naive) {
    c.block_m = 1, c.block_n = 128, c.stages = 1, c.warps = 4;  // its only shape: one key per thread
  }
  return c;
}

bool operator==(const KernelConfig& a, const KernelConfig& b) {
  if (a.algorithm != b.algorithm) return false;
  bool equal = true;
  config::for_each_field<KernelConfig>([&](const auto& f) {
    if (f.in(a)) equal = equal && a.*f.member == b.*f.member;
  });
  return equal;
}

bool PartialConfig::has(std::string_view field) const {
  return std::find(given.begin(), given.end(), field) != given.end();
}

std::string to_json(const KernelConfig& c) { return config::json_of(c); }
std::string to_json(const DecodeKernelConfig& c) { return config::json_of(c); }
std::string to_json(const CombineKernelConfig& c) { return config::json_of(c); }
std::string to_json(const AppendKernelConfig& c) { return config::json_of(c); }
std::string to_json(const BlockMaskKernelConfig& c) { return config::json_of(c); }
std::string to_json(const AnyKernelConfig& c) { return c.visit([](const auto& x) { return to_json(x); }); }

std::size_t hash_of(const AnyKernelConfig& c) {
  return c.visit([&](const auto& x) { return static_cast<std::size_t>(config::hash_fields(x) * 31 + c.variant().index()); });
}

Result<PartialConfig> parse_config_json(std::string_view json) { return config::parse_any(config::json_text_fields(json)); }
Result<PartialConfig> parse_config_pairs(const std::vector<std::string>& pairs) {
  return config::parse_any(config::pair_text_fields(pairs));
}

Result<AnyKernelConfig> any_config_from_json(std::string_view json) {
  auto p = parse_config_json(json);
  if (!p.ok()) return std::move(p).error();
  return std::move(p->config);
}
Result<AnyKernelConfig> any_config_from_pairs(const std::vector<std::string>& pairs) {
  auto p = parse_config_pairs(pairs);
  if (!p.ok()) return std::move(p).error();
  return std::move(p->config);
}

Result<KernelConfig> config_from_json(std::string_view json) {
  return config::parse_one<KernelConfig>(config::json_text_fields(json));
}
Result<KernelConfig> config_from_pairs(const std::vector<std::string>& pairs) {
  return config::parse_one<KernelConfig>(config::pair_text_fields(pairs));
}
Result<DecodeKernelConfig> decode_config_from_json(std::string_view json) {
  return config::parse_one<DecodeKernelConfig>(config::json_text_fields(json));
}
Result<DecodeKernelConfig> decode_config_from_pairs(const std::vector<std::string>& pairs) {
  return config::parse_one<DecodeKernelConfig>(config::pair_text_fields(pairs));
}
Result<CombineKernelConfig> combine_config_from_json(std::string_view json) {
  return config::parse_one<CombineKernelConfig>(config::json_text_fields(json));
}
Result<CombineKernelConfig> combine_config_from_pairs(const std::vector<std::string>& pairs) {
  return config::parse_one<CombineKernelConfig>(config::pair_text_fields(pairs));
}
Result<AppendKernelConfig> append_config_from_json(std::string_view json) {
  return config::parse_one<AppendKernelConfig>(config::json_text_fields(json));
}
Result<AppendKernelConfig> append_config_from_pairs(const std::vector<std::string>& pairs) {
  return config::parse_one<AppendKernelConfig>(config::pair_text_fields(pairs));
}
Result<BlockMaskKernelConfig> block_mask_config_from_json(std::string_view json) {
  return config::parse_one<BlockMaskKernelConfig>(config::json_text_fields(json));
}
Result<BlockMaskKernelConfig> block_mask_config_from_pairs(const std::vector<std::string>& pairs) {
  return config::parse_one<BlockMaskKernelConfig>(config::pair_text_fields(pairs));
}

const Arch& AnyKernelConfig::arch() const {
  return std::visit([](const auto& c) -> const Arch& { return c.arch; }, config_);
}

std::vector<ConfigIssue> validate(const AnyKernelConfig& c) { return c.visit([](const auto& x) { return validate(x); }); }
Status check(const AnyKernelConfig& c) { return c.visit([](const auto& x) { return check(x); }); }
int shared_memory_bytes(const AnyKernelConfig& c) { return c.visit([](const auto& x) { return shared_memory_bytes(x); }); }
int threads_per_cta(const AnyKernelConfig& c) { return c.visit([](const auto& x) { return threads_per_cta(x); }); }
std::string readable_name(const AnyKernelConfig& c) { return c.visit([](const auto& x) { return readable_name(x); }); }

}  // namespace flashjit
