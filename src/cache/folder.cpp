#include "cache/folder.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <system_error>
#include <tuple>

#include "cache/entry_format.hpp"
#include "cache/files.hpp"

namespace flashjit::cache {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr auto kStaleTempAge = std::chrono::hours(1);

}  // namespace

Result<Scan> scan(const fs::path& root) {
  Scan out;
  std::error_code ec;
  if (!fs::exists(root, ec)) return out;
  for (fs::directory_iterator shards(root, ec), end; !ec && shards != end; shards.increment(ec)) {
    std::error_code fec;
    if (shards->path().filename().string().size() != 2 || !shards->is_directory(fec)) continue;
    for (fs::directory_iterator it(shards->path(), fec); !fec && it != end; it.increment(fec)) {
      std::string name = it->path().filename().string();
      if (name.starts_with(kTempPrefix)) {
        out.temps.push_back(it->path());
      } else if (name.ends_with(kSuffix)) {
        std::string key = name.substr(0, name.size() - kSuffix.size());
        if (valid_key(key)) out.entries.emplace_back(std::move(key), it->path());
      }
    }
    if (fec && fec != std::errc::no_such_file_or_directory)
      return Error(ErrorCode::io, fmt::format("cannot list {}: {}", shards->path().string(), fec.message()));
  }
  if (ec) return Error(ErrorCode::io, fmt::format("cannot list {}: {}", root.string(), ec.message()));
  return out;
}

std::vector<EntryInfo> entry_infos(const Scan& found, bool with_names) {
  std::vector<EntryInfo> out;
  for (const auto& [key, path] : found.entries) {
    std::error_code e1, e2;
    EntryInfo info{key, {}, fs::file_size(path, e1), fs::last_write_time(path, e2), path};
    if (e1 || e2) continue;  // removed meanwhile
    auto header = with_names ? read_header(path, key) : Result<json>(Error());
    if (header && (*header)["meta"].is_object() && (*header)["meta"].value("name", json()).is_string())
      info.name = (*header)["meta"]["name"].get<std::string>();
    out.push_back(std::move(info));
  }
  return out;
}

Status remove_stale_temps(const std::vector<fs::path>& temps) {
  const auto cutoff = fs::file_time_type::clock::now() - kStaleTempAge;
  for (const auto& t : temps) {
    std::error_code ec;
    auto when = fs::last_write_time(t, ec);
    if (!ec && when < cutoff && ::unlink(t.c_str()) != 0 && errno != ENOENT)
      return io_error("cannot remove stale temporary file", t, errno);
  }
  return {};
}

Status evict_lru(const fs::path& root, std::uint64_t max_bytes, const std::string& keep, const log::Logger& logger) {
  auto found = scan(root);
  if (!found) return std::move(found).error();
  FLASHJIT_TRY(remove_stale_temps(found->temps));
  auto entries = entry_infos(*found, false);
  std::uint64_t total = 0;
  for (const auto& e : entries) total += e.bytes;
  std::sort(entries.begin(), entries.end(), [](const EntryInfo& a, const EntryInfo& b) {
    return std::tie(a.last_used, a.key) < std::tie(b.last_used, b.key);
  });
  for (const auto& e : entries) {
    if (total <= max_bytes) break;
    if (e.key == keep) continue;
    if (::unlink(e.path.c_str()) != 0 && errno != ENOENT) return io_error("cannot evict", e.path, errno);
    logger.debug("kernel cache: evicted {} ({}, {} bytes)", e.key, e.name, e.bytes);
    total -= e.bytes;
  }
  return {};
}

}  // namespace flashjit::cache
