// Canonical JSON, key=value pairs and readable names of a KernelConfig.
#include <fmt/format.h>

#include "config/text_fields.hpp"
#include "flashjit/config.hpp"

namespace flashjit {
namespace {

using config::bad_field;

// Sets one field from its text form (shared by JSON and key=value parsing).
Status set_field(KernelConfig& c, const std::string& key, const std::string& value) {
  auto as_int = [&](int& dst) -> Status {
    try {
      std::size_t used = 0;
      int v = std::stoi(value, &used);
      if (used != value.size()) return bad_field(key, fmt::format("'{}' is not an integer", value));
      dst = v;
      return {};
    } catch (const std::exception&) {
      return bad_field(key, fmt::format("'{}' is not an integer", value));
    }
  };
  if (key == "algorithm") {
    auto a = parse_algorithm(value);
    if (!a) return bad_field(key, fmt::format("'{}' is not one of naive, fa2, fa3, auto", value));
    c.algorithm = *a;
  } else if (key == "arch") {
    auto a = Arch::parse(value);
    if (!a) return bad_field(key, fmt::format("'{}' is not a CUDA target like sm_80 or sm_90a", value));
    c.arch = *a;
  } else if (key == "dtype") {
    auto d = parse_dtype(value);
    if (!d) return bad_field(key, fmt::format("'{}' is not one of bf16, fp16", value));
    c.dtype = *d;
  } else if (key == "mask") {
    auto m = parse_mask(value);
    if (!m)
      return bad_field(key, fmt::format("'{}' is not one of none, causal, sliding_window, chunked, chunked_causal", value));
    c.mask = *m;
  } else if (key == "scheduler") {
    auto s = parse_scheduler(value);
    if (!s) return bad_field(key, fmt::format("'{}' is not one of grid, persistent", value));
    c.scheduler = *s;
  } else if (key == "varlen") {
    if (value == "true" || value == "1") {
      c.varlen = true;
    } else if (value == "false" || value == "0") {
      c.varlen = false;
    } else {
      return bad_field(key, fmt::format("'{}' is not one of true, false", value));
    }
  } else if (key == "head_dim") {
    return as_int(c.head_dim);
  } else if (key == "block_m") {
    return as_int(c.block_m);
  } else if (key == "block_n") {
    return as_int(c.block_n);
  } else if (key == "stages") {
    return as_int(c.stages);
  } else if (key == "warps") {
    return as_int(c.warps);
  } else {
    return bad_field(key, "unknown field (known: algorithm, arch, dtype, head_dim, block_m, block_n, stages, "
                          "warps, mask, scheduler, varlen)");
  }
  return {};
}

}  // namespace

std::string to_json(const KernelConfig& c) {
  return fmt::format(
      R"({{"algorithm":"{}","arch":"{}","dtype":"{}","head_dim":{},"block_m":{},"block_n":{},"stages":{},)"
      R"("warps":{},"mask":"{}","scheduler":"{}","varlen":{}}})",
      to_string(c.algorithm), c.arch.to_string(), to_string(c.dtype), c.head_dim, c.block_m, c.block_n,
      c.stages, c.warps, to_string(c.mask), to_string(c.scheduler), c.varlen ? "true" : "false");
}

// Every field of `fields` set on a default KernelConfig.
static Result<KernelConfig> from_fields(Result<config::TextFields> fields) {
  if (!fields.ok()) return std::move(fields).error();
  KernelConfig c;
  for (const auto& [key, value] : *fields) FLASHJIT_TRY(set_field(c, key, value));
  return c;
}

Result<KernelConfig> config_from_json(std::string_view text) { return from_fields(config::json_text_fields(text)); }

Result<KernelConfig> config_from_pairs(const std::vector<std::string>& pairs) {
  return from_fields(config::pair_text_fields(pairs));
}

std::string readable_name(const KernelConfig& c) {
  std::string arch = c.arch.to_string();
  arch.erase(arch.find('_'), 1);  // sm_90a -> sm90a
  const char* varlen = c.varlen ? "_varlen" : "";
  if (c.algorithm == Algorithm::naive)
    return fmt::format("naive_{}_d{}_w{}_{}{}_{}", to_string(c.dtype), c.head_dim, c.warps, to_string(c.mask), varlen,
                       arch);
  // fa3 counts consumer warpgroups ("wg"), fa2 warps ("w").
  return fmt::format("{}_{}_d{}_bm{}_bn{}_s{}_{}{}_{}{}{}_{}", to_string(c.algorithm), to_string(c.dtype), c.head_dim,
                     c.block_m, c.block_n, c.stages, c.algorithm == Algorithm::fa3 ? "wg" : "w", c.warps,
                     to_string(c.mask), c.scheduler == Scheduler::persistent ? "_persistent" : "", varlen, arch);
}

}  // namespace flashjit
