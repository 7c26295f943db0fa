#include "cache/files.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <system_error>
#include <thread>
#include <utility>

#include "cache/entry_format.hpp"

namespace flashjit::cache {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Closes a file descriptor on scope exit.
struct Fd {
  int fd = -1;
  ~Fd() { if (fd >= 0) ::close(fd); }
};

std::string errno_text(int err) { return std::error_code(err, std::generic_category()).message(); }

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

Status write_all(int fd, std::string_view bytes, const fs::path& path) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return io_error("cannot write", path, errno);
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return {};
}

}  // namespace

Error io_error(const std::string& what, const fs::path& path, int err) {
  return Error(ErrorCode::io, fmt::format("{} {}: {}", what, path.string(), errno_text(err)));
}

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

std::string read_only_reason(const fs::path& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0 && !(st.st_mode & S_IWUSR))
    return fmt::format("mode {:04o} has no owner write permission", st.st_mode & 07777);
  if (::access(dir.c_str(), W_OK | X_OK) != 0) return errno_text(errno);
  return {};
}

Result<Entry> load_entry(const fs::path& path, const std::string& key, struct stat& st) {
  auto bytes = read_entry_file(path, st);
  if (!bytes) return std::move(bytes).error();
  return decode(*bytes, key);
}

Result<json> read_header(const fs::path& path, const std::string& key) {
  std::ifstream in(path, std::ios::binary);
  std::string magic, line;
  if (!std::getline(in, magic) || !std::getline(in, line)) return Error(ErrorCode::cache, "truncated header");
  return parse_header(magic, line, key);
}

void remove_if_same(const fs::path& path, const struct stat& st) {
  struct stat now {};
  if (::lstat(path.c_str(), &now) == 0 && now.st_ino == st.st_ino && now.st_dev == st.st_dev) ::unlink(path.c_str());
}

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

}  // namespace flashjit::cache
