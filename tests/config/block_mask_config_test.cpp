// The block_mask kind (and the prefill configs' block_sparse field): JSON round trips, parsers, readable names,
// validate()'s field-by-field errors and the any-kind forms.
#include <string>

#include "flashjit/config.hpp"
#include "support/catch.hpp"

using flashjit::AnyKernelConfig;
using flashjit::Arch;
using flashjit::BlockMaskKernelConfig;
using flashjit::KernelConfig;
using flashjit::KernelKind;
using flashjit::MaskKind;

namespace {

std::string first_field(const BlockMaskKernelConfig& c) {
  const auto issues = validate(c);
  return issues.empty() ? std::string() : issues[0].field;
}

}  // namespace

TEST_CASE("block_mask config: canonical JSON round-trips and names the kernel", "[config][block_mask]") {
  BlockMaskKernelConfig c;
  c.arch = Arch{80, false}, c.mask = MaskKind::causal, c.warps = 8;
  c.mask_mod = "__device__ bool mask_mod(int b, int h, int q, int k, const flashjit::ModContext& ctx) { return true; }";
  const std::string json = to_json(c);
  CHECK(json.rfind(R"({"kernel":"block_mask","arch":"sm_80","mask":"causal","mask_mod":")", 0) == 0);
  auto back = flashjit::block_mask_config_from_json(json);
  REQUIRE(back.ok());
  CHECK(*back == c);
  auto any = flashjit::any_config_from_json(json);
  REQUIRE(any.ok());
  CHECK(any->kind() == KernelKind::block_mask);
  CHECK(to_string(any->kind()) == std::string("block_mask"));
  auto pairs = flashjit::block_mask_config_from_pairs({"kernel=block_mask", "mask=sliding_window", "warps=2"});
  REQUIRE(pairs.ok());
  CHECK(pairs->mask == MaskKind::sliding_window);
  CHECK(pairs->warps == 2);
  CHECK(readable_name(*pairs) == "block_mask_sliding_window_w2_sm90a");
  const std::string name = readable_name(c);
  CHECK(name.rfind("block_mask_causal_mmod", 0) == 0);
  CHECK(name.size() == std::string("block_mask_causal_mmod12345678_w8_sm80").size());
  CHECK(threads_per_cta(AnyKernelConfig(c)) == 256);
  CHECK(shared_memory_bytes(AnyKernelConfig(c)) == 0);
  // The snippet's text is the kernel's: another text, another hash.
  BlockMaskKernelConfig other = c;
  other.mask_mod += "\n";
  CHECK(readable_name(other) != name);
  CHECK(hash_of(AnyKernelConfig(other)) != hash_of(AnyKernelConfig(c)));
}

TEST_CASE("block_mask config: parsers refuse other fields, validate names the field", "[config][block_mask]") {
  auto rows = flashjit::parse_config_json(R"({"kernel":"block_mask","head_dim":64})");
  REQUIRE_FALSE(rows.ok());
  CHECK(rows.error().message.find("warps") != std::string::npos);
  auto unknown = flashjit::parse_config_json(R"({"kernel":"blocks"})");
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.error().message.find("append, block_mask") != std::string::npos);
  BlockMaskKernelConfig c;
  CHECK(first_field(c).empty());
  BlockMaskKernelConfig bad = c;
  bad.warps = 0;
  CHECK(first_field(bad) == "warps");
  bad = c, bad.warps = 33;
  CHECK(first_field(bad) == "warps");
  bad = c, bad.arch = Arch{75, false};
  CHECK(first_field(bad) == "arch");
  bad = c, bad.mask_mod = std::string("bool\0x", 6);
  CHECK(first_field(bad) == "mask_mod");
}

TEST_CASE("prefill block_sparse: in the JSON and the name only when on, refused with varlen, pages and packing",
          "[config][block_sparse]") {
  KernelConfig c = KernelConfig::defaults(flashjit::Algorithm::fa3);
  c.arch = Arch{90, true}, c.mask = MaskKind::causal;
  CHECK(to_json(c).find("block_sparse") == std::string::npos);
  CHECK(readable_name(c).find("bsparse") == std::string::npos);
  c.block_sparse = true;
  REQUIRE(validate(c).empty());
  CHECK(to_json(c).find(R"("block_sparse":true)") != std::string::npos);
  CHECK(readable_name(c).find("_bsparse_sm90a") != std::string::npos);
  auto back = flashjit::config_from_json(to_json(c));
  REQUIRE(back.ok());
  CHECK(*back == c);
  auto pairs = flashjit::config_from_pairs({"algorithm=fa3", "mask=causal", "block_sparse=true"});
  REQUIRE(pairs.ok());
  CHECK(pairs->block_sparse);
  for (auto set : {+[](KernelConfig& k) { k.varlen = true; }, +[](KernelConfig& k) { k.page_size = 64; },
                   +[](KernelConfig& k) { k.pack_gqa = true; }}) {
    KernelConfig bad = c;
    set(bad);
    const auto issues = validate(bad);
    bool named = false;
    for (const auto& i : issues) named |= i.field == "block_sparse";
    CHECK(named);
  }
}
