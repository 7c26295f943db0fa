// The on-disk kernel cache: one file per entry holding metadata JSON, the cubin and the generated source,
// with a SHA-256 checksum. Writes are atomic (temporary file, fsync, rename), so many processes compiling
// the same kernel at once all succeed and leave one valid entry.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/log.hpp"
#include "flashjit/error.hpp"

namespace flashjit::cache {

struct Entry {
  std::string key;            // 64 hex characters
  std::string cubin;          // binary
  std::string source;         // generated CUDA source
  nlohmann::json meta;        // config, name, options, versions, ptxas stats, compile time, ...
};

struct EntryInfo {
  std::string key;
  std::string name;           // meta["name"] when present
  std::uint64_t bytes = 0;    // file size
  std::filesystem::file_time_type last_used;
  std::filesystem::path path;
};

struct VerifyReport {
  int ok = 0;
  std::vector<std::string> corrupt;  // "KEY: reason"; corrupt entries are removed when the dir is writable
  int removed = 0;                   // how many of them are gone (the others say "(left in place)")
};

// The folder and cap come from the caller (runtime::Settings: RuntimeOptions or the environment).
struct CacheOptions {
  std::filesystem::path dir;
  std::uint64_t max_bytes = 0;  // 0: no cap
  log::Logger logger;           // warnings (corrupt entries, a read-only folder) and evictions (debug)
};

class DiskCache {
 public:
  // Creates the folder (0700) if missing. Refuses (ErrorCode::cache) a folder writable by group or
  // others, or not owned by the current user: a cubin there is code we would run. A read-only folder is
  // accepted: writable() is false, store() does nothing, and one warning is logged.
  static Result<DiskCache> open(CacheOptions options);

  // nullopt on a miss. A truncated or corrupted entry is reported (warning), removed and treated as a miss.
  // A hit refreshes the entry's last-used time (for LRU eviction).
  std::optional<Entry> load(const std::string& key);
  // Atomic store; then evicts least-recently-used entries while the cache is over max_bytes.
  Status store(const Entry& entry);

  Result<std::vector<EntryInfo>> list() const;
  std::uint64_t total_bytes() const;
  VerifyReport verify();
  Status clear();
  Status evict(std::uint64_t max_bytes);

  const std::filesystem::path& dir() const { return dir_; }
  bool writable() const { return writable_; }
  std::uint64_t max_bytes() const { return max_bytes_; }

 private:
  std::filesystem::path dir_;
  std::uint64_t max_bytes_ = 0;
  bool writable_ = true;
  log::Logger logger_;
};

}  // namespace flashjit::cache
