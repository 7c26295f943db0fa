// The variants (softcap, ALiBi, sinks) in the layers that name problems by their shapes: sweep entries (values,
// lists, errors), ProblemShape's JSON, description and problem, the autotuner's candidates and reference kernel, the
// precompile plan, and decode entries (their split and combine kernels).
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dispatch/decode_heuristics.hpp"
#include "dispatch/heuristics.hpp"
#include "dispatch/problem_shape.hpp"
#include "support/catch.hpp"
#include "tune/candidates.hpp"
#include "tune/precompile_plan.hpp"
#include "tune/sweep.hpp"

using flashjit::Arch;
using flashjit::KernelConfig;
using flashjit::dispatch::ProblemShape;
using flashjit::tune::parse_sweep;

namespace {

const Arch kSm90a{90, true};
const Arch kSm80{80, false};

std::vector<ProblemShape> expand(const std::string& fields) {
  auto s = parse_sweep(R"({"problems": [{"heads_q": 8, "head_dim": 64, "seqlen": 256, )" + fields + "}]}", "v.json");
  INFO(fields);
  if (!s.ok()) INFO(s.error().to_string());
  REQUIRE(s.ok());
  return s->problems;
}

std::string error_of(const std::string& text) {
  auto s = parse_sweep(text, "bad.json");
  INFO(text);
  REQUIRE_FALSE(s.ok());
  return s.error().message;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// (softcap, alibi, sinks) of each shape.
std::vector<std::vector<bool>> flags(const std::vector<ProblemShape>& shapes) {
  std::vector<std::vector<bool>> out;
  for (const auto& s : shapes) out.push_back({s.softcap, s.alibi, s.sinks});
  return out;
}

}  // namespace

TEST_CASE("variants: sweep entries take softcap, alibi and sinks", "[tune][sweep][variants]") {
  CHECK(flags(expand(R"("mask": "causal")")) == std::vector<std::vector<bool>>{{false, false, false}});
  CHECK(flags(expand(R"("softcap": 50)")) == std::vector<std::vector<bool>>{{true, false, false}});
  CHECK(flags(expand(R"("softcap": 30.5, "alibi": true, "sinks": true)")) ==
        std::vector<std::vector<bool>>{{true, true, true}});
  CHECK(flags(expand(R"("softcap": true, "sinks": false)")) == std::vector<std::vector<bool>>{{true, false, false}});
  // Lists are axes of the cross product (after mask, before the shapes); a cap and true are the same kernel.
  CHECK(flags(expand(R"("sinks": [false, true], "alibi": {"values": [true]})")) ==
        std::vector<std::vector<bool>>{{false, true, false}, {false, true, true}});
  CHECK(expand(R"("softcap": [30, 50, true])").size() == 1);
  const auto grid = expand(R"("mask": ["none", "causal"], "softcap": [false, 50], "seqlen": [128, 256])");
  REQUIRE(grid.size() == 8);
  CHECK((grid[0].mask == flashjit::MaskKind::none && !grid[0].softcap && grid[0].seqlen_q == 128));
  CHECK((grid[3].mask == flashjit::MaskKind::none && grid[3].softcap && grid[3].seqlen_q == 256));
  CHECK((grid[4].mask == flashjit::MaskKind::causal && !grid[4].softcap));
}

TEST_CASE("variants: sweep errors name the field", "[tune][sweep][variants]") {
  const std::string head = R"({"problems": [{"heads_q": 8, "head_dim": 64, "seqlen": 256, )";
  CHECK(contains(error_of(head + R"("softcap": 0}]})"),
                 "sweep bad.json: problems[0].softcap: expected a cap > 0, true or false, got 0"));
  CHECK(contains(error_of(head + R"("softcap": -3}]})"), "problems[0].softcap: expected a cap > 0"));
  CHECK(contains(error_of(head + R"("softcap": "50"}]})"), "problems[0].softcap: expected a cap > 0"));
  CHECK(contains(error_of(head + R"("alibi": 1}]})"), "problems[0].alibi: expected true or false, got 1"));
  CHECK(contains(error_of(head + R"("sinks": [true, "no"]}]})"), "problems[0].sinks[1]: expected true or false"));
  CHECK(contains(error_of(head + R"("sinks": []}]})"), "problems[0].sinks: the list is empty"));
  CHECK(contains(error_of(head + R"("alibi": {"values": [true], "x": 1}}]})"), "problems[0].alibi.x: unknown field"));
}

TEST_CASE("variants: a shape's JSON, description and problem", "[dispatch][variants]") {
  ProblemShape s;
  s.heads_q = 32, s.heads_kv = 8, s.seqlen_q = s.seqlen_k = 4096, s.mask = flashjit::MaskKind::causal;
  CHECK_FALSE(to_json(s).contains("softcap"));  // off: absent, so existing tables' problems read as before
  s.softcap = s.sinks = true;
  const auto j = to_json(s);
  CHECK(j["softcap"] == true);
  CHECK(j["sinks"] == true);
  CHECK_FALSE(j.contains("alibi"));
  auto back = flashjit::dispatch::shape_from_json(nlohmann::json::parse(j.dump()));
  REQUIRE(back.ok());
  CHECK(*back == s);
  CHECK(describe(s) == "bf16 B1 Sq4096 Sk4096 H32/8 D128 causal softcap sinks");
  auto bad = flashjit::dispatch::shape_from_json(nlohmann::json::parse(R"({"alibi": "yes"})"));
  REQUIRE_FALSE(bad.ok());
  CHECK(contains(bad.error().message, "alibi: expected true or false"));

  const flashjit::AttentionProblem p = to_problem(s);
  CHECK(p.softcap == flashjit::dispatch::kShapeSoftcap);
  CHECK(p.alibi_slopes == nullptr);
  CHECK(p.sinks != nullptr);
  auto c = flashjit::dispatch::choose(p, kSm90a);
  REQUIRE(c.ok());
  CHECK((c->softcap && !c->alibi && c->sinks));
  CHECK(contains(readable_name(*c), "_softcap_sinks_sm90a"));
}

TEST_CASE("variants: candidates and the reference kernel carry them", "[tune][variants]") {
  ProblemShape s;
  s.heads_q = 8, s.head_dim = 64, s.seqlen_q = s.seqlen_k = 1024, s.alibi = true;
  const auto candidates = flashjit::tune::enumerate(s, {}, kSm80, flashjit::tune::Density::reduced);
  REQUIRE_FALSE(candidates.valid.empty());
  for (const KernelConfig& c : candidates.valid) CHECK((c.alibi && !c.softcap && !c.sinks));
  const KernelConfig ref = flashjit::tune::reference_config(s, kSm80);
  CHECK(ref.algorithm == flashjit::Algorithm::naive);
  CHECK((ref.alibi && !ref.softcap && !ref.sinks));
  CHECK(flashjit::dispatch::supports(ref, to_problem(s), kSm80).ok());
}

TEST_CASE("variants: precompile plans the variant kernels of a sweep", "[tune][plan][variants]") {
  auto sweep = parse_sweep(R"({"problems": [{"heads_q": 8, "heads_kv": 2, "head_dim": 128, "seqlen": 4096,
                                             "mask": "causal", "softcap": [false, 50], "sinks": [false, true]}]})",
                           "v.json");
  REQUIRE(sweep.ok());
  REQUIRE(sweep->problems.size() == 4);
  const auto plan = flashjit::tune::precompile_plan(*sweep, {kSm90a, kSm80}, {}, false);
  REQUIRE(plan.configs.size() == 8);  // four variant combinations on two archs, each its own kernel
  int with_softcap = 0, with_sinks = 0;
  for (const KernelConfig& c : plan.configs) with_softcap += c.softcap, with_sinks += c.sinks;
  CHECK(with_softcap == 4);
  CHECK(with_sinks == 4);
  for (const auto& shape : sweep->problems)
    CHECK(std::find(plan.configs.begin(), plan.configs.end(), *flashjit::dispatch::choose(to_problem(shape), kSm90a)) !=
          plan.configs.end());
}

TEST_CASE("variants: decode sweep entries", "[tune][sweep][variants][decode]") {
  const std::string entry =
      R"({"problems": [{"kind": "decode", "heads_q": 64, "heads_kv": 8, "head_dim": 64, "seqlen_k": 8192, "sinks": true}]})";
  auto sweep = parse_sweep(entry, "d.json");
  REQUIRE(sweep.ok());
  REQUIRE(sweep->decode.size() == 1);
  const auto& shape = sweep->decode[0];
  CHECK((shape.sinks && !shape.softcap && !shape.alibi));
  const flashjit::DecodeProblem p = to_problem(shape);
  CHECK((p.sinks != nullptr && p.alibi_slopes == nullptr && p.softcap == 0.f));
  CHECK(describe(shape) == "decode bf16 B1 q1 Sk8192 H64/8 D64 contiguous sinks");

  // One sequence over 8k keys splits on 132 SMs: the split and the combine kernel both have the sinks.
  const auto plan = flashjit::tune::precompile_plan(*sweep, {kSm90a}, {}, false);
  REQUIRE_FALSE(plan.decode.empty());
  for (const auto& c : plan.decode) CHECK((c.sinks && !c.softcap && !c.alibi));
  REQUIRE(plan.combine.size() == 1);
  CHECK(plan.combine[0].sinks);
  CHECK(plan.decode[0] == flashjit::dispatch::plan_decode(p, kSm90a, 132).split);

  auto capped = parse_sweep(R"({"problems": [{"kind": "decode", "heads_q": 8, "head_dim": 64, "seqlen_k": 1024,
                                              "softcap": [false, 30], "alibi": true}]})", "d.json");
  REQUIRE(capped.ok());
  REQUIRE(capped->decode.size() == 2);
  CHECK((!capped->decode[0].softcap && capped->decode[1].softcap && capped->decode[1].alibi));
  CHECK(contains(error_of(R"({"problems": [{"kind": "decode", "heads_q": 8, "head_dim": 64, "seqlen_k": 1024,
                                            "sinks": 1}]})"),
                 "problems[0].sinks: expected true or false, got 1"));
}

// User snippets (score_mod, mask_mod) by shape: a text or a list of texts per sweep entry (one kernel each), in the
// shape's JSON and description (a hash), reaching the problem, the candidates and the precompile plan (prefill and
// decode); errors name the field.
namespace {
const char* const kScore = "__device__ float score_mod(float s, int b, int h, int q, int k, "
                           "const flashjit::ModContext& ctx) { return s * 0.5f; }";
const char* const kMask = "__device__ bool mask_mod(int b, int h, int q, int k, const flashjit::ModContext& ctx) "
                          "{ return (q ^ k) % 3 != 0; }";
std::string quoted(const char* text) { return nlohmann::json(text).dump(); }
}  // namespace

TEST_CASE("snippets: sweep entries take score_mod and mask_mod", "[tune][sweep][variants]") {
  const auto one = expand("\"score_mod\": " + quoted(kScore));
  REQUIRE(one.size() == 1);
  CHECK(one[0].score_mod == kScore);
  CHECK(one[0].mask_mod.empty());
  const auto two = expand("\"mask_mod\": [" + quoted(kMask) + ", " + quoted(kScore) + "], \"seqlen\": [128, 256]");
  REQUIRE(two.size() == 4);  // the snippets are an axis before the lengths
  CHECK((two[0].mask_mod == kMask && two[0].seqlen_q == 128 && two[1].mask_mod == kMask && two[2].mask_mod == kScore));

  const std::string head = R"({"problems": [{"heads_q": 8, "head_dim": 64, "seqlen": 256, )";
  CHECK(contains(error_of(head + R"("score_mod": 3}]})"),
                 "problems[0].score_mod: expected the snippet's CUDA C++ text or a list of texts, got 3"));
  CHECK(contains(error_of(head + R"("mask_mod": ""}]})"), "problems[0].mask_mod: expected the snippet's CUDA C++ text"));
  CHECK(contains(error_of(head + R"("mask_mod": []}]})"), "problems[0].mask_mod: an empty list"));
  CHECK(contains(error_of(head + R"("score_mod": ["a", 1]}]})"), "problems[0].score_mod: expected"));
}

TEST_CASE("snippets: a shape's JSON, description, problem and kernels", "[dispatch][tune][variants]") {
  ProblemShape s;
  s.heads_q = 8, s.head_dim = 64, s.seqlen_q = s.seqlen_k = 1024, s.mask = flashjit::MaskKind::causal;
  CHECK_FALSE(to_json(s).contains("score_mod"));
  s.score_mod = kScore, s.mask_mod = kMask;
  const auto j = to_json(s);
  CHECK(j["score_mod"] == kScore);
  CHECK(j["mask_mod"] == kMask);
  auto back = flashjit::dispatch::shape_from_json(nlohmann::json::parse(j.dump()));
  REQUIRE(back.ok());
  CHECK(*back == s);
  CHECK(contains(describe(s), "causal smod"));
  CHECK(contains(describe(s), " mmod"));
  auto bad = flashjit::dispatch::shape_from_json(nlohmann::json::parse(R"({"score_mod": 1})"));
  REQUIRE_FALSE(bad.ok());
  CHECK(contains(bad.error().message, "score_mod: expected the snippet's CUDA C++ text"));

  const flashjit::AttentionProblem p = to_problem(s);
  CHECK(std::string(p.score_mod) == kScore);
  CHECK(std::string(p.mask_mod) == kMask);
  auto c = flashjit::dispatch::choose(p, kSm80);
  REQUIRE(c.ok());
  CHECK((c->score_mod == kScore && c->mask_mod == kMask));
  const auto candidates = flashjit::tune::enumerate(s, {}, kSm80, flashjit::tune::Density::reduced);
  REQUIRE_FALSE(candidates.valid.empty());
  for (const KernelConfig& k : candidates.valid) CHECK((k.score_mod == kScore && k.mask_mod == kMask));
  const KernelConfig ref = flashjit::tune::reference_config(s, kSm80);
  CHECK((ref.score_mod == kScore && ref.mask_mod == kMask));
  CHECK(flashjit::dispatch::supports(ref, p, kSm80).ok());
}

TEST_CASE("snippets: precompile plans a kernel per snippet, prefill and decode", "[tune][plan][variants]") {
  auto sweep = parse_sweep(R"({"problems": [{"heads_q": 8, "head_dim": 64, "seqlen": 1024, "mask": "causal",
                                             "score_mod": [)" + quoted(kScore) + ", " + quoted(kMask) + R"(]},
                                            {"kind": "decode", "heads_q": 32, "heads_kv": 8, "head_dim": 128,
                                             "seqlen_k": 4096, "mask_mod": )" + quoted(kMask) + "}]}",
                           "s.json");
  // The second prefill "score_mod" is a mask_mod's text: it parses (the sweep does not compile), one kernel each.
  REQUIRE(sweep.ok());
  REQUIRE(sweep->problems.size() == 2);
  REQUIRE(sweep->decode.size() == 1);
  CHECK(sweep->decode[0].mask_mod == kMask);
  CHECK(contains(describe(sweep->decode[0]), "contiguous mmod"));
  const auto plan = flashjit::tune::precompile_plan(*sweep, {kSm80}, {}, false);
  REQUIRE(plan.configs.size() == 2);
  CHECK((plan.configs[0].score_mod == kScore && plan.configs[1].score_mod == kMask));
  REQUIRE_FALSE(plan.decode.empty());
  for (const auto& d : plan.decode) CHECK(d.mask_mod == kMask);
  const flashjit::DecodeProblem dp = to_problem(sweep->decode[0]);
  CHECK(std::string(dp.mask_mod) == kMask);
}
