// Tests of the settings: what the environment gives, what the options override, the cache folder's fallbacks,
// that each Runtime logs to its own sink at its own level, and that nothing else in src/ or tools/ reads the
// environment.
#include "runtime/settings.hpp"

#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flashjit/config.hpp"
#include "flashjit/runtime.hpp"
#include "support/capture_stderr.hpp"
#include "support/catch.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;
using flashjit::LogLevel;
using flashjit::Runtime;
using flashjit::RuntimeOptions;
using flashjit::runtime::Environment;
using flashjit::runtime::resolve;
using flashjit::runtime::Settings;
using flashjit::test::capture_stderr;
using flashjit::test::TempDir;

namespace {

// Saves an environment variable and restores it at scope exit.
struct EnvGuard {
  std::string name;
  std::optional<std::string> old;
  explicit EnvGuard(std::string n) : name(std::move(n)) {
    if (const char* v = ::getenv(name.c_str())) old = v;
  }
  ~EnvGuard() {
    if (old) ::setenv(name.c_str(), old->c_str(), 1);
    else ::unsetenv(name.c_str());
  }
};

// A log callback that keeps what it receives (from any thread).
struct Recorder {
  std::mutex mutex;
  std::vector<std::pair<LogLevel, std::string>> lines;

  flashjit::LogCallback callback() {
    return [this](LogLevel level, std::string_view message) {
      std::lock_guard lock(mutex);
      lines.emplace_back(level, std::string(message));
    };
  }
  bool has(std::string_view part) {
    std::lock_guard lock(mutex);
    for (const auto& [level, text] : lines)
      if (text.find(part) != std::string::npos) return true;
    return false;
  }
};

Environment everything_set() {
  Environment e;
  e.cache_dir = "/env/cache";
  e.cache_max_mb = "5";
  e.jit = "0";
  e.tuned = "/env/a.json:/env/b";
  e.pdl = "0";
  e.check_pages = "1";
  e.log = "debug";
  return e;
}

}  // namespace

TEST_CASE("settings: the defaults, and what the environment sets", "[runtime][settings]") {
  Environment none;
  none.home = "/home/someone";
  const Settings d = resolve({}, none);
  CHECK(d.cache_dir == fs::path("/home/someone/.cache/flashjit"));
  CHECK(d.cache_max_bytes == 0);
  CHECK(d.jit);
  CHECK(d.tuned_tables.empty());
  CHECK(d.pdl);
  CHECK_FALSE(d.check_pages);
  CHECK(d.logger.level() == LogLevel::warn);

  const Settings e = resolve({}, everything_set());
  CHECK(e.cache_dir == fs::path("/env/cache"));
  CHECK(e.cache_max_bytes == 5ull << 20);
  CHECK_FALSE(e.jit);
  CHECK(e.tuned_tables == std::vector<fs::path>{"/env/a.json", "/env/b"});
  CHECK_FALSE(e.pdl);
  CHECK(e.check_pages);
  CHECK(e.logger.level() == LogLevel::debug);

  // Only "0" turns JIT and PDL off, only "1" turns the page checks on.
  Environment other = none;
  other.jit = other.pdl = "no";
  other.check_pages = "yes";
  const Settings o = resolve({}, other);
  CHECK(o.jit);
  CHECK(o.pdl);
  CHECK_FALSE(o.check_pages);

  // FLASHJIT_LOG: debug, info, warn, error; any other value is warn.
  for (auto [text, level] : {std::pair{"debug", LogLevel::debug}, std::pair{"info", LogLevel::info},
                             std::pair{"warn", LogLevel::warn}, std::pair{"error", LogLevel::error},
                             std::pair{"warning", LogLevel::warn}, std::pair{"DEBUG", LogLevel::warn}}) {
    INFO("FLASHJIT_LOG=" << text);
    Environment env = none;
    env.log = text;
    CHECK(resolve({}, env).logger.level() == level);
  }
}

TEST_CASE("settings: every option overrides the environment", "[runtime][settings]") {
  Recorder recorder;
  RuntimeOptions options;
  options.cache_dir = "/option/cache";
  options.cache_max_mb = 0;  // no cap, whatever FLASHJIT_CACHE_MAX_MB says
  options.jit = true;
  options.tuned_tables = std::vector<fs::path>{};
  options.pdl = true;
  options.check_pages = false;
  options.log_level = LogLevel::error;
  options.log_callback = recorder.callback();
  Environment env = everything_set();
  env.cache_max_mb = "not a number";  // not read: the option is set, so nothing is said about it
  const Settings s = resolve(options, env);
  CHECK(s.cache_dir == fs::path("/option/cache"));
  CHECK(s.cache_max_bytes == 0);
  CHECK(s.jit);
  CHECK(s.tuned_tables.empty());
  CHECK(s.pdl);
  CHECK_FALSE(s.check_pages);
  CHECK(s.logger.level() == LogLevel::error);
  s.logger.write(LogLevel::error, "to the callback");
  CHECK(recorder.lines == std::vector<std::pair<LogLevel, std::string>>{{LogLevel::error, "to the callback"}});

  options = {};
  options.cache_max_mb = 7;
  options.jit = false;
  options.tuned_tables = std::vector<fs::path>{"/option/t.json"};
  options.pdl = false;
  options.check_pages = true;
  const Settings t = resolve(options, Environment{});
  CHECK(t.cache_max_bytes == 7ull << 20);
  CHECK_FALSE(t.jit);
  CHECK(t.tuned_tables == std::vector<fs::path>{"/option/t.json"});
  CHECK_FALSE(t.pdl);
  CHECK(t.check_pages);
  CHECK(flashjit::runtime::cache_options(t).max_bytes == 7ull << 20);
}

TEST_CASE("settings: default cache folder and size cap from the environment", "[runtime][settings]") {
  using flashjit::runtime::default_cache_dir;
  Environment env;
  env.home = "/home/someone";
  env.xdg_cache_home = "/xdg";
  env.cache_dir = "/explicit/dir";
  CHECK(default_cache_dir(env) == fs::path("/explicit/dir"));
  env.cache_dir.clear();
  CHECK(default_cache_dir(env) == fs::path("/xdg/flashjit"));
  env.xdg_cache_home = "relative";  // the XDG spec says to ignore relative paths
  CHECK(default_cache_dir(env) == fs::path("/home/someone/.cache/flashjit"));
  env.xdg_cache_home.clear();
  CHECK(default_cache_dir(env) == fs::path("/home/someone/.cache/flashjit"));

  CHECK(resolve({}, env).cache_max_bytes == 0);
  env.cache_max_mb = "5";
  CHECK(resolve({}, env).cache_max_bytes == 5ull * 1024 * 1024);
  for (const char* bad : {"abc", "5MB", "-1", "", "99999999999999999999"}) {
    INFO("value: " << bad);
    env.cache_max_mb = bad;
    Recorder recorder;
    RuntimeOptions options;
    options.log_callback = recorder.callback();
    CHECK(resolve(options, env).cache_max_bytes == 0);
    CHECK(recorder.has("FLASHJIT_CACHE_MAX_MB") == (*bad != '\0'));  // unset (empty) is no mistake
  }
}

TEST_CASE("settings: ':'-separated path lists", "[runtime][settings]") {
  using flashjit::runtime::split_paths;
  CHECK(split_paths("").empty());
  CHECK(split_paths("::").empty());
  CHECK(split_paths("/a/x.json::/b/:c") == std::vector<fs::path>{"/a/x.json", "/b/", "c"});
}

TEST_CASE("settings: the process environment, with options on top", "[runtime][settings]") {
  EnvGuard g1("FLASHJIT_CACHE_DIR"), g2("FLASHJIT_CACHE_MAX_MB"), g3("FLASHJIT_JIT"), g4("FLASHJIT_TUNED"),
      g5("FLASHJIT_PDL"), g6("FLASHJIT_CHECK_PAGES"), g7("FLASHJIT_LOG");
  ::setenv("FLASHJIT_CACHE_DIR", "/from/env", 1);
  ::setenv("FLASHJIT_CACHE_MAX_MB", "3", 1);
  ::setenv("FLASHJIT_JIT", "0", 1);
  ::setenv("FLASHJIT_TUNED", "/t1.json:/t2", 1);
  ::setenv("FLASHJIT_PDL", "0", 1);
  ::setenv("FLASHJIT_CHECK_PAGES", "1", 1);
  ::setenv("FLASHJIT_LOG", "info", 1);
  const Settings env = resolve({});
  CHECK(env.cache_dir == fs::path("/from/env"));
  CHECK(env.cache_max_bytes == 3ull << 20);
  CHECK_FALSE(env.jit);
  CHECK(env.tuned_tables == std::vector<fs::path>{"/t1.json", "/t2"});
  CHECK_FALSE(env.pdl);
  CHECK(env.check_pages);
  CHECK(env.logger.level() == LogLevel::info);

  RuntimeOptions options;
  options.cache_dir = "/from/options";
  options.jit = true;
  options.log_level = LogLevel::debug;
  const Settings mixed = resolve(options);
  CHECK(mixed.cache_dir == fs::path("/from/options"));
  CHECK(mixed.jit);
  CHECK(mixed.logger.level() == LogLevel::debug);
  CHECK(mixed.cache_max_bytes == 3ull << 20);  // what the options leave unset still comes from the environment
  CHECK_FALSE(mixed.pdl);
}

TEST_CASE("settings: two runtimes log to their own sinks at their own levels", "[runtime][settings]") {
  TempDir dir;
  std::ofstream(dir.path / "broken.json") << "{";
  auto config = flashjit::config_from_json(R"({"algorithm":"fa2","arch":"sm_80","head_dim":64})");
  REQUIRE(config.ok());
  Recorder verbose, quiet;
  auto make = [&](LogLevel level, Recorder& recorder) {
    RuntimeOptions options;
    options.cache_dir = dir.path / "cache";
    options.jit = true;
    options.tuned_tables = std::vector<fs::path>{dir.path / "broken.json"};
    options.log_level = level;
    options.log_callback = recorder.callback();
    auto rt = Runtime::create(options);
    REQUIRE(rt.ok());
    return std::move(*rt);
  };
  const std::string err = capture_stderr([&] {
    auto a = make(LogLevel::debug, verbose);
    auto b = make(LogLevel::error, quiet);
    REQUIRE(a->compile(*config).ok());  // compiled now: NVRTC's options and the times at debug
    REQUIRE(b->compile(*config).ok());  // a cache hit, at debug: below b's level
  });
  CHECK(err.empty());
  CHECK(verbose.has("ignoring tuned table"));  // the broken table, a warning at create
  CHECK(verbose.has("nvrtc compile"));
  CHECK(verbose.has("compiling fa2_bf16_d64"));
  CHECK_FALSE(verbose.has("cache hit"));  // b's message, not a's
  CHECK(quiet.lines.empty());

  // A third at info without a callback: its lines go to stderr, the others' sinks see nothing more.
  const auto before = verbose.lines.size();
  const std::string info = capture_stderr([&] {
    RuntimeOptions options;
    options.cache_dir = dir.path / "cache";
    options.tuned_tables = std::vector<fs::path>{dir.path / "broken.json"};
    options.log_level = LogLevel::info;
    auto c = Runtime::create(options);
    REQUIRE(c.ok());
  });
  CHECK(info.find("flashjit warning: ignoring tuned table") != std::string::npos);
  CHECK(verbose.lines.size() == before);
  CHECK(quiet.lines.empty());
}

TEST_CASE("settings: only settings.cpp reads the environment", "[runtime][settings]") {
  const fs::path root = FLASHJIT_SOURCE_DIR;
  // The compile worker's fault hook (FLASHJIT_WORKER_FAULT) is a test hook of the CLI, not a setting; where
  // NVRTC is loaded from (FLASHJIT_NVRTC, CUDA_HOME) is process-wide, like the driver's dlopen (ARCHITECTURE.md).
  const std::vector<fs::path> allowed = {root / "src/runtime/settings.cpp", root / "tools/flashjit/compile_worker.cpp",
                                         root / "src/compile/nvrtc_library.cpp"};
  std::vector<std::string> offenders;
  std::size_t scanned = 0;
  for (const char* top : {"src", "tools"}) {
    for (const auto& e : fs::recursive_directory_iterator(root / top)) {
      const std::string ext = e.path().extension().string();
      if (!e.is_regular_file() || (ext != ".cpp" && ext != ".hpp" && ext != ".h" && ext != ".inc")) continue;
      ++scanned;
      std::ifstream in(e.path());
      const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (text.find("getenv") != std::string::npos &&
          std::find(allowed.begin(), allowed.end(), e.path()) == allowed.end())
        offenders.push_back(fs::relative(e.path(), root).string());
    }
  }
  CHECK(scanned > 50);
  std::string list;
  for (const auto& o : offenders) list += " " + o;
  INFO("getenv outside src/runtime/settings.cpp in:" << list);
  CHECK(offenders.empty());
}

// Issue 29: cache_max_mb of 2^44 MiB or more wrapped to a tiny cap (2^44 << 20 is 2^64: 0 bytes, 2^44 + 1: 1 MiB).
TEST_CASE("settings: a cache cap too large for bytes is no cap, never a wrapped one", "[runtime][settings]") {
  for (std::uint64_t mb : {std::uint64_t(1) << 44, (std::uint64_t(1) << 44) + 1, UINT64_MAX}) {
    RuntimeOptions options;
    options.cache_max_mb = mb;
    INFO(mb);
    CHECK(resolve(options, Environment{}).cache_max_bytes == UINT64_MAX);
  }
  RuntimeOptions options;
  options.cache_max_mb = (std::uint64_t(1) << 44) - 1;
  CHECK(resolve(options, Environment{}).cache_max_bytes == ((std::uint64_t(1) << 44) - 1) << 20);
}

TEST_CASE("settings: compiles in a worker by default, with a time limit; in process on request", "[runtime][settings]") {
  const Settings d = resolve({}, Environment{});
  CHECK_FALSE(d.compile_in_process);
  CHECK(d.compile_worker.empty());
  CHECK(d.compile_timeout == std::chrono::milliseconds(600000));
  CHECK_FALSE(d.check_seqlens);

  Environment env;
  env.compile_in_process = "1";
  env.compile_worker = "/opt/flashjit/bin/flashjit";
  env.compile_timeout = "2.5";
  env.check_seqlens = "1";
  const Settings e = resolve({}, env);
  CHECK(e.compile_in_process);
  CHECK(e.compile_worker == fs::path("/opt/flashjit/bin/flashjit"));
  CHECK(e.compile_timeout == std::chrono::milliseconds(2500));
  CHECK(e.check_seqlens);

  RuntimeOptions options;
  options.compile_in_process = false;
  options.compile_worker = "/elsewhere/flashjit";
  options.compile_timeout_s = 1e10;  // clamped to a week: no deadline overflows
  options.check_seqlens = false;
  const Settings o = resolve(options, env);
  CHECK_FALSE(o.compile_in_process);
  CHECK(o.compile_worker == fs::path("/elsewhere/flashjit"));
  CHECK(o.compile_timeout == std::chrono::milliseconds(7LL * 24 * 3600 * 1000));
  CHECK_FALSE(o.check_seqlens);

  Recorder recorder;
  RuntimeOptions logged;
  logged.log_callback = recorder.callback();
  for (const char* bad : {"soon", "-3", "0", "nan"}) {
    env.compile_timeout = bad;
    recorder.lines.clear();
    INFO(bad);
    CHECK(resolve(logged, env).compile_timeout == std::chrono::milliseconds(600000));
    REQUIRE(recorder.lines.size() == 1);
    CHECK(recorder.lines[0].second.find("FLASHJIT_COMPILE_TIMEOUT") != std::string::npos);
  }
}
