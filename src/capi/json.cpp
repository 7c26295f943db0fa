#include "capi/json.hpp"

#include <nlohmann/json.hpp>

namespace flashjit::capi {
namespace {

// Paths and names are bytes: invalid UTF-8 is replaced rather than thrown on.
std::string dump(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace

std::string kernel_info_json(const AnyKernelConfig& config, const KernelInfo& info) {
  const nlohmann::ordered_json j = {{"name", info.name},
                                    {"key", info.key},
                                    {"config", nlohmann::ordered_json::parse(to_json(config))},
                                    {"cache_hit", info.cache_hit},
                                    {"compile_ms", info.compile_ms},
                                    {"registers", info.ptxas.registers},
                                    {"spill_stores", info.ptxas.spill_stores},
                                    {"spill_loads", info.ptxas.spill_loads},
                                    {"stack_frame", info.ptxas.stack_frame},
                                    {"static_smem", info.ptxas.static_smem},
                                    {"dynamic_smem", info.dynamic_smem}};
  return dump(j);
}

std::string decode_selection_json(const DecodeSelection& s) {
  const nlohmann::ordered_json j = {
      {"split", nlohmann::ordered_json::parse(to_json(s.split))},
      {"num_splits", s.num_splits},
      {"keys_per_split", s.keys_per_split},
      {"combine", s.combine ? nlohmann::ordered_json::parse(to_json(*s.combine)) : nlohmann::ordered_json(nullptr)},
      {"append", s.append ? nlohmann::ordered_json::parse(to_json(*s.append)) : nlohmann::ordered_json(nullptr)},
      {"workspace_bytes", s.workspace_bytes}};
  return dump(j);
}

std::string cache_info_json(const Runtime& runtime, const CacheStats& stats) {
  const nlohmann::ordered_json j = {{"dir", runtime.cache_dir().string()},
                                    {"writable", runtime.cache_writable()},
                                    {"entries", stats.entries},
                                    {"bytes", stats.bytes},
                                    {"max_bytes", stats.max_bytes}};
  return dump(j);
}

}  // namespace flashjit::capi
