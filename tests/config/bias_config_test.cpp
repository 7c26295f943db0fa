// The bias field of prefill and decode configs: in the JSON and the name only when set, round trips through JSON
// and key=value pairs, its values named in errors, refused with pack_gqa, part of the cache key and the hash.
#include <string>

#include "flashjit/config.hpp"
#include "support/catch.hpp"

using namespace flashjit;

TEST_CASE("bias: the type names both ways", "[config][bias]") {
  for (BiasType b : {BiasType::none, BiasType::fp32, BiasType::bf16, BiasType::fp16, BiasType::boolean}) {
    INFO(to_string(b));
    CHECK(parse_bias_type(to_string(b)) == b);
  }
  CHECK(std::string(to_string(BiasType::boolean)) == "bool");
  CHECK_FALSE(parse_bias_type("int8"));
}

TEST_CASE("bias: in the prefill JSON and name only when set, last", "[config][bias]") {
  KernelConfig c = KernelConfig::defaults(Algorithm::fa3);
  c.mask = MaskKind::causal;
  const std::string plain = to_json(c), plain_name = readable_name(c);
  CHECK(plain.find("bias") == std::string::npos);
  c.sinks = true;
  c.bias = BiasType::bf16;
  CHECK(to_json(c).ends_with(R"("sinks":true,"bias":"bf16"})"));
  CHECK(readable_name(c).ends_with("_causal_sinks_biasbf16_sm90a"));
  auto back = config_from_json(to_json(c));
  REQUIRE(back.ok());
  CHECK(*back == c);
  CHECK(hash_of(AnyKernelConfig(*back)) == hash_of(AnyKernelConfig(c)));
  KernelConfig f32 = c;
  f32.bias = BiasType::fp32;
  CHECK_FALSE(f32 == c);
  CHECK(to_json(f32) != to_json(c));  // the cache key's config part
  auto pairs = config_from_pairs({"algorithm=fa3", "mask=causal", "sinks=true", "bias=bf16"});
  REQUIRE(pairs.ok());
  CHECK(pairs->bias == BiasType::bf16);
  auto boolean = config_from_pairs({"bias=bool"});
  REQUIRE(boolean.ok());
  CHECK(boolean->bias == BiasType::boolean);
  CHECK(readable_name(*boolean).find("_biasbool_") != std::string::npos);
  auto bad = config_from_json(R"({"bias":"int8"})");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message.find("config field 'bias': 'int8' is not one of none, fp32, bf16, fp16, bool") !=
        std::string::npos);
  auto typed = config_from_json(R"({"bias":true})");
  CHECK_FALSE(typed.ok());
}

TEST_CASE("bias: validate refuses it with pack_gqa, takes it everywhere else", "[config][bias]") {
  for (Algorithm a : {Algorithm::fa3, Algorithm::fa2, Algorithm::naive}) {
    KernelConfig c = KernelConfig::defaults(a);
    c.bias = BiasType::fp16;
    INFO(readable_name(c));
    CHECK(validate(c).empty());
  }
  KernelConfig packed = KernelConfig::defaults(Algorithm::fa3);
  packed.pack_gqa = true;
  REQUIRE(validate(packed).empty());
  packed.bias = BiasType::boolean;
  const auto issues = validate(packed);
  REQUIRE(issues.size() == 1);
  CHECK(issues[0].field == "pack_gqa");
  CHECK(issues[0].message.find("bias") != std::string::npos);
}

TEST_CASE("bias_tma: fa3 only, with a bias of whole 128-byte tile rows, in the JSON and name when on",
          "[config][bias][bias_tma]") {
  KernelConfig c = KernelConfig::defaults(Algorithm::fa3);
  c.block_n = 128, c.bias = BiasType::bf16, c.bias_tma = true;
  CHECK(validate(c).empty());
  CHECK(to_json(c).ends_with(R"("bias":"bf16","bias_tma":true})"));
  CHECK(readable_name(c).find("_biasbf16_tma_") != std::string::npos);
  auto back = config_from_json(to_json(c));
  REQUIRE(back.ok());
  CHECK(*back == c);
  KernelConfig off = c;
  off.bias_tma = false;
  CHECK_FALSE(off == c);
  CHECK(to_json(off).find("bias_tma") == std::string::npos);
  // A bias tile per stage: the shared memory grows by stages x block_m x block_n entries.
  CHECK(shared_memory_bytes(c) == shared_memory_bytes(off) + 2 * 128 * 128 * 2);
  auto issue_of = [](const KernelConfig& k) {
    const auto issues = validate(k);
    return issues.empty() ? std::string() : issues[0].field + ": " + issues[0].message;
  };
  KernelConfig no_bias = c;
  no_bias.bias = BiasType::none;
  CHECK(issue_of(no_bias).find("bias_tma: bias_tma stages a bias tensor's tiles") == 0);
  KernelConfig narrow = c;
  narrow.block_n = 96;  // 192 bytes of bf16
  CHECK(issue_of(narrow).find("192 bytes") != std::string::npos);
  narrow.bias = BiasType::fp32;  // 384 bytes
  CHECK(issue_of(narrow).empty());
  KernelConfig boolean = c;
  boolean.bias = BiasType::boolean;
  CHECK(issue_of(boolean).empty());
  boolean.block_n = 64;
  CHECK(issue_of(boolean).find("64 bytes") != std::string::npos);
  KernelConfig gathered = c;
  gathered.page_size = 8;
  CHECK(issue_of(gathered).find("gathered pages") != std::string::npos);
  gathered.page_size = 16;
  CHECK(issue_of(gathered).empty());
  KernelConfig fa2 = KernelConfig::defaults(Algorithm::fa2);
  fa2.bias = BiasType::bf16, fa2.bias_tma = true;
  CHECK(issue_of(fa2).find("bias_tma is an fa3 kernel's") != std::string::npos);
  // Too much shared memory: three stages of K, V and bias tiles at d128 (288 KB), which fit without the bias (224 KB).
  KernelConfig deep = c;
  deep.stages = 3;
  CHECK(issue_of(deep).find("shared memory") != std::string::npos);
  deep.bias_tma = false;
  CHECK(issue_of(deep).empty());
}

TEST_CASE("bias: in the decode JSON and name only when set", "[config][decode][bias]") {
  DecodeKernelConfig d;
  const std::string plain = to_json(d);
  d.bias = BiasType::fp32;
  CHECK(to_json(d) == plain.substr(0, plain.size() - 1) + R"(,"bias":"fp32"})");
  CHECK(readable_name(d) == "decode_bf16_d128_r16_bn64_s3_w4_contiguous_biasfp32_sm90a");
  CHECK(validate(d).empty());
  auto back = decode_config_from_json(to_json(d));
  REQUIRE(back.ok());
  CHECK(*back == d);
  auto pairs = any_config_from_pairs({"kernel=decode", "bias=bool"});
  REQUIRE(pairs.ok());
  REQUIRE(pairs->get_if<DecodeKernelConfig>() != nullptr);
  CHECK(pairs->get_if<DecodeKernelConfig>()->bias == BiasType::boolean);
}
