// Tests of the flashjit command-line tool. Each runs the built binary (FLASHJIT_CLI_PATH) through the shell
// with FLASHJIT_CACHE_DIR set to a fresh folder (and the other FLASHJIT_* variables unset), capturing
// stdout + stderr and the exit code (cli/cli_runner.hpp). Only the compile/cache test and the run test
// invoke NVRTC.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "cli/cli_runner.hpp"
#include "compile/nvrtc.hpp"
#include "cuda/driver.hpp"
#include "flashjit/config.hpp"
#include "support/catch.hpp"

namespace fs = std::filesystem;
using flashjit::test::Cli;
using flashjit::test::quote;

namespace {

std::string name_of(const std::vector<std::string>& pairs) {
  auto config = flashjit::config_from_pairs(pairs);
  REQUIRE(config.ok());
  return flashjit::readable_name(*config);
}

// The one entry file under the cache folder.
fs::path only_entry(const fs::path& cache) {
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(cache))
    if (e.is_regular_file() && e.path().extension() == ".fjk") files.push_back(e.path());
  REQUIRE(files.size() == 1);
  return files.front();
}

void flip_middle_byte(const fs::path& file) {
  fs::permissions(file, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::add);
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  REQUIRE(f);
  const auto middle = static_cast<std::streamoff>(fs::file_size(file) / 2);
  char c = 0;
  f.seekg(middle);
  f.read(&c, 1);
  c = static_cast<char>(~c);
  f.seekp(middle);
  f.write(&c, 1);
  REQUIRE(f);
}

}  // namespace

TEST_CASE("cli: help and usage errors", "[cli]") {
  Cli cli;
  auto help = cli("--help");
  INFO(help);
  CHECK(help.code == 0);
  CHECK(help.has("compile"));
  CHECK(help.has("--cache-dir"));
  const std::pair<const char*, int> cases[] = {
      {"", 2},                                       // no subcommand
      {"frobnicate", 2},                             // unknown subcommand
      {"compile --no-such-option head_dim=64", 2},   // unknown option
      {"emit", 2},                                   // CONFIG is required
      {"emit not-a-config", 2},                      // neither key=value nor .json
      {"run --dtype fp32", 2},
      {"run --iters 0", 2},
      {"run --heads-q 32 --heads-kv 5", 2},
      {"run a.json b.json", 2},                      // run takes one config
      {"cache", 2},
      {"cache frob", 2},
      {"compile --help", 0},
  };
  for (const auto& [args, code] : cases) {
    auto r = cli(args);
    INFO(r);
    CHECK(r.code == code);
  }
  auto unknown = cli("frobnicate");
  INFO(unknown);
  CHECK(unknown.has("frobnicate"));
}

TEST_CASE("cli: info", "[cli]") {
  Cli cli;
  auto info = cli("info");
  INFO(info);
  CHECK(info.code == 0);
  CHECK(info.has(cli.cache().string()));
  CHECK(info.has("nvrtc"));
  CHECK(info.has(flashjit::compile::nvrtc_version()));
  CHECK(info.has("driver"));
  CHECK(info.has("writable"));
  CHECK(info.has("0 kernels"));
  auto no_jit = cli("info", "FLASHJIT_JIT=0");
  INFO(no_jit);
  CHECK(no_jit.code == 0);
  CHECK(no_jit.has("FLASHJIT_JIT=0"));
  auto elsewhere = cli("--cache-dir " + quote((cli.root() / "other").string()) + " info");
  INFO(elsewhere);
  CHECK(elsewhere.code == 0);
  CHECK(elsewhere.has((cli.root() / "other").string()));
}

TEST_CASE("cli: emit prints the generated source or the config's issues", "[cli]") {
  Cli cli;
  auto emit = cli("emit algorithm=fa2 head_dim=64", "", /*stdout_only=*/true);
  INFO(emit);
  CHECK(emit.code == 0);
  CHECK(emit.has("extern \"C\""));
  CHECK(emit.has(name_of({"algorithm=fa2", "head_dim=64"})));

  auto bad = cli("emit head_dim=65");
  INFO(bad);
  CHECK(bad.code == 2);  // invalid input
  CHECK(bad.has("head_dim"));
  auto unknown_field = cli("emit head_dimm=64");
  INFO(unknown_field);
  CHECK(unknown_field.code == 2);
  CHECK(unknown_field.has("head_dimm"));

  std::ofstream(cli.root() / "a.json") << R"({"head_dim": 64})";
  std::ofstream(cli.root() / "b.json") << R"({"algorithm": "naive", "head_dim": 64, "block_m": 1,
                                            "block_n": 128, "stages": 1})";
  auto two = cli("emit " + quote((cli.root() / "a.json").string()) + " " + quote((cli.root() / "b.json").string()));
  INFO(two);
  CHECK(two.code == 0);
  CHECK(two.has(name_of({"head_dim=64"})));
  CHECK(two.has(name_of({"algorithm=naive", "head_dim=64", "block_m=1", "block_n=128", "stages=1"})));
  CHECK(cli("emit " + quote((cli.root() / "missing.json").string())).code == 2);

  // --ptx: what NVRTC makes of it for the config's virtual arch (the decode kernel waits for the kernel before it).
  auto ptx = cli("emit --ptx kernel=decode head_dim=128 arch=sm_90a", "", /*stdout_only=*/true);
  INFO(ptx);
  CHECK(ptx.code == 0);
  CHECK(ptx.has(".target sm_90a"));
  CHECK(ptx.has(".entry flashjit_decode_bf16_d128_"));
  CHECK(ptx.has("griddepcontrol.wait"));
  CHECK(!ptx.has("extern \"C\""));
  auto ptx80 = cli("emit --ptx algorithm=fa2 head_dim=64 arch=sm_80", "", /*stdout_only=*/true);
  INFO(ptx80);
  CHECK(ptx80.code == 0);
  CHECK(ptx80.has(".target sm_80"));
  CHECK(ptx80.has("mma.sync"));
}

TEST_CASE("cli: compile, then the cache commands", "[cli]") {
  Cli cli;
  const std::string name = name_of({"algorithm=fa2", "head_dim=64", "mask=causal"});

  // A miss, with ptxas's report: registers, no spills.
  auto first = cli("compile algorithm=fa2 head_dim=64 mask=causal --json", "", /*stdout_only=*/true);
  INFO(first);
  REQUIRE(first.code == 0);
  const auto report = nlohmann::json::parse(first.output);
  REQUIRE(report.size() == 1);
  CHECK(report[0]["name"] == name);
  CHECK(report[0]["cache_hit"] == false);
  CHECK(report[0]["registers"].get<int>() > 0);
  CHECK(report[0]["spill_stores"] == 0);
  CHECK(report[0]["spill_loads"] == 0);
  const std::string key = report[0]["key"];

  // The same config again, inline and from a JSON file: hits.
  auto second = cli("compile algorithm=fa2 head_dim=64 mask=causal");
  INFO(second);
  CHECK(second.code == 0);
  CHECK(second.has(name));
  CHECK(second.has("hit"));
  CHECK_FALSE(second.has("miss"));
  const fs::path file = cli.root() / "causal64.json";
  std::ofstream(file) << R"({"algorithm": "fa2", "arch": "sm_90a", "head_dim": 64, "mask": "causal"})";
  auto from_file = cli("compile " + quote(file.string()));
  INFO(from_file);
  CHECK(from_file.code == 0);
  CHECK(from_file.has(name));
  CHECK(from_file.has("hit"));

  auto ls = cli("cache ls");
  INFO(ls);
  CHECK(ls.code == 0);
  CHECK(ls.has(key.substr(0, 16)));
  CHECK(ls.has(name));
  auto stat = cli("cache stat");
  INFO(stat);
  CHECK(stat.code == 0);
  CHECK(stat.has(cli.cache().string()));
  CHECK(stat.has("entries:  1"));
  auto verify = cli("cache verify");
  INFO(verify);
  CHECK(verify.code == 0);
  CHECK(verify.has("1 entries ok, 0 corrupt"));

  auto clear = cli("cache clear");
  INFO(clear);
  CHECK(clear.code == 0);
  CHECK(clear.has("removed 1"));
  auto empty = cli("cache ls");
  INFO(empty);
  CHECK(empty.code == 0);
  CHECK(empty.has("KEY"));  // the header alone
  CHECK_FALSE(empty.has(name));

  // Compiled again after the clear (a miss), then corrupted on disk: verify names it and fails.
  auto again = cli("compile algorithm=fa2 head_dim=64 mask=causal");
  INFO(again);
  CHECK(again.code == 0);
  CHECK(again.has("miss"));
  flip_middle_byte(only_entry(cli.cache()));
  auto corrupt = cli("cache verify");
  INFO(corrupt);
  CHECK(corrupt.code == 1);
  CHECK(corrupt.has("corrupt"));
  CHECK(corrupt.has(key));
}

TEST_CASE("cli: precompiled-only mode fails on a cache miss, naming the kernel", "[cli]") {
  Cli cli;
  auto r = cli("compile algorithm=fa2 head_dim=64 mask=causal", "FLASHJIT_JIT=0");
  INFO(r);
  CHECK(r.code == 1);
  CHECK(r.has(name_of({"algorithm=fa2", "head_dim=64", "mask=causal"})));
  CHECK(r.has("FLASHJIT_JIT=0"));
}

TEST_CASE("cli: run compiles the dispatcher's kernel, and runs it when there is a GPU", "[cli]") {
  Cli cli;
  auto devices = flashjit::cuda::device_count();
  const bool gpu = devices.ok() && *devices > 0;
  auto r = cli("run --seqlen-q 256 --seqlen-k 256 --heads-q 4 --heads-kv 2 --iters 3");
  INFO(r);
  CHECK(r.code == 0);
  CHECK(r.has("fa3_bf16_d128"));  // the dispatcher picks FA3 for sm_90a
  if (gpu) {
    CHECK(r.has("relative L2 error"));
    CHECK(r.has("TFLOP/s"));
  } else {
    CHECK(r.has("no GPU"));
    CHECK(r.has("registers"));
  }
}
