// Tests of `flashjit precompile` on sweeps with decode problems (small sm_80 kernels) into a fresh cache,
// then of what a runtime in precompiled-only mode finds there: the artifact store Runtime::decode and
// Runtime::merge load through, with jit=false, reports a cache hit for the split, combine and merge kernels
// the planner picks, and so does `flashjit compile` of their JSON with FLASHJIT_JIT=0. Also: decode and
// combine configs through `flashjit compile` / `emit`, the worker fault hook on a decode kernel, `--sms`,
// and autotune on sweeps with decode problems.
#include <filesystem>
#include <string>

#include "cache/disk_cache.hpp"
#include "cli/cli_runner.hpp"
#include "cuda/driver.hpp"
#include "dispatch/decode_heuristics.hpp"
#include "cache/artifact_store.hpp"
#include "support/catch.hpp"
#include "tune/compile_pool.hpp"
#include "tune/precompile_plan.hpp"
#include "tune/sweep.hpp"

namespace fs = std::filesystem;
using flashjit::AnyKernelConfig;
using flashjit::Arch;
using flashjit::test::Cli;
using flashjit::test::quote;
using flashjit::test::write_input;

namespace {

const Arch kSm80{80, false};

// Two decode problems (GQA 4, d64, 4096 keys): B1 leaves SMs idle, so its keys are split (split kernel +
// combine kernel); B256 fills the GPU in one split and uses the same split kernel. With the merge kernel:
// three kernels.
const char* kDecodeSweep = R"({"name": "tiny-decode", "problems": [
  {"kind": "decode", "heads_q": 4, "heads_kv": 1, "head_dim": 64, "batch": [1, 256], "seqlen_k": 4096}]})";

flashjit::tune::PrecompilePlan plan_of(const char* sweep_text, int sms = flashjit::tune::kDefaultPrecompileSms) {
  auto sweep = flashjit::tune::parse_sweep(sweep_text, "tiny-decode.json");
  REQUIRE(sweep.ok());
  return flashjit::tune::precompile_plan(*sweep, {kSm80}, {}, false, sms);
}

}  // namespace

TEST_CASE("cli: precompile of decode problems, then a precompiled-only runtime finds the kernels",
          "[cli][precompile][decode]") {
  Cli cli;
  const std::string sweep = write_input(cli, "tiny-decode.json", kDecodeSweep);
  const auto plan = plan_of(kDecodeSweep);
  REQUIRE(plan.decode.size() == 1);
  REQUIRE(plan.combine.size() == 1);
  REQUIRE(plan.merge.size() == 1);
  const auto kernels = plan.kernels();

  auto first = cli("precompile --sweep " + sweep + " --arch sm_80 -j 2");
  INFO(first);
  CHECK(first.code == 0);
  CHECK(first.has("precompile tiny-decode: 2 problems (0 prefill, 2 decode) for sm_80, decode planned for 132 SMs"));
  CHECK(first.has("kernels        3   prefill 0, decode 1, combine 1, merge 1"));
  CHECK(first.has("compiled       3"));
  CHECK(first.has("failed         0"));
  for (const auto& k : kernels) CHECK(first.has("compiled " + readable_name(k)));  // the progress lines

  // What Runtime::decode / merge do with FLASHJIT_JIT=0: the artifact store over the cache, JIT off.
  auto disk = flashjit::cache::DiskCache::open({cli.cache(), 0});
  REQUIRE(disk.ok());
  flashjit::cache::ArtifactStore store(std::move(*disk), /*jit=*/false, flashjit::log::Logger{});
  auto split = store.get(plan.decode[0]);
  auto combine = store.get(plan.combine[0]);
  auto merge = store.get(plan.merge[0]);
  for (const auto* a : {&split, &combine, &merge}) {
    if (!a->ok()) FAIL(a->error().to_string());
    CHECK((**a)->info.cache_hit);
    CHECK((**a)->cubin.compare(0, 4, "\x7f" "ELF") == 0);
  }
  CHECK((*split)->info.name == readable_name(plan.decode[0]));
  // ... the very configs the planner gives a problem on a 132-SM GPU of the arch.
  flashjit::DecodeProblem b1;
  b1.batch = 1, b1.heads_q = 4, b1.heads_kv = 1, b1.head_dim = 64, b1.max_seqlen_k = 4096;
  const auto b1_plan = flashjit::dispatch::plan_decode(b1, kSm80, 132);
  CHECK(b1_plan.splits.num_splits > 1);
  CHECK(b1_plan.split == plan.decode[0]);
  CHECK(b1_plan.combine == plan.combine[0]);
  CHECK(flashjit::dispatch::merge_kernel_config(flashjit::DType::bf16, 64, kSm80) == plan.merge[0]);
  for (const auto& k : kernels) {
    auto info = flashjit::tune::compile_in_cache({cli.cache()}, k, /*jit=*/false);
    REQUIRE(info.ok());
    CHECK(info->cache_hit);
  }
  // A decode kernel that was not precompiled is a miss naming the kernel.
  flashjit::DecodeKernelConfig paged = plan.decode[0];
  paged.layout = flashjit::KvLayout::paged, paged.page_size = 16;
  auto miss = store.get(paged);
  REQUIRE_FALSE(miss.ok());
  CHECK(miss.error().code == flashjit::ErrorCode::not_found);
  CHECK(miss.error().message.find(readable_name(paged)) != std::string::npos);

  // `flashjit compile` of the same configs' JSON in precompiled-only mode: hits.
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    const std::string file = write_input(cli, "kernel" + std::to_string(i) + ".json", to_json(kernels[i]));
    auto hit = cli("compile " + file, "FLASHJIT_JIT=0");
    INFO(hit);
    CHECK(hit.code == 0);
    CHECK(hit.has(readable_name(kernels[i])));
    CHECK(hit.has("hit"));
  }
  auto pairs = cli("compile kernel=combine arch=sm_80 head_dim=64 fp32_inputs=false --json", "FLASHJIT_JIT=0");
  INFO(pairs);
  CHECK(pairs.code == 0);
  CHECK(pairs.has(R"("cache_hit": true)"));
  CHECK(pairs.has(R"("kernel": "combine")"));
  auto not_there = cli("compile kernel=decode arch=sm_80 head_dim=64 layout=paged page_size=16", "FLASHJIT_JIT=0");
  INFO(not_there);
  CHECK(not_there.code == 1);
  CHECK(not_there.has("FLASHJIT_JIT=0"));

  // A second run finds everything; with --sms 1 nothing is split, so the combine kernel is not needed.
  auto second = cli("precompile --sweep " + sweep + " --arch sm_80");
  INFO(second);
  CHECK(second.code == 0);
  CHECK(second.has("compiled       0"));
  CHECK(second.has("cached         3"));
  auto one_sm = cli("precompile --sweep " + sweep + " --arch sm_80 --sms 1");
  INFO(one_sm);
  CHECK(one_sm.code == 0);
  CHECK(one_sm.has("decode planned for 1 SMs"));
  CHECK(one_sm.has("kernels        2   prefill 0, decode 1, combine 0, merge 1"));
  CHECK(one_sm.has("cached         2"));
}

TEST_CASE("cli: precompile of mixed sweeps, decode worker faults, --sms usage", "[cli][precompile][decode]") {
  Cli cli;
  // One prefill problem (one fa2 kernel) and the decode problems: four kernels; the decode worker crashes.
  const std::string mixed = write_input(cli, "mixed.json", R"({"problems": [
    {"heads_q": 4, "heads_kv": 2, "head_dim": 64, "seqlen": 256},
    {"kind": "decode", "heads_q": 4, "heads_kv": 1, "head_dim": 64, "batch": [1, 256], "seqlen_k": 4096}]})");
  auto crashed = cli("precompile --sweep " + mixed + " --arch sm_80 -j 2", "FLASHJIT_WORKER_FAULT=crash:decode_");
  INFO(crashed);
  CHECK(crashed.code == 1);
  CHECK(crashed.has("3 problems (1 prefill, 2 decode)"));
  CHECK(crashed.has("kernels        4   prefill 1, decode 1, combine 1, merge 1"));
  CHECK(crashed.has("SIGSEGV"));
  CHECK(crashed.has("compiled       3"));
  CHECK(crashed.has("failed         1"));
  auto again = cli("precompile --sweep " + mixed + " --arch sm_80");
  INFO(again);
  CHECK(again.code == 0);
  CHECK(again.has("compiled       1"));
  CHECK(again.has("cached         3"));

  // A prefill-only sweep keeps its summary as it was.
  const std::string prefill = write_input(cli, "prefill.json", R"({"problems": [{"heads_q": 4, "heads_kv": 2, "head_dim": 64, "seqlen": 256}]})");
  auto plain = cli("precompile --sweep " + prefill + " --arch sm_80");
  INFO(plain);
  CHECK(plain.code == 0);
  CHECK(plain.has("precompile prefill: 1 problem for sm_80\n"));
  CHECK(plain.has("kernels        1\n"));

  for (const char* sms : {"0", "-4", "x"}) {
    auto bad = cli("precompile --sweep " + mixed + " --sms " + sms);
    INFO(bad);
    CHECK(bad.code == 2);
  }
  auto bad_sweep = cli("precompile --sweep " +
                       write_input(cli, "bad.json", R"({"problems": [{"kind": "decode", "heads_q": 4, "head_dim": 64,
                                                                  "seqlen_k": 64, "mask": "causal"}]})"));
  INFO(bad_sweep);
  CHECK(bad_sweep.code == 2);
  CHECK(bad_sweep.has("problems[0].mask: unknown field"));
}

TEST_CASE("cli: emit of decode and combine configs", "[cli][decode]") {
  Cli cli;
  auto split = cli("emit kernel=decode arch=sm_80 head_dim=64 layout=paged page_size=16 mask=sliding_window");
  INFO(split);
  CHECK(split.code == 0);
  CHECK(split.has("decode_bf16_d64_r16_bn64_s3_w4_paged16_window_sm80"));
  CHECK(split.has(R"("kernel":"decode")"));
  const std::string file = write_input(cli, "combine.json", R"({"kernel": "combine", "dtype": "fp16", "fp32_inputs": false})");
  auto combine = cli("emit " + file);
  INFO(combine);
  CHECK(combine.code == 0);
  CHECK(combine.has("combine_fp16_fp16_d128_w4_sm90a"));
  auto invalid = cli("emit kernel=decode rows=24");
  INFO(invalid);
  CHECK(invalid.code == 2);
  CHECK(invalid.has("rows:"));
  auto bad_kind = cli("emit kernel=prefil");
  INFO(bad_kind);
  CHECK(bad_kind.code == 2);
  CHECK(bad_kind.has("'kernel'"));
  auto run = cli("run kernel=combine");
  INFO(run);
  CHECK(run.code == 2);
  CHECK(run.has("run takes a prefill config"));
}

TEST_CASE("cli: autotune refuses paged prefill problems, which precompile compiles", "[cli][autotune][paged]") {
  Cli cli;
  const std::string paged = write_input(cli, "paged.json", R"({"problems": [
    {"heads_q": 4, "heads_kv": 2, "head_dim": 64, "seqlen_q": 64, "seqlen_k": 256, "page_size": [0, 16]}]})");
  const std::string out = quote((cli.root() / "out.json").string());
  auto rejected = cli("autotune --sweep " + paged + " -o " + out);
  INFO(rejected);
  CHECK(rejected.code == 2);
  CHECK(rejected.has("paged16 is paged, and paged problems are not autotuned"));
  CHECK_FALSE(fs::exists(cli.root() / "out.json"));
  auto compiled = cli("precompile --sweep " + paged + " --arch sm_90a");
  INFO(compiled);
  CHECK(compiled.code == 0);
  CHECK(compiled.has("_paged16_sm90a"));
}

TEST_CASE("cli: autotune skips decode problems", "[cli][autotune][decode]") {
  Cli cli;
  const std::string only_decode = write_input(cli, "decode.json", kDecodeSweep);
  const std::string out = quote((cli.root() / "out.json").string());
  auto rejected = cli("autotune --sweep " + only_decode + " -o " + out);
  INFO(rejected);
  CHECK(rejected.code == 2);
  CHECK(rejected.has("only decode problems"));
  CHECK(rejected.has("decode problems are not autotuned"));
  CHECK_FALSE(fs::exists(cli.root() / "out.json"));

  auto devices = flashjit::cuda::device_count();
  if (devices.ok() && *devices > 0) return;  // the rest needs no GPU; with one, autotune would run
  const std::string mixed = write_input(cli, "mixed.json", R"({"problems": [
    {"heads_q": 4, "heads_kv": 2, "head_dim": 64, "seqlen": 256},
    {"kind": "decode", "heads_q": 4, "heads_kv": 1, "head_dim": 64, "seqlen_k": 4096}]})");
  auto skipped = cli("autotune --sweep " + mixed + " -o " + out);
  INFO(skipped);
  CHECK(skipped.code == 1);
  CHECK(skipped.has("skipping 1 decode problem: decode problems are not autotuned"));
  CHECK(skipped.has("autotune needs a GPU"));
}

TEST_CASE("cli: autotune refuses biased and block-sparse problems; precompile compiles them and the block_mask kernel",
          "[cli][autotune][bias][block_sparse]") {
  Cli cli;
  const std::string sweep = write_input(cli, "sparse.json", R"({"problems": [
    {"heads_q": 4, "heads_kv": 2, "head_dim": 64, "seqlen": 256, "mask": "causal", "bias": "bool"},
    {"heads_q": 4, "heads_kv": 2, "head_dim": 64, "seqlen": 256, "mask": "causal", "block_size": 128}]})");
  const std::string out = quote((cli.root() / "out.json").string());
  auto rejected = cli("autotune --sweep " + sweep + " -o " + out);
  INFO(rejected);
  CHECK(rejected.code == 2);
  CHECK(rejected.has("has a bias, and such problems are not autotuned yet"));
  CHECK_FALSE(fs::exists(cli.root() / "out.json"));
  auto compiled = cli("precompile --sweep " + sweep + " --arch sm_90a");
  INFO(compiled);
  CHECK(compiled.code == 0);
  CHECK(compiled.has("block_mask 1"));
  CHECK(compiled.has("_biasbool_"));
  CHECK(compiled.has("_bsparse_sm90a"));
  CHECK(compiled.has("block_mask_causal_w8_sm90a"));
}
