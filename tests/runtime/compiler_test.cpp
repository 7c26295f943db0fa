// The runtime's compiles out of process (issue 29): a compiler that crashes or hangs fails that kernel with a
// clear error and this process lives; in process on request, and when no worker can be used. The worker is the
// built CLI (FLASHJIT_CLI_PATH); its fault hook FLASHJIT_WORKER_FAULT plays the broken compiler.
#include "runtime/compiler.hpp"

#include <stdlib.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "dispatch/heuristics.hpp"
#include "flashjit/runtime.hpp"
#include "support/catch.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;
using flashjit::ErrorCode;
using flashjit::LogLevel;
using flashjit::Runtime;
using flashjit::RuntimeOptions;
using flashjit::test::TempDir;

namespace {

// Sets an environment variable for one scope (the workers inherit it).
struct ScopedEnv {
  std::string name, old;
  bool had;
  ScopedEnv(const char* n, const std::string& value) : name(n) {
    const char* v = ::getenv(n);
    had = v != nullptr;
    if (had) old = v;
    ::setenv(n, value.c_str(), 1);
  }
  ~ScopedEnv() { had ? ::setenv(name.c_str(), old.c_str(), 1) : ::unsetenv(name.c_str()); }
};

// The quickest kernel to compile.
flashjit::KernelConfig naive() {
  return flashjit::dispatch::naive_config(flashjit::DType::bf16, 64, flashjit::MaskKind::none, flashjit::Arch{80, false});
}

struct Logged {
  std::vector<std::pair<LogLevel, std::string>> lines;
  bool has(const std::string& part) const {
    for (const auto& l : lines)
      if (l.second.find(part) != std::string::npos) return true;
    return false;
  }
};

std::unique_ptr<Runtime> runtime_in(const fs::path& cache, RuntimeOptions options, Logged& logged) {
  options.cache_dir = cache;
  options.log_level = LogLevel::warn;
  options.log_callback = [&logged](LogLevel l, std::string_view m) { logged.lines.emplace_back(l, std::string(m)); };
  auto rt = Runtime::create(std::move(options));
  INFO((rt ? std::string() : rt.error().to_string()));
  REQUIRE(rt.ok());
  return std::move(rt).value();
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST_CASE("runtime compiler: a crashing or hanging compiler fails its kernel, the process lives", "[runtime][compile]") {
  TempDir cache;
  Logged logged;
  RuntimeOptions options;
  options.compile_worker = fs::path(FLASHJIT_CLI_PATH);
  options.compile_timeout_s = 3;
  auto rt = runtime_in(cache.path, options, logged);

  SECTION("crash") {
    ScopedEnv fault("FLASHJIT_WORKER_FAULT", "crash:naive");
    auto info = rt->compile(naive());
    REQUIRE_FALSE(info.ok());
    INFO(info.error().to_string());
    CHECK(info.error().code == ErrorCode::compile);
    CHECK(info.error().message.find("was killed by signal 11 (SIGSEGV)") != std::string::npos);
    CHECK(info.error().to_string().find("generated source saved to") != std::string::npos);
  }
  SECTION("hang") {
    ScopedEnv fault("FLASHJIT_WORKER_FAULT", "hang:naive");
    const auto t0 = std::chrono::steady_clock::now();
    auto info = rt->compile(naive());
    REQUIRE_FALSE(info.ok());
    INFO(info.error().to_string());
    CHECK(info.error().message.find("ran past the 3 s time limit") != std::string::npos);
    CHECK(seconds_since(t0) < 30);
  }
  // The failure is not kept: once the compiler works, the same kernel compiles.
  auto again = rt->compile(naive());
  INFO((again ? std::string() : again.error().to_string()));
  REQUIRE(again.ok());
  CHECK_FALSE(again->cache_hit);
  CHECK(again->ptxas.registers > 0);
  CHECK(logged.lines.empty());
}

TEST_CASE("runtime compiler: in process on request, and when the worker cannot be used", "[runtime][compile]") {
  ScopedEnv fault("FLASHJIT_WORKER_FAULT", "crash:naive");  // would crash a worker; in process it is not read
  TempDir cache;
  Logged logged;
  RuntimeOptions options;
  SECTION("compile_in_process") {
    options.compile_in_process = true;
    auto rt = runtime_in(cache.path, options, logged);
    auto info = rt->compile(naive());
    INFO((info ? std::string() : info.error().to_string()));
    CHECK(info.ok());
    CHECK(logged.lines.empty());
  }
  SECTION("a worker that does not exist: one warning, then in process") {
    options.compile_worker = cache.path / "no-such-flashjit";
    auto rt = runtime_in(cache.path / "cache", options, logged);
    auto info = rt->compile(naive());
    INFO((info ? std::string() : info.error().to_string()));
    CHECK(info.ok());
    REQUIRE(logged.lines.size() == 1);
    CHECK(logged.has("compiling in this process"));
    CHECK(logged.has("no-such-flashjit"));
  }
}

TEST_CASE("runtime compiler: the worker beside this program is found", "[runtime][compile]") {
  // The test binary is build/tests/flashjit_tests; the CLI build/flashjit.
  const fs::path found = flashjit::runtime::find_compile_worker();
  CHECK(fs::weakly_canonical(found) == fs::weakly_canonical(FLASHJIT_CLI_PATH));
}
