// Tests of the config's text forms: canonical JSON (round trip, exact form, partial objects, errors naming
// the field), key=value pairs, readable names, and the enum / arch names.
#include <cctype>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "dispatch/heuristics.hpp"
#include "flashjit/config.hpp"
#include "support/catch.hpp"
#include "support/checks.hpp"

using flashjit::Algorithm;
using flashjit::Arch;
using flashjit::DType;
using flashjit::ErrorCode;
using flashjit::KernelConfig;
using flashjit::MaskKind;
using flashjit::Scheduler;

using flashjit::test::contains;
using flashjit::test::require_error_naming;

namespace {


}  // namespace

TEST_CASE("to_json -> config_from_json round-trips", "[config]") {
  auto algorithm = GENERATE(Algorithm::naive, Algorithm::fa2, Algorithm::fa3, Algorithm::automatic);
  auto arch = GENERATE(Arch{80, false}, Arch{86, false}, Arch{89, false}, Arch{90, false}, Arch{90, true},
                       Arch{100, true}, Arch{120, false});
  auto dtype = GENERATE(DType::bf16, DType::fp16);
  auto mask = GENERATE(MaskKind::none, MaskKind::causal, MaskKind::sliding_window, MaskKind::chunked,
                       MaskKind::chunked_causal);
  // head_dim, block_m, block_n, stages, warps (valid and invalid ones: the text forms do not validate)
  auto [d, bm, bn, s, w] = GENERATE(std::make_tuple(128, 128, 64, 2, 4), std::make_tuple(64, 1, 128, 1, 4),
                                    std::make_tuple(256, 64, 32, 5, 8), std::make_tuple(40, 16, 16, 1, 1),
                                    std::make_tuple(0, -1, 0, 0, -3), std::make_tuple(100000, 4096, 7, 99, 64));
  const bool varlen = GENERATE(false, true);
  KernelConfig c;
  c.algorithm = algorithm;
  c.arch = arch;
  c.dtype = dtype;
  c.mask = mask;
  c.head_dim = d, c.block_m = bm, c.block_n = bn, c.stages = s;
  // fa3 counts consumer warpgroups, the others warps.
  const bool fa3 = algorithm == Algorithm::fa3;
  (fa3 ? c.consumer_warpgroups : c.warps) = w;
  c.scheduler = Scheduler::grid;
  c.varlen = varlen;

  const std::string json = to_json(c);
  INFO(json);
  auto back = flashjit::config_from_json(json);
  REQUIRE(back.ok());
  CHECK(*back == c);
  CHECK(to_json(*back) == json);

  // The same through key=value pairs.
  auto pairs = flashjit::config_from_pairs(
      {std::string("algorithm=") + to_string(algorithm), "arch=" + arch.to_string(),
       std::string("dtype=") + to_string(dtype), "head_dim=" + std::to_string(d), "block_m=" + std::to_string(bm),
       "block_n=" + std::to_string(bn), "stages=" + std::to_string(s), (fa3 ? "consumer_warpgroups=" : "warps=") + std::to_string(w),
       std::string("mask=") + to_string(mask), "scheduler=grid", varlen ? "varlen=true" : "varlen=false"});
  REQUIRE(pairs.ok());
  CHECK(*pairs == c);
}

TEST_CASE("canonical JSON is exact and stable", "[config]") {
  SECTION("fa2") {
    KernelConfig c;  // the defaults
    c.mask = MaskKind::causal;
    CHECK(to_json(c) ==
          R"({"algorithm":"fa2","arch":"sm_90a","dtype":"bf16","head_dim":128,"head_dim_v":0,"block_m":128,"block_n":64,)"
          R"("stages":2,"warps":4,"mask":"causal","scheduler":"grid","varlen":false})");
  }
  SECTION("naive") {
    KernelConfig c;
    c.algorithm = Algorithm::naive;
    c.arch = Arch{80, false};
    c.dtype = DType::fp16;
    c.head_dim = 40, c.block_m = 1, c.block_n = 128, c.stages = 1, c.warps = 4;
    c.mask = MaskKind::chunked_causal;
    CHECK(to_json(c) ==
          R"({"algorithm":"naive","arch":"sm_80","dtype":"fp16","head_dim":40,"head_dim_v":0,"block_m":1,"block_n":128,)"
          R"("stages":1,"warps":4,"mask":"chunked_causal","scheduler":"grid","varlen":false})");
  }
  SECTION("varlen fa3") {
    KernelConfig c;
    c.algorithm = Algorithm::fa3;
    c.head_dim = 128, c.block_m = 128, c.block_n = 128, c.stages = 2, c.consumer_warpgroups = 2;
    c.scheduler = Scheduler::persistent;
    c.varlen = true;
    CHECK(to_json(c) ==
          R"({"algorithm":"fa3","arch":"sm_90a","dtype":"bf16","head_dim":128,"head_dim_v":0,"block_m":128,"block_n":128,)"
          R"("stages":2,"consumer_warpgroups":2,"mask":"none","scheduler":"persistent","varlen":true})");
  }
  SECTION("variants: in the JSON only when on, in declaration order") {
    KernelConfig c;
    c.softcap = true;
    c.sinks = true;
    CHECK(to_json(c) ==
          R"({"algorithm":"fa2","arch":"sm_90a","dtype":"bf16","head_dim":128,"head_dim_v":0,"block_m":128,"block_n":64,)"
          R"("stages":2,"warps":4,"mask":"none","scheduler":"grid","varlen":false,"softcap":true,"sinks":true})");
    auto back = flashjit::config_from_json(to_json(c));
    REQUIRE(back.ok());
    CHECK(*back == c);
    CHECK_FALSE(back->alibi);
    auto off = flashjit::config_from_json(R"({"softcap":false,"alibi":true})");
    REQUIRE(off.ok());
    CHECK_FALSE(off->softcap);
    CHECK(off->alibi);
    CHECK(to_json(*off).find("softcap") == std::string::npos);
    auto bad = flashjit::config_from_json(R"({"sinks":1})");
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.error().message.find("sinks") != std::string::npos);
  }
  SECTION("snippets: JSON strings (quotes, backslashes, newlines escaped), a hash of each in the name") {
    KernelConfig c;
    c.score_mod = "__device__ float score_mod(float s, int, int, int, int, const flashjit::ModContext&) {\n"
                  "  return s * 0.5f; // \"half\" \\ \n}";
    const std::string json = to_json(c);
    CHECK(json.find(R"("score_mod":"__device__ float score_mod)") != std::string::npos);
    CHECK(json.find('\n') == std::string::npos);  // one line: the generated source's comment holds it
    auto back = flashjit::config_from_json(json);
    REQUIRE(back.ok());
    CHECK(back->score_mod == c.score_mod);
    CHECK(*back == c);
    const std::string name = readable_name(c);
    CHECK(name.find("_smod") != std::string::npos);
    KernelConfig other = c;
    other.score_mod += " ";
    CHECK(readable_name(other) != name);
    CHECK(to_json(other) != json);
    KernelConfig nul = c;
    nul.mask_mod = std::string("x\0y", 3);
    bool named = false;
    for (const auto& i : validate(nul)) named |= i.field == "mask_mod";
    CHECK(named);
    KernelConfig huge = c;
    huge.score_mod.assign(64 * 1024 + 1, ' ');
    named = false;
    for (const auto& i : validate(huge)) named |= i.field == "score_mod";
    CHECK(named);
  }
  SECTION("the same config always gives the same text; a different one a different text") {
    KernelConfig a, b;
    CHECK(to_json(a) == to_json(b));
    b.stages = 3;
    CHECK(to_json(a) != to_json(b));
    KernelConfig v;
    v.varlen = true;
    CHECK(to_json(a) != to_json(v));
  }
  SECTION("any field order and whitespace parse to the same config and canonicalize") {
    auto r = flashjit::config_from_json(
        "{ \"scheduler\" : \"grid\",\n \"mask\":\"sliding_window\", \"warps\": 8, \"stages\":3,\"block_n\":32,"
        "\t\"block_m\":64, \"head_dim\": 256, \"dtype\":\"fp16\", \"arch\":\"sm_86\", \"algorithm\":\"fa2\" }");
    REQUIRE(r.ok());
    CHECK(to_json(*r) ==
          R"({"algorithm":"fa2","arch":"sm_86","dtype":"fp16","head_dim":256,"head_dim_v":0,"block_m":64,"block_n":32,)"
          R"("stages":3,"warps":8,"mask":"sliding_window","scheduler":"grid","varlen":false})");
  }
}

TEST_CASE("partial JSON keeps the defaults", "[config]") {
  const KernelConfig defaults;
  SECTION("empty object") {
    auto r = flashjit::config_from_json("{}");
    REQUIRE(r.ok());
    CHECK(*r == defaults);
  }
  SECTION("two fields") {
    auto r = flashjit::config_from_json(R"({"head_dim":64,"mask":"causal"})");
    REQUIRE(r.ok());
    KernelConfig expected = defaults;
    expected.head_dim = 64;
    expected.mask = MaskKind::causal;
    CHECK(*r == expected);
  }
  SECTION("arch only") {
    auto r = flashjit::config_from_json(R"({"arch":"sm_80"})");
    REQUIRE(r.ok());
    KernelConfig expected = defaults;
    expected.arch = Arch{80, false};
    CHECK(*r == expected);
  }
  SECTION("a value must have its field's JSON type (the key=value form takes text)") {
    for (const char* json : {R"({"block_n":"128"})", R"({"varlen":"true"})", R"({"varlen":1})", R"({"mask":1})",
                             R"({"head_dim":64.0})", R"({"arch":90})"}) {
      INFO(json);
      auto r = flashjit::config_from_json(json);
      REQUIRE_FALSE(r.ok());
      CHECK(r.error().code == ErrorCode::invalid_config);
      CHECK(r.error().message.find("expected ") != std::string::npos);
    }
    auto r = flashjit::config_from_json(R"({"block_n":"128"})");
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message.find("'block_n'") != std::string::npos);
    CHECK(r.error().message.find("expected an integer, got the string \"128\"") != std::string::npos);
    auto pairs = flashjit::config_from_pairs({"block_n=128", "varlen=true"});
    REQUIRE(pairs.ok());
    CHECK(pairs->block_n == 128);
  }
  SECTION("a syntax error says where") {
    auto r = flashjit::config_from_json("{\n  \"head_dim\": 64\n  \"mask\": \"causal\"\n}");
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message.find("line 3, column") != std::string::npos);
  }
  SECTION("varlen defaults to false; a boolean") {
    CHECK_FALSE(defaults.varlen);
    for (const char* json : {R"({"varlen":true})"}) {
      INFO(json);
      auto r = flashjit::config_from_json(json);
      REQUIRE(r.ok());
      KernelConfig expected = defaults;
      expected.varlen = true;
      CHECK(*r == expected);
    }
    for (const char* json : {R"({"varlen":false})"}) {
      INFO(json);
      auto r = flashjit::config_from_json(json);
      REQUIRE(r.ok());
      CHECK(*r == defaults);
    }
  }
}

TEST_CASE("config_from_json: malformed JSON", "[config]") {
  auto text = GENERATE(as<std::string>{}, "", "{", "}", "not json", R"({"head_dim":})", R"({"head_dim" 64})",
                       R"({head_dim:64})", R"({"head_dim":64,})", "[1,2]", "null", "42", R"("fa2")", "[]");
  INFO("JSON: " << text);
  auto r = flashjit::config_from_json(text);
  REQUIRE(!r.ok());
  CHECK(r.error().code == ErrorCode::invalid_config);
}

TEST_CASE("config_from_json: wrong value types name the field", "[config]") {
  auto [json, field] = GENERATE(table<std::string, std::string>({
      {R"({"head_dim":64.5})", "head_dim"},
      {R"({"head_dim":64.0})", "head_dim"},
      {R"({"head_dim":true})", "head_dim"},
      {R"({"head_dim":null})", "head_dim"},
      {R"({"head_dim":[64]})", "head_dim"},
      {R"({"block_m":{"v":1}})", "block_m"},
      {R"({"block_n":"sixty-four"})", "block_n"},
      {R"({"block_n":"64k"})", "block_n"},
      {R"({"block_n":""})", "block_n"},
      {R"({"stages":99999999999})", "stages"},
      {R"({"warps":-99999999999})", "warps"},
      {R"({"mask":null})", "mask"},
      {R"({"mask":1})", "mask"},
      {R"({"dtype":["bf16"]})", "dtype"},
      {R"({"algorithm":false})", "algorithm"},
      {R"({"arch":90})", "arch"},
      {R"({"scheduler":0})", "scheduler"},
      {R"({"varlen":"yes"})", "varlen"},
      {R"({"varlen":2})", "varlen"},
      {R"({"varlen":null})", "varlen"},
      {R"({"varlen":[true]})", "varlen"},
      {R"({"block_n":false})", "block_n"},
  }));
  INFO("JSON: " << json);
  require_error_naming(flashjit::config_from_json(json), field);
}

TEST_CASE("config_from_json: unknown fields are errors naming the field", "[config]") {
  auto [json, field] = GENERATE(table<std::string, std::string>({
      {R"({"head_dims":64})", "head_dims"},
      {R"({"HEAD_DIM":64})", "HEAD_DIM"},
      {R"({"head_dim":64,"window":128})", "window"},
      {R"({"":1})", ""},
  }));
  INFO("JSON: " << json);
  require_error_naming(flashjit::config_from_json(json), field);
}

TEST_CASE("config_from_json: bad enum values name the field", "[config]") {
  auto [json, field] = GENERATE(table<std::string, std::string>({
      {R"({"algorithm":"fa4"})", "algorithm"},
      {R"({"algorithm":"automatic"})", "algorithm"},
      {R"({"algorithm":"FA2"})", "algorithm"},
      {R"({"dtype":"fp32"})", "dtype"},
      {R"({"dtype":"bfloat16"})", "dtype"},
      {R"({"mask":"causal_window"})", "mask"},
      {R"({"mask":""})", "mask"},
      {R"({"scheduler":"dynamic"})", "scheduler"},
      {R"({"arch":"sm_80a"})", "arch"},
      {R"({"arch":"gfx90a"})", "arch"},
      {R"({"arch":"90a"})", "arch"},
  }));
  INFO("JSON: " << json);
  require_error_naming(flashjit::config_from_json(json), field);
}

TEST_CASE("config_from_pairs", "[config]") {
  SECTION("no pairs: the defaults") {
    auto r = flashjit::config_from_pairs({});
    REQUIRE(r.ok());
    CHECK(*r == KernelConfig{});
  }
  SECTION("a full naive config") {
    auto r = flashjit::config_from_pairs({"algorithm=naive", "arch=sm_86", "dtype=fp16", "head_dim=40", "block_m=1",
                                          "block_n=64", "stages=1", "warps=2", "mask=sliding_window"});
    REQUIRE(r.ok());
    KernelConfig expected;
    expected.algorithm = Algorithm::naive;
    expected.arch = Arch{86, false};
    expected.dtype = DType::fp16;
    expected.head_dim = 40, expected.block_m = 1, expected.block_n = 64, expected.stages = 1, expected.warps = 2;
    expected.mask = MaskKind::sliding_window;
    CHECK(*r == expected);
    CHECK(validate(*r).empty());
  }
  SECTION("a later pair overrides an earlier one") {
    auto r = flashjit::config_from_pairs({"head_dim=64", "head_dim=96"});
    REQUIRE(r.ok());
    CHECK(r->head_dim == 96);
  }
  SECTION("not key=value") {
    auto p = GENERATE(as<std::string>{}, "head_dim", "=64", "", "head_dim 64");
    INFO("pair: '" << p << "'");
    auto r = flashjit::config_from_pairs({p});
    REQUIRE(!r.ok());
    CHECK(r.error().code == ErrorCode::invalid_config);
  }
  SECTION("bad values and unknown keys name the field") {
    auto [pair, field] = GENERATE(table<std::string, std::string>({
        {"head_dim=", "head_dim"},
        {"head_dim=6x4", "head_dim"},
        {"head_dim=64=", "head_dim"},
        {"head_dim=64.0", "head_dim"},
        {"warps=four", "warps"},
        {"stages=99999999999", "stages"},
        {"mask=diagonal", "mask"},
        {"dtype=f16", "dtype"},
        {"arch=sm_9x", "arch"},
        {"algorithm=", "algorithm"},
        {"foo=1", "foo"},
        {"varlen=on", "varlen"},
        {"varlen=", "varlen"},
    }));
    INFO("pair: " << pair);
    require_error_naming(flashjit::config_from_pairs({"head_dim=64", pair}), field);
  }
}

TEST_CASE("readable_name examples", "[config]") {
  KernelConfig c;
  CHECK(readable_name(c) == "fa2_bf16_d128_bm128_bn64_s2_w4_none_sm90a");
  c.mask = MaskKind::causal;
  CHECK(readable_name(c) == "fa2_bf16_d128_bm128_bn64_s2_w4_causal_sm90a");
  c.algorithm = Algorithm::fa2;
  c.arch = Arch{80, false};
  c.dtype = DType::fp16;
  c.head_dim = 64, c.block_m = 128, c.block_n = 128, c.stages = 3, c.warps = 4;
  c.mask = MaskKind::chunked_causal;
  CHECK(readable_name(c) == "fa2_fp16_d64_bm128_bn128_s3_w4_chunked_causal_sm80");
  c.arch = Arch{90, false};
  CHECK(readable_name(c) == "fa2_fp16_d64_bm128_bn128_s3_w4_chunked_causal_sm90");
  KernelConfig n;
  n.algorithm = Algorithm::naive;
  n.arch = Arch{90, true};
  n.dtype = DType::bf16;
  n.head_dim = 40, n.block_m = 1, n.block_n = 128, n.stages = 1, n.warps = 4;
  n.mask = MaskKind::sliding_window;
  CHECK(readable_name(n) == "naive_bf16_d40_w4_sliding_window_sm90a");
  n.dtype = DType::fp16, n.head_dim = 256, n.mask = MaskKind::none, n.arch = Arch{86, false};
  n.warps = 2, n.block_n = 64;
  CHECK(readable_name(n) == "naive_fp16_d256_w2_none_sm86");
  n.varlen = true;
  CHECK(readable_name(n) == "naive_fp16_d256_w2_none_varlen_sm86");
  KernelConfig f;
  f.algorithm = Algorithm::fa3;
  f.head_dim = 128, f.block_m = 128, f.block_n = 128, f.stages = 2, f.warps = 2;
  f.mask = MaskKind::causal;
  f.scheduler = Scheduler::persistent;
  f.varlen = true;
  CHECK(readable_name(f) == "fa3_bf16_d128_bm128_bn128_s2_wg2_causal_persistent_varlen_sm90a");
  f.scheduler = Scheduler::grid;
  CHECK(readable_name(f) == "fa3_bf16_d128_bm128_bn128_s2_wg2_causal_varlen_sm90a");
  f.softcap = f.alibi = f.sinks = true;
  CHECK(readable_name(f) == "fa3_bf16_d128_bm128_bn128_s2_wg2_causal_varlen_softcap_alibi_sinks_sm90a");
  f.varlen = f.softcap = f.alibi = false;
  CHECK(readable_name(f) == "fa3_bf16_d128_bm128_bn128_s2_wg2_causal_sinks_sm90a");
  n.alibi = true;
  CHECK(readable_name(n) == "naive_fp16_d256_w2_none_varlen_alibi_sm86");
}

TEST_CASE("readable names are C identifiers and tell the heuristic/naive configs apart", "[config]") {
  std::set<std::string> names;
  int count = 0;
  for (Arch a : {Arch{80, false}, Arch{86, false}, Arch{90, false}, Arch{90, true}})
    for (DType t : {DType::bf16, DType::fp16})
      for (MaskKind m : {MaskKind::none, MaskKind::causal, MaskKind::sliding_window, MaskKind::chunked,
                         MaskKind::chunked_causal})
        for (int d : {32, 64, 96, 128, 256}) {
          for (KernelConfig c : {flashjit::dispatch::fa2_heuristic(t, d, m, a),
                                 flashjit::dispatch::naive_config(t, d, m, a),
                                 flashjit::dispatch::fa2_heuristic(t, d, m, a),
                                 flashjit::dispatch::naive_config(t, d, m, a)}) {
            c.varlen = count % 4 >= 2;  // the last two: their varlen variants
            std::string name = readable_name(c);
            INFO(name);
            ++count;
            names.insert(name);
            bool identifier = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0]));
            for (char ch : name)
              identifier = identifier && (std::islower(static_cast<unsigned char>(ch)) ||
                                          std::isdigit(static_cast<unsigned char>(ch)) || ch == '_');
            CHECK(identifier);
          }
        }
  CHECK(names.size() == static_cast<std::size_t>(count));
}

TEST_CASE("enum names round-trip", "[config]") {
  for (auto a : {Algorithm::naive, Algorithm::fa2, Algorithm::fa3, Algorithm::automatic}) {
    auto back = flashjit::parse_algorithm(to_string(a));
    REQUIRE(back.has_value());
    CHECK(*back == a);
  }
  for (auto d : {DType::bf16, DType::fp16}) {
    auto back = flashjit::parse_dtype(to_string(d));
    REQUIRE(back.has_value());
    CHECK(*back == d);
  }
  for (auto m : {MaskKind::none, MaskKind::causal, MaskKind::sliding_window, MaskKind::chunked,
                 MaskKind::chunked_causal}) {
    auto back = flashjit::parse_mask(to_string(m));
    REQUIRE(back.has_value());
    CHECK(*back == m);
  }
  CHECK(std::string(to_string(Algorithm::automatic)) == "auto");
  CHECK(std::string(to_string(MaskKind::chunked_causal)) == "chunked_causal");
  CHECK(flashjit::parse_scheduler("grid") == Scheduler::grid);
  CHECK(flashjit::parse_scheduler("persistent") == Scheduler::persistent);
  CHECK(!flashjit::parse_algorithm("automatic"));
  CHECK(!flashjit::parse_algorithm(""));
  CHECK(!flashjit::parse_dtype("BF16"));
  CHECK(!flashjit::parse_mask("Causal"));
  CHECK(!flashjit::parse_scheduler("dynamic"));
}

TEST_CASE("Arch::parse / to_string", "[config]") {
  SECTION("round trip") {
    auto text = GENERATE(as<std::string>{}, "sm_50", "sm_75", "sm_80", "sm_86", "sm_87", "sm_89", "sm_90",
                         "sm_90a", "sm_100", "sm_100a", "sm_120", "sm_120a");
    auto a = Arch::parse(text);
    INFO(text);
    REQUIRE(a.has_value());
    CHECK(a->to_string() == text);
  }
  SECTION("values") {
    CHECK(Arch::parse("sm_90a") == Arch{90, true});
    CHECK(Arch::parse("sm_90") == Arch{90, false});
    CHECK(Arch::parse("sm_86") == Arch{86, false});
    CHECK(Arch{80, false}.to_string() == "sm_80");
    CHECK(Arch{}.to_string() == "sm_90a");
  }
  SECTION("rejects") {
    auto text = GENERATE(as<std::string>{}, "", "sm", "sm_", "sm_a", "sm_9x", "sm_80a", "sm_86a", "gfx90a",
                         "SM_90", "sm90", "sm_90b", "sm_90aa", "sm_-90", "sm_+90", "sm_ 90", "sm_90 ", " sm_90",
                         "sm_9.0", "sm_49", "sm_999", "compute_90");
    INFO("'" << text << "'");
    CHECK(!Arch::parse(text).has_value());
  }
}
