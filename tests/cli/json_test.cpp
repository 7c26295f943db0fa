// The CLI for scripts: --json documents (info, cache ls/stat, select, run, precompile), exit code 2 for every
// invalid input with one line naming what the user gave, strict JSON types and JSON syntax errors with their
// line and column, warnings for unknown FLASHJIT_* values, NVRTC not found, NVRTC and its builtins from one folder.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "cli/cli_runner.hpp"
#include "cuda/driver.hpp"

using flashjit::test::Cli;
using flashjit::test::parsed;
using flashjit::test::quote;
using flashjit::test::write_input;
using nlohmann::json;

namespace {

bool has_gpu() {
  auto n = flashjit::cuda::device_count();
  return n.ok() && *n > 0;
}

}  // namespace

TEST_CASE("cli json: info, cache ls and stat", "[cli][json]") {
  Cli cli;
  auto info = cli("info --json", "", /*stdout_only=*/true);
  CHECK(info.code == 0);
  const json i = parsed(info);
  CHECK(i["ok"] == true);
  CHECK(i["flashjit"].is_string());
  CHECK(i["abi_version"].is_number_integer());
  CHECK(i["nvrtc"]["version"].is_string());
  CHECK(i["nvrtc"]["path"].get<std::string>().find("libnvrtc") != std::string::npos);
  CHECK(i["driver"]["available"].is_boolean());
  CHECK(i["devices"].is_array());
  CHECK(i["jit"] == true);
  CHECK(i["cache"]["dir"] == cli.cache().string());
  CHECK(i["cache"]["entries"] == 0);
  CHECK(i["tuned"]["tables"].is_number_integer());

  auto ls = cli("cache ls --json", "", true);
  CHECK(ls.code == 0);
  CHECK(parsed(ls)["entries"] == json::array());
  auto header = cli("cache ls");
  INFO(header);
  CHECK(header.code == 0);
  CHECK(header.has("KEY"));
  CHECK(header.has("LAST USED"));
  auto stat = cli("cache stat --json", "", true);
  const json s = parsed(stat);
  CHECK(s["entries"] == 0);
  CHECK(s["writable"] == true);
}

TEST_CASE("cli json: select answers without a GPU", "[cli][json][select]") {
  Cli cli;
  auto fa3 = cli("select --json --head-dim 128 --mask causal --arch sm_90a", "", true);
  CHECK(fa3.code == 0);
  const json a = parsed(fa3);
  CHECK(a["kernel"]["config"]["algorithm"] == "fa3");
  CHECK(a["kernel"]["config"]["head_dim"] == 128);
  CHECK(a["arch"] == "sm_90a");
  auto fa2 = cli("select --json --head-dim 64 --arch sm_80", "", true);
  CHECK(parsed(fa2)["kernel"]["config"]["algorithm"] == "fa2");
  auto text = cli("select --head-dim 64 --arch sm_80");
  INFO(text);
  CHECK(text.has("kernel:   fa2_"));

  // Decode: more splits on a device with more SMs never means fewer CTAs than with fewer.
  auto decode = cli("select --json --decode --batch 1 --heads-q 32 --heads-kv 8 --seqlen-k 32768 --sms 132", "", true);
  CHECK(decode.code == 0);
  const json d = parsed(decode);
  CHECK(d["split_kernel"]["config"]["kernel"] == "decode");
  CHECK(d["num_splits"].get<int>() > 1);
  CHECK(d["sms"] == 132);
  auto paged = cli("select --json --decode --page-size 16 --seqlen-k 1000 --heads-q 8 --heads-kv 8", "", true);
  CHECK(parsed(paged)["problem"]["page_size"] == 16);
}

TEST_CASE("cli json: run and precompile", "[cli][json]") {
  Cli cli;
  const std::string sweep = write_input(cli, "one.json", R"({"name": "one", "problems": [
    {"heads_q": 4, "heads_kv": 4, "head_dim": 64, "seqlen": 256}]})");
  auto pre = cli("precompile --json --sweep " + sweep + " --arch sm_80 -j 1", "", true);
  CHECK(pre.code == 0);
  const json p = parsed(pre);
  CHECK(p["sweep"] == "one");
  CHECK(p["compiled"] == 1);
  CHECK(p["failed"] == 0);
  CHECK(p["failures"] == json::array());
  CHECK(p["kernels"]["total"] == 1);

  if (has_gpu()) return;  // below: what run says without one
  // The explicit config resolves to the kernel precompile just stored.
  auto run = cli("run --json algorithm=fa2 arch=sm_80 head_dim=64 --heads-q 4 --heads-kv 4 --head-dim 64 --seqlen-q 256 "
                 "--seqlen-k 256", "", true);
  CHECK(run.code == 0);
  const json r = parsed(run);
  CHECK(r["ran"] == false);
  CHECK(r["problem"]["head_dim"] == 64);
  CHECK(r["kernel"]["name"].get<std::string>().rfind("fa2_", 0) == 0);
  CHECK(r["kernel"]["cache_hit"] == true);
  CHECK(r["kernel"]["registers"].is_number_integer());
}

TEST_CASE("cli: every invalid input exits 2 with one line naming it", "[cli][usage]") {
  Cli cli;
  const std::string string_int = write_input(cli, "string_int.json", R"({"head_dim": "64"})");
  const std::string syntax = write_input(cli, "syntax.json", "{\n  \"head_dim\": 64,\n  \"block_m\" 64\n}");
  const std::string sweep = write_input(cli, "s.json", R"({"problems": [{"heads_q": 4, "head_dim": 64, "seqlen": 256}]})");
  const std::pair<std::string, std::string> invalid[] = {
      {"emit head_dim=65", "head_dim"},
      {"emit head_dimm=64", "head_dimm"},
      {"emit " + string_int, "expected an integer, got the string \"64\""},
      {"emit " + syntax, "line 3, column"},
      {"compile " + quote((cli.root() / "missing.json").string()), "missing.json"},
      {"run --head-dim 512", "--head-dim 512: must be a multiple of 8"},
      {"run --heads-q 6 --heads-kv 4", "--heads-kv 4: heads_q (6) must be a multiple"},
      {"select --head-dim 12", "--head-dim 12"},
      {"select --arch sm_13x", "--arch 'sm_13x'"},
      {"select --decode --q-len 17", "--q-len 17"},
      {"precompile --sweep " + sweep + " -j 0", "'0' is not a positive integer"},
      {"precompile --sweep " + quote((cli.root() / "none.json").string()), "none.json"},
      {"autotune -o out.json --sweep " + quote((cli.root() / "none.json").string()), "none.json"},
  };
  for (const auto& [args, names] : invalid) {
    auto r = cli(args);
    INFO(r);
    CHECK(r.code == 2);
    CHECK(r.has(names));
    CHECK(r.output.find("invalid config naive") == std::string::npos);  // never a kernel the user did not name
  }
}

TEST_CASE("cli: unknown FLASHJIT_* values are warned about; NVRTC not found is an error", "[cli]") {
  Cli cli;
  auto log = cli("info", "FLASHJIT_LOG=verbose");
  INFO(log);
  CHECK(log.code == 0);
  CHECK(log.has("ignoring FLASHJIT_LOG='verbose': not one of debug, info, warn, error"));
  auto jit = cli("info", "FLASHJIT_JIT=off");
  CHECK(jit.has("ignoring FLASHJIT_JIT='off'"));

  const std::string none = quote((cli.root() / "libnvrtc.so.13").string());
  auto info = cli("info --json", "FLASHJIT_NVRTC=" + none, true);
  CHECK(info.code == 0);
  const json i = parsed(info);
  CHECK(i["nvrtc"]["version"].is_null());
  CHECK(i["nvrtc"]["error"].get<std::string>().find("FLASHJIT_NVRTC") != std::string::npos);
  auto compile = cli("compile algorithm=fa2 head_dim=64 arch=sm_80", "FLASHJIT_NVRTC=" + none);
  INFO(compile);
  CHECK(compile.code == 1);
  CHECK(compile.has("NVRTC not found"));
  CHECK(compile.has("libnvrtc.so.13"));
}

TEST_CASE("cli: NVRTC from a directory on no search path loads its builtins from that directory", "[cli]") {
  // The nvidia-cuda-nvrtc wheel's case: FLASHJIT_NVRTC names a libnvrtc.so.13 whose directory the loader does
  // not search, so NVRTC's own dlopen of libnvrtc-builtins.so.M.m would take another copy or none (a compile
  // then fails with NVRTC_ERROR_BUILTIN_OPERATION_FAILURE). Links in a fresh folder stand for the wheel's files.
  namespace fs = std::filesystem;
  const fs::path toolkit = "/usr/local/cuda/lib64";
  std::string builtins_name;
  std::error_code ec;
  for (fs::directory_iterator it(toolkit, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().filename().string().starts_with("libnvrtc-builtins.so.")) builtins_name = it->path().filename();
  if (!fs::exists(toolkit / "libnvrtc.so.13") || builtins_name.empty()) {
    WARN("no CUDA 13 toolkit NVRTC in " << toolkit << ": not checked");
    return;
  }
  Cli cli;
  const fs::path wheel = cli.root() / "nvidia" / "cu13" / "lib";
  fs::create_directories(wheel);
  fs::create_symlink(toolkit / "libnvrtc.so.13", wheel / "libnvrtc.so.13");
  fs::create_symlink(toolkit / builtins_name, wheel / builtins_name);
  const std::string env = "FLASHJIT_NVRTC=" + quote((wheel / "libnvrtc.so.13").string());
  auto info = cli("info --json", env, true);
  INFO(info);
  REQUIRE(info.code == 0);
  const json i = parsed(info);
  CHECK(i["nvrtc"]["path"] == (wheel / "libnvrtc.so.13").string());
  CHECK(i["nvrtc"]["builtins"] == (wheel / builtins_name).string());
  auto compile = cli("compile algorithm=fa2 head_dim=64 arch=sm_80", env);
  INFO(compile);
  CHECK(compile.code == 0);
}
