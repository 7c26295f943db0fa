// Layout: <dir>/v1/<key[0:2]>/<key>.fjk, one file per entry:
//   line 1  "flashjit-kernel-cache 1"
//   line 2  JSON header: key, meta, cubin_bytes, source_bytes, cubin_sha256, source_sha256, meta_sha256
//   then    the cubin bytes, then the source bytes (nothing after).
// meta_sha256 is taken over meta.dump(), which is canonical (sorted keys, shortest round-trip numbers).
// Temporary files are "<shard>/.tmp-<pid>-<thread>-<random>" and are renamed onto the entry name; clear() and
// evict() remove those older than an hour (left by crashed writers), younger ones may belong to a live writer.
//
// Read-only detection: a folder is read-only when its owner-write bit is clear (chmod 500) or when
// access(W_OK) fails (non-root without permission; read-only mount, where access() fails even for root
// with EROFS). The mode bit is what makes "chmod 500" mean read-only for root too, who bypasses access().
#include "cache/disk_cache.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <system_error>
#include <thread>
#include <tuple>
#include <utility>

#include "common/hash.hpp"
#include "common/log.hpp"

namespace flashjit::cache {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr std::string_view kMagic = "flashjit-kernel-cache 1";
constexpr const char* kVersionDir = "v1";
constexpr std::string_view kSuffix = ".fjk";
constexpr std::string_view kTempPrefix = ".tmp-";
constexpr auto kStaleTempAge = std::chrono::hours(1);

// Closes a file descriptor on scope exit.
struct Fd {
  int fd = -1;
  ~Fd() { if (fd >= 0) ::close(fd); }
};

std::string errno_text(int err) { return std::error_code(err, std::generic_category()).message(); }

Error io_error(const std::string& what, const fs::path& path, int err) {
  return Error(ErrorCode::io, fmt::format("{} {}: {}", what, path.string(), errno_text(err)));
}

bool valid_key(std::string_view key) {
  auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); };
  return key.size() == 64 && std::all_of(key.begin(), key.end(), hex);
}

// Creates `dir` (mode exactly 0700) unless it exists; parents get the default mode.
Status ensure_private_dir(const fs::path& dir, bool create_parents) {
  if (::mkdir(dir.c_str(), 0700) == 0) {
    ::chmod(dir.c_str(), 0700);  // in case the umask removed owner bits
    return {};
  }
  int err = errno;
  if (err == EEXIST) return {};
  if (err == ENOENT && create_parents && dir.has_parent_path()) {
    std::error_code ec;
    fs::create_directories(dir.parent_path(), ec);
    if (ec)
      return Error(ErrorCode::io, fmt::format("cannot create {}: {}", dir.parent_path().string(), ec.message()));
    return ensure_private_dir(dir, false);
  }
  return io_error("cannot create cache directory", dir, err);
}

// Refuses a folder that someone else could write into: its cubins are code we would run.
Status check_private(const fs::path& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return io_error("cannot stat cache directory", dir, errno);
  if (!S_ISDIR(st.st_mode))
    return Error(ErrorCode::cache, fmt::format("cache path {} is not a directory", dir.string()));
  if (st.st_uid != ::geteuid())
    return Error(ErrorCode::cache, fmt::format("refusing cache directory {}: owned by uid {}, not by the current user "
                                               "(uid {}); set FLASHJIT_CACHE_DIR to a directory you own",
                                               dir.string(), st.st_uid, ::geteuid()));
  if (st.st_mode & 022)
    return Error(ErrorCode::cache,
                 fmt::format("refusing cache directory {}: writable by group or others (mode {:04o}); fix it with "
                             "`chmod 700 {}` or set FLASHJIT_CACHE_DIR to a private directory",
                             dir.string(), st.st_mode & 07777, dir.string()));
  return {};
}

// Empty string when writable, else why not.
std::string read_only_reason(const fs::path& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0 && !(st.st_mode & S_IWUSR))
    return fmt::format("mode {:04o} has no owner write permission", st.st_mode & 07777);
  if (::access(dir.c_str(), W_OK | X_OK) != 0) return errno_text(errno);
  return {};
}

std::string encode(const Entry& e) {
  json h = {{"key", e.key},
            {"cubin_bytes", e.cubin.size()},
            {"source_bytes", e.source.size()},
            {"cubin_sha256", sha256_hex(e.cubin)},
            {"source_sha256", sha256_hex(e.source)},
            {"meta_sha256", sha256_hex(e.meta.dump())},
            {"meta", e.meta}};
  std::string out = fmt::format("{}\n{}\n", kMagic, h.dump());
  out.reserve(out.size() + e.cubin.size() + e.source.size());
  return out.append(e.cubin).append(e.source);
}

// Validates the magic line and the JSON header line of the entry stored under `key`; returns the header.
Result<json> parse_header(std::string_view magic, std::string_view line, const std::string& key) {
  auto bad = [](std::string why) { return Error(ErrorCode::cache, std::move(why)); };
  if (magic != kMagic) return bad("bad magic line (not a flashjit cache entry of this version)");
  json h = json::parse(line, nullptr, false);
  if (h.is_discarded() || !h.is_object()) return bad("header is not a JSON object");
  for (const char* f : {"key", "cubin_sha256", "source_sha256", "meta_sha256"})
    if (!h.contains(f) || !h[f].is_string()) return bad(fmt::format("header field '{}' missing", f));
  for (const char* f : {"cubin_bytes", "source_bytes"})
    if (!h.contains(f) || !h[f].is_number_unsigned()) return bad(fmt::format("header field '{}' missing", f));
  if (!h.contains("meta")) return bad("header field 'meta' missing");
  if (h["key"].get<std::string>() != key) return bad(fmt::format("header is for key {}", h["key"].get<std::string>()));
  if (sha256_hex(h["meta"].dump()) != h["meta_sha256"].get<std::string>()) return bad("meta checksum mismatch");
  return h;
}

// Fully validates a whole entry file.
Result<Entry> decode(std::string_view bytes, const std::string& key) {
  auto bad = [](std::string why) { return Error(ErrorCode::cache, std::move(why)); };
  auto nl1 = bytes.find('\n');
  auto nl2 = nl1 == std::string_view::npos ? nl1 : bytes.find('\n', nl1 + 1);
  if (nl2 == std::string_view::npos) return bad("truncated header");
  auto header = parse_header(bytes.substr(0, nl1), bytes.substr(nl1 + 1, nl2 - nl1 - 1), key);
  if (!header) return std::move(header).error();
  json& h = *header;
  const std::string_view payload = bytes.substr(nl2 + 1);
  const auto cubin_bytes = h["cubin_bytes"].get<std::uint64_t>(), source_bytes = h["source_bytes"].get<std::uint64_t>();
  if (cubin_bytes > payload.size() || source_bytes != payload.size() - cubin_bytes)
    return bad(fmt::format("size mismatch: header says {} + {} bytes, file has {}", cubin_bytes, source_bytes,
                           payload.size()));
  Entry e{key, std::string(payload.substr(0, cubin_bytes)), std::string(payload.substr(cubin_bytes)),
          std::move(h["meta"])};
  if (sha256_hex(e.cubin) != h["cubin_sha256"].get<std::string>()) return bad("cubin checksum mismatch");
  if (sha256_hex(e.source) != h["source_sha256"].get<std::string>()) return bad("source checksum mismatch");
  return e;
}

// Reads a whole entry file. ErrorCode::not_found: no such file; io: could not read it (not the file's fault);
// cache: the file is not acceptable (not a regular file, not ours, writable by others).
Result<std::string> read_entry_file(const fs::path& path, struct stat& st) {
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW)};
  if (f.fd < 0) {
    int err = errno;
    if (err == ENOENT) return Error(ErrorCode::not_found, "no such entry");
    if (err == ELOOP && ::lstat(path.c_str(), &st) == 0) return Error(ErrorCode::cache, "is a symbolic link");
    return io_error("cannot open", path, err);
  }
  if (::fstat(f.fd, &st) != 0) return io_error("cannot stat", path, errno);
  if (!S_ISREG(st.st_mode)) return Error(ErrorCode::cache, "not a regular file");
  if (st.st_uid != ::geteuid() || (st.st_mode & 022))
    return Error(ErrorCode::cache, "not owned by the current user, or writable by others");
  std::string bytes(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t got = 0;
  while (got < bytes.size()) {
    ssize_t n = ::read(f.fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return io_error("cannot read", path, errno);
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  bytes.resize(got);
  return bytes;
}

fs::path entry_path(const fs::path& root, const std::string& key) {
  return root / key.substr(0, 2) / (key + std::string(kSuffix));
}

// Reads and fully validates the entry file at `path`; `st` receives its identity (for remove_if_same).
Result<Entry> load_entry(const fs::path& path, const std::string& key, struct stat& st) {
  auto bytes = read_entry_file(path, st);
  if (!bytes) return std::move(bytes).error();
  return decode(*bytes, key);
}

// Reads and validates only the first two lines of an entry (for list()).
Result<json> read_header(const fs::path& path, const std::string& key) {
  std::ifstream in(path, std::ios::binary);
  std::string magic, line;
  if (!std::getline(in, magic) || !std::getline(in, line)) return Error(ErrorCode::cache, "truncated header");
  return parse_header(magic, line, key);
}

// Removes `path` unless it was replaced (by a concurrent store) since we read it as `st`.
void remove_if_same(const fs::path& path, const struct stat& st) {
  struct stat now {};
  if (::lstat(path.c_str(), &now) == 0 && now.st_ino == st.st_ino && now.st_dev == st.st_dev) ::unlink(path.c_str());
}

Status write_all(int fd, std::string_view bytes, const fs::path& path) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return io_error("cannot write", path, errno);
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return {};
}

// Writes `bytes` to a unique temporary file next to `path`, fsyncs it, renames it onto `path`, fsyncs the folder.
Status write_atomically(const fs::path& path, std::string_view bytes) {
  const fs::path shard = path.parent_path();
  FLASHJIT_TRY(ensure_private_dir(shard, false));
  auto tid = std::hash<std::thread::id>{}(std::this_thread::get_id());
  std::string tmp = (shard / fmt::format("{}{}-{:x}-XXXXXX", kTempPrefix, ::getpid(), tid)).string();
  Fd f{::mkostemp(tmp.data(), O_CLOEXEC)};  // mode 0600, O_EXCL, random suffix
  if (f.fd < 0) return io_error("cannot create temporary file in", shard, errno);
  Status s = write_all(f.fd, bytes, tmp);
  if (s && ::fsync(f.fd) != 0) s = io_error("cannot fsync", tmp, errno);
  if (s && ::close(std::exchange(f.fd, -1)) != 0) s = io_error("cannot close", tmp, errno);
  if (s && ::rename(tmp.c_str(), path.c_str()) != 0) s = io_error("cannot rename onto", path, errno);
  if (!s) {
    ::unlink(tmp.c_str());
    return s;
  }
  Fd d{::open(shard.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (d.fd >= 0 && ::fsync(d.fd) != 0 && errno == EIO) return io_error("cannot fsync", shard, EIO);
  return {};
}

struct Scan {
  std::vector<std::pair<std::string, fs::path>> entries;  // key, path
  std::vector<fs::path> temps;
};

// Lists entry and temporary files under <dir>/v1/<shard>/. Files vanishing meanwhile are fine.
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

// Size, last use and, with_names, name (read from the header only) of each entry found.
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

// Removes temporary files left by writers that crashed (older than kStaleTempAge); live writers' are kept.
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

// Removes least-recently-used entries (oldest mtime first) until the total is <= max_bytes, sparing `keep`.
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

}  // namespace

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
  struct stat st {};
  auto entry = load_entry(path, key, st);
  if (!entry) {
    const Error& e = entry.error();
    if (e.code == ErrorCode::not_found) return std::nullopt;
    bool remove = e.code == ErrorCode::cache && writable_;
    logger_.warn("kernel cache entry {} at {} is unusable: {}{}", key, path.string(), e.message,
                 remove ? "; removed it" : "");
    if (remove) remove_if_same(path, st);
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
      report.corrupt.push_back(fmt::format("{}: {}", key, entry.error().message));
      if (writable_ && entry.error().code == ErrorCode::cache) remove_if_same(path, st);
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
