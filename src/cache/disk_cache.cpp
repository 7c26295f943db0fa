// The DiskCache over its parts: the entry format (entry_format.hpp), the file-system steps (files.hpp) and the
// folder's contents and eviction (folder.hpp).
#include "cache/disk_cache.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>
#include <utility>

#include "cache/entry_format.hpp"
#include "cache/files.hpp"
#include "cache/folder.hpp"
#include "common/log.hpp"

namespace flashjit::cache {
namespace fs = std::filesystem;
using nlohmann::json;

Result<DiskCache> DiskCache::open(CacheOptions options) {
  if (options.dir.empty())
    return Error(ErrorCode::cache, "no cache directory: set FLASHJIT_CACHE_DIR (HOME is not set either)");
  DiskCache c;
  c.dir_ = std::move(options.dir);
  c.max_bytes_ = options.max_bytes;
  c.logger_ = std::move(options.logger);
  FLASHJIT_TRY(ensure_private_dir(c.dir_, true));
  FLASHJIT_TRY(check_private(c.dir_));
  const fs::path root = c.dir_ / kVersionDir;
  std::string why = read_only_reason(c.dir_);
  c.writable_ = why.empty();
  if (c.writable_) FLASHJIT_TRY(ensure_private_dir(root, false));
  std::error_code ec;
  if (fs::exists(root, ec)) FLASHJIT_TRY(check_private(root));
  if (!c.writable_)
    c.logger_.warn("kernel cache directory {} is read-only ({}): cached kernels are used, new ones are not stored",
                   c.dir_.string(), why);
  return c;
}

std::optional<Entry> DiskCache::load(const std::string& key) {
  if (!valid_key(key)) {
    logger_.debug("kernel cache: ignoring invalid key '{}'", key);
    return std::nullopt;
  }
  const fs::path path = entry_path(dir_ / kVersionDir, key);
  if (Status shard = check_private_shard(path.parent_path()); !shard) {
    logger_.warn("kernel cache entry {} is not read: {}", key, shard.error().message);
    return std::nullopt;
  }
  struct stat st {};
  auto entry = load_entry(path, key, st);
  if (!entry) {
    const Error& e = entry.error();
    if (e.code == ErrorCode::not_found) return std::nullopt;
    const bool removed = e.code == ErrorCode::cache && writable_ && remove_if_same(path, st);
    logger_.warn("kernel cache entry {} at {} is unusable: {}{}", key, path.string(), e.message,
                 removed ? "; removed it" : (writable_ && e.code == ErrorCode::cache ? "; could not remove it" : ""));
    return std::nullopt;
  }
  if (writable_) ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);  // last used = now; failure is harmless
  return std::move(entry).value();
}

Status DiskCache::store(const Entry& entry) {
  if (!valid_key(entry.key))
    return Error(ErrorCode::invalid_argument,
                 fmt::format("invalid kernel cache key '{}': expected 64 lowercase hex characters", entry.key));
  if (!writable_) return {};
  std::string bytes;
  try {
    bytes = encode(entry);
  } catch (const json::exception& e) {
    return Error(ErrorCode::invalid_argument, fmt::format("cannot serialize metadata of {}: {}", entry.key, e.what()));
  }
  Status s = write_atomically(entry_path(dir_ / kVersionDir, entry.key), bytes);
  if (!s) return std::move(s).error().with(fmt::format("while storing kernel {} in the cache", entry.key));
  if (max_bytes_ > 0) {
    if (Status ev = evict_lru(dir_ / kVersionDir, max_bytes_, entry.key, logger_); !ev)
      logger_.warn("kernel cache eviction failed: {}", ev.error().to_string());
  }
  return {};
}

Result<std::vector<EntryInfo>> DiskCache::list() const {
  auto found = scan(dir_ / kVersionDir);
  if (!found) return std::move(found).error();
  return entry_infos(*found, true);
}

std::uint64_t DiskCache::total_bytes() const {
  auto found = scan(dir_ / kVersionDir);
  std::uint64_t total = 0;
  if (found)
    for (const auto& e : entry_infos(*found, false)) total += e.bytes;
  return total;
}

VerifyReport DiskCache::verify() {
  VerifyReport report;
  auto found = scan(dir_ / kVersionDir);
  if (!found) {
    report.corrupt.push_back(fmt::format("{}: {}", dir_.string(), found.error().message));
    return report;
  }
  for (const auto& [key, path] : found->entries) {
    struct stat st {};
    auto entry = load_entry(path, key, st);
    if (entry) {
      ++report.ok;
    } else if (entry.error().code != ErrorCode::not_found) {
      const bool removed = writable_ && entry.error().code == ErrorCode::cache && remove_if_same(path, st);
      report.corrupt.push_back(fmt::format("{}: {}{}", key, entry.error().message, removed ? "" : " (left in place)"));
      report.removed += removed;
    }
  }
  return report;
}

Status DiskCache::clear() {
  if (!writable_) return Error(ErrorCode::cache, fmt::format("cannot clear {}: the cache is read-only", dir_.string()));
  auto found = scan(dir_ / kVersionDir);
  if (!found) return std::move(found).error();
  FLASHJIT_TRY(remove_stale_temps(found->temps));
  for (const auto& entry : found->entries)
    if (::unlink(entry.second.c_str()) != 0 && errno != ENOENT) return io_error("cannot remove", entry.second, errno);
  return {};
}

Status DiskCache::evict(std::uint64_t max_bytes) {
  if (!writable_)
    return Error(ErrorCode::cache, fmt::format("cannot evict from {}: the cache is read-only", dir_.string()));
  return evict_lru(dir_ / kVersionDir, max_bytes, {}, logger_);
}

}  // namespace flashjit::cache
