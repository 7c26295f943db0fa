// The disk cache's file-system steps: private folders, read-only detection, reading an entry file safely,
// writing one atomically, removing one only when it is unchanged.
//
// Read-only detection: a folder is read-only when its owner-write bit is clear (chmod 500) or when
// access(W_OK) fails (non-root without permission; read-only mount, where access() fails even for root
// with EROFS). The mode bit is what makes "chmod 500" mean read-only for root too, who bypasses access().
#pragma once

#include <sys/stat.h>

#include <filesystem>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "cache/disk_cache.hpp"
#include "flashjit/error.hpp"

namespace flashjit::cache {

// ErrorCode::io: "WHAT PATH: the errno's text".
Error io_error(const std::string& what, const std::filesystem::path& path, int err);

// Creates `dir` (mode exactly 0700) unless it exists; parents get the default mode.
Status ensure_private_dir(const std::filesystem::path& dir, bool create_parents);
// Refuses a folder that someone else could write into: its cubins are code we would run.
Status check_private(const std::filesystem::path& dir);
// Empty string when writable, else why not.
std::string read_only_reason(const std::filesystem::path& dir);

// Reads and fully validates the entry file at `path`; `st` receives its identity (for remove_if_same).
// ErrorCode::not_found: no such file; io: could not read it (not the file's fault); cache: the file is not
// acceptable (not a regular file, not ours, writable by others, or not a valid entry).
Result<Entry> load_entry(const std::filesystem::path& path, const std::string& key, struct stat& st);
// Reads and validates only the first two lines of an entry (for list()); refuses what load_entry refuses.
Result<nlohmann::json> read_header(const std::filesystem::path& path, const std::string& key);
// Removes `path` (a file, or a folder with what it holds) unless it was replaced (by a concurrent store) since
// we read it as `st`; whether it is gone.
bool remove_if_same(const std::filesystem::path& path, const struct stat& st);
// Refuses a shard folder (<dir>/v1/<key[0:2]>) that is a symbolic link, not a folder, not the current user's or
// writable by group or others; a missing one is fine (nothing to read, store creates it 0700).
Status check_private_shard(const std::filesystem::path& shard);
// Writes `bytes` to a unique temporary file next to `path`, fsyncs it, renames it onto `path`, fsyncs the folder.
Status write_atomically(const std::filesystem::path& path, std::string_view bytes);

}  // namespace flashjit::cache
