#include "tune/resume.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace flashjit::tune {

using dispatch::ProblemShape;
using dispatch::Stamp;
using dispatch::TunedEntry;
using dispatch::TunedTable;

std::filesystem::path partial_path(const std::filesystem::path& output) { return output.string() + ".partial"; }

Result<TunedTable> resume_table(const std::filesystem::path& output, const Stamp& system) {
  std::error_code ec;
  std::filesystem::path from;
  for (const auto& candidate : {partial_path(output), output})
    if (std::filesystem::exists(candidate, ec)) {
      from = candidate;
      break;
    }
  if (from.empty()) return TunedTable{system, "", {}};
  auto table = dispatch::load_table(from);
  if (!table.ok()) return std::move(table).error().with("while resuming from earlier results");
  if (auto why = dispatch::stamp_mismatch(table->stamp, system, true); !why.empty())
    return Error(ErrorCode::invalid_argument,
                 fmt::format("{} holds results measured elsewhere ({}); remove it or write to another file", from.string(),
                             why));
  table->stamp = system;
  return table;
}

std::vector<std::size_t> pending_problems(const std::vector<ProblemShape>& problems, const TunedTable& done) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < problems.size(); ++i) {
    const ProblemShape p = normalized(problems[i]);
    if (std::none_of(done.entries.begin(), done.entries.end(), [&](const TunedEntry& e) { return e.problem == p; }))
      out.push_back(i);
  }
  return out;
}

}  // namespace flashjit::tune
