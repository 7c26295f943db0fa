// Entry files and folders that are not what the cache writes (issue 29): symbolic links, files of other users or
// writable by others, FIFOs, folders at an entry's path, shard folders that are links or shared. Each is refused
// (never followed, never waited on), and what can be removed is removed so that later stores succeed.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fcntl.h>
#include <fstream>
#include <future>
#include <iterator>
#include <string>

#include "cache/disk_cache.hpp"
#include "cache/files.hpp"
#include "common/hash.hpp"
#include "support/capture_stderr.hpp"
#include "support/catch.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;
using flashjit::cache::CacheOptions;
using flashjit::cache::DiskCache;
using flashjit::cache::Entry;
using flashjit::test::capture_stderr;
using flashjit::test::TempDir;

namespace {

Entry entry_of(int i) {
  Entry e;
  e.key = flashjit::sha256_hex("files test " + std::to_string(i));
  e.cubin = std::string(512, static_cast<char>('a' + i));
  e.source = "// source " + std::to_string(i) + "\n";
  e.meta = {{"name", "files-test-" + std::to_string(i)}};
  return e;
}

DiskCache open_cache(const fs::path& dir) {
  auto c = DiskCache::open(CacheOptions{dir, 0});
  INFO((c ? std::string() : c.error().to_string()));
  REQUIRE(c.ok());
  return std::move(c).value();
}

fs::path path_of(const fs::path& dir, const std::string& key) { return dir / "v1" / key.substr(0, 2) / (key + ".fjk"); }

bool contains(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

// Runs `f` on a thread; fails (instead of hanging the suite) when it takes longer than `limit`, after `unblock`.
template <class F, class U>
auto within(std::chrono::seconds limit, F f, U unblock) {
  auto result = std::async(std::launch::async, f);
  if (result.wait_for(limit) != std::future_status::ready) {
    unblock();
    FAIL_CHECK("did not return within " << limit.count() << " s");
  }
  return result.get();
}

}  // namespace

TEST_CASE("disk cache files: a symbolic link at an entry's path is refused, not followed", "[cache]") {
  TempDir tmp, elsewhere;
  DiskCache cache = open_cache(tmp.path);
  Entry e = entry_of(1);
  REQUIRE(cache.store(e).ok());
  const fs::path path = path_of(tmp.path, e.key);
  // A valid entry file of ours (0600) elsewhere, linked in its place: only O_NOFOLLOW keeps it out.
  const fs::path target = elsewhere / "planted.fjk";
  fs::copy_file(path, target);
  fs::remove(path);
  fs::create_symlink(target, path);

  std::optional<Entry> got;
  const std::string log = capture_stderr([&] { got = cache.load(e.key); });
  CHECK_FALSE(got.has_value());
  CHECK(contains(log, "symbolic link"));
  CHECK(fs::exists(target));  // the link is removed, never what it points to
  CHECK_FALSE(fs::is_symlink(path));
  auto report = cache.verify();
  CHECK(report.ok == 0);
}

TEST_CASE("disk cache files: an entry writable by others or of another user is refused", "[cache]") {
  TempDir tmp;
  DiskCache cache = open_cache(tmp.path);
  Entry e = entry_of(2);
  REQUIRE(cache.store(e).ok());
  const fs::path path = path_of(tmp.path, e.key);
  SECTION("mode 0666") { REQUIRE(::chmod(path.c_str(), 0666) == 0); }
  SECTION("mode 0620") { REQUIRE(::chmod(path.c_str(), 0620) == 0); }
  SECTION("owned by another user") {
    if (::geteuid() != 0) {
      SUCCEED("not root: cannot chown an entry to another user; skipped");
      return;
    }
    REQUIRE(::chown(path.c_str(), 65534, 65534) == 0);
  }
  std::optional<Entry> got;
  const std::string log = capture_stderr([&] { got = cache.load(e.key); });
  CHECK_FALSE(got.has_value());
  CHECK(contains(log, "not owned by the current user, or writable by others"));
  // list() reads headers the same way: no name from such a file.
  REQUIRE(cache.store(e).ok());
  REQUIRE(cache.load(e.key).has_value());
}

TEST_CASE("disk cache files: a FIFO at an entry's path neither hangs load, list nor verify", "[cache]") {
  TempDir tmp;
  DiskCache cache = open_cache(tmp.path);
  Entry e = entry_of(3);
  REQUIRE(cache.store(e).ok());
  const fs::path path = path_of(tmp.path, e.key);
  fs::remove(path);
  REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
  // Should a reader block in open(), a writer opened here releases it.
  auto unblock = [&] {
    int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0) ::close(fd);
  };
  SECTION("list") {
    auto listed = within(std::chrono::seconds(5), [&] { return cache.list(); }, unblock);
    REQUIRE(listed.ok());
  }
  SECTION("load") {
    std::string log;
    auto got = within(std::chrono::seconds(5), [&] {
      std::optional<Entry> r;
      log = capture_stderr([&] { r = cache.load(e.key); });
      return r;
    }, unblock);
    CHECK_FALSE(got.has_value());
    CHECK(contains(log, "not a regular file"));
  }
  SECTION("verify") {
    auto report = within(std::chrono::seconds(5), [&] { return cache.verify(); }, unblock);
    CHECK(report.corrupt.size() == 1);
    CHECK(report.removed == 1);
  }
  REQUIRE(cache.store(e).ok());
  CHECK(cache.load(e.key).has_value());
}

TEST_CASE("disk cache files: a folder at an entry's path is removed, and the next store succeeds", "[cache]") {
  TempDir tmp;
  DiskCache cache = open_cache(tmp.path);
  Entry e = entry_of(4);
  REQUIRE(cache.store(e).ok());
  const fs::path path = path_of(tmp.path, e.key);
  fs::remove(path);
  fs::create_directories(path / "inside");
  SECTION("through load") {
    std::optional<Entry> got;
    const std::string log = capture_stderr([&] { got = cache.load(e.key); });
    CHECK_FALSE(got.has_value());
    CHECK(contains(log, "is a folder"));
    CHECK(contains(log, "removed it"));
  }
  SECTION("through verify") {
    auto report = cache.verify();
    REQUIRE(report.corrupt.size() == 1);
    CHECK(report.removed == 1);
    CHECK_FALSE(contains(report.corrupt[0], "left in place"));
  }
  CHECK_FALSE(fs::exists(path));
  REQUIRE(cache.store(e).ok());
  CHECK(cache.load(e.key).has_value());
}

TEST_CASE("disk cache files: a shard folder that is a link or shared is neither written to nor read from", "[cache]") {
  TempDir tmp, other;
  DiskCache cache = open_cache(tmp.path);
  Entry e = entry_of(5);
  const fs::path shard = path_of(tmp.path, e.key).parent_path();
  SECTION("a symbolic link to a folder writable by everyone") {
    REQUIRE(::chmod(other.path.c_str(), 0777) == 0);
    fs::create_directories(shard.parent_path());
    fs::create_symlink(other.path, shard);
  }
  SECTION("a shard folder writable by everyone") {
    fs::create_directories(shard);
    REQUIRE(::chmod(shard.c_str(), 0777) == 0);
  }
  auto stored = cache.store(e);
  REQUIRE_FALSE(stored.ok());
  CHECK(contains(stored.error().message, "refusing cache folder"));
  CHECK(fs::is_empty(other.path));
  // An entry planted there (a valid file, of ours) is not loaded either.
  const fs::path real = fs::is_symlink(shard) ? other.path : shard;
  {
    TempDir side;
    DiskCache good = open_cache(side.path);
    REQUIRE(good.store(e).ok());
    fs::copy_file(path_of(side.path, e.key), real / (e.key + ".fjk"));
  }
  std::optional<Entry> got;
  const std::string log = capture_stderr([&] { got = cache.load(e.key); });
  CHECK_FALSE(got.has_value());
  CHECK(contains(log, "refusing cache folder"));
}
