// A config of any kernel kind: prefill (KernelConfig), decode split (DecodeKernelConfig) or combine
// (CombineKernelConfig). What the tools pass around where every kind may appear (precompile, the compile
// pool and its workers, `flashjit compile` / `emit`); the runtime keeps the concrete types.
//
// The kinds are told apart by the canonical JSON's "kernel" field: absent (or "prefill") for a KernelConfig,
// "decode" or "combine" otherwise. Prefill JSON is unchanged, so its cache keys and tuned tables are too.
#pragma once

#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "config/decode_config.hpp"
#include "flashjit/config.hpp"

namespace flashjit {

enum class KernelKind { prefill, decode, combine };
const char* to_string(KernelKind kind);

class AnyKernelConfig {
 public:
  using Variant = std::variant<KernelConfig, DecodeKernelConfig, CombineKernelConfig>;

  AnyKernelConfig() = default;
  AnyKernelConfig(const KernelConfig& c) : config_(c) {}         // NOLINT: implicit on purpose
  AnyKernelConfig(const DecodeKernelConfig& c) : config_(c) {}   // NOLINT
  AnyKernelConfig(const CombineKernelConfig& c) : config_(c) {}  // NOLINT

  KernelKind kind() const { return static_cast<KernelKind>(config_.index()); }
  const Variant& variant() const { return config_; }
  template <class Config>
  const Config* get_if() const { return std::get_if<Config>(&config_); }
  template <class F>
  decltype(auto) visit(F&& f) const { return std::visit(std::forward<F>(f), config_); }
  const Arch& arch() const;

  bool operator==(const AnyKernelConfig&) const = default;

 private:
  Variant config_;
};

std::string to_json(const AnyKernelConfig& config);
std::string readable_name(const AnyKernelConfig& config);
std::vector<ConfigIssue> validate(const AnyKernelConfig& config);

// Any kind from its JSON: "kernel" picks the parser (absent: prefill); errors name the field as each
// parser does, "config field 'kernel': ..." for an unknown kind.
Result<AnyKernelConfig> any_config_from_json(std::string_view json);
// key=value pairs; a kernel=decode or kernel=combine pair picks the kind (default prefill).
Result<AnyKernelConfig> any_config_from_pairs(const std::vector<std::string>& pairs);

}  // namespace flashjit
