// Tests of the disk kernel cache. Each test works in its own fresh folder under /tmp, removed at the end.
// Several tests look at the files themselves (format "<dir>/v1/<key[0:2]>/<key>.fjk": magic line, JSON
// header line, cubin, source) to corrupt them on purpose.
#include "cache/disk_cache.hpp"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "common/hash.hpp"
#include "support/capture_stderr.hpp"
#include "support/catch.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;
using flashjit::ErrorCode;
using flashjit::cache::CacheOptions;
using flashjit::cache::DiskCache;
using flashjit::cache::Entry;

namespace {

using flashjit::test::capture_stderr;
using flashjit::test::TempDir;

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

bool contains(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

std::string key_of(int i) { return flashjit::sha256_hex("test key " + std::to_string(i)); }

// Every byte value, '\0' first, plus a per-entry tag so different entries differ.
Entry make_entry(int i, std::size_t cubin_size = 1024) {
  Entry e;
  e.key = key_of(i);
  e.cubin.push_back('\0');
  for (std::size_t j = 1; j < cubin_size; ++j) e.cubin.push_back(static_cast<char>((j * 7 + i) & 0xff));
  e.source = "// kernel " + std::to_string(i) + "\nextern \"C\" __global__ void k() {}\n\xce\xbb\n";
  e.meta = {{"name", "kernel-name-" + std::to_string(i % 10)}, {"ms", 12.5}, {"regs", {128, 0}}, {"sm", "sm_90a"}};
  return e;
}

DiskCache open_ok(const fs::path& dir, std::uint64_t max_bytes = 0) {
  auto c = DiskCache::open(CacheOptions{dir, max_bytes});
  INFO((c ? std::string() : c.error().to_string()));
  REQUIRE(c.ok());
  return std::move(c).value();
}

fs::path path_of(const fs::path& dir, const std::string& key) {
  return dir / "v1" / key.substr(0, 2) / (key + ".fjk");
}

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_all(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

// Offset of the first payload (cubin) byte: after the magic line and the header line.
std::size_t payload_offset(const std::string& bytes) { return bytes.find('\n', bytes.find('\n') + 1) + 1; }

std::vector<fs::path> files_under(const fs::path& dir, const std::string& prefix = "") {
  std::vector<fs::path> out;
  for (const auto& f : fs::recursive_directory_iterator(dir))
    if (f.is_regular_file() && f.path().filename().string().starts_with(prefix)) out.push_back(f.path());
  return out;
}

unsigned mode_of(const fs::path& p) {
  struct stat st {};
  REQUIRE(::stat(p.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

bool same_entry(const Entry& a, const Entry& b) {
  return a.key == b.key && a.cubin == b.cubin && a.source == b.source && a.meta == b.meta;
}

void set_age(const fs::path& p, std::chrono::seconds age) {
  fs::last_write_time(p, fs::file_time_type::clock::now() - age);
}

}  // namespace

TEST_CASE("disk cache: store then load round-trips cubin, source and meta", "[cache]") {
  TempDir tmp;
  DiskCache cache = open_ok(tmp.path);
  CHECK(cache.writable());

  Entry e = make_entry(1, 4096);
  REQUIRE(e.cubin.find('\0') != std::string::npos);
  REQUIRE(cache.store(e).ok());
  auto got = cache.load(e.key);
  REQUIRE(got.has_value());
  CHECK(got->key == e.key);
  CHECK(got->cubin == e.cubin);
  CHECK(got->source == e.source);
  CHECK(got->meta == e.meta);
  CHECK(got->meta["name"] == "kernel-name-1");

  SECTION("empty cubin and source, null meta") {
    Entry empty;
    empty.key = key_of(2);
    REQUIRE(cache.store(empty).ok());
    auto g = cache.load(empty.key);
    REQUIRE(g.has_value());
    CHECK(g->cubin.empty());
    CHECK(g->source.empty());
    CHECK(g->meta.is_null());
  }
  SECTION("storing a key again replaces the entry") {
    Entry e2 = make_entry(7);
    e2.key = e.key;
    REQUIRE(cache.store(e2).ok());
    auto g = cache.load(e.key);
    REQUIRE(g.has_value());
    CHECK(same_entry(*g, e2));
    CHECK(files_under(tmp.path).size() == 1);
  }
  SECTION("a second DiskCache on the same folder sees the entry") {
    DiskCache other = open_ok(tmp.path);
    auto g = other.load(e.key);
    REQUIRE(g.has_value());
    CHECK(same_entry(*g, e));
  }
  SECTION("meta with invalid UTF-8 is an error, not an exception") {
    Entry bad = make_entry(3);
    bad.meta["name"] = std::string("\xff\xfe");
    auto s = cache.store(bad);
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().code == ErrorCode::invalid_argument);
    CHECK_FALSE(cache.load(bad.key).has_value());
  }
}

TEST_CASE("disk cache: misses and invalid keys", "[cache]") {
  TempDir tmp;
  DiskCache cache = open_ok(tmp.path);
  CHECK_FALSE(cache.load(key_of(1)).has_value());

  std::string upper = key_of(1);
  std::transform(upper.begin(), upper.end(), upper.begin(), ::toupper);
  const std::vector<std::string> bad_keys = {"", "abc", key_of(1).substr(0, 63), key_of(1) + "0", upper,
                                             "../" + key_of(1).substr(3), std::string(62, 'a') + "/b"};
  for (const auto& key : bad_keys) {
    INFO("key: " << key);
    CHECK_FALSE(cache.load(key).has_value());
    Entry e = make_entry(1);
    e.key = key;
    auto s = cache.store(e);
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().code == ErrorCode::invalid_argument);
    CHECK(contains(s.error().message, "64 lowercase hex"));
  }
  CHECK(files_under(tmp.path).empty());
}

TEST_CASE("disk cache: corrupt entries are reported, removed and treated as misses", "[cache]") {
  TempDir tmp;
  DiskCache cache = open_ok(tmp.path);
  Entry e = make_entry(1);
  REQUIRE(cache.store(e).ok());
  const fs::path path = path_of(tmp.path, e.key);
  REQUIRE(fs::exists(path));
  std::string bytes = read_all(path);
  const std::size_t payload = payload_offset(bytes);
  REQUIRE(bytes.size() == payload + e.cubin.size() + e.source.size());

  std::string reason;
  SECTION("truncated payload") {
    fs::resize_file(path, bytes.size() - 5);
    reason = "size mismatch";
  }
  SECTION("truncated header") {
    fs::resize_file(path, 20);
    reason = "truncated";
  }
  SECTION("empty file") {
    fs::resize_file(path, 0);
    reason = "truncated";
  }
  SECTION("extra bytes at the end") {
    write_all(path, bytes + "x");
    reason = "size mismatch";
  }
  SECTION("flipped cubin byte") {
    bytes[payload + 5] ^= 0x01;
    write_all(path, bytes);
    reason = "cubin checksum";
  }
  SECTION("flipped source byte") {
    bytes[bytes.size() - 3] ^= 0x20;
    write_all(path, bytes);
    reason = "source checksum";
  }
  SECTION("flipped meta byte") {
    auto at = bytes.find("kernel-name-1");
    REQUIRE(at < payload);
    bytes[at] = 'K';
    write_all(path, bytes);
    reason = "meta checksum";
  }
  SECTION("bad magic") {
    bytes[0] = 'F';
    write_all(path, bytes);
    reason = "magic";
  }
  SECTION("header of another key") {
    Entry other = make_entry(2);
    REQUIRE(cache.store(other).ok());
    fs::copy_file(path_of(tmp.path, other.key), path, fs::copy_options::overwrite_existing);
    reason = "header is for key " + other.key;
  }

  std::optional<Entry> got;
  std::string log = capture_stderr([&] { got = cache.load(e.key); });
  CHECK_FALSE(got.has_value());
  CHECK_FALSE(fs::exists(path));
  CHECK(count(log, "warning") == 1);
  CHECK(contains(log, e.key));
  CHECK(contains(log, path.string()));
  CHECK(contains(log, reason));

  REQUIRE(cache.store(e).ok());
  auto again = cache.load(e.key);
  REQUIRE(again.has_value());
  CHECK(same_entry(*again, e));
}

TEST_CASE("disk cache: verify reports and removes corrupt entries", "[cache]") {
  TempDir tmp;
  DiskCache cache = open_ok(tmp.path);
  for (int i = 0; i < 4; ++i) REQUIRE(cache.store(make_entry(i)).ok());
  auto flip = [&](int i) {
    std::string b = read_all(path_of(tmp.path, key_of(i)));
    b[payload_offset(b) + 100] ^= 0x40;
    write_all(path_of(tmp.path, key_of(i)), b);
  };
  flip(1);
  fs::resize_file(path_of(tmp.path, key_of(3)), 300);

  auto report = cache.verify();
  CHECK(report.ok == 2);
  REQUIRE(report.corrupt.size() == 2);
  std::set<std::string> bad;
  for (const auto& line : report.corrupt) bad.insert(line.substr(0, 64));
  CHECK(bad == std::set<std::string>{key_of(1), key_of(3)});
  CHECK_FALSE(fs::exists(path_of(tmp.path, key_of(1))));
  CHECK_FALSE(fs::exists(path_of(tmp.path, key_of(3))));
  CHECK(fs::exists(path_of(tmp.path, key_of(0))));

  auto second = cache.verify();
  CHECK(second.ok == 2);
  CHECK(second.corrupt.empty());
}

TEST_CASE("disk cache: folder permissions", "[cache]") {
  TempDir tmp;

  SECTION("a missing folder is created with its parents, mode 0700") {
    const fs::path dir = tmp.path / "a" / "b" / "cache";
    DiskCache cache = open_ok(dir);
    CHECK(cache.dir() == dir);
    CHECK(mode_of(dir) == 0700);
    CHECK(mode_of(dir / "v1") == 0700);
    REQUIRE(cache.store(make_entry(1)).ok());
    CHECK(mode_of(path_of(dir, key_of(1)).parent_path()) == 0700);
    CHECK(mode_of(path_of(dir, key_of(1))) == 0600);
  }
  SECTION("a folder writable by group or others is refused") {
    for (unsigned mode : {0777u, 0770u, 0720u, 0702u}) {
      INFO("mode " << std::oct << mode);
      const fs::path dir = tmp.path / ("m" + std::to_string(mode));
      REQUIRE(::mkdir(dir.c_str(), 0700) == 0);
      REQUIRE(::chmod(dir.c_str(), mode) == 0);
      auto c = DiskCache::open(CacheOptions{dir, 0});
      REQUIRE_FALSE(c.ok());
      CHECK(c.error().code == ErrorCode::cache);
      CHECK(contains(c.error().message, dir.string()));
      CHECK(contains(c.error().message, "chmod 700"));
      CHECK(contains(c.error().message, "FLASHJIT_CACHE_DIR"));
      CHECK(mode_of(dir) == mode);  // not "fixed" behind the user's back
    }
  }
  SECTION("a shared v1 subfolder is refused too") {
    REQUIRE(::mkdir((tmp / "v1").c_str(), 0700) == 0);
    REQUIRE(::chmod((tmp / "v1").c_str(), 0777) == 0);
    auto c = DiskCache::open(CacheOptions{tmp.path, 0});
    REQUIRE_FALSE(c.ok());
    CHECK(c.error().code == ErrorCode::cache);
    CHECK(contains(c.error().message, (tmp / "v1").string()));
  }
  SECTION("mode 0755 is accepted") {
    REQUIRE(::chmod(tmp.path.c_str(), 0755) == 0);
    CHECK(open_ok(tmp.path).writable());
  }
  SECTION("a folder owned by another user is refused") {
    if (::geteuid() != 0) {
      WARN("not root: cannot chown a folder to another user; skipped");
      return;
    }
    const fs::path dir = tmp / "theirs";
    REQUIRE(::mkdir(dir.c_str(), 0700) == 0);
    REQUIRE(::chown(dir.c_str(), 65534, 65534) == 0);
    auto c = DiskCache::open(CacheOptions{dir, 0});
    REQUIRE_FALSE(c.ok());
    CHECK(c.error().code == ErrorCode::cache);
    CHECK(contains(c.error().message, dir.string()));
    CHECK(contains(c.error().message, "owned by uid 65534"));
  }
  SECTION("a regular file is not a cache folder") {
    write_all(tmp / "file", "x");
    auto c = DiskCache::open(CacheOptions{tmp / "file", 0});
    REQUIRE_FALSE(c.ok());
    CHECK(contains(c.error().message, (tmp / "file").string()));
  }
}

// chmod 500 means read-only even for root, who bypasses access(W_OK): open() also looks at the owner-write bit.
TEST_CASE("disk cache: a read-only folder is used read-only", "[cache]") {
  TempDir tmp;
  Entry before = make_entry(1);
  Entry corrupt = make_entry(2);
  {
    DiskCache cache = open_ok(tmp.path);
    REQUIRE(cache.store(before).ok());
    REQUIRE(cache.store(corrupt).ok());
  }
  const fs::path corrupt_path = path_of(tmp.path, corrupt.key);
  fs::resize_file(corrupt_path, 100);
  set_age(path_of(tmp.path, before.key), std::chrono::seconds(1000));
  const auto old_mtime = fs::last_write_time(path_of(tmp.path, before.key));
  REQUIRE(::chmod(tmp.path.c_str(), 0500) == 0);

  std::optional<DiskCache> cache;
  std::string log = capture_stderr([&] {
    auto c = DiskCache::open(CacheOptions{tmp.path, 1});
    REQUIRE(c.ok());
    cache.emplace(std::move(c).value());
  });
  CHECK_FALSE(cache->writable());
  CHECK(count(log, "warning") == 1);
  CHECK(contains(log, tmp.path.string()));
  CHECK(contains(log, "read-only"));

  const auto files = files_under(tmp.path);
  Entry fresh = make_entry(3);
  CHECK(cache->store(fresh).ok());
  CHECK_FALSE(cache->load(fresh.key).has_value());
  CHECK(files_under(tmp.path) == files);

  auto got = cache->load(before.key);
  REQUIRE(got.has_value());
  CHECK(same_entry(*got, before));
  CHECK(fs::last_write_time(path_of(tmp.path, before.key)) == old_mtime);  // nothing written

  std::string log2 = capture_stderr([&] { CHECK_FALSE(cache->load(corrupt.key).has_value()); });
  CHECK(contains(log2, corrupt.key));
  CHECK(fs::exists(corrupt_path));  // reported but left alone
  auto report = cache->verify();
  CHECK(report.ok == 1);
  CHECK(report.corrupt.size() == 1);
  CHECK(fs::exists(corrupt_path));

  auto cleared = cache->clear();
  REQUIRE_FALSE(cleared.ok());
  CHECK(cleared.error().code == ErrorCode::cache);
  CHECK_FALSE(cache->evict(0).ok());
  CHECK(files_under(tmp.path) == files);
}

TEST_CASE("disk cache: concurrent processes store and load the same keys", "[cache][concurrency]") {
  TempDir tmp;
  const int kProcs = 8, kKeys = 6, kRounds = 25;
  // Capped: eviction races with loads and stores of the other processes; uncapped: every load must hit.
  const bool capped = GENERATE(false, true);
  std::uint64_t entry_bytes = 0;
  {
    DiskCache probe = open_ok(tmp.path);
    REQUIRE(probe.store(make_entry(0)).ok());
    entry_bytes = probe.total_bytes();
    REQUIRE(probe.clear().ok());
  }
  const std::uint64_t cap = capped ? entry_bytes * 5 / 2 : 0;

  std::vector<pid_t> children;
  for (int p = 0; p < kProcs; ++p) {
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      int rc = 0;
      auto c = DiskCache::open(CacheOptions{tmp.path, cap});
      if (!c) ::_exit(10);
      for (int r = 0; r < kRounds && rc == 0; ++r) {
        for (int k = 0; k < kKeys && rc == 0; ++k) {
          int i = (k + p + r) % kKeys;
          Entry e = make_entry(i);
          if (!c->store(e).ok()) rc = 11;
          auto got = c->load(e.key);
          if (got && !same_entry(*got, e)) rc = 12;
          if (!got && !capped) rc = 13;
        }
      }
      ::_exit(rc);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }

  DiskCache cache = open_ok(tmp.path);
  auto report = cache.verify();
  CHECK(report.corrupt.empty());
  CHECK(report.ok == (capped ? static_cast<int>(cache.list()->size()) : kKeys));
  if (capped) CHECK(cache.total_bytes() <= cap);
  CHECK(files_under(tmp.path, ".tmp-").empty());
}

TEST_CASE("disk cache: concurrent threads share one cache", "[cache][concurrency]") {
  TempDir tmp;
  DiskCache cache = open_ok(tmp.path);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int r = 0; r < 20; ++r) {
        Entry e = make_entry((t + r) % 3);
        if (!cache.store(e).ok()) ++failures;
        auto got = cache.load(e.key);
        if (!got || !same_entry(*got, e)) ++failures;
      }
    });
  for (auto& t : threads) t.join();
  CHECK(failures == 0);
  CHECK(cache.verify().ok == 3);
  CHECK(files_under(tmp.path, ".tmp-").empty());
}

TEST_CASE("disk cache: eviction removes least recently used entries", "[cache]") {
  TempDir tmp;
  std::uint64_t one = 0;
  {
    DiskCache probe = open_ok(tmp.path);
    REQUIRE(probe.store(make_entry(0)).ok());
    one = probe.total_bytes();
    REQUIRE(one > make_entry(0).cubin.size());
    REQUIRE(probe.clear().ok());
  }
  auto keys = [&](DiskCache& c) {
    std::set<std::string> out;
    auto entries = c.list();
    REQUIRE(entries.ok());
    for (const auto& e : *entries) out.insert(e.key);
    return out;
  };

  SECTION("a recently loaded entry survives") {
    DiskCache cache = open_ok(tmp.path, one * 3 + one / 2);  // room for three entries
    for (int i = 0; i < 3; ++i) REQUIRE(cache.store(make_entry(i)).ok());
    CHECK(keys(cache).size() == 3);
    set_age(path_of(tmp.path, key_of(0)), std::chrono::seconds(300));
    set_age(path_of(tmp.path, key_of(1)), std::chrono::seconds(200));
    set_age(path_of(tmp.path, key_of(2)), std::chrono::seconds(100));
    REQUIRE(cache.load(key_of(0)).has_value());  // now the most recently used

    REQUIRE(cache.store(make_entry(3)).ok());
    CHECK(keys(cache) == std::set<std::string>{key_of(0), key_of(2), key_of(3)});
    REQUIRE(cache.store(make_entry(4)).ok());
    CHECK(keys(cache) == std::set<std::string>{key_of(0), key_of(3), key_of(4)});
    CHECK(cache.total_bytes() <= cache.max_bytes());
  }
  SECTION("an entry larger than the cap is kept alone") {
    DiskCache cache = open_ok(tmp.path, 10);
    REQUIRE(cache.store(make_entry(1)).ok());
    CHECK(keys(cache) == std::set<std::string>{key_of(1)});
    REQUIRE(cache.store(make_entry(2)).ok());
    CHECK(keys(cache) == std::set<std::string>{key_of(2)});
    CHECK(cache.load(key_of(2)).has_value());
  }
  SECTION("explicit evict") {
    DiskCache cache = open_ok(tmp.path);  // no cap: store never evicts
    for (int i = 0; i < 5; ++i) {
      REQUIRE(cache.store(make_entry(i)).ok());
      set_age(path_of(tmp.path, key_of(i)), std::chrono::seconds(100 - i));
    }
    REQUIRE(cache.evict(one * 10).ok());
    CHECK(keys(cache).size() == 5);
    REQUIRE(cache.evict(one * 2).ok());
    CHECK(keys(cache) == std::set<std::string>{key_of(3), key_of(4)});
    REQUIRE(cache.evict(0).ok());
    CHECK(keys(cache).empty());
  }
}

TEST_CASE("disk cache: list, total_bytes and clear", "[cache]") {
  TempDir tmp;
  DiskCache cache = open_ok(tmp.path);
  CHECK(cache.list()->empty());
  CHECK(cache.total_bytes() == 0);
  const auto start = fs::file_time_type::clock::now() - std::chrono::seconds(5);
  for (int i = 0; i < 3; ++i) REQUIRE(cache.store(make_entry(i, 100 + 50 * i)).ok());

  auto entries = cache.list();
  REQUIRE(entries.ok());
  REQUIRE(entries->size() == 3);
  std::sort(entries->begin(), entries->end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  std::uint64_t sum = 0;
  for (int i = 0; i < 3; ++i) {
    const auto& info = (*entries)[i];
    CHECK(info.key == key_of(i));
    CHECK(info.name == "kernel-name-" + std::to_string(i));
    CHECK(info.path == path_of(tmp.path, key_of(i)));
    CHECK(info.bytes == fs::file_size(info.path));
    CHECK(info.bytes > 100 + 50 * static_cast<std::uint64_t>(i));
    CHECK(info.last_used >= start);
    sum += info.bytes;
  }
  CHECK(cache.total_bytes() == sum);

  SECTION("list reads only headers: a corrupt cubin still lists") {
    std::string b = read_all(path_of(tmp.path, key_of(1)));
    b[payload_offset(b)] ^= 1;
    write_all(path_of(tmp.path, key_of(1)), b);
    CHECK(cache.list()->size() == 3);
  }
  SECTION("clear removes every entry and stale temporary files") {
    const fs::path shard = path_of(tmp.path, key_of(0)).parent_path();
    write_all(shard / ".tmp-1-2-stale0", "partial");
    set_age(shard / ".tmp-1-2-stale0", std::chrono::hours(2));
    write_all(shard / ".tmp-1-2-live00", "being written");
    CHECK(cache.list()->size() == 3);  // temporary files are not entries

    REQUIRE(cache.clear().ok());
    CHECK(cache.list()->empty());
    CHECK(cache.total_bytes() == 0);
    CHECK_FALSE(cache.load(key_of(0)).has_value());
    CHECK_FALSE(fs::exists(shard / ".tmp-1-2-stale0"));
    CHECK(fs::exists(shard / ".tmp-1-2-live00"));  // may belong to a live writer
    REQUIRE(cache.store(make_entry(0)).ok());
    CHECK(cache.load(key_of(0)).has_value());
  }
  SECTION("evict removes stale temporary files too") {
    const fs::path shard = path_of(tmp.path, key_of(2)).parent_path();
    write_all(shard / ".tmp-9-9-stale1", "partial");
    set_age(shard / ".tmp-9-9-stale1", std::chrono::hours(3));
    REQUIRE(cache.evict(sum).ok());
    CHECK_FALSE(fs::exists(shard / ".tmp-9-9-stale1"));
    CHECK(cache.list()->size() == 3);
  }
}

TEST_CASE("disk cache: messages go to the logger of its options", "[cache]") {
  using flashjit::LogLevel;
  TempDir tmp;
  const Entry e = make_entry(1);
  REQUIRE(open_ok(tmp.path).store(e).ok());
  fs::resize_file(path_of(tmp.path, e.key), 100);
  std::vector<std::pair<LogLevel, std::string>> seen;
  const flashjit::log::Logger logger(LogLevel::debug,
                                     [&](LogLevel l, std::string_view m) { seen.emplace_back(l, std::string(m)); });
  auto cache = DiskCache::open(CacheOptions{tmp.path, 0, logger});
  REQUIRE(cache.ok());
  const std::string err = capture_stderr([&] {
    CHECK_FALSE(cache->load(e.key).has_value());
    CHECK_FALSE(cache->load("not a key").has_value());
  });
  CHECK(err.empty());
  REQUIRE(seen.size() == 2);
  CHECK(seen[0].first == LogLevel::warn);
  CHECK(contains(seen[0].second, e.key));
  CHECK(seen[1].first == LogLevel::debug);
  CHECK(contains(seen[1].second, "invalid key"));
}
