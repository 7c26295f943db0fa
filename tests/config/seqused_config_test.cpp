// The prefill configs' seqused_k field: in the JSON and the name only when on, round trips, refused beside a page
// size or block sparsity.
#include <string>

#include "flashjit/config.hpp"
#include "support/catch.hpp"

using flashjit::Arch;
using flashjit::KernelConfig;
using flashjit::MaskKind;

TEST_CASE("prefill seqused_k: in the JSON and the name only when on, refused with pages and block sparsity",
          "[config][seqused]") {
  for (auto algorithm : {flashjit::Algorithm::fa3, flashjit::Algorithm::fa2, flashjit::Algorithm::naive}) {
    KernelConfig c = KernelConfig::defaults(algorithm);
    c.arch = Arch{90, true}, c.mask = MaskKind::causal;
    INFO(readable_name(c));
    CHECK(to_json(c).find("seqused_k") == std::string::npos);
    CHECK(readable_name(c).find("sequsedk") == std::string::npos);
    c.seqused_k = true;
    REQUIRE(validate(c).empty());
    CHECK(to_json(c).find(R"("seqused_k":true)") != std::string::npos);
    CHECK(readable_name(c).find("_sequsedk_sm90a") != std::string::npos);
    auto back = flashjit::config_from_json(to_json(c));
    REQUIRE(back.ok());
    CHECK(*back == c);
    c.varlen = true;  // over ragged keys too
    CHECK(validate(c).empty());
    for (auto set : {+[](KernelConfig& k) { k.page_size = 64; }, +[](KernelConfig& k) { k.block_sparse = true; }}) {
      KernelConfig bad = c;
      bad.varlen = false;
      set(bad);
      bool named = false;
      for (const auto& i : validate(bad)) named |= i.field == "seqused_k";
      CHECK(named);
    }
  }
  auto pairs = flashjit::config_from_pairs({"algorithm=fa2", "seqused_k=true"});
  REQUIRE(pairs.ok());
  CHECK(pairs->seqused_k);
}
