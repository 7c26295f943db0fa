// Tests of `flashjit precompile` on sweeps with append problems and decodes fused with an append (small sm_80
// kernels) into a fresh cache: the summary counts the append kernels (text and --json), a second run compiles
// nothing, and a runtime in precompiled-only mode finds every kernel prepare_append_kv loads; and autotune,
// which skips append problems.
#include <fmt/format.h>

#include <filesystem>
#include <string>

#include "cache/artifact_store.hpp"
#include "cache/disk_cache.hpp"
#include "cli/cli_runner.hpp"
#include "cuda/driver.hpp"
#include "dispatch/append_plan.hpp"
#include "support/catch.hpp"
#include "tune/precompile_plan.hpp"
#include "tune/sweep.hpp"

namespace fs = std::filesystem;
using flashjit::Arch;
using flashjit::KvLayout;
using flashjit::test::Cli;
using flashjit::test::parsed;
using flashjit::test::quote;
using flashjit::test::write_input;

namespace {

const Arch kSm80{80, false};

// Two append problems (d64, contiguous and 16-token pages): two kernels each, one per size class.
const char* kAppendSweep = R"({"name": "tiny-append", "problems": [
  {"kind": "append", "heads_kv": 1, "head_dim": 64, "layout": ["contiguous", "paged"], "page_size": 16}]})";

// A decode fused with an append over 16-token pages (its split, combine and merge kernels, and the two append
// kernels of paged 16), and the append of the same cache on its own (nothing more).
const char* kFusedSweep = R"({"name": "tiny-fused", "problems": [
  {"kind": "decode", "heads_q": 4, "heads_kv": 1, "head_dim": 64, "seqlen_k": 4096, "layout": "paged",
   "page_size": 16, "append": true},
  {"kind": "append", "heads_kv": 1, "head_dim": 64, "layout": "paged", "page_size": 16}]})";

flashjit::tune::PrecompilePlan plan_of(const char* sweep_text) {
  auto sweep = flashjit::tune::parse_sweep(sweep_text, "sweep.json");
  REQUIRE(sweep.ok());
  return flashjit::tune::precompile_plan(*sweep, {kSm80}, {}, false);
}

}  // namespace

TEST_CASE("cli: precompile of append problems, then a precompiled-only runtime finds the kernels",
          "[cli][precompile][append]") {
  Cli cli;
  const std::string sweep = write_input(cli, "tiny-append.json", kAppendSweep);
  const auto plan = plan_of(kAppendSweep);
  REQUIRE(plan.append.size() == 4);
  REQUIRE(plan.kernels().size() == 4);

  auto first = cli("precompile --sweep " + sweep + " --arch sm_80 -j 2");
  INFO(first);
  CHECK(first.code == 0);
  CHECK(first.has("precompile tiny-append: 2 problems (0 prefill, 0 decode, 2 append) for sm_80\n"));
  CHECK(first.has("kernels        4   prefill 0, decode 0, combine 0, merge 0, append 4\n"));
  CHECK(first.has("compiled       4"));
  CHECK(first.has("cached         0"));
  CHECK(first.has("failed         0"));
  for (const auto& c : plan.append) CHECK(first.has("compiled " + readable_name(c)));  // the progress lines
  CHECK(first.has("append_bf16_d64_paged16_w4_v2_sm80"));

  // What Runtime::append_kv / prepare_append_kv do with FLASHJIT_JIT=0: the artifact store over the cache, JIT
  // off, finds the kernel of every size class of both layouts.
  auto disk = flashjit::cache::DiskCache::open({cli.cache(), 0});
  REQUIRE(disk.ok());
  flashjit::cache::ArtifactStore store(std::move(*disk), /*jit=*/false, flashjit::log::Logger{});
  for (KvLayout layout : {KvLayout::contiguous, KvLayout::paged})
    for (const auto& c : flashjit::dispatch::append_prepare_kernels(flashjit::DType::bf16, 64, layout, 16, kSm80)) {
      auto a = store.get(c);
      if (!a.ok()) FAIL(a.error().to_string());
      CHECK((*a)->info.cache_hit);
    }
  // An append kernel of another page size was not precompiled: a miss naming it.
  const auto other = flashjit::dispatch::append_prepare_kernels(flashjit::DType::bf16, 64, KvLayout::paged, 64, kSm80);
  auto miss = store.get(other.front());
  REQUIRE_FALSE(miss.ok());
  CHECK(miss.error().code == flashjit::ErrorCode::not_found);
  CHECK(miss.error().message.find(readable_name(other.front())) != std::string::npos);

  // A second run compiles nothing; --json counts the problems and kernels by kind.
  auto second = cli("precompile --json --sweep " + sweep + " --arch sm_80", "", true);
  CHECK(second.code == 0);
  const auto j = parsed(second);
  CHECK(j["ok"] == true);
  CHECK(j["problems"]["prefill"] == 0);
  CHECK(j["problems"]["decode"] == 0);
  CHECK(j["problems"]["append"] == 2);
  CHECK(j["kernels"]["total"] == 4);
  CHECK(j["kernels"]["append"] == 4);
  CHECK(j["kernels"]["decode"] == 0);
  CHECK(j["compiled"] == 0);
  CHECK(j["cached"] == 4);
  CHECK(j["failed"] == 0);
}

TEST_CASE("cli: precompile of a decode fused with an append", "[cli][precompile][decode][append]") {
  Cli cli;
  const std::string sweep = write_input(cli, "tiny-fused.json", kFusedSweep);
  const auto plan = plan_of(kFusedSweep);
  REQUIRE(plan.append.size() == 2);  // the fused decode's; the append problem's are the same two
  REQUIRE(plan.combine.size() == 1);
  REQUIRE(plan.merge.size() == 1);
  const std::size_t total = plan.kernels().size();
  REQUIRE(total == plan.decode.size() + 4);

  auto first = cli("precompile --json --sweep " + sweep + " --arch sm_80 -j 2", "", true);
  CHECK(first.code == 0);
  const auto j = parsed(first);
  CHECK(j["problems"]["decode"] == 1);
  CHECK(j["problems"]["append"] == 1);
  CHECK(j["kernels"]["total"] == total);
  CHECK(j["kernels"]["decode"] == plan.decode.size());
  CHECK(j["kernels"]["append"] == 2);
  CHECK(j["compiled"] == total);
  CHECK(j["failed"] == 0);

  auto second = cli("precompile --sweep " + sweep + " --arch sm_80");
  INFO(second);
  CHECK(second.code == 0);
  CHECK(second.has("2 problems (0 prefill, 1 decode, 1 append) for sm_80, decode planned for 132 SMs"));
  CHECK(second.has(", append 2\n"));
  CHECK(second.has("compiled       0"));
  CHECK(second.has(fmt::format("cached    {:>6}\n", total)));

  // Without its append flag the decode needs no append kernel; the summary of a decode sweep stays as it was.
  const std::string plain = write_input(cli, "plain.json", R"({"name": "plain", "problems": [
    {"kind": "decode", "heads_q": 4, "heads_kv": 1, "head_dim": 64, "seqlen_k": 4096, "layout": "paged",
     "page_size": 16}]})");
  auto unfused = cli("precompile --sweep " + plain + " --arch sm_80");
  INFO(unfused);
  CHECK(unfused.code == 0);
  CHECK(unfused.has("1 problem (0 prefill, 1 decode) for sm_80"));
  CHECK(unfused.has(fmt::format("kernels   {:>6}   prefill 0, decode {}, combine 1, merge 1\n", total - 2,
                                plan.decode.size())));
  CHECK(unfused.has("compiled       0"));
}

TEST_CASE("cli: autotune skips append problems", "[cli][autotune][append]") {
  Cli cli;
  const std::string out = quote((cli.root() / "out.json").string());
  auto only_append = cli("autotune --sweep " + write_input(cli, "append.json", kAppendSweep) + " -o " + out);
  INFO(only_append);
  CHECK(only_append.code == 2);
  CHECK(only_append.has("sweep tiny-append has only append problems (2), and append problems are not autotuned"));
  CHECK(only_append.has("no tiles to tune"));
  CHECK(only_append.has("`flashjit precompile` compiles their kernels"));
  auto no_prefill = cli("autotune --sweep " + write_input(cli, "fused.json", kFusedSweep) + " -o " + out);
  INFO(no_prefill);
  CHECK(no_prefill.code == 2);
  CHECK(no_prefill.has("has only decode problems (1) and append problems (1), and decode problems are not autotuned; "
                       "append problems are not autotuned"));
  CHECK_FALSE(fs::exists(cli.root() / "out.json"));

  auto devices = flashjit::cuda::device_count();
  if (devices.ok() && *devices > 0) return;  // the rest needs no GPU; with one, autotune would run
  const std::string mixed = write_input(cli, "mixed.json", R"({"problems": [
    {"heads_q": 4, "heads_kv": 2, "head_dim": 64, "seqlen": 256},
    {"kind": "append", "heads_kv": 2, "head_dim": 64, "layout": ["contiguous", "paged"], "page_size": [16, 64]}]})");
  auto skipped = cli("autotune --sweep " + mixed + " -o " + out);
  INFO(skipped);
  CHECK(skipped.code == 1);
  CHECK(skipped.has("skipping 3 append problems: append problems are not autotuned (an append kernel has no tiles"));
  CHECK_FALSE(skipped.has("decode problem"));
  CHECK(skipped.has("autotune needs a GPU"));
}
