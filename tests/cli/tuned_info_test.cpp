// `flashjit info` counts the tuned tables a Runtime loads (FLASHJIT_TUNED, <cache>/tuned); with --verbose
// it says why a table is ignored.
#include <string>

#include "cli/cli_runner.hpp"
#include "dispatch/tuned_table.hpp"
#include "support/catch.hpp"

using flashjit::test::Cli;
using flashjit::test::quote;
using namespace flashjit::dispatch;

TEST_CASE("cli: info counts the tuned tables and says why one is ignored", "[cli][tuned]") {
  Cli cli;
  TunedEntry e;
  e.problem.seqlen_q = e.problem.seqlen_k = 4096, e.problem.heads_q = 32, e.problem.heads_kv = 8;
  e.best.algorithm = flashjit::Algorithm::fa3, e.best.block_m = 128, e.best.consumer_warpgroups = 2, e.best.block_n = 128;
  const TunedTable current{system_stamp("NVIDIA H200", flashjit::Arch{90, true}, 13000), "llama3", {e, e}};
  REQUIRE(save_table(current, cli.cache() / "tuned" / "h200.json").ok());
  TunedTable old = current;
  old.stamp.flashjit = "0.0.1";
  REQUIRE(save_table(old, cli.root() / "old.json").ok());

  auto r = cli("-v info", "FLASHJIT_TUNED=" + quote((cli.root() / "old.json").string()));
  INFO(r);
  CHECK(r.code == 0);
  CHECK(r.has("tuned:     1 table, 2 entries"));
  CHECK(r.has("old.json: measured with flashjit 0.0.1"));  // debug level
  auto quiet = cli("info", "FLASHJIT_TUNED=" + quote((cli.root() / "old.json").string()));
  CHECK_FALSE(quiet.has("0.0.1"));
}
