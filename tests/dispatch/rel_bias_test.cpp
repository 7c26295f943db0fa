// The relative-logits table (AttentionProblem::rel_bias) on the host: check()'s issues of a bad table (fake
// pointers, never dereferenced), the dispatcher compiling it in (choose, supports), no packed GQA tiles with it,
// and its config field (JSON, name, validate).
#include <cstdint>
#include <string>

#include "dispatch/heuristics.hpp"
#include "flashjit/problem.hpp"
#include "support/catch.hpp"
#include "support/checks.hpp"

using flashjit::Algorithm;
using flashjit::Arch;
using flashjit::AttentionProblem;
using flashjit::DType;
using flashjit::KernelConfig;
using flashjit::MaskKind;
using flashjit::test::contains;

namespace {

constexpr Arch kSm90a{90, true};

const float* fake_floats(std::uintptr_t address) { return reinterpret_cast<const float*>(address); }

// [2, 1024, 32 / 8, 128], causal, a table of 512 distances per head.
AttentionProblem rel_problem() {
  AttentionProblem p;
  p.dtype = DType::bf16;
  p.batch = 2, p.seqlen_q = p.seqlen_k = 1024;
  p.heads_q = 32, p.heads_kv = 8, p.head_dim = 128;
  p.mask = MaskKind::causal;
  p.q = p.k = p.v = reinterpret_cast<const void*>(std::uintptr_t{0x100000});
  p.o = reinterpret_cast<void*>(std::uintptr_t{0x400000});
  p.rel_bias = fake_floats(0x800000), p.rel_bias_extent = 512, p.rel_bias_head_stride = 512;
  return p;
}

std::string message(const flashjit::Status& s) { return s.ok() ? std::string() : s.error().message; }

}  // namespace

TEST_CASE("rel_bias: check() takes a table and names each bad field", "[dispatch][rel_bias]") {
  AttentionProblem p = rel_problem();
  CHECK(check(p).ok());
  p.rel_bias_head_stride = 0, p.rel_bias_offset = -700;  // one row for every head; any offset within 2^30
  CHECK(check(p).ok());
  p = rel_problem();
  p.rel_bias = fake_floats(0x800002);
  CHECK(contains(message(check(p)), "rel_bias (0x800002) must be 4-byte aligned (fp32)"));
  for (int extent : {0, -1, (1 << 30) + 1}) {
    p = rel_problem();
    p.rel_bias_extent = extent;
    CHECK(contains(message(check(p)), "rel_bias_extent (entries per head of rel_bias) must be in [1, 2^30]"));
  }
  p = rel_problem();
  p.rel_bias_head_stride = -1;
  CHECK(contains(message(check(p)), "rel_bias_head_stride must be in [0, 2^40] elements"));
  p.rel_bias_head_stride = std::int64_t{1} << 40, p.heads_q = 128;  // 127 rows of 2^40 floats: past 2^48 bytes
  CHECK(contains(message(check(p)), "rel_bias_head_stride puts the last head's row more than 2^48 bytes past rel_bias"));
  p = rel_problem();
  p.rel_bias_offset = (1 << 30) + 1;
  CHECK(contains(message(check(p)), "rel_bias_offset must be in [-2^30, 2^30]"));
  p = rel_problem();
  p.rel_bias = nullptr;
  CHECK(contains(message(check(p)), "are set but rel_bias is null"));
}

TEST_CASE("rel_bias: the dispatcher compiles it in, never on packed GQA tiles", "[dispatch][rel_bias]") {
  AttentionProblem p = rel_problem();
  for (Algorithm a : {Algorithm::automatic, Algorithm::fa2, Algorithm::naive}) {
    auto c = flashjit::dispatch::choose(p, kSm90a, a);
    REQUIRE(c.ok());
    CHECK(c->rel_bias);
    CHECK(flashjit::dispatch::supports(*c, p, kSm90a).ok());
    KernelConfig plain = *c;
    plain.rel_bias = false;
    CHECK(contains(message(flashjit::dispatch::supports(plain, p, kSm90a)),
                   "the problem has rel_bias but the kernel has no rel_bias: set rel_bias"));
  }
  // A short sliding window with grouped heads takes packed tiles (fit_pack_gqa), but not with a table.
  p.mask = MaskKind::sliding_window, p.window_left = 128, p.window_right = 0;
  AttentionProblem plain = p;
  plain.rel_bias = nullptr, plain.rel_bias_extent = 0, plain.rel_bias_head_stride = 0;
  auto packed = flashjit::dispatch::choose(plain, kSm90a);
  REQUIRE(packed.ok());
  CHECK(packed->pack_gqa);
  auto c = flashjit::dispatch::choose(p, kSm90a);
  REQUIRE(c.ok());
  CHECK_FALSE(c->pack_gqa);
  CHECK(c->rel_bias);
  CHECK(contains(message(flashjit::dispatch::supports(*c, plain, kSm90a)), "a rel_bias kernel needs the problem's rel_bias"));
}

TEST_CASE("rel_bias config: in the JSON and the name only when on, not with pack_gqa", "[config][rel_bias]") {
  KernelConfig c = flashjit::dispatch::fa3_heuristic(DType::bf16, 128, MaskKind::causal, kSm90a);
  CHECK(to_json(c).find("rel_bias") == std::string::npos);
  CHECK(readable_name(c).find("relbias") == std::string::npos);
  c.rel_bias = true, c.alibi = true;
  REQUIRE(validate(c).empty());
  CHECK(to_json(c).find(R"("rel_bias":true)") != std::string::npos);
  CHECK(readable_name(c).find("_alibi_relbias_sm90a") != std::string::npos);
  auto back = flashjit::config_from_json(to_json(c));
  REQUIRE(back.ok());
  CHECK(*back == c);
  c.alibi = false, c.pack_gqa = true;
  bool named = false;
  for (const auto& i : validate(c)) named |= i.field == "pack_gqa" && contains(i.message, "rel_bias");
  CHECK(named);
}
