#include "cache/files.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
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
  Fd() = default;
  explicit Fd(int f) : fd(f) {}
  Fd(Fd&& o) noexcept : fd(std::exchange(o.fd, -1)) {}
  Fd& operator=(Fd&&) = delete;
  ~Fd() { if (fd >= 0) ::close(fd); }
};

std::string errno_text(int err) { return std::error_code(err, std::generic_category()).message(); }

// Opens an entry file for reading, refusing what is not a plain private file of ours: a symbolic link
// (O_NOFOLLOW), a FIFO or device (O_NONBLOCK: opening a FIFO would wait for a writer; fstat then refuses it),
// a folder, a file of another user or one that others may write. ErrorCode::not_found: no such file; io:
// could not open it (not the file's fault); cache: the file is not acceptable.
Result<Fd> open_entry_file(const fs::path& path, struct stat& st) {
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)};
  if (f.fd < 0) {
    int err = errno;
    if (err == ENOENT) return Error(ErrorCode::not_found, "no such entry");
    if (err == ELOOP && ::lstat(path.c_str(), &st) == 0) return Error(ErrorCode::cache, "is a symbolic link");
    return io_error("cannot open", path, err);
  }
  if (::fstat(f.fd, &st) != 0) return io_error("cannot stat", path, errno);
  if (S_ISDIR(st.st_mode)) return Error(ErrorCode::cache, "is a folder, not a file");
  if (!S_ISREG(st.st_mode)) return Error(ErrorCode::cache, "not a regular file");
  if (st.st_uid != ::geteuid() || (st.st_mode & 022))
    return Error(ErrorCode::cache, "not owned by the current user, or writable by others");
  return Fd{std::exchange(f.fd, -1)};
}

// Reads from `fd` until end of file, at most `limit` bytes, or until `done(bytes so far)`.
Result<std::string> read_from(int fd, const fs::path& path, std::size_t limit,
                              const std::function<bool(const std::string&)>& done) {
  std::string bytes;
  char buf[65536];
  while (bytes.size() < limit) {
    ssize_t n = ::read(fd, buf, std::min(sizeof buf, limit - bytes.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return io_error("cannot read", path, errno);
    if (n == 0) break;
    bytes.append(buf, static_cast<std::size_t>(n));
    if (done && done(bytes)) break;
  }
  return bytes;
}

// Reads a whole entry file (see open_entry_file for the errors).
Result<std::string> read_entry_file(const fs::path& path, struct stat& st) {
  auto f = open_entry_file(path, st);
  if (!f) return std::move(f).error();
  return read_from(f->fd, path, static_cast<std::size_t>(st.st_size), {});
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
  struct stat st {};
  auto f = open_entry_file(path, st);
  if (!f) return std::move(f).error();
  auto two_lines = [](const std::string& b) {
    const auto first = b.find('\n');
    return first != std::string::npos && b.find('\n', first + 1) != std::string::npos;
  };
  auto bytes = read_from(f->fd, path, static_cast<std::size_t>(st.st_size), two_lines);
  if (!bytes) return std::move(bytes).error();
  const auto first = bytes->find('\n');
  const auto second = first == std::string::npos ? first : bytes->find('\n', first + 1);
  if (second == std::string::npos) return Error(ErrorCode::cache, "truncated header");
  return parse_header(bytes->substr(0, first), bytes->substr(first + 1, second - first - 1), key);
}

bool remove_if_same(const fs::path& path, const struct stat& st) {
  struct stat now {};
  if (::lstat(path.c_str(), &now) != 0 || now.st_ino != st.st_ino || now.st_dev != st.st_dev) return false;
  if (S_ISDIR(now.st_mode)) {  // a folder where an entry belongs: in our private folder, so ours to remove
    std::error_code ec;
    fs::remove_all(path, ec);
    return !ec;
  }
  return ::unlink(path.c_str()) == 0;
}

Status check_private_shard(const fs::path& shard) {
  struct stat st {};
  if (::lstat(shard.c_str(), &st) != 0) {
    if (errno == ENOENT) return {};
    return io_error("cannot stat cache folder", shard, errno);
  }
  if (S_ISLNK(st.st_mode))
    return Error(ErrorCode::cache, fmt::format("refusing cache folder {}: a symbolic link", shard.string()));
  if (!S_ISDIR(st.st_mode))
    return Error(ErrorCode::cache, fmt::format("refusing cache folder {}: not a folder", shard.string()));
  if (st.st_uid != ::geteuid() || (st.st_mode & 022))
    return Error(ErrorCode::cache,
                 fmt::format("refusing cache folder {}: owned by uid {} with mode {:04o} (it must be the current "
                             "user's and not writable by group or others)",
                             shard.string(), st.st_uid, st.st_mode & 07777));
  return {};
}

Status write_atomically(const fs::path& path, std::string_view bytes) {
  const fs::path shard = path.parent_path();
  FLASHJIT_TRY(ensure_private_dir(shard, false));
  FLASHJIT_TRY(check_private_shard(shard));
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
