// The variants through the CLI: `select --softcap/--alibi/--sinks` names the variant kernels (prefill, and decode's
// split and combine kernels), `precompile` compiles a sweep's variant kernels, `emit` takes the config fields
// (sinks=true ...). No GPU needed.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/cli_runner.hpp"

using flashjit::test::Cli;
using flashjit::test::parsed;
using flashjit::test::quote;
using nlohmann::json;

TEST_CASE("cli variants: select names the variant kernel", "[cli][select][variants]") {
  Cli cli;
  auto plain = cli("select --head-dim 128 --mask causal --arch sm_90a");
  INFO(plain);
  CHECK(plain.code == 0);
  CHECK_FALSE(plain.has("softcap"));
  auto capped = cli("select --head-dim 128 --mask causal --softcap 50 --arch sm_90a");
  INFO(capped);
  CHECK(capped.code == 0);
  CHECK(capped.has("_causal_persistent_softcap_sm90a"));
  CHECK(capped.has("\"softcap\":true"));
  auto every = cli("select --json --head-dim 64 --softcap 30 --alibi --sinks --arch sm_80", "", true);
  CHECK(every.code == 0);
  const json e = parsed(every);
  CHECK(e["kernel"]["config"]["algorithm"] == "fa2");
  CHECK(e["kernel"]["config"]["softcap"] == true);
  CHECK(e["kernel"]["config"]["alibi"] == true);
  CHECK(e["kernel"]["config"]["sinks"] == true);
  CHECK(e["kernel"]["name"].get<std::string>().find("_softcap_alibi_sinks_sm80") != std::string::npos);
  CHECK(e["problem"]["softcap"] == true);
  CHECK(e["problem"]["alibi"] == true);

  auto negative = cli("select --softcap -1");
  INFO(negative);
  CHECK(negative.code == 2);
  CHECK(negative.has("--softcap"));

  // Decode, gpt-oss-shaped: one sequence over 8k keys splits on 132 SMs; the sinks join where the splits merge.
  auto decode = cli("select --json --decode --batch 1 --heads-q 64 --heads-kv 8 --head-dim 64 --seqlen-k 8192 --sinks "
                    "--softcap 30",
                    "", true);
  CHECK(decode.code == 0);
  const json d = parsed(decode);
  CHECK(d["problem"]["sinks"] == true);
  CHECK(d["problem"]["softcap"] == true);
  CHECK_FALSE(d["problem"].contains("alibi"));
  CHECK(d["split_kernel"]["config"]["sinks"] == true);
  CHECK(d["split_kernel"]["config"]["softcap"] == true);
  CHECK(d["split_kernel"]["name"].get<std::string>().find("_softcap_sinks_sm90a") != std::string::npos);
  REQUIRE(d["num_splits"].get<int>() > 1);
  CHECK(d["combine_kernel"]["config"]["sinks"] == true);
}

TEST_CASE("cli variants: select names the rel_bias and seqused_k kernels, prefill only", "[cli][select][variants]") {
  Cli cli;
  auto both = cli("select --json --head-dim 128 --mask causal --rel-bias --seqused-k --arch sm_90a", "", true);
  CHECK(both.code == 0);
  const json b = parsed(both);
  CHECK(b["kernel"]["config"]["rel_bias"] == true);
  CHECK(b["kernel"]["config"]["seqused_k"] == true);
  CHECK(b["kernel"]["name"].get<std::string>().find("_relbias_sequsedk_sm90a") != std::string::npos);
  CHECK(b["problem"]["rel_bias"] == true);
  CHECK(b["problem"]["seqused_k"] == true);
  auto decode = cli("select --decode --rel-bias");
  INFO(decode);
  CHECK(decode.code == 2);
  CHECK(decode.has("--rel-bias and --seqused-k are prefill options"));
}

TEST_CASE("cli variants: precompile compiles a sweep's variant kernels", "[cli][precompile][variants]") {
  Cli cli;
  const auto sweep = cli.root() / "gemma.json";
  std::ofstream(sweep) << R"({"name": "gemma", "problems": [
    {"heads_q": 4, "heads_kv": 2, "head_dim": 64, "seqlen": 256, "softcap": [false, 50]}]})";
  auto pre = cli("precompile --json --sweep " + quote(sweep.string()) + " --arch sm_80 -j 2", "", true);
  CHECK(pre.code == 0);
  const json p = parsed(pre);
  CHECK(p["compiled"] == 2);  // with and without softcap
  CHECK(p["failed"] == 0);
  auto ls = cli("cache ls");
  INFO(ls);
  CHECK(ls.has("_none_softcap_sm80"));

  auto emitted = cli("emit algorithm=fa2 arch=sm_80 head_dim=64 sinks=true");
  INFO(emitted);
  CHECK(emitted.code == 0);
  CHECK(emitted.has("/*sinks=*/true>"));
}
