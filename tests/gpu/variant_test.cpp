// Variants (softcap, ALiBi, learnable sinks; templates/attention/variant.cuh) in the FA3, FA2 and reference
// kernels against the float64 reference: each variant alone and all three together, on every mask, odd
// lengths (rows that see no key: O = 0 and LSE = the sink's logit), GQA, bf16 and fp16, ALiBi tables [Hq] and
// [B, Hq]. The configs are the dispatcher's (dispatch::choose), so the variant flags and the tiles it picks
// for them are what runs.
#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "dispatch/heuristics.hpp"
#include "harness.hpp"
#include "support/catch.hpp"

using namespace flashjit;
using namespace flashjit::test;

namespace {

constexpr Arch kSm90a{90, true};

std::uint64_t fresh_seed() {
  static std::uint64_t n = 0x7a21a57;
  return n += 0x9e3779b97f4a7c15ull;
}

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
  const Comparison cmp = compare(shape, o, lse, ref_o, ref_lse);
  INFO(cmp.to_string());
  CHECK(cmp.nan_count == 0);
  CHECK(cmp.empty_row_violations == 0);
  CHECK(cmp.rel_l2 <= tolerance(shape.dtype));
  CHECK(cmp.lse_max_abs <= kPrefillLseTolerance);
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
