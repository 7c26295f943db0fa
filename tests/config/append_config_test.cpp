// The append kind: its JSON round trip, parsers, readable name, validate()'s field-by-field errors and the
// any-kind forms (kind, hash, resources).
#include <string>

#include "flashjit/config.hpp"
#include "support/catch.hpp"

using flashjit::AnyKernelConfig;
using flashjit::AppendKernelConfig;
using flashjit::Arch;
using flashjit::DType;
using flashjit::KernelKind;
using flashjit::KvLayout;

namespace {

std::string first_field(const AppendKernelConfig& c) {
  const auto issues = validate(c);
  return issues.empty() ? std::string() : issues[0].field;
}

}  // namespace

TEST_CASE("append config: canonical JSON round-trips and names the kernel", "[config][append]") {
  AppendKernelConfig c;
  c.arch = Arch{80, false}, c.dtype = DType::fp16, c.head_dim = 64, c.layout = KvLayout::paged, c.page_size = 16;
  c.warps = 8, c.vectors = 4;
  const std::string json = to_json(c);
  CHECK(json == R"({"kernel":"append","arch":"sm_80","dtype":"fp16","head_dim":64,"layout":"paged","page_size":16,)"
                R"("warps":8,"vectors":4})");
  auto back = flashjit::append_config_from_json(json);
  REQUIRE(back.ok());
  CHECK(*back == c);
  auto any = flashjit::any_config_from_json(json);
  REQUIRE(any.ok());
  CHECK(any->kind() == KernelKind::append);
  CHECK(*any == AnyKernelConfig(c));
  CHECK(to_string(any->kind()) == std::string("append"));
  auto pairs = flashjit::append_config_from_pairs({"kernel=append", "head_dim=64", "layout=paged", "page_size=16",
                                                   "arch=sm_80", "dtype=fp16", "warps=8", "vectors=4"});
  REQUIRE(pairs.ok());
  CHECK(*pairs == c);
  CHECK(readable_name(c) == "append_fp16_d64_paged16_w8_v4_sm80");
  CHECK(readable_name(AppendKernelConfig{}) == "append_bf16_d128_contiguous_w4_v2_sm90a");
  CHECK(readable_name(AnyKernelConfig(c)) == readable_name(c));
  CHECK(threads_per_cta(AnyKernelConfig(c)) == 256);
  CHECK(shared_memory_bytes(AnyKernelConfig(c)) == 0);
}

TEST_CASE("append config: the parsers refuse other kinds' fields and other kinds", "[config][append]") {
  auto rows = flashjit::parse_config_json(R"({"kernel":"append","rows":16})");
  REQUIRE_FALSE(rows.ok());
  CHECK(rows.error().message.find("unknown field of an append config") != std::string::npos);
  CHECK(rows.error().message.find("vectors") != std::string::npos);
  auto other = flashjit::append_config_from_json(R"({"kernel":"decode"})");
  REQUIRE_FALSE(other.ok());
  CHECK(other.error().message.find("'decode' is not 'append'") != std::string::npos);
  auto unknown = flashjit::parse_config_json(R"({"kernel":"copy"})");
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.error().message.find("prefill, decode, combine, append") != std::string::npos);
  auto typed = flashjit::parse_config_json(R"({"kernel":"append","vectors":"4"})");
  REQUIRE_FALSE(typed.ok());
  CHECK(typed.error().message.find("vectors") != std::string::npos);
}

TEST_CASE("append config: validate names the field", "[config][append]") {
  AppendKernelConfig c;
  REQUIRE(validate(c).empty());
  REQUIRE(check(AnyKernelConfig(c)).ok());
  AppendKernelConfig bad = c;
  bad.head_dim = 12;
  CHECK(first_field(bad) == "head_dim");
  bad = c, bad.head_dim = 264;
  CHECK(first_field(bad) == "head_dim");
  bad = c, bad.head_dim = 8;
  CHECK(first_field(bad).empty());
  bad = c, bad.layout = KvLayout::paged, bad.page_size = 0;
  CHECK(first_field(bad) == "page_size");
  bad.page_size = 24;
  CHECK(first_field(bad) == "page_size");
  bad.page_size = 512;
  CHECK(first_field(bad) == "page_size");
  for (int ok : {1, 2, 16, 256}) {
    bad.page_size = ok;
    CHECK(first_field(bad).empty());
  }
  bad = c, bad.page_size = 16;  // contiguous
  CHECK(first_field(bad) == "page_size");
  bad = c, bad.warps = 0;
  CHECK(first_field(bad) == "warps");
  bad = c, bad.warps = 33;
  CHECK(first_field(bad) == "warps");
  bad = c, bad.vectors = 3;
  CHECK(first_field(bad) == "vectors");
  bad = c, bad.arch = Arch{75, false};
  CHECK(first_field(bad) == "arch");
  bad = c, bad.arch = Arch{80, true};
  CHECK(first_field(bad) == "arch");
  const auto st = check(bad);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message.find("append_bf16_d128_contiguous_w4_v2_sm80a") != std::string::npos);
}

TEST_CASE("append config: kinds compare and hash apart, fields change the hash", "[config][append]") {
  AppendKernelConfig a, b;
  CHECK(hash_of(AnyKernelConfig(a)) == hash_of(AnyKernelConfig(b)));
  b.vectors = 4;
  CHECK(hash_of(AnyKernelConfig(a)) != hash_of(AnyKernelConfig(b)));
  CHECK_FALSE(AnyKernelConfig(a) == AnyKernelConfig(flashjit::CombineKernelConfig{}));
  CHECK(hash_of(AnyKernelConfig(a)) != hash_of(AnyKernelConfig(flashjit::CombineKernelConfig{})));
}
