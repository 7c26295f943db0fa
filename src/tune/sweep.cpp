#include "tune/sweep.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/json_depth.hpp"
#include "flashjit/config.hpp"
#include "tune/sweep_values.hpp"

namespace flashjit::tune {

using dispatch::ProblemShape;

namespace {

using nlohmann::json;
using namespace sweep_values;

constexpr std::size_t kMaxProblems = 100000;  // per sweep, after expansion
constexpr const char* kMaskChoices = "none, causal, sliding_window, chunked, chunked_causal";

// One axis of the cross product: its values and how a value is set on a shape.
template <class Shape>
struct AxisOf {
  std::vector<int> values;
  std::function<void(Shape&, int)> set;
};

// The axes of one sweep entry, read field by field.
template <class Shape>
struct Axes {
  const json& entry;
  const std::string& where;
  std::vector<AxisOf<Shape>> list;

  // An integer field (value, list or range), when the entry has it.
  Status int_field(const char* field, std::function<void(Shape&, int)> set) {
    if (!entry.contains(field)) return {};
    auto v = ints(entry[field], where + "." + field);
    if (!v.ok()) return std::move(v).error();
    list.push_back({std::move(*v), std::move(set)});
    return {};
  }
  // softcap, alibi, sinks: each value turns the shape's flag on or off.
  Status variants() {
    for (auto [field, flag] :
         {std::pair{"softcap", &Shape::softcap}, {"alibi", &Shape::alibi}, {"sinks", &Shape::sinks}}) {
      if (!entry.contains(field)) continue;
      auto v = flags(entry[field], where + "." + field, std::string_view(field) == "softcap");
      if (!v.ok()) return std::move(v).error();
      list.push_back({std::move(*v), [flag = flag](Shape& s, int x) { s.*flag = x != 0; }});
    }
    return {};
  }
  // score_mod, mask_mod: the snippet's CUDA C++ text, or a list of texts (one kernel each).
  Status snippets() {
    for (auto [field, member] : {std::pair{"score_mod", &Shape::score_mod}, {"mask_mod", &Shape::mask_mod}}) {
      if (!entry.contains(field)) continue;
      const json& v = entry[field];
      const json list_of = v.is_array() ? v : json::array({v});
      auto texts = std::make_shared<std::vector<std::string>>();
      for (const json& t : list_of) {
        if (!t.is_string() || t.get<std::string>().empty())
          return at(where + "." + field, fmt::format("expected the snippet's CUDA C++ text or a list of texts, got {}",
                                                     t.is_string() ? "\"\"" : v.dump()));
        texts->push_back(t.get<std::string>());
      }
      if (texts->empty()) return at(where + "." + field, "an empty list");
      std::vector<int> index(texts->size());
      for (std::size_t i = 0; i < index.size(); ++i) index[i] = static_cast<int>(i);
      list.push_back({std::move(index), [texts, member = member](Shape& s, int x) { s.*member = (*texts)[x]; }});
    }
    return {};
  }
  Status dtype() {
    if (!entry.contains("dtype")) return {};
    auto v = names(entry["dtype"], where + ".dtype", parse_dtype, "bf16, fp16");
    if (!v.ok()) return std::move(v).error();
    list.push_back({std::move(*v), [](Shape& s, int x) { s.dtype = static_cast<DType>(x); }});
    return {};
  }
};

// The cross product of the axes (the last one turning fastest), each shape normalized and checked.
template <class Shape>
Result<std::vector<Shape>> cross_product(const std::vector<AxisOf<Shape>>& axes, const std::string& where) {
  std::size_t count = 1;
  for (const auto& a : axes) {
    count *= a.values.size();
    if (count > kMaxProblems) return at(where, fmt::format("expands to more than {} problems", kMaxProblems));
  }
  std::vector<Shape> out;
  std::vector<std::size_t> index(axes.size(), 0);
  for (std::size_t n = 0; n < count; ++n) {
    Shape s;
    for (std::size_t a = 0; a < axes.size(); ++a) axes[a].set(s, axes[a].values[index[a]]);
    s = normalized(s);
    if (auto issues = check_shape(s); !issues.empty())
      return at(where + "." + issues.front().field, fmt::format("{} (in {})", issues.front().message, describe(s)));
    out.push_back(s);
    for (std::size_t a = axes.size(); a-- > 0;) {
      if (++index[a] < axes[a].values.size()) break;
      index[a] = 0;
    }
  }
  return out;
}

enum class EntryKind { prefill, decode, append };

// The problem kind of an entry: "prefill" (the default), "decode" or "append".
Result<EntryKind> entry_kind(const json& entry, const std::string& where) {
  constexpr const char* kKinds = "prefill, decode, append";
  auto it = entry.find("kind");
  if (it == entry.end()) return EntryKind::prefill;
  if (!it->is_string())
    return at(where + ".kind", fmt::format("expected one of {} (a string), got {}", kKinds, it->dump()));
  const std::string kind = it->get<std::string>();
  if (kind == "prefill") return EntryKind::prefill;
  if (kind == "decode") return EntryKind::decode;
  if (kind == "append") return EntryKind::append;
  return at(where + ".kind", fmt::format("'{}' is not one of {}", kind, kKinds));
}

// The layout axis of a decode or append entry (contiguous unless given), and the page_size rule: required when
// the paged layout is listed, refused otherwise.
template <class Shape>
Status layout_axis(Axes<Shape>& axes) {
  std::vector<int> layouts{static_cast<int>(KvLayout::contiguous)};
  if (axes.entry.contains("layout")) {
    auto v = names(axes.entry["layout"], axes.where + ".layout", parse_kv_layout, "contiguous, paged");
    if (!v.ok()) return std::move(v).error();
    layouts = std::move(*v);
  }
  const bool paged = std::find(layouts.begin(), layouts.end(), static_cast<int>(KvLayout::paged)) != layouts.end();
  if (paged && !axes.entry.contains("page_size"))
    return at(axes.where + ".page_size", "missing (required with the paged layout)");
  if (!paged && axes.entry.contains("page_size"))
    return at(axes.where + ".page_size", "only applies to the paged layout, which this problem does not list");
  axes.list.push_back({layouts, [](Shape& s, int x) { s.layout = static_cast<KvLayout>(x); }});
  return {};
}

// A decode entry ("kind": "decode"): dtype, layout, the variants, the snippets, append, batch, q_len, heads_q,
// heads_kv, head_dim, page_size, window_left, then seqlen_k turning fastest.
Result<std::vector<DecodeShape>> expand_decode_problem(const json& entry, const std::string& where) {
  FLASHJIT_TRY(only_keys(entry,
                         {"kind", "dtype", "batch", "q_len", "heads_q", "heads_kv", "head_dim", "seqlen_k", "layout",
                          "page_size", "window_left", "softcap", "alibi", "sinks", "score_mod", "mask_mod", "append"},
                         where));
  for (const char* required : {"heads_q", "head_dim", "seqlen_k"})
    if (!entry.contains(required)) return at(where + "." + required, "missing (required)");
  Axes<DecodeShape> axes{entry, where};
  FLASHJIT_TRY(axes.dtype());
  FLASHJIT_TRY(layout_axis(axes));
  FLASHJIT_TRY(axes.variants());
  FLASHJIT_TRY(axes.snippets());
  if (entry.contains("append")) {  // true: fused with an append of the new tokens' keys and values
    auto v = flags(entry["append"], where + ".append", /*cap=*/false);
    if (!v.ok()) return std::move(v).error();
    axes.list.push_back({std::move(*v), [](DecodeShape& s, int x) { s.append = x != 0; }});
  }
  FLASHJIT_TRY(axes.int_field("batch", [](DecodeShape& s, int x) { s.batch = x; }));
  FLASHJIT_TRY(axes.int_field("q_len", [](DecodeShape& s, int x) { s.q_len = x; }));
  FLASHJIT_TRY(axes.int_field("heads_q", [](DecodeShape& s, int x) { s.heads_q = s.heads_kv = x; }));  // MHA unless given
  FLASHJIT_TRY(axes.int_field("heads_kv", [](DecodeShape& s, int x) { s.heads_kv = x; }));
  FLASHJIT_TRY(axes.int_field("head_dim", [](DecodeShape& s, int x) { s.head_dim = x; }));
  FLASHJIT_TRY(axes.int_field("page_size", [](DecodeShape& s, int x) { s.page_size = x; }));
  FLASHJIT_TRY(axes.int_field("window_left", [](DecodeShape& s, int x) { s.window_left = x; }));
  FLASHJIT_TRY(axes.int_field("seqlen_k", [](DecodeShape& s, int x) { s.seqlen_k = x; }));
  return cross_product(axes.list, where);
}

// An append entry ("kind": "append"): dtype, layout, heads_kv, head_dim, then page_size turning fastest.
Result<std::vector<AppendShape>> expand_append_problem(const json& entry, const std::string& where) {
  FLASHJIT_TRY(only_keys(entry, {"kind", "dtype", "heads_kv", "head_dim", "layout", "page_size"}, where));
  for (const char* required : {"heads_kv", "head_dim"})
    if (!entry.contains(required)) return at(where + "." + required, "missing (required)");
  Axes<AppendShape> axes{entry, where};
  FLASHJIT_TRY(axes.dtype());
  FLASHJIT_TRY(layout_axis(axes));
  FLASHJIT_TRY(axes.int_field("heads_kv", [](AppendShape& s, int x) { s.heads_kv = x; }));
  FLASHJIT_TRY(axes.int_field("head_dim", [](AppendShape& s, int x) { s.head_dim = x; }));
  FLASHJIT_TRY(axes.int_field("page_size", [](AppendShape& s, int x) { s.page_size = x; }));
  return cross_product(axes.list, where);
}

Result<std::vector<ProblemShape>> expand_problem(const json& entry, const std::string& where) {
  FLASHJIT_TRY(only_keys(entry,
                         {"kind", "dtype", "batch", "seqlen", "seqlen_q", "seqlen_k", "heads_q", "heads_kv", "head_dim",
                          "mask", "window_left", "window_right", "chunk_size", "softcap", "alibi", "sinks", "score_mod",
                          "mask_mod", "page_size", "bias", "block_size", "rel_bias", "seqused_k"},
                         where));
  for (const char* required : {"heads_q", "head_dim"})
    if (!entry.contains(required)) return at(where + "." + required, "missing (required)");
  const bool both = entry.contains("seqlen_q") && entry.contains("seqlen_k");
  if (entry.contains("seqlen") && (entry.contains("seqlen_q") || entry.contains("seqlen_k")))
    return at(where + ".seqlen", "give \"seqlen\" (seqlen_q = seqlen_k) or \"seqlen_q\" and \"seqlen_k\", not both");
  if (!entry.contains("seqlen") && !both)
    return at(where + (entry.contains("seqlen_q") ? ".seqlen_k" : ".seqlen_q"),
              "missing (give \"seqlen\", or both \"seqlen_q\" and \"seqlen_k\")");

  Axes<ProblemShape> axes{entry, where};
  FLASHJIT_TRY(axes.dtype());
  std::vector<int> masks{static_cast<int>(MaskKind::none)};
  if (entry.contains("mask")) {
    auto v = names(entry["mask"], where + ".mask", parse_mask, kMaskChoices);
    if (!v.ok()) return std::move(v).error();
    masks = std::move(*v);
  }
  axes.list.push_back({masks, [](ProblemShape& s, int x) { s.mask = static_cast<MaskKind>(x); }});
  FLASHJIT_TRY(axes.variants());
  FLASHJIT_TRY(axes.snippets());
  FLASHJIT_TRY(axes.int_field("batch", [](ProblemShape& s, int x) { s.batch = x; }));
  FLASHJIT_TRY(axes.int_field("heads_q", [](ProblemShape& s, int x) { s.heads_q = s.heads_kv = x; }));  // MHA unless given
  FLASHJIT_TRY(axes.int_field("heads_kv", [](ProblemShape& s, int x) { s.heads_kv = x; }));
  FLASHJIT_TRY(axes.int_field("head_dim", [](ProblemShape& s, int x) { s.head_dim = x; }));
  FLASHJIT_TRY(axes.int_field("seqlen", [](ProblemShape& s, int x) { s.seqlen_q = s.seqlen_k = x; }));
  FLASHJIT_TRY(axes.int_field("seqlen_q", [](ProblemShape& s, int x) { s.seqlen_q = x; }));
  FLASHJIT_TRY(axes.int_field("seqlen_k", [](ProblemShape& s, int x) { s.seqlen_k = x; }));
  // Mask constants only where a listed mask uses them.
  auto listed = [&](std::initializer_list<MaskKind> kinds) {
    return std::any_of(masks.begin(), masks.end(), [&](int m) {
      return std::find(kinds.begin(), kinds.end(), static_cast<MaskKind>(m)) != kinds.end();
    });
  };
  for (const char* field : {"window_left", "window_right"})
    if (entry.contains(field) && !listed({MaskKind::sliding_window}))
      return at(where + "." + field, "only applies to the sliding_window mask, which this problem does not list");
  if (entry.contains("chunk_size") && !listed({MaskKind::chunked, MaskKind::chunked_causal}))
    return at(where + ".chunk_size", "only applies to the chunked masks, which this problem does not list");
  FLASHJIT_TRY(axes.int_field("window_left", [](ProblemShape& s, int x) { s.window_left = x; }));
  FLASHJIT_TRY(axes.int_field("window_right", [](ProblemShape& s, int x) { s.window_right = x; }));
  FLASHJIT_TRY(axes.int_field("chunk_size", [](ProblemShape& s, int x) { s.chunk_size = x; }));
  FLASHJIT_TRY(axes.int_field("page_size", [](ProblemShape& s, int x) { s.page_size = x; }));  // 0: contiguous
  if (entry.contains("bias")) {  // the bias's entry type, or a list of them ("none": no bias)
    auto v = names(entry["bias"], where + ".bias", parse_bias_type, "none, fp32, bf16, fp16, bool");
    if (!v.ok()) return std::move(v).error();
    axes.list.push_back({std::move(*v), [](ProblemShape& s, int x) { s.bias = static_cast<BiasType>(x); }});
  }
  FLASHJIT_TRY(axes.int_field("block_size", [](ProblemShape& s, int x) { s.block_size = x; }));  // 0: no block mask
  // A relative-logits table and seqused_k over contiguous keys: flags (or lists of them), like the variants.
  for (auto [field, flag] : {std::pair{"rel_bias", &ProblemShape::rel_bias}, {"seqused_k", &ProblemShape::seqused_k}}) {
    if (!entry.contains(field)) continue;
    auto v = flags(entry[field], where + "." + field, false);
    if (!v.ok()) return std::move(v).error();
    axes.list.push_back({std::move(*v), [flag = flag](ProblemShape& s, int x) { s.*flag = x != 0; }});
  }
  return cross_product(axes.list, where);
}

Result<CandidateSpace> parse_candidates(const json& c) {
  if (!c.is_object()) return at("candidates", fmt::format("expected an object, got {}", c.dump()));
  FLASHJIT_TRY(only_keys(c, {"algorithm", "block_m", "block_n", "stages", "warps", "scheduler"}, "candidates"));
  CandidateSpace space;
  if (c.contains("algorithm")) {
    auto v = names(c["algorithm"], "candidates.algorithm", parse_algorithm, "naive, fa2, fa3");
    if (!v.ok()) return std::move(v).error();
    for (int a : *v) {
      if (static_cast<Algorithm>(a) == Algorithm::automatic)
        return at("candidates.algorithm", "'auto' is not a candidate algorithm (list naive, fa2 or fa3)");
      space.algorithms.push_back(static_cast<Algorithm>(a));
    }
  }
  if (c.contains("scheduler")) {
    auto v = names(c["scheduler"], "candidates.scheduler", parse_scheduler, "the known schedulers");
    if (!v.ok()) return std::move(v).error();
    for (int s : *v) space.schedulers.push_back(static_cast<Scheduler>(s));
  }
  for (auto [field, dst] : {std::pair{"block_m", &space.block_m}, {"block_n", &space.block_n},
                            {"stages", &space.stages}, {"warps", &space.warps}}) {
    if (!c.contains(field)) continue;
    auto v = ints(c[field], std::string("candidates.") + field);
    if (!v.ok()) return std::move(v).error();
    *dst = std::move(*v);
  }
  // The cross product's size, the lists left out at their largest defaults (candidates.cpp).
  auto size_or = [](std::size_t n, double fallback) { return n ? double(n) : fallback; };
  const double configs = size_or(space.algorithms.size(), 1) * size_or(space.block_m.size(), 2) *
                         size_or(space.block_n.size(), 13) * size_or(space.stages.size(), 2) *
                         size_or(space.warps.size(), 3) * size_or(space.schedulers.size(), 2);
  if (configs > double(kMaxCandidates))
    return at("candidates", fmt::format("the space holds up to {:.3g} configs per problem, more than {}: give "
                                        "fewer values",
                                        configs, kMaxCandidates));
  return space;
}

Result<Sweep> parse(const json& j, const std::string& stem) {
  if (!j.is_object()) return at("(top level)", "a sweep must be a JSON object with a \"problems\" list");
  FLASHJIT_TRY(only_keys(j, {"name", "description", "problems", "candidates"}, ""));
  Sweep sweep;
  sweep.name = stem;
  for (auto [field, dst] : {std::pair{"name", &sweep.name}, {"description", &sweep.description}}) {
    if (!j.contains(field)) continue;
    if (!j[field].is_string()) return at(field, fmt::format("expected a string, got {}", j[field].dump()));
    *dst = j[field].get<std::string>();
  }
  if (!j.contains("problems")) return at("problems", "missing (required)");
  const json& problems = j["problems"];
  if (!problems.is_array() || problems.empty()) return at("problems", "expected a non-empty list of problems");
  // Appends the shapes not seen yet (in order); the prefill, decode and append lists share the problem cap.
  auto append = [&](auto& list, const auto& expanded) -> Status {
    for (const auto& s : expanded)
      if (std::find(list.begin(), list.end(), s) == list.end()) {
        if (sweep.problems.size() + sweep.decode.size() + sweep.append.size() == kMaxProblems)
          return at("problems", fmt::format("more than {} problems", kMaxProblems));
        list.push_back(s);
      }
    return {};
  };
  for (std::size_t i = 0; i < problems.size(); ++i) {
    const std::string where = fmt::format("problems[{}]", i);
    if (!problems[i].is_object())
      return at(where, fmt::format("a problem must be an object, got {}", problems[i].dump()));
    auto kind = entry_kind(problems[i], where);
    if (!kind.ok()) return std::move(kind).error();
    if (*kind == EntryKind::decode) {
      auto expanded = expand_decode_problem(problems[i], where);
      if (!expanded.ok()) return std::move(expanded).error();
      FLASHJIT_TRY(append(sweep.decode, *expanded));
    } else if (*kind == EntryKind::append) {
      auto expanded = expand_append_problem(problems[i], where);
      if (!expanded.ok()) return std::move(expanded).error();
      FLASHJIT_TRY(append(sweep.append, *expanded));
    } else {
      auto expanded = expand_problem(problems[i], where);
      if (!expanded.ok()) return std::move(expanded).error();
      FLASHJIT_TRY(append(sweep.problems, *expanded));
    }
  }
  if (j.contains("candidates")) {
    auto c = parse_candidates(j["candidates"]);
    if (!c.ok()) return std::move(c).error();
    sweep.candidates = std::move(*c);
  }
  return sweep;
}

}  // namespace

Result<Sweep> parse_sweep(std::string_view text, const std::string& origin) {
  if (Status depth = check_json_depth(text); !depth)
    return Error(ErrorCode::invalid_argument, fmt::format("sweep {}: {}", origin, depth.error().message));
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number too large (1e9999)
    return Error(ErrorCode::invalid_argument, fmt::format("sweep {}: not valid JSON: {}", origin, e.what()));
  }
  auto sweep = parse(j, std::filesystem::path(origin).stem().string());
  if (!sweep.ok()) {
    Error e = std::move(sweep).error();
    e.message = fmt::format("sweep {}: {}", origin, e.message);
    return e;
  }
  return sweep;
}

Result<Sweep> load_sweep(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error(ErrorCode::io, fmt::format("cannot read sweep file {}", path.string()));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return Error(ErrorCode::io, fmt::format("error reading sweep file {}", path.string()));
  return parse_sweep(text.str(), path.string());
}

}  // namespace flashjit::tune
