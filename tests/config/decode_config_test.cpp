// Tests of the decode and combine configs' text forms: canonical JSON round trips (JSON and key=value
// pairs), partial objects, errors naming the field, and AnyKernelConfig telling the kinds apart by "kernel"
// (prefill JSON unchanged).
#include <string>
#include <tuple>
#include <vector>

#include "flashjit/config.hpp"
#include "dispatch/decode_heuristics.hpp"
#include "support/catch.hpp"
#include "support/checks.hpp"

using flashjit::AnyKernelConfig;
using flashjit::Arch;
using flashjit::CombineKernelConfig;
using flashjit::DecodeKernelConfig;
using flashjit::DType;
using flashjit::ErrorCode;
using flashjit::KernelConfig;
using flashjit::KernelKind;
using flashjit::KvLayout;
using flashjit::MaskKind;

using flashjit::test::contains;
using flashjit::test::require_error_naming;

namespace {


std::string b(bool v) { return v ? "true" : "false"; }

}  // namespace

TEST_CASE("decode config: to_json -> decode_config_from_json round-trips", "[config][decode]") {
  auto arch = GENERATE(Arch{80, false}, Arch{86, false}, Arch{90, false}, Arch{90, true}, Arch{100, true});
  auto dtype = GENERATE(DType::bf16, DType::fp16);
  auto layout = GENERATE(KvLayout::contiguous, KvLayout::paged);
  const MaskKind mask = GENERATE(MaskKind::causal, MaskKind::sliding_window, MaskKind::chunked_causal);
  const bool cluster = GENERATE(false, true);
  // head_dim, rows, block_n, stages, warps, column groups (valid and invalid: the text forms do not validate)
  auto [d, rows, bn, s, w, cg] =
      GENERATE(std::make_tuple(128, 16, 64, 3, 4, 1), std::make_tuple(256, 128, 64, 2, 8, 1),
               std::make_tuple(64, 32, 32, 4, 2, 1), std::make_tuple(128, 16, 64, 3, 4, 4),
               std::make_tuple(0, -16, 7, 99, -1, 3));
  DecodeKernelConfig c;
  c.arch = arch, c.dtype = dtype, c.layout = layout, c.mask = mask, c.cluster_merge = cluster;
  c.head_dim = d, c.rows = rows, c.block_n = bn, c.stages = s, c.warps = w, c.column_groups = cg;
  c.page_size = layout == KvLayout::paged ? (d > 0 ? 16 : -3) : 0;

  const std::string json = to_json(c);
  INFO(json);
  auto back = flashjit::decode_config_from_json(json);
  REQUIRE(back.ok());
  CHECK(*back == c);
  CHECK(to_json(*back) == json);

  auto any = flashjit::any_config_from_json(json);
  REQUIRE(any.ok());
  CHECK(any->kind() == KernelKind::decode);
  CHECK(*any == AnyKernelConfig(c));
  CHECK(to_json(*any) == json);
  CHECK(readable_name(*any) == readable_name(c));

  const std::vector<std::string> pairs = {
      "kernel=decode", "arch=" + arch.to_string(), std::string("dtype=") + to_string(dtype),
      "head_dim=" + std::to_string(d), "rows=" + std::to_string(rows), "block_n=" + std::to_string(bn),
      "stages=" + std::to_string(s), "warps=" + std::to_string(w), "column_groups=" + std::to_string(cg),
      std::string("layout=") + to_string(layout),
      "page_size=" + std::to_string(c.page_size), std::string("mask=") + to_string(mask), "cluster_merge=" + b(cluster)};
  auto from_pairs = flashjit::decode_config_from_pairs(pairs);
  REQUIRE(from_pairs.ok());
  CHECK(*from_pairs == c);
  auto any_pairs = flashjit::any_config_from_pairs(pairs);
  REQUIRE(any_pairs.ok());
  CHECK(*any_pairs == AnyKernelConfig(c));
}

TEST_CASE("combine config: to_json -> combine_config_from_json round-trips", "[config][decode]") {
  auto arch = GENERATE(Arch{80, false}, Arch{89, false}, Arch{90, true}, Arch{120, false});
  auto dtype = GENERATE(DType::bf16, DType::fp16);
  const bool fp32 = GENERATE(false, true);
  auto [d, w] = GENERATE(std::make_tuple(128, 4), std::make_tuple(64, 1), std::make_tuple(256, 32),
                         std::make_tuple(-8, 0));
  CombineKernelConfig c;
  c.arch = arch, c.dtype = dtype, c.fp32_inputs = fp32, c.head_dim = d, c.warps = w;

  const std::string json = to_json(c);
  INFO(json);
  auto back = flashjit::combine_config_from_json(json);
  REQUIRE(back.ok());
  CHECK(*back == c);
  CHECK(to_json(*back) == json);

  auto any = flashjit::any_config_from_json(json);
  REQUIRE(any.ok());
  CHECK(any->kind() == KernelKind::combine);
  CHECK(*any == AnyKernelConfig(c));
  CHECK(any->arch() == arch);

  const std::vector<std::string> pairs = {"kernel=combine", "arch=" + arch.to_string(),
                                          std::string("dtype=") + to_string(dtype), "fp32_inputs=" + b(fp32),
                                          "head_dim=" + std::to_string(d), "warps=" + std::to_string(w)};
  auto from_pairs = flashjit::combine_config_from_pairs(pairs);
  REQUIRE(from_pairs.ok());
  CHECK(*from_pairs == c);
  auto any_pairs = flashjit::any_config_from_pairs(pairs);
  REQUIRE(any_pairs.ok());
  CHECK(*any_pairs == AnyKernelConfig(c));
}

TEST_CASE("decode and combine configs: the planner's configs round-trip, partial JSON keeps defaults",
          "[config][decode]") {
  flashjit::DecodeProblem p;
  p.batch = 1, p.heads_q = 32, p.heads_kv = 8, p.head_dim = 128, p.max_seqlen_k = 32768;
  p.layout = KvLayout::paged, p.page_size = 16, p.window_left = 256;
  const auto plan = flashjit::dispatch::plan_decode(p, Arch{90, true}, 132);
  const auto merge = flashjit::dispatch::merge_kernel_config(DType::fp16, 64, Arch{80, false});
  for (const AnyKernelConfig& c : {AnyKernelConfig(plan.split), AnyKernelConfig(plan.combine), AnyKernelConfig(merge)}) {
    INFO(to_json(c));
    CHECK(validate(c).empty());
    auto back = flashjit::any_config_from_json(to_json(c));
    REQUIRE(back.ok());
    CHECK(*back == c);
  }
  CHECK(to_json(plan.split) ==
        R"({"kernel":"decode","arch":"sm_90a","dtype":"bf16","head_dim":128,"rows":16,"block_n":128,)"
        R"("stages":3,"warps":4,"column_groups":1,"layout":"paged","page_size":16,"mask":"sliding_window",)"
        R"("cluster_merge":false})");
  CHECK(to_json(merge) == R"({"kernel":"combine","arch":"sm_80","dtype":"fp16","fp32_inputs":false,"head_dim":64,"warps":4})");

  auto partial = flashjit::decode_config_from_json(R"({"head_dim": 64, "layout": "paged", "page_size": 32, "mask": "sliding_window"})");
  REQUIRE(partial.ok());
  DecodeKernelConfig expected;
  expected.head_dim = 64, expected.layout = KvLayout::paged, expected.page_size = 32, expected.mask = MaskKind::sliding_window;
  CHECK(*partial == expected);
  auto empty = flashjit::combine_config_from_json("{}");
  REQUIRE(empty.ok());
  CHECK(*empty == CombineKernelConfig{});
  auto kind_only = flashjit::any_config_from_json(R"({"kernel": "decode"})");
  REQUIRE(kind_only.ok());
  CHECK(*kind_only == AnyKernelConfig(DecodeKernelConfig{}));
}

TEST_CASE("decode and combine configs: variants in the JSON and the name only when on", "[config][decode][variant]") {
  flashjit::DecodeKernelConfig d;
  const std::string plain = to_json(d), plain_name = readable_name(d);
  CHECK(plain.find("softcap") == std::string::npos);
  d.softcap = d.sinks = true;
  CHECK(to_json(d) == plain.substr(0, plain.size() - 1) + R"(,"softcap":true,"sinks":true})");
  CHECK(readable_name(d) == "decode_bf16_d128_r16_bn64_s3_w4_contiguous_softcap_sinks_sm90a");
  auto back = flashjit::decode_config_from_json(to_json(d));
  REQUIRE(back.ok());
  CHECK(*back == d);
  flashjit::CombineKernelConfig c;
  CHECK(to_json(c).find("sinks") == std::string::npos);
  c.sinks = true;
  CHECK(readable_name(c) == "combine_f32_bf16_d128_w4_sinks_sm90a");
  auto cback = flashjit::combine_config_from_json(to_json(c));
  REQUIRE(cback.ok());
  CHECK(*cback == c);
}

TEST_CASE("decode config: errors name the field", "[config][decode]") {
  auto [json, field] = GENERATE(table<std::string, std::string>({
      {R"({"kernel":"combine"})", "kernel"},
      {R"({"head_dim":64.5})", "head_dim"},
      {R"({"rows":"sixteen"})", "rows"},
      {R"({"block_n":null})", "block_n"},
      {R"({"stages":[3]})", "stages"},
      {R"({"warps":99999999999})", "warps"},
      {R"({"column_groups":true})", "column_groups"},
      {R"({"layout":"ring"})", "layout"},
      {R"({"layout":1})", "layout"},
      {R"({"mask":"maybe"})", "mask"},
      {R"({"cluster_merge":2})", "cluster_merge"},
      {R"({"arch":"sm_9"})", "arch"},
      {R"({"dtype":"fp32"})", "dtype"},
      {R"({"fp32_inputs":true})", "fp32_inputs"},  // a combine field
  }));
  INFO(json);
  require_error_naming(flashjit::decode_config_from_json(json), field);
  if (field != "kernel")  // the same through the kind dispatch
    require_error_naming(flashjit::any_config_from_json(R"({"kernel":"decode",)" + json.substr(1)), field);
}

TEST_CASE("combine config: errors name the field; malformed JSON and pairs", "[config][decode]") {
  auto [cjson, cfield] = GENERATE(table<std::string, std::string>({
      {R"({"kernel":"decode"})", "kernel"},
      {R"({"fp32_inputs":"yes"})", "fp32_inputs"},
      {R"({"warps":"4w"})", "warps"},
      {R"({"rows":16})", "rows"},  // a decode field
      {R"({"head_dim":{}})", "head_dim"},
  }));
  INFO(cjson);
  require_error_naming(flashjit::combine_config_from_json(cjson), cfield);

  for (const char* bad : {"", "{", "[]", "42"}) {
    CHECK(flashjit::decode_config_from_json(bad).error().code == ErrorCode::invalid_config);
    CHECK(flashjit::combine_config_from_json(bad).error().code == ErrorCode::invalid_config);
    CHECK(flashjit::any_config_from_json(bad).error().code == ErrorCode::invalid_config);
  }
  require_error_naming(flashjit::decode_config_from_pairs({"warps=x"}), "warps");
  require_error_naming(flashjit::combine_config_from_pairs({"layout=paged"}), "layout");
  CHECK_FALSE(flashjit::decode_config_from_pairs({"rows"}).ok());  // not a key=value pair
}

TEST_CASE("any config: the kind comes from \"kernel\"; prefill JSON is unchanged", "[config][decode]") {
  KernelConfig prefill;
  prefill.head_dim = 64;
  const std::string json = to_json(prefill);
  CHECK_FALSE(contains(json, "kernel"));  // cache keys and tuned tables of prefill kernels keep their text
  auto any = flashjit::any_config_from_json(json);
  REQUIRE(any.ok());
  CHECK(any->kind() == KernelKind::prefill);
  CHECK(*any == AnyKernelConfig(prefill));
  CHECK(to_json(*any) == json);
  CHECK(readable_name(*any) == readable_name(prefill));

  auto explicit_kind = flashjit::any_config_from_json(R"({"kernel":"prefill","head_dim":64})");
  REQUIRE(explicit_kind.ok());
  CHECK(*explicit_kind == AnyKernelConfig(prefill));
  auto pairs = flashjit::any_config_from_pairs({"head_dim=64"});
  REQUIRE(pairs.ok());
  CHECK(*pairs == AnyKernelConfig(prefill));

  require_error_naming(flashjit::any_config_from_json(R"({"kernel":"encode"})"), "kernel");
  require_error_naming(flashjit::any_config_from_json(R"({"kernel":3})"), "kernel");
  require_error_naming(flashjit::any_config_from_pairs({"kernel=split"}), "kernel");
  require_error_naming(flashjit::any_config_from_json(R"({"head_dim":64,"rows":16})"), "rows");  // prefill parser
  CHECK(contains(flashjit::any_config_from_json(R"({"kernel":"decode","rows":"x"})").error().message, "'rows'"));

  // Different kinds never compare equal, and their JSON differs.
  const AnyKernelConfig d = DecodeKernelConfig{}, c = CombineKernelConfig{};
  CHECK(d != c);
  CHECK(d != AnyKernelConfig(prefill));
  CHECK(to_json(d) != to_json(c));
  CHECK(to_string(d.kind()) == std::string("decode"));
  CHECK(to_string(c.kind()) == std::string("combine"));
}

TEST_CASE("decode config: CTAs per SM by shared memory, at most what the registers allow (192 per thread for key "
          "slices of d128 and more, 168 else)",
          "[config][decode]") {
  DecodeKernelConfig c;  // d128, 16 rows, 64-key tiles, three stages, four warps: 100 KB
  c.arch = Arch{90, true};
  CHECK(flashjit::ctas_per_sm(c) == 2);
  c.arch = Arch{80, false};  // 164 KB per SM
  CHECK(flashjit::ctas_per_sm(c) == 1);
  c.arch = Arch{90, true};
  c.block_n = 64, c.stages = 2;  // 68 KB: three by shared memory, two by registers (64 Ki / (128 x 192))
  CHECK(flashjit::shared_memory_bytes(c) == 69632);
  CHECK(flashjit::ctas_per_sm(c) == 2);
  c.block_n = 32, c.stages = 2, c.warps = 2;  // 36 KB, 64 threads
  CHECK(flashjit::shared_memory_bytes(c) == 36864);
  CHECK(flashjit::ctas_per_sm(c) == 5);  // 228 KB / 37 KB = 6; 64 Ki registers / (64 x 192) = 5
  c.column_groups = 2;  // the paged short-cache kernel: 64 Ki / (64 x 168) = 6
  CHECK(flashjit::ctas_per_sm(c) == 6);
  c.column_groups = 1, c.head_dim = 64;  // 18 KB: twelve by shared memory, six by registers
  CHECK(flashjit::ctas_per_sm(c) == 6);
  c.head_dim = 128, c.block_n = 128, c.stages = 3, c.warps = 4;  // 196 KB
  CHECK(flashjit::ctas_per_sm(c) == 1);
}
