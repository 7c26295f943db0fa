// Tests of `flashjit precompile` end to end on tiny sweeps (sm_80 fa2 kernels, the quickest to compile) into a
// fresh cache, and of `flashjit autotune` without a GPU.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iterator>
#include <thread>

#include "cli/cli_runner.hpp"
#include "compile/subprocess.hpp"
#include "flashjit/runtime.hpp"
#include "cuda/driver.hpp"
#include "dispatch/heuristics.hpp"
#include "support/catch.hpp"

namespace fs = std::filesystem;
using flashjit::test::Cli;
using flashjit::test::quote;
using flashjit::test::write_input;

namespace {

// Two problems, d64 on sm_80: the dispatcher picks one fa2 kernel per mask.
const char* kTinySweep = R"({"name": "tiny", "problems": [
  {"heads_q": 4, "heads_kv": 2, "head_dim": 64, "seqlen": 256, "mask": ["none", "causal"]}]})";

flashjit::KernelConfig picked(flashjit::MaskKind mask) {
  flashjit::AttentionProblem p;
  p.heads_q = 4, p.heads_kv = 2, p.head_dim = 64, p.seqlen_q = p.seqlen_k = 256, p.mask = mask;
  return *flashjit::dispatch::choose(p, flashjit::Arch{80, false});
}

}  // namespace

TEST_CASE("cli: precompile compiles once, in workers, and a crash fails alone", "[cli][precompile]") {
  Cli cli;
  const std::string sweep = write_input(cli, "tiny.json", kTinySweep);
  const std::string none = readable_name(picked(flashjit::MaskKind::none));
  const std::string causal = readable_name(picked(flashjit::MaskKind::causal));

  // The causal kernel's worker crashes: that kernel fails with the signal named, the other compiles.
  auto crashed = cli("precompile --sweep " + sweep + " --arch sm_80 -j 2", "FLASHJIT_WORKER_FAULT=crash:_causal_");
  INFO(crashed);
  CHECK(crashed.code == 1);
  CHECK(crashed.has("SIGSEGV"));
  CHECK(crashed.has(causal));
  CHECK(crashed.has("compiled " + none));  // plain progress lines: stderr is not a terminal
  CHECK(crashed.has("compiled       1"));
  CHECK(crashed.has("failed         1"));
  CHECK(crashed.has("[2/2]"));

  auto second = cli("precompile --sweep " + sweep + " --arch sm_80 -j 2");
  INFO(second);
  CHECK(second.code == 0);
  CHECK(second.has("compiled       1"));
  CHECK(second.has("cached         1"));
  CHECK(second.has("failed         0"));

  // Everything is cached now: nothing compiles.
  auto third = cli("precompile --sweep " + sweep + " --arch sm_80");
  INFO(third);
  CHECK(third.code == 0);
  CHECK(third.has("compiled       0"));
  CHECK(third.has("cached         2"));

  // Precompiled-only mode finds the kernels.
  for (auto mask : {"none", "causal"}) {
    auto hit = cli(std::string("compile algorithm=fa2 arch=sm_80 head_dim=64 block_m=128 warps=4 block_n=64 stages=2 mask=") +
                       mask,
                   "FLASHJIT_JIT=0");
    INFO(hit);
    CHECK(hit.code == 0);
    CHECK(hit.has("hit"));
  }
  CHECK(picked(flashjit::MaskKind::none).block_n == 64);  // the configs compiled above are the dispatcher's

  // The whole candidate space of a reduced sweep: the dispatcher's pick (cached) plus 16-rows-per-warp.
  const std::string space = write_input(cli, "space.json", R"({"problems": [{"heads_q": 4, "head_dim": 64, "seqlen": 256}],
      "candidates": {"warps": [4], "block_n": [64], "stages": [2]}})");
  auto all = cli("precompile --sweep " + space + " --arch sm_80 --all-candidates -j 1");
  INFO(all);
  CHECK(all.code == 0);
  CHECK(all.has("kernels        2"));
  CHECK(all.has("compiled       1"));
  CHECK(all.has("cached         1"));
}

TEST_CASE("cli: precompile kills a hung worker at the timeout", "[cli][precompile]") {
  Cli cli;
  const std::string sweep = write_input(cli, "tiny.json", kTinySweep);
  auto hung = cli("precompile --sweep " + sweep + " --arch sm_80 -j 2 --timeout 0.5", "FLASHJIT_WORKER_FAULT=hang:fa2");
  INFO(hung);
  CHECK(hung.code == 1);
  CHECK(hung.has("timeout"));
  CHECK(hung.has("failed         2"));
}

TEST_CASE("cli: precompile and autotune usage errors", "[cli][precompile]") {
  Cli cli;
  const std::string good = write_input(cli, "tiny.json", kTinySweep);
  const std::pair<std::string, int> usage[] = {
      {"precompile", 2},                                   // --sweep is required
      {"precompile --sweep " + good + " --arch sm_12x", 2},
      {"precompile --sweep " + good + " -j 0", 2},
      {"autotune --sweep " + good, 2},                     // -o is required
  };
  for (const auto& [args, code] : usage) {
    auto r = cli(args);
    INFO(r);
    CHECK(r.code == code);
  }
  const std::string bad = write_input(cli, "bad.json", R"({"problems": [{"heads_q": 4, "head_dim": 64, "seqlen": 256},
                                                                 {"heads_q": 4, "head_dim": 64, "seqlen": "x"}]})");
  auto r = cli("precompile --sweep " + bad);
  INFO(r);
  CHECK(r.code == 2);
  CHECK(r.has("problems[1].seqlen"));
  auto missing = cli("precompile --sweep " + quote((cli.root() / "none.json").string()));
  INFO(missing);
  CHECK(missing.code == 2);
  CHECK(missing.has("none.json"));

  auto help = cli("--help");
  CHECK(help.has("precompile"));
  CHECK(help.has("autotune"));
  CHECK_FALSE(help.has("compile-worker"));  // internal
}

TEST_CASE("cli: autotune needs a GPU", "[cli][autotune]") {
  auto devices = flashjit::cuda::device_count();
  if (devices.ok() && *devices > 0) return;  // exercised on GPU machines by hand (it takes minutes)
  Cli cli;
  const std::string sweep = write_input(cli, "tiny.json", kTinySweep);
  auto r = cli("autotune --sweep " + sweep + " -o " + quote((cli.root() / "out.json").string()));
  INFO(r);
  CHECK(r.code == 1);
  CHECK(r.has("autotune needs a GPU"));
  CHECK_FALSE(fs::exists(cli.root() / "out.json"));
}

// Issue 29, item 4: a kernel the cache did not keep (here its shard path is a file, so every store fails) was
// counted as compiled, and precompile exited 0 for a cache a FLASHJIT_JIT=0 server would then miss in.
TEST_CASE("cli: precompile fails a kernel the cache did not keep", "[cli][precompile]") {
  Cli cli;
  const std::string sweep = write_input(cli, "tiny.json", kTinySweep);
  auto key = flashjit::Runtime::kernel_key(picked(flashjit::MaskKind::causal));
  REQUIRE(key.ok());
  fs::create_directories(cli.cache() / "v1");
  std::ofstream(cli.cache() / "v1" / key->substr(0, 2)) << "not a folder";
  auto other = flashjit::Runtime::kernel_key(picked(flashjit::MaskKind::none));
  REQUIRE(other.ok());
  const bool both = other->substr(0, 2) == key->substr(0, 2);  // one chance in 256: the same shard
  auto run = cli("precompile --sweep " + sweep + " --arch sm_80 -j 2");
  INFO(run);
  CHECK(run.code == 1);
  CHECK(run.has(both ? "compiled       0" : "compiled       1"));
  CHECK(run.has(both ? "failed         2" : "failed         1"));
  CHECK(run.has("the cache did not keep it"));
  CHECK(run.has(readable_name(picked(flashjit::MaskKind::causal))));
}

namespace {

// Pids of the live (not zombie) children of `parent`, from /proc.
std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    char state = 0;
    long ppid = 0;
    if (std::sscanf(stat.c_str() + close + 1, " %c %ld", &state, &ppid) == 2 && ppid == parent && state != 'Z')
      out.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return out;
}

bool alive(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = stat.rfind(')');
  return close != std::string::npos && stat.size() > close + 2 && stat[close + 2] != 'Z';
}

}  // namespace

// Issue 29, item 5: killing precompile (kill -9) left its workers running, compiling for no one.
TEST_CASE("cli: workers die with a killed precompile", "[cli][precompile]") {
  Cli cli;
  const std::string sweep = (cli.root() / "tiny.json").string();
  std::ofstream(sweep) << kTinySweep;
  auto child = flashjit::compile::Child::spawn(
      {FLASHJIT_CLI_PATH, "--cache-dir", cli.cache().string(), "precompile", "--sweep", sweep, "--arch", "sm_80", "-j",
       "2", "--timeout", "600"},
      {"FLASHJIT_WORKER_FAULT=hang:fa2"});
  REQUIRE(child.ok());
  const pid_t precompile = (*child)->pid();
  std::vector<pid_t> workers;
  for (int i = 0; i < 600 && workers.size() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    workers = children_of(precompile);
  }
  REQUIRE(workers.size() == 2);
  (*child)->kill_and_reap();  // SIGKILL: no handler of precompile runs
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    gone = !alive(workers[0]) && !alive(workers[1]);
  }
  for (pid_t w : workers)
    if (alive(w)) ::kill(w, SIGKILL);  // do not leave them behind either way
  CHECK(gone);
}
