// The disk cache's entries on disk. Layout: <dir>/v1/<key[0:2]>/<key>.fjk, one file per entry:
//   line 1  "flashjit-kernel-cache 1"
//   line 2  JSON header: key, meta, cubin_bytes, source_bytes, cubin_sha256, source_sha256, meta_sha256
//   then    the cubin bytes, then the source bytes (nothing after).
// meta_sha256 is taken over meta.dump(), which is canonical (sorted keys, shortest round-trip numbers).
// Temporary files are "<shard>/.tmp-<pid>-<thread>-<random>" and are renamed onto the entry name.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "cache/disk_cache.hpp"
#include "flashjit/error.hpp"

namespace flashjit::cache {

inline constexpr std::string_view kMagic = "flashjit-kernel-cache 1";
inline constexpr const char* kVersionDir = "v1";
inline constexpr std::string_view kSuffix = ".fjk";
inline constexpr std::string_view kTempPrefix = ".tmp-";

// 64 lowercase hex characters.
bool valid_key(std::string_view key);
// <root>/<key[0:2]>/<key>.fjk (root: <dir>/v1).
std::filesystem::path entry_path(const std::filesystem::path& root, const std::string& key);

// The whole entry file; throws nlohmann::json::exception when the meta cannot be serialized.
std::string encode(const Entry& e);
// Validates the magic line and the JSON header line of the entry stored under `key`; returns the header.
// Errors are ErrorCode::cache, saying what is wrong.
Result<nlohmann::json> parse_header(std::string_view magic, std::string_view line, const std::string& key);
// Fully validates a whole entry file (header, sizes, checksums).
Result<Entry> decode(std::string_view bytes, const std::string& key);

}  // namespace flashjit::cache
