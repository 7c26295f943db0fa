// Tests of what follows from each kind's field declaration (src/config/kinds.hpp): the fields an algorithm
// has, the defaults a parsed config starts from, equality and the hash over those fields only, the known-field
// lists of the errors, and the any-kind forms.
#include <string>
#include <vector>

#include "flashjit/config.hpp"
#include "support/catch.hpp"
#include "support/checks.hpp"

using flashjit::Algorithm;
using flashjit::AnyKernelConfig;
using flashjit::CombineKernelConfig;
using flashjit::DecodeKernelConfig;
using flashjit::KernelConfig;
using flashjit::KernelKind;
using flashjit::MaskKind;
using flashjit::test::contains;
using flashjit::test::require_error_naming;

TEST_CASE("kinds: fa3 has consumer_warpgroups, fa2 and naive have warps; naming the other is an error",
          "[config][kinds]") {
  auto fa3 = flashjit::config_from_pairs({"algorithm=fa3", "consumer_warpgroups=3", "block_m=192"});
  REQUIRE(fa3.ok());
  CHECK(fa3->consumer_warpgroups == 3);
  CHECK(contains(to_json(*fa3), R"("consumer_warpgroups":3)"));
  CHECK_FALSE(contains(to_json(*fa3), R"("warps")"));
  CHECK(contains(readable_name(*fa3), "_wg3_"));

  auto wrong = flashjit::config_from_pairs({"algorithm=fa3", "warps=2"});
  require_error_naming(wrong, "warps");
  CHECK(contains(wrong.error().message, "fa3 kernels have no warps"));
  CHECK(contains(wrong.error().message, "consumer_warpgroups"));  // the fields it has are listed
  require_error_naming(flashjit::config_from_json(R"({"algorithm":"fa2","consumer_warpgroups":2})"),
                       "consumer_warpgroups");
  require_error_naming(flashjit::config_from_pairs({"algorithm=naive", "consumer_warpgroups=1"}), "consumer_warpgroups");

  auto fa2 = flashjit::config_from_pairs({"algorithm=fa2", "warps=8"});
  REQUIRE(fa2.ok());
  CHECK(contains(to_json(*fa2), R"("warps":8)"));
  CHECK_FALSE(contains(to_json(*fa2), "consumer_warpgroups"));
}

TEST_CASE("kinds: pack_gqa is an fa3 field, in the JSON and the name only when on", "[config][kinds]") {
  auto plain = flashjit::config_from_pairs({"algorithm=fa3"});
  REQUIRE(plain.ok());
  CHECK_FALSE(contains(to_json(*plain), "pack_gqa"));
  CHECK_FALSE(contains(readable_name(*plain), "packgqa"));
  auto packed = flashjit::config_from_pairs({"algorithm=fa3", "pack_gqa=true", "mask=sliding_window"});
  REQUIRE(packed.ok());
  CHECK(packed->pack_gqa);
  CHECK(contains(to_json(*packed), R"("pack_gqa":true)"));
  CHECK(contains(readable_name(*packed), "_sliding_window_packgqa_sm90a"));
  auto again = flashjit::config_from_json(to_json(*packed));
  REQUIRE(again.ok());
  CHECK(*again == *packed);
  CHECK_FALSE(*again == *plain);
  auto fa2 = flashjit::config_from_pairs({"algorithm=fa2", "pack_gqa=true"});
  require_error_naming(fa2, "pack_gqa");
  CHECK(contains(fa2.error().message, "fa2 kernels have no pack_gqa"));
}

TEST_CASE("kinds: a parsed config starts from the defaults of the algorithm it names", "[config][kinds]") {
  for (Algorithm a : {Algorithm::naive, Algorithm::fa2, Algorithm::fa3}) {
    auto c = flashjit::config_from_pairs({std::string("algorithm=") + to_string(a), "head_dim=64"});
    REQUIRE(c.ok());
    KernelConfig expected = KernelConfig::defaults(a);
    expected.head_dim = 64;
    CHECK(*c == expected);
    INFO(to_json(*c));
    CHECK(validate(*c).empty());  // every algorithm's defaults are a valid kernel at d64 on sm_90a
  }
  // The order of the fields does not matter: the algorithm is read first.
  auto late = flashjit::config_from_pairs({"head_dim=64", "algorithm=naive"});
  REQUIRE(late.ok());
  CHECK(late->block_m == 1);
  CHECK(late->stages == 1);
}

TEST_CASE("kinds: equality and the hash cover the fields a config has, not the others", "[config][kinds]") {
  KernelConfig a = KernelConfig::defaults(Algorithm::fa3), b = a;
  b.warps = 7;  // not a field of fa3
  CHECK(a == b);
  CHECK(hash_of(AnyKernelConfig(a)) == hash_of(AnyKernelConfig(b)));
  CHECK(to_json(a) == to_json(b));
  b.consumer_warpgroups = 3;
  CHECK_FALSE(a == b);
  CHECK(hash_of(AnyKernelConfig(a)) != hash_of(AnyKernelConfig(b)));

  KernelConfig f = KernelConfig::defaults(Algorithm::fa2), g = f;
  g.consumer_warpgroups = 1;  // not a field of fa2
  CHECK(f == g);
  g.warps = 8;
  CHECK_FALSE(f == g);

  // Kinds never compare equal and (almost surely) hash apart even with equal-looking fields.
  DecodeKernelConfig d;
  CombineKernelConfig c;
  CHECK_FALSE(AnyKernelConfig(d) == AnyKernelConfig(c));
  CHECK(hash_of(AnyKernelConfig(d)) != hash_of(AnyKernelConfig(c)));
  DecodeKernelConfig d2 = d;
  d2.mask = MaskKind::chunked_causal;
  CHECK(hash_of(AnyKernelConfig(d)) != hash_of(AnyKernelConfig(d2)));
}

TEST_CASE("kinds: unknown fields list the kind's fields; partial configs say which fields were given",
          "[config][kinds]") {
  auto decode = flashjit::parse_config_json(R"({"kernel":"decode","head":64})");
  require_error_naming(decode, "head");
  CHECK(contains(decode.error().message, "unknown field of a decode config"));
  CHECK(contains(decode.error().message, "column_groups"));
  auto combine = flashjit::parse_config_pairs({"kernel=combine", "rows=16"});
  require_error_naming(combine, "rows");
  CHECK(contains(combine.error().message, "fp32_inputs"));

  auto partial = flashjit::parse_config_pairs({"algorithm=fa3", "head_dim=256", "mask=causal"});
  REQUIRE(partial.ok());
  CHECK(partial->config.kind() == KernelKind::prefill);
  CHECK(partial->given == std::vector<std::string>{"algorithm", "head_dim", "mask"});
  CHECK(partial->has("mask"));
  CHECK_FALSE(partial->has("block_n"));
  auto kinds = flashjit::parse_config_json(R"({"kernel":"decode","layout":"paged","page_size":16})");
  REQUIRE(kinds.ok());
  CHECK(kinds->config.kind() == KernelKind::decode);
  CHECK(kinds->given == std::vector<std::string>{"layout", "page_size"});  // "kernel" names the kind only
}

TEST_CASE("kinds: nested JSON values are refused without printing them", "[config][kinds]") {
  std::string deep(100000, '[');
  deep += std::string(100000, ']');
  auto r = flashjit::parse_config_json(R"({"head_dim":)" + deep + "}");
  require_error_naming(r, "head_dim");
  CHECK(r.error().message.size() < 300);
}
