// Tests of the compile pool, which runs the real worker (the built flashjit
// binary) in a fresh cache: a compile that crashes and one that hangs (through the worker's fault hook; the
// hang is killed at a short timeout) fail alone while the others compile; at most `jobs` workers at once.
#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "support/catch.hpp"
#include "support/temp_dir.hpp"
#include "tune/background_compile.hpp"
#include "tune/compile_pool.hpp"
#include "compile/subprocess.hpp"

namespace fs = std::filesystem;
using flashjit::Algorithm;
using flashjit::ErrorCode;
using flashjit::KernelConfig;
using flashjit::compile::Child;
using flashjit::tune::CompilePool;
using flashjit::tune::PoolEvent;
using flashjit::tune::PoolOptions;

namespace {

using flashjit::test::TempDir;

// Small naive kernels: the fastest to compile (different warps give different kernels).
KernelConfig naive(int warps) {
  KernelConfig c;
  c.algorithm = Algorithm::naive;
  c.head_dim = 64;
  c.block_m = 1, c.warps = warps, c.block_n = 32 * warps, c.stages = 1;
  return c;
}

PoolOptions options(const fs::path& cache, int jobs) {
  PoolOptions o;
  o.worker = {FLASHJIT_CLI_PATH, "--cache-dir", cache.string()};
  o.jobs = jobs;
  o.timeout = std::chrono::milliseconds(1500);
  return o;
}

}  // namespace

TEST_CASE("compile pool: a crash and a hang fail alone, the rest compile", "[tune][pool]") {
  TempDir dir;
  PoolOptions o = options(dir.path / "cache", 2);
  o.env = {"FLASHJIT_WORKER_FAULT=crash:_w2_,hang:_w3_"};
  const std::vector<KernelConfig> configs = {naive(1), naive(2), naive(3), naive(4)};
  int max_running = 0, started = 0, finished = 0;
  const auto t0 = std::chrono::steady_clock::now();
  const auto outcomes = CompilePool(o).run(configs, [&](const PoolEvent& e) {
    max_running = std::max(max_running, static_cast<int>(e.progress.running.size()));
    (e.kind == PoolEvent::started ? started : finished) += 1;
    CHECK(e.progress.total == 4);
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  REQUIRE(outcomes.size() == 4);
  CHECK(started == 4);
  CHECK(finished == 4);
  CHECK(max_running <= 2);
  CHECK(seconds < 20);

  for (std::size_t i : {0u, 3u}) {
    INFO(outcomes[i].name << (outcomes[i].info.ok() ? "" : outcomes[i].info.error().to_string()));
    REQUIRE(outcomes[i].info.ok());
    CHECK(outcomes[i].config == configs[i]);
    CHECK(outcomes[i].info->name == readable_name(configs[i]));
    CHECK_FALSE(outcomes[i].info->cache_hit);
    CHECK(outcomes[i].info->ptxas.registers > 0);
  }
  const auto& crashed = outcomes[1].info;
  REQUIRE_FALSE(crashed.ok());
  CHECK(crashed.error().code == ErrorCode::compile);
  CHECK(crashed.error().message.find("SIGSEGV") != std::string::npos);
  CHECK(crashed.error().message.find(readable_name(configs[1])) != std::string::npos);
  const auto& hung = outcomes[2].info;
  REQUIRE_FALSE(hung.ok());
  CHECK(hung.error().message.find("timeout") != std::string::npos);
  CHECK(outcomes[2].wall_ms >= 1500);

  // The compiled kernels are in the cache now: the workers find them.
  o.env.clear();
  const auto again = CompilePool(o).run({configs[0], configs[3]});
  for (const auto& a : again) {
    REQUIRE(a.info.ok());
    CHECK(a.info->cache_hit);
  }
  auto split = flashjit::tune::split_cached({dir.path / "cache"}, configs);
  REQUIRE(split.ok());
  CHECK(split->cached.size() == 2);
  CHECK(split->missing == std::vector<KernelConfig>{configs[1], configs[2]});
}

TEST_CASE("compile pool: a config the worker rejects, a missing worker, cancellation", "[tune][pool]") {
  TempDir dir;
  KernelConfig bad = naive(1);
  bad.block_n = 48;  // invalid: the worker reports validate()'s issues
  const auto rejected = CompilePool(options(dir.path / "cache", 1)).run({bad});
  REQUIRE_FALSE(rejected[0].info.ok());
  CHECK(rejected[0].info.error().code == ErrorCode::invalid_config);
  CHECK(rejected[0].info.error().message.find("block_n") != std::string::npos);

  PoolOptions missing = options(dir.path / "cache", 1);
  missing.worker = {"/no/such/flashjit"};
  const auto not_started = CompilePool(missing).run({naive(1)});
  REQUIRE_FALSE(not_started[0].info.ok());
  CHECK(not_started[0].info.error().message.find("/no/such/flashjit") != std::string::npos);

  PoolOptions hang = options(dir.path / "cache", 1);
  hang.env = {"FLASHJIT_WORKER_FAULT=hang:naive"};
  hang.timeout = std::chrono::seconds(60);
  std::atomic<bool> cancel{false};
  const auto t0 = std::chrono::steady_clock::now();
  const auto cancelled = CompilePool(hang).run(
      {naive(1), naive(2)}, [&](const PoolEvent& e) { cancel = e.kind == PoolEvent::started; }, &cancel);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
  for (const auto& c : cancelled) {
    REQUIRE_FALSE(c.info.ok());
    CHECK(c.info.error().message.find("cancelled") != std::string::npos);
  }
}

TEST_CASE("background compiles: answers as kernels finish", "[tune][pool]") {
  TempDir dir;
  flashjit::KernelInfo known;
  known.name = "known";
  PoolOptions o = options(dir.path / "cache", 2);
  o.env = {"FLASHJIT_WORKER_FAULT=crash:_w2_"};
  flashjit::tune::BackgroundCompiles compiles(o, {naive(1), naive(2)}, {{naive(4), known}});
  auto first = compiles.wait(naive(1));
  REQUIRE(first.ok());
  CHECK(first->name == readable_name(naive(1)));
  CHECK_FALSE(compiles.wait(naive(2)).ok());
  auto k = compiles.wait(naive(4));
  REQUIRE(k.ok());
  CHECK(k->name == "known");
  auto never = compiles.wait(naive(8));
  REQUIRE_FALSE(never.ok());
  CHECK(never.error().message.find("never submitted") != std::string::npos);
}

// Issue 29: `--timeout 1e10` made start + timeout overflow the clock, so every worker was killed at once.
TEST_CASE("compile pool: a timeout past the clock's range waits, never kills at once", "[tune][pool]") {
  TempDir dir;
  KernelConfig bad = naive(1);
  bad.block_n = 48;  // the worker answers at once (validate()), no NVRTC
  PoolOptions o = options(dir.path / "cache", 1);
  for (auto timeout : {std::chrono::milliseconds(static_cast<long long>(1e13)), std::chrono::milliseconds::max(),
                       flashjit::compile::timeout_of(1e10)}) {
    o.timeout = timeout;
    const auto outcome = CompilePool(o).run({bad});
    REQUIRE_FALSE(outcome[0].info.ok());
    INFO(outcome[0].info.error().to_string());
    CHECK(outcome[0].info.error().code == ErrorCode::invalid_config);
  }
  CHECK(flashjit::compile::timeout_of(1e10) == std::chrono::milliseconds(7LL * 24 * 3600 * 1000));
  CHECK(flashjit::compile::timeout_of(0) == std::chrono::milliseconds(1));
}
