// Variants (softcap, ALiBi, learnable sinks; templates/attention/variant.cuh) in the FA3, FA2 and reference
// kernels against the float64 reference: each variant alone and all three together, on every mask, odd
// lengths (rows that see no key: O = 0 and LSE = the sink's logit), GQA, bf16 and fp16, ALiBi tables [Hq] and
// [B, Hq]. The configs are the dispatcher's (dispatch::choose), so the variant flags and the tiles it picks
// for them are what runs.
#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "checks.hpp"
#include "dispatch/heuristics.hpp"
#include "harness.hpp"
#include "support/catch.hpp"

using namespace flashjit;
using namespace flashjit::test;

namespace {

constexpr Arch kSm90a{90, true};

SeedSequence fresh_seed{0x7a21a57};

struct VariantCase {
  const char* name;
  float softcap;
  int alibi;
  bool sinks;
};
const VariantCase kVariants[] = {{"softcap", 0.8f, 0, false},
                                 {"softcap 30", 30.f, 0, false},
                                 {"alibi [Hq]", 0.f, 1, false},
                                 {"alibi [B, Hq]", 0.f, 2, false},
                                 {"sinks", 0.f, 0, true},
                                 {"softcap + alibi + sinks", 0.9f, 2, true}};

struct Lengths {
  int sq, sk, group, batch;
};
const Lengths kLengths[] = {{1, 1, 1, 1},   {17, 17, 4, 2},    {128, 1000, 8, 1}, {1000, 128, 1, 1},
                            {300, 301, 1, 2}, {1, 1000, 8, 2}, {257, 4097, 4, 1}};

void check_variant(Algorithm algorithm, const Shape& shape) {
  ensure_context();
  auto c = Case::make(shape, fresh_seed());
  REQUIRE(c.ok());
  const AttentionProblem problem = c->problem();
  auto config = dispatch::choose(problem, kSm90a, algorithm, nullptr);
  REQUIRE(config.ok());
  INFO(shape.to_string() << " with " << readable_name(*config));
  CHECK(config->softcap == (shape.softcap > 0));
  CHECK(config->alibi == (shape.alibi != 0));
  CHECK(config->sinks == shape.sinks);
  auto st = runtime().forward(problem, *config);
  if (!st.ok()) FAIL(st.error().to_string());
  std::vector<float> o, lse;
  REQUIRE(c->read_outputs(o, lse).ok());
  std::vector<double> ref_o, ref_lse;
  reference_attention(shape, c->q(), c->k(), c->v(), ref_o, ref_lse);
  check_ok(compare(shape, o, lse, ref_o, ref_lse), shape.dtype);
}

// Every variant on every mask at one head dim; the lengths rotate so that each variant meets each set.
void check_variants(Algorithm algorithm, int head_dim) {
  int index = head_dim / 16;
  for (const auto& v : kVariants)
    for (const auto& m : kMasks) {
      const Lengths& l = kLengths[index++ % std::size(kLengths)];
      Shape s;
      s.batch = l.batch, s.seqlen_q = l.sq, s.seqlen_k = l.sk, s.heads_q = 8, s.heads_kv = 8 / l.group;
      s.head_dim = head_dim, s.dtype = index % 2 ? DType::bf16 : DType::fp16;
      s.mask = m.kind, s.window_left = m.left, s.window_right = m.right, s.chunk_size = m.chunk;
      s.softcap = v.softcap, s.alibi = v.alibi, s.sinks = v.sinks;
      check_variant(algorithm, s);
    }
}

}  // namespace

TEST_CASE("fa3 variants match float64 on every mask (d64, d128)", "[fa3][variant][gpu]") {
  check_variants(Algorithm::fa3, GENERATE(64, 128));
}

TEST_CASE("fa3 variants match float64 on every mask (d80, d192, d256)", "[fa3][variant][gpu]") {
  check_variants(Algorithm::fa3, GENERATE(80, 192, 256));
}

TEST_CASE("fa2 and reference variants match float64 on every mask", "[fa2][reference][variant][gpu]") {
  const Algorithm algorithm = GENERATE(Algorithm::fa2, Algorithm::naive);
  check_variants(algorithm, GENERATE(64, 128));
}

TEST_CASE("a sink far above every score leaves O near 0 and LSE at the sink", "[fa3][variant][gpu]") {
  // The sink dominates: exp(sink - max) overflows nothing (finalize_sink works relative to max(m, sink)).
  Shape s;
  s.batch = 1, s.seqlen_q = 200, s.seqlen_k = 300, s.heads_q = 4, s.heads_kv = 4, s.head_dim = 128;
  s.sinks = true;
  // sink_logit is near log(Sk) + up to 3: scale the scores down instead, with a small softcap, so the sinks
  // dominate every row by a wide margin.
  s.softcap = 0.05f;
  check_variant(Algorithm::fa3, s);
}

// User snippets (templates/attention/mod.cuh) that restate a built-in variant or mask, so the float64 reference of
// that one checks them: q_idx, kv_idx, the lengths and each kind of auxiliary argument (pointers, scalars,
// integers) reach the snippet as documented, in every kernel kind.
namespace {

// Softcap 0.8 as a score_mod, the cap read from ctx.scalar(0).
const char* kSoftcapMod = R"(
__device__ float score_mod(float score, int b, int h, int q_idx, int kv_idx, const flashjit::ModContext& ctx) {
  const float cap = ctx.scalar(0);
  return cap * tanhf(score / cap);
}
)";
// ALiBi over [Hq] slopes in device memory (ctx.pointer<float>(0)), bottom-right aligned by the lengths.
const char* kAlibiMod = R"(
__device__ float score_mod(float score, int b, int h, int q_idx, int kv_idx, const flashjit::ModContext& ctx) {
  const int a = q_idx + ctx.seqlen_k - ctx.seqlen_q;
  return score - ctx.pointer<float>(0)[h] * fabsf(float(a - kv_idx));
}
)";
// A sliding window (left ctx.integer(0), right ctx.integer(1)) as a mask_mod, with a helper of its own.
const char* kWindowMod = R"(
__device__ bool inside(long long lo, long long x, long long hi) { return lo <= x && x <= hi; }
__device__ bool mask_mod(int b, int h, int q_idx, int kv_idx, const flashjit::ModContext& ctx) {
  const long long a = q_idx + ctx.seqlen_k - ctx.seqlen_q;
  return inside(a - ctx.integer(0), kv_idx, a + ctx.integer(1));
}
)";

enum class Mod { softcap, alibi, window };

void check_mod(Algorithm algorithm, Mod mod, const Lengths& l, int head_dim, DType dtype) {
  ensure_context();
  Shape s;  // what the reference computes
  s.batch = l.batch, s.seqlen_q = l.sq, s.seqlen_k = l.sk, s.heads_q = 8, s.heads_kv = 8 / l.group;
  s.head_dim = head_dim, s.dtype = dtype;
  if (mod == Mod::softcap) s.softcap = 0.8f;
  if (mod == Mod::alibi) s.alibi = 1;
  if (mod == Mod::window) s.mask = MaskKind::sliding_window, s.window_left = 37, s.window_right = 5;
  Shape run = s;  // what the kernel is given: the snippet instead of the variant or mask
  run.softcap = 0.f, run.alibi = 0, run.mask = MaskKind::none;
  auto c = Case::make(run, fresh_seed());
  REQUIRE(c.ok());
  AttentionProblem problem = c->problem();
  cuda::DeviceBuffer slopes;
  if (mod == Mod::softcap) {
    problem.score_mod = kSoftcapMod;
    problem.aux.scalars[0] = 0.8f;
  } else if (mod == Mod::alibi) {
    std::vector<float> host;
    for (int h = 0; h < s.heads_q; ++h) host.push_back(static_cast<float>(alibi_slope(s, 0, h)));
    auto buf = cuda::DeviceBuffer::allocate(host.size() * 4);
    REQUIRE(buf.ok());
    slopes = std::move(*buf);
    REQUIRE(slopes.upload(host.data(), host.size() * 4).ok());
    problem.score_mod = kAlibiMod;
    problem.aux.pointers[0] = slopes.get();
  } else {
    problem.mask_mod = kWindowMod;
    problem.aux.integers[0] = s.window_left, problem.aux.integers[1] = s.window_right;
  }
  auto config = dispatch::choose(problem, kSm90a, algorithm, nullptr);
  REQUIRE(config.ok());
  INFO(s.to_string() << " as a snippet, with " << readable_name(*config));
  auto st = runtime().forward(problem, *config);
  if (!st.ok()) FAIL(st.error().to_string());
  std::vector<float> o, lse;
  REQUIRE(c->read_outputs(o, lse).ok());
  std::vector<double> ref_o, ref_lse;
  reference_attention(s, c->q(), c->k(), c->v(), ref_o, ref_lse);
  check_ok(compare(s, o, lse, ref_o, ref_lse), s.dtype);
}

}  // namespace

TEST_CASE("score_mod and mask_mod snippets match the built-ins they restate", "[fa3][fa2][reference][variant][gpu]") {
  const Algorithm algorithm = GENERATE(Algorithm::fa3, Algorithm::fa2, Algorithm::naive);
  const Mod mod = GENERATE(Mod::softcap, Mod::alibi, Mod::window);
  for (const Lengths& l : {Lengths{17, 17, 4, 2}, Lengths{300, 301, 1, 2}, Lengths{128, 1000, 8, 1}})
    check_mod(algorithm, mod, l, algorithm == Algorithm::fa3 ? 128 : 64, l.batch == 2 ? DType::bf16 : DType::fp16);
}
