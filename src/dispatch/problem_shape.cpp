#include "dispatch/problem_shape.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <optional>

#include "config/variants.hpp"

namespace flashjit::dispatch {
namespace {

bool uses_window(MaskKind m) { return m == MaskKind::sliding_window; }
// What a shape's problem points its variants' arrays at (never read).
const float kStandIn[1] = {0.f};
const int kStandInInts[1] = {0};
bool uses_chunk(MaskKind m) { return m == MaskKind::chunked || m == MaskKind::chunked_causal; }

Error field_error(const std::string& field, const std::string& why) {
  return Error(ErrorCode::invalid_argument, fmt::format("{}: {}", field, why));
}

Status read_bool(const nlohmann::json& j, const char* field, bool& out) {
  auto it = j.find(field);
  if (it == j.end()) return {};
  if (!it->is_boolean()) return field_error(field, fmt::format("expected true or false, got {}", it->dump()));
  out = it->get<bool>();
  return {};
}

Status read_int(const nlohmann::json& j, const char* field, int& out) {
  auto it = j.find(field);
  if (it == j.end()) return {};
  if (!it->is_number_integer()) return field_error(field, fmt::format("expected an integer, got {}", it->dump()));
  // An unsigned value past INT64_MAX read as long long would wrap (2^64 - 1 to -1).
  const auto v = it->is_number_unsigned() && it->get<std::uint64_t>() > (1ULL << 31) ? (1LL << 31) : it->get<long long>();
  if (v < -(1LL << 31) || v > (1LL << 31) - 1) return field_error(field, fmt::format("{} is out of range", it->dump()));
  out = static_cast<int>(v);
  return {};
}

template <class E>
Status read_enum(const nlohmann::json& j, const char* field, E& out, std::optional<E> (*parse)(std::string_view),
                 const char* choices) {
  auto it = j.find(field);
  if (it == j.end()) return {};
  if (!it->is_string()) return field_error(field, fmt::format("expected a string, got {}", it->dump()));
  auto v = parse(it->get<std::string>());
  if (!v) return field_error(field, fmt::format("'{}' is not one of {}", it->get<std::string>(), choices));
  out = *v;
  return {};
}

}  // namespace

AttentionProblem to_problem(const ProblemShape& s) {
  AttentionProblem p;
  p.dtype = s.dtype;
  p.batch = s.batch, p.seqlen_q = s.seqlen_q, p.seqlen_k = s.seqlen_k;
  p.heads_q = s.heads_q, p.heads_kv = s.heads_kv, p.head_dim = s.head_dim;
  p.mask = s.mask;
  p.window_left = s.window_left, p.window_right = s.window_right, p.chunk_size = s.chunk_size;
  if (s.softcap) p.softcap = kShapeSoftcap;
  if (s.alibi) p.alibi_slopes = kStandIn;
  if (s.sinks) p.sinks = kStandIn;
  if (!s.score_mod.empty()) p.score_mod = s.score_mod.c_str();
  if (!s.mask_mod.empty()) p.mask_mod = s.mask_mod.c_str();
  if (s.page_size > 0) {
    p.page_table = kStandInInts, p.seqused_k = kStandInInts, p.page_size = s.page_size;
    p.max_pages_per_seq = (s.seqlen_k + s.page_size - 1) / s.page_size;
    p.num_pages = s.batch * p.max_pages_per_seq;
  }
  if (s.bias != BiasType::none) p.bias = kStandIn, p.bias_type = s.bias;  // strides 0: one entry for every pair
  if (s.rel_bias) p.rel_bias = kStandIn, p.rel_bias_extent = 1;           // head stride 0: one row for every head
  if (s.seqused_k) p.seqused_k = kStandInInts;
  if (s.block_size > 0) {
    BlockMask& m = p.block_mask;
    m.kv_num_blocks = m.kv_indices = kStandInInts;
    m.q_block = m.kv_block = s.block_size;
    m.num_q_blocks = (s.seqlen_q + s.block_size - 1) / s.block_size;
    m.num_kv_blocks = (s.seqlen_k + s.block_size - 1) / s.block_size;
  }
  return p;
}

ProblemShape normalized(ProblemShape s) {
  if (!uses_window(s.mask)) s.window_left = -1, s.window_right = -1;
  if (!uses_chunk(s.mask)) s.chunk_size = 0;
  return s;
}

std::vector<ConfigIssue> check_shape(const ProblemShape& s) {
  std::vector<ConfigIssue> out;
  auto positive = [&](const char* field, int v) {
    if (v < 1) out.push_back({field, fmt::format("must be >= 1, got {}", v)});
  };
  positive("batch", s.batch);
  positive("seqlen_q", s.seqlen_q);
  positive("seqlen_k", s.seqlen_k);
  positive("heads_q", s.heads_q);
  positive("heads_kv", s.heads_kv);
  if (s.heads_q >= 1 && s.heads_kv >= 1 && s.heads_q % s.heads_kv != 0)
    out.push_back({"heads_kv", fmt::format("heads_q ({}) must be a multiple of heads_kv ({})", s.heads_q, s.heads_kv)});
  if (s.batch > 65535) out.push_back({"batch", fmt::format("must be <= 65535 (grid limit), got {}", s.batch)});
  if (s.heads_q > 65535) out.push_back({"heads_q", fmt::format("must be <= 65535 (grid limit), got {}", s.heads_q)});
  if (s.head_dim < 8 || s.head_dim > 256 || s.head_dim % 8 != 0)
    out.push_back({"head_dim", fmt::format("must be a multiple of 8 in [8, 256], got {}", s.head_dim)});
  if (uses_window(s.mask)) {
    if (s.window_left < -1) out.push_back({"window_left", fmt::format("must be >= 0 or -1 (unbounded), got {}", s.window_left)});
    if (s.window_right < -1)
      out.push_back({"window_right", fmt::format("must be >= 0 or -1 (unbounded), got {}", s.window_right)});
  }
  config::validate_snippets(s.score_mod, s.mask_mod, out);
  if (s.page_size != 0 && (s.page_size < 1 || s.page_size > 256 || (s.page_size & (s.page_size - 1)) != 0))
    out.push_back({"page_size", fmt::format("must be 0 (contiguous) or a power of two in [1, 256], got {}", s.page_size)});
  if (s.block_size != 0 && (s.block_size < 16 || s.block_size > kMaxBlockMaskBlock || s.block_size % 16 != 0))
    out.push_back({"block_size", fmt::format("must be 0 (no block mask) or a multiple of 16 in [16, 2^20], got {}",
                                             s.block_size)});
  if (s.block_size != 0 && s.page_size != 0)
    out.push_back({"block_size", "a block mask takes dense keys: not with page_size"});
  if (s.seqused_k && (s.page_size != 0 || s.block_size != 0))
    out.push_back({"seqused_k", "seqused_k over contiguous keys: not with page_size (paged problems have it anyway) "
                                "or block_size"});
  if (uses_chunk(s.mask) && s.chunk_size < 1)
    out.push_back({"chunk_size", fmt::format("must be >= 1 for a {} mask, got {}", to_string(s.mask), s.chunk_size)});
  return out;
}

nlohmann::ordered_json to_json(const ProblemShape& s) {
  nlohmann::ordered_json j = {{"dtype", to_string(s.dtype)}, {"batch", s.batch},       {"seqlen_q", s.seqlen_q},
                              {"seqlen_k", s.seqlen_k},      {"heads_q", s.heads_q},   {"heads_kv", s.heads_kv},
                              {"head_dim", s.head_dim},      {"mask", to_string(s.mask)}};
  if (uses_window(s.mask)) j.update({{"window_left", s.window_left}, {"window_right", s.window_right}});
  if (uses_chunk(s.mask)) j["chunk_size"] = s.chunk_size;
  for (auto [field, on] : {std::pair{"softcap", s.softcap}, {"alibi", s.alibi}, {"sinks", s.sinks}})
    if (on) j[field] = true;
  if (!s.score_mod.empty()) j["score_mod"] = s.score_mod;
  if (!s.mask_mod.empty()) j["mask_mod"] = s.mask_mod;
  if (s.page_size > 0) j["page_size"] = s.page_size;
  if (s.bias != BiasType::none) j["bias"] = to_string(s.bias);
  if (s.block_size > 0) j["block_size"] = s.block_size;
  for (auto [field, on] : {std::pair{"rel_bias", s.rel_bias}, {"seqused_k", s.seqused_k}})
    if (on) j[field] = true;
  return j;
}

Result<ProblemShape> shape_from_json(const nlohmann::json& j) {
  if (!j.is_object()) return Error(ErrorCode::invalid_argument, fmt::format("a problem must be an object, got {}", j.dump()));
  static const char* const known[] = {"dtype",      "batch",        "seqlen_q",   "seqlen_k", "heads_q",
                                      "heads_kv",   "head_dim",     "mask",       "window_left",
                                      "window_right", "chunk_size", "softcap",    "alibi",    "sinks",
                                      "score_mod",  "mask_mod",     "page_size",  "bias",     "block_size",
                                      "rel_bias",   "seqused_k"};
  for (const auto& [key, value] : j.items())
    if (std::find(std::begin(known), std::end(known), key) == std::end(known))
      return field_error(key, "unknown field");
  ProblemShape s;
  FLASHJIT_TRY(read_enum(j, "dtype", s.dtype, parse_dtype, "bf16, fp16"));
  FLASHJIT_TRY(read_enum(j, "mask", s.mask, parse_mask, "none, causal, sliding_window, chunked, chunked_causal"));
  FLASHJIT_TRY(read_enum(j, "bias", s.bias, parse_bias_type, "none, fp32, bf16, fp16, bool"));
  for (auto [field, dst] : {std::pair{"batch", &s.batch}, {"seqlen_q", &s.seqlen_q}, {"seqlen_k", &s.seqlen_k},
                            {"heads_q", &s.heads_q}, {"heads_kv", &s.heads_kv}, {"head_dim", &s.head_dim},
                            {"window_left", &s.window_left}, {"window_right", &s.window_right},
                            {"chunk_size", &s.chunk_size}, {"page_size", &s.page_size}, {"block_size", &s.block_size}})
    FLASHJIT_TRY(read_int(j, field, *dst));
  for (auto [field, dst] : {std::pair{"softcap", &s.softcap}, {"alibi", &s.alibi}, {"sinks", &s.sinks},
                            {"rel_bias", &s.rel_bias}, {"seqused_k", &s.seqused_k}})
    FLASHJIT_TRY(read_bool(j, field, *dst));
  for (auto [field, dst] : {std::pair{"score_mod", &s.score_mod}, {"mask_mod", &s.mask_mod}}) {
    auto it = j.find(field);
    if (it == j.end()) continue;
    if (!it->is_string() || it->get<std::string>().empty())
      return field_error(field, fmt::format("expected the snippet's CUDA C++ text (a non-empty string), got {}",
                                            it->is_string() ? "\"\"" : it->dump()));
    *dst = it->get<std::string>();
  }
  s = normalized(s);
  if (auto issues = check_shape(s); !issues.empty()) return field_error(issues.front().field, issues.front().message);
  return s;
}

std::string describe(const ProblemShape& s) {
  std::string mask = to_string(s.mask);
  if (uses_window(s.mask)) mask += fmt::format("({},{})", s.window_left, s.window_right);
  if (uses_chunk(s.mask)) mask += fmt::format("({})", s.chunk_size);
  std::string variants = config::variant_tag(s.softcap, s.alibi, s.sinks, s.score_mod, s.mask_mod);
  std::replace(variants.begin(), variants.end(), '_', ' ');
  return fmt::format("{} B{} Sq{} Sk{} H{}/{} D{} {}{}{}{}{}{}{}", to_string(s.dtype), s.batch, s.seqlen_q, s.seqlen_k,
                     s.heads_q, s.heads_kv, s.head_dim, mask, variants,
                     s.page_size > 0 ? fmt::format(" paged{}", s.page_size) : "",
                     s.bias != BiasType::none ? fmt::format(" bias{}", to_string(s.bias)) : "",
                     s.rel_bias ? " relbias" : "", s.seqused_k ? " sequsedk" : "",
                     s.block_size > 0 ? fmt::format(" blocks{}", s.block_size) : "");
}

}  // namespace flashjit::dispatch
