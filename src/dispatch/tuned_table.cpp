#include "dispatch/tuned_table.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

#include "common/json_depth.hpp"
#include "common/log.hpp"
#include "compile/nvrtc.hpp"
#include "dispatch/heuristics.hpp"

namespace flashjit::dispatch {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

constexpr const char* kFormat = "flashjit-tuned-table";
constexpr int kFormatVersion = 1;

Error at(const std::string& where, const std::string& why) {
  return Error(ErrorCode::invalid_argument, fmt::format("{}: {}", where, why));
}

ordered_json config_json(const KernelConfig& c) { return ordered_json::parse(flashjit::to_json(c)); }

Result<KernelConfig> config_at(const json& j, const std::string& where) {
  if (!j.is_object()) return at(where, fmt::format("expected a config object, got a {}", j.type_name()));
  auto c = config_from_json(j.dump());
  if (!c.ok()) return at(where, c.error().message);
  return c;
}

Result<double> number_at(const json& j, const char* field, const std::string& where) {
  auto it = j.find(field);
  if (it == j.end()) return at(where + "." + field, "missing");
  if (!it->is_number()) return at(where + "." + field, fmt::format("expected a number, got a {}", it->type_name()));
  return it->get<double>();
}

Result<std::string> string_at(const json& j, const char* field, const std::string& where) {
  auto it = j.find(field);
  if (it == j.end() || !it->is_string()) return at(where + "." + field, "expected a string");
  return it->get<std::string>();
}

// An optional field: `fallback` when absent; an error when present and not a string.
Result<std::string> optional_string(const json& j, const char* field, const std::string& fallback,
                                    const std::string& where) {
  if (!j.contains(field)) return fallback;
  return string_at(j, field, where);
}

// An integer field (optional: `fallback` when absent) that must lie in [lo, hi]; never read modulo 2^32.
Result<std::int64_t> int_at(const json& j, const char* field, std::optional<std::int64_t> fallback,
                            std::int64_t lo, std::int64_t hi, const std::string& where) {
  auto it = j.find(field);
  const std::string name = where.empty() ? std::string(field) : where + "." + field;
  if (it == j.end()) {
    if (fallback) return *fallback;
    return at(name, "missing");
  }
  if (!it->is_number_integer()) return at(name, fmt::format("expected an integer, got a {}", it->type_name()));
  const bool in_range = it->is_number_unsigned() ? it->get<std::uint64_t>() <= static_cast<std::uint64_t>(hi)
                                                 : it->get<std::int64_t>() >= lo && it->get<std::int64_t>() <= hi;
  if (!in_range) return at(name, fmt::format("{} is outside [{}, {}]", it->dump(), lo, hi));
  return it->get<std::int64_t>();
}

ordered_json entry_json(const TunedEntry& e) {
  ordered_json j = {{"problem", to_json(e.problem)}, {"best", config_json(e.best)}, {"tflops", e.tflops},
                    {"median_ms", e.median_ms}};
  if (e.runner_up) j.update({{"runner_up", config_json(*e.runner_up)}, {"runner_up_tflops", e.runner_up_tflops}});
  if (e.heuristic) j.update({{"heuristic", config_json(*e.heuristic)}, {"heuristic_tflops", e.heuristic_tflops}});
  j["rel_l2"] = e.rel_l2 ? json(*e.rel_l2) : json(nullptr);
  const CandidateCounts& c = e.candidates;
  j["candidates"] = {{"enumerated", c.enumerated}, {"invalid", c.invalid}, {"spilling", c.spilling},
                     {"failed", c.failed},         {"timed", c.timed}};
  return j;
}

Result<TunedEntry> parse_entry(const json& j, const std::string& where) {
  if (!j.is_object()) return at(where, "expected an object");
  TunedEntry e;
  if (!j.contains("problem")) return at(where + ".problem", "missing");
  auto shape = shape_from_json(j["problem"]);
  if (!shape.ok()) return at(where + ".problem", shape.error().message);
  e.problem = *shape;
  if (!j.contains("best")) return at(where + ".best", "missing");
  auto best = config_at(j["best"], where + ".best");
  if (!best.ok()) return std::move(best).error();
  e.best = *best;
  for (auto [field, dst] : {std::pair{"tflops", &e.tflops}, {"median_ms", &e.median_ms}}) {
    auto v = number_at(j, field, where);
    if (!v.ok()) return std::move(v).error();
    *dst = *v;
  }
  for (auto [field, config, tflops] :
       {std::tuple{"runner_up", &e.runner_up, &e.runner_up_tflops}, {"heuristic", &e.heuristic, &e.heuristic_tflops}}) {
    if (!j.contains(field)) continue;
    auto c = config_at(j[field], where + "." + field);
    if (!c.ok()) return std::move(c).error();
    *config = *c;
    auto t = number_at(j, (std::string(field) + "_tflops").c_str(), where);
    if (!t.ok()) return std::move(t).error();
    *tflops = *t;
  }
  if (j.contains("rel_l2") && !j["rel_l2"].is_null()) {
    auto v = number_at(j, "rel_l2", where);
    if (!v.ok()) return std::move(v).error();
    e.rel_l2 = *v;
  }
  if (j.contains("candidates")) {
    const json& c = j["candidates"];
    if (!c.is_object()) return at(where + ".candidates", "expected an object");
    CandidateCounts& n = e.candidates;
    for (auto [field, dst] : {std::pair{"enumerated", &n.enumerated}, {"invalid", &n.invalid},
                              {"spilling", &n.spilling}, {"failed", &n.failed}, {"timed", &n.timed}}) {
      auto v = int_at(c, field, 0, 0, std::numeric_limits<int>::max(), where + ".candidates");
      if (!v.ok()) return std::move(v).error();
      *dst = static_cast<int>(*v);
    }
  }
  return e;
}

Result<TunedTable> parse(const json& j) {
  if (!j.is_object()) return at("(top level)", "a tuned table must be a JSON object");
  auto format = optional_string(j, "format", "", "");
  if (!format.ok() || *format != kFormat) return at("format", fmt::format("expected \"{}\"", kFormat));
  auto version = int_at(j, "version", std::nullopt, std::numeric_limits<std::int64_t>::min(),
                        std::numeric_limits<std::int64_t>::max(), "");
  if (!version.ok() || *version != kFormatVersion)
    return at("version", fmt::format("this flashjit reads version {} tables", kFormatVersion));
  TunedTable t;
  if (!j.contains("stamp") || !j["stamp"].is_object()) return at("stamp", "missing");
  const json& s = j["stamp"];
  for (auto [field, dst] : {std::pair{"gpu", &t.stamp.gpu}, {"nvrtc", &t.stamp.nvrtc}, {"flashjit", &t.stamp.flashjit}}) {
    auto v = string_at(s, field, "stamp");
    if (!v.ok()) return std::move(v).error();
    *dst = *v;
  }
  auto arch_text = string_at(s, "arch", "stamp");
  if (!arch_text.ok()) return std::move(arch_text).error();
  auto arch = Arch::parse(*arch_text);
  if (!arch) return at("stamp.arch", fmt::format("'{}' is not a CUDA target like sm_90a", *arch_text));
  t.stamp.arch = *arch;
  auto driver = int_at(s, "driver", 0, 0, std::numeric_limits<int>::max(), "stamp");
  if (!driver.ok()) return std::move(driver).error();
  t.stamp.driver = static_cast<int>(*driver);
  auto sweep = optional_string(j, "sweep", "", "");
  if (!sweep.ok()) return std::move(sweep).error();
  t.sweep = *sweep;
  if (!j.contains("entries") || !j["entries"].is_array()) return at("entries", "expected a list");
  for (std::size_t i = 0; i < j["entries"].size(); ++i) {
    auto e = parse_entry(j["entries"][i], fmt::format("entries[{}]", i));
    if (!e.ok()) return std::move(e).error();
    t.entries.push_back(std::move(*e));
  }
  return t;
}

// ln of a positive count.
double ln(double x) { return std::log(std::max(1.0, x)); }

}  // namespace

std::string to_json(const TunedTable& t) {
  ordered_json entries = ordered_json::array();
  for (const auto& e : t.entries) entries.push_back(entry_json(e));
  ordered_json j = {{"format", kFormat},
                    {"version", kFormatVersion},
                    {"stamp",
                     {{"gpu", t.stamp.gpu},
                      {"arch", t.stamp.arch.to_string()},
                      {"driver", t.stamp.driver},
                      {"nvrtc", t.stamp.nvrtc},
                      {"flashjit", t.stamp.flashjit}}},
                    {"sweep", t.sweep},
                    {"entries", std::move(entries)}};
  return j.dump(1) + "\n";
}

Result<TunedTable> parse_table(std::string_view text, const std::string& origin) {
  if (Status depth = check_json_depth(text); !depth)
    return Error(ErrorCode::invalid_argument, fmt::format("tuned table {}: {}", origin, depth.error().message));
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number too large (1e9999)
    return Error(ErrorCode::invalid_argument, fmt::format("tuned table {}: not valid JSON: {}", origin, e.what()));
  }
  Result<TunedTable> t = Error(ErrorCode::internal, "not parsed");
  try {  // every field is checked before it is read; this only keeps a missed one from escaping as an exception
    t = parse(j);
  } catch (const json::exception& e) {
    t = Error(ErrorCode::invalid_argument, e.what());
  }
  if (!t.ok()) {
    Error e = std::move(t).error();
    e.message = fmt::format("tuned table {}: {}", origin, e.message);
    return e;
  }
  return t;
}

Result<TunedTable> load_table(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error(ErrorCode::io, fmt::format("cannot read tuned table {}", path.string()));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return Error(ErrorCode::io, fmt::format("error reading tuned table {}", path.string()));
  return parse_table(text.str(), path.string());
}

Status save_table(const TunedTable& table, const std::filesystem::path& path) {
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  if (ec) return Error(ErrorCode::io, fmt::format("cannot create {}: {}", path.parent_path().string(), ec.message()));
  const std::filesystem::path tmp = path.string() + fmt::format(".tmp{}", ::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << to_json(table);
    out.flush();
    if (!out) {
      std::filesystem::remove(tmp, ec);
      return Error(ErrorCode::io, fmt::format("cannot write {}", tmp.string()));
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    return Error(ErrorCode::io, fmt::format("cannot rename {} to {}: {}", tmp.string(), path.string(), ec.message()));
  }
  return {};
}

Stamp system_stamp(const std::string& gpu, const Arch& arch, int driver) {
  return Stamp{gpu, arch, driver, compile::nvrtc_version(), FLASHJIT_VERSION};
}

std::string stamp_mismatch(const Stamp& table, const Stamp& system, bool compare_device) {
  std::vector<std::string> why;
  if (table.flashjit != system.flashjit) why.push_back(fmt::format("flashjit {}, running {}", table.flashjit, system.flashjit));
  if (table.nvrtc != system.nvrtc) why.push_back(fmt::format("NVRTC {}, running {}", table.nvrtc, system.nvrtc));
  if (compare_device && table.gpu != system.gpu) why.push_back(fmt::format("GPU '{}', running on '{}'", table.gpu, system.gpu));
  if (compare_device && !(table.arch == system.arch))
    why.push_back(fmt::format("arch {}, device is {}", table.arch.to_string(), system.arch.to_string()));
  return fmt::format("{}", fmt::join(why, "; "));
}

std::vector<std::filesystem::path> TunedTables::default_sources(const std::vector<std::filesystem::path>& tuned,
                                                                const std::filesystem::path& cache_dir) {
  std::vector<std::filesystem::path> out = tuned;
  std::error_code ec;
  if (std::filesystem::is_directory(cache_dir / "tuned", ec)) out.push_back(cache_dir / "tuned");
  return out;
}

TunedTables TunedTables::load(const std::vector<std::filesystem::path>& sources, log::Logger logger) {
  TunedTables tables(std::move(logger));
  for (const auto& source : sources) {
    std::error_code ec;
    std::vector<std::filesystem::path> files;
    if (std::filesystem::is_directory(source, ec)) {
      for (const auto& e : std::filesystem::directory_iterator(source, ec))
        if (e.path().extension() == ".json") files.push_back(e.path());
      std::sort(files.begin(), files.end());
    } else {
      files.push_back(source);
    }
    for (const auto& f : files) {
      auto t = load_table(f);
      if (!t.ok()) {
        tables.logger_.warn("ignoring tuned table: {}", t.error().message);
        continue;
      }
      tables.add(std::move(*t), f.string());
    }
  }
  return tables;
}

bool TunedTables::add(TunedTable table, const std::string& origin) {
  const Stamp system = system_stamp("", table.stamp.arch, 0);
  if (auto why = stamp_mismatch(table.stamp, system, false); !why.empty()) {
    logger_.debug("ignoring tuned table {}: measured with {}", origin, why);
    return false;
  }
  auto& entries = table.entries;
  entries.erase(std::remove_if(entries.begin(), entries.end(),
                               [&](const TunedEntry& e) {
                                 auto st = check(e.best);
                                 if (!st.ok())
                                   logger_.debug("ignoring an entry of tuned table {} ({}): {}", origin,
                                                 describe(e.problem), st.error().message);
                                 return !st.ok();
                               }),
                entries.end());
  index(table);
  tables_.push_back({std::move(table), origin});
  return true;
}

void TunedTables::index(const TunedTable& table) {
  for (const auto& e : table.entries) {
    const ProblemShape& p = e.problem;
    index_.push_back({p.dtype, p.head_dim, p.mask, p.heads_q / p.heads_kv, ln(p.seqlen_q), ln(p.seqlen_k),
                      ln(double(p.batch) * p.heads_q), e.best});
  }
}

TunedTables TunedTables::for_device(const std::string& gpu, const Arch& arch) const {
  TunedTables out(logger_);
  const Stamp system = system_stamp(gpu, arch, 0);
  for (const auto& t : tables_) {
    if (auto why = stamp_mismatch(t.table.stamp, system, true); !why.empty()) {
      logger_.debug("tuned table {} does not apply to device '{}' ({}): measured on {}", t.origin, gpu, arch.to_string(), why);
      continue;
    }
    out.index(t.table);
    out.tables_.push_back(t);
  }
  return out;
}

std::vector<std::string> TunedTables::gpus(const Arch& arch) const {
  std::vector<std::string> out;
  for (const auto& t : tables_)
    if (t.table.stamp.arch == arch && std::find(out.begin(), out.end(), t.table.stamp.gpu) == out.end())
      out.push_back(t.table.stamp.gpu);
  return out;
}

std::optional<KernelConfig> TunedTables::lookup(const AttentionProblem& p, const Arch& arch) const {
  if (index_.empty() || p.heads_kv < 1 || p.heads_q % p.heads_kv != 0) return std::nullopt;
  const int group = p.heads_q / p.heads_kv;
  const double q = ln(p.seqlen_q), k = ln(p.seqlen_k), width = ln(double(p.batch) * p.heads_q);
  const Indexed* best = nullptr;
  double best_distance = std::numeric_limits<double>::infinity();
  for (const auto& e : index_) {
    if (e.dtype != p.dtype || e.head_dim != p.head_dim || e.mask != p.mask || e.group != group) continue;
    const double d = std::abs(e.log_q - q) + std::abs(e.log_k - k) + std::abs(e.log_width - width);
    if (d < best_distance && supports(e.config, p, arch).ok()) best = &e, best_distance = d;
  }
  if (!best) return std::nullopt;
  return best->config;
}

}  // namespace flashjit::dispatch
