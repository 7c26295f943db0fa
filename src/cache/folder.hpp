// The disk cache folder's contents: the entry and temporary files under <dir>/v1/<shard>/, the size and last
// use of each entry, and what clear() and evict() remove. Temporary files older than an hour were left by
// crashed writers and are removed; younger ones may belong to a live writer.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "cache/disk_cache.hpp"
#include "common/log.hpp"
#include "flashjit/error.hpp"

namespace flashjit::cache {

struct Scan {
  std::vector<std::pair<std::string, std::filesystem::path>> entries;  // key, path
  std::vector<std::filesystem::path> temps;
};

// Lists entry and temporary files under <dir>/v1/<shard>/ (root: <dir>/v1). Files vanishing meanwhile are fine.
Result<Scan> scan(const std::filesystem::path& root);
// Size, last use and, with_names, name (read from the header only) of each entry found.
std::vector<EntryInfo> entry_infos(const Scan& found, bool with_names);
// Removes temporary files left by writers that crashed (older than an hour); live writers' are kept.
Status remove_stale_temps(const std::vector<std::filesystem::path>& temps);
// Removes least-recently-used entries (oldest mtime first) until the total is <= max_bytes, sparing `keep`.
Status evict_lru(const std::filesystem::path& root, std::uint64_t max_bytes, const std::string& keep,
                 const log::Logger& logger);

}  // namespace flashjit::cache
