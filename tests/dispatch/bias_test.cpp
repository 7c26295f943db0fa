// A problem's bias tensor (no device: fake pointer values, never dereferenced): check() of prefill (fixed-length,
// varlen, paged) and decode problems accepts broadcast strides and names each bad field; choose() compiles the
// bias's type in, never packs the query heads with it, and supports() serves a bias kernel to its own type only.
#include <cstdint>
#include <limits>
#include <string>

#include "dispatch/decode_heuristics.hpp"
#include "dispatch/heuristics.hpp"
#include "flashjit/decode.hpp"
#include "support/catch.hpp"
#include "support/checks.hpp"

using namespace flashjit;
using flashjit::test::contains;

namespace {

const Arch kSm90a{90, true};
const void* fake(std::uintptr_t address) { return reinterpret_cast<const void*>(address); }

// B2, Sq 128, Sk 256, H8 / KV2, D64, a dense bf16 bias [2, 8, 128, 256].
AttentionProblem with_bias() {
  AttentionProblem p;
  p.batch = 2, p.seqlen_q = 128, p.seqlen_k = 256, p.heads_q = 8, p.heads_kv = 2, p.head_dim = 64;
  p.q = fake(0x10000), p.k = fake(0x20000), p.v = fake(0x30000), p.o = const_cast<void*>(fake(0x40000));
  p.bias = fake(0x50000), p.bias_type = BiasType::bf16;
  p.bias_strides = BiasStrides::contiguous(p.heads_q, p.seqlen_q, p.seqlen_k);
  return p;
}

template <class Problem>
void require_invalid(const Problem& p, const std::string& part) {
  auto st = check(p);
  REQUIRE(!st.ok());
  INFO(st.error().message);
  CHECK(contains(st.error().message, part));
}

}  // namespace

TEST_CASE("check(problem): a bias tensor", "[dispatch][bias]") {
  AttentionProblem p = with_bias();
  CHECK(p.bias_strides.batch == 8 * 128 * 256);
  CHECK(p.bias_strides.k == 1);
  REQUIRE(check(p).ok());
  SECTION("broadcast dimensions (stride 0), any stride, every type") {
    p.bias_strides = {0, 0, 256, 1};  // one [Sq, Sk] plane
    CHECK(check(p).ok());
    p.bias_strides = {256, 0, 0, 1};  // a key padding mask [B, 1, 1, Sk]
    p.bias_type = BiasType::boolean, p.bias = fake(0x50001);
    CHECK(check(p).ok());
    p.bias_strides = {7, 3, 1, 129};  // odd, transposed
    p.bias_type = BiasType::fp16, p.bias = fake(0x50002);
    CHECK(check(p).ok());
  }
  SECTION("pointer and type together") {
    p.bias_type = BiasType::none;
    require_invalid(p, "bias is set but bias_type is none");
    p.bias = nullptr, p.bias_type = BiasType::fp32;
    require_invalid(p, "bias_type is fp32 but bias is null");
    p.bias = fake(0x50000), p.bias_type = static_cast<BiasType>(7);
    require_invalid(p, "bias_type 7 is not a BiasType");
  }
  SECTION("aligned to an entry") {
    p.bias = fake(0x50001);
    require_invalid(p, "bias (0x50001) must be aligned to its 2-byte entries");
    p.bias = fake(0x50002), p.bias_type = BiasType::fp32;
    require_invalid(p, "aligned to its 4-byte entries");
  }
  SECTION("strides >= 0 and within reach") {
    p.bias_strides.head = -1;
    require_invalid(p, "bias_strides.head must be >= 0 elements (0 broadcasts), got -1");
    p.bias_strides.head = std::int64_t{1} << 46;
    require_invalid(p, "more than 2^48 bytes past bias");
  }
  SECTION("varlen and paged: [sequences, Hq, max_q, max_k]") {
    p.cu_seqlens_q = static_cast<const int*>(fake(0x60000)), p.cu_seqlens_k = static_cast<const int*>(fake(0x61000));
    p.total_q = 300, p.total_k = 500;
    CHECK(check(p).ok());
    p.bias_strides.batch = std::int64_t{1} << 47;
    require_invalid(p, "bias_strides");
  }
}

TEST_CASE("check(decode problem): a bias tensor [B, Hq, q_len, max_seqlen_k]", "[dispatch][decode][bias]") {
  DecodeProblem d;
  d.batch = 3, d.q_len = 4, d.heads_q = 32, d.heads_kv = 8, d.head_dim = 128, d.max_seqlen_k = 4097;
  d.q = fake(0x10000), d.o = const_cast<void*>(fake(0x20000));
  d.k_cache = fake(0x30000), d.v_cache = fake(0x40000), d.seqlens_k = static_cast<const int*>(fake(0x50000));
  d.bias = fake(0x60000), d.bias_type = BiasType::fp32;
  d.bias_strides = BiasStrides::contiguous(d.heads_q, d.q_len, d.max_seqlen_k);
  CHECK(check(d).ok());
  d.bias_strides.k = -2;
  require_invalid(d, "bias_strides.k must be >= 0");
  d.bias_strides.k = 1, d.bias = fake(0x60002);
  require_invalid(d, "aligned to its 4-byte entries");
  d.bias = nullptr;
  require_invalid(d, "bias_type is fp32 but bias is null");
  d.bias = fake(0x60000);
  CHECK(dispatch::plan_decode(d, kSm90a, 132).split.bias == BiasType::fp32);
  d.bias = nullptr, d.bias_type = BiasType::none;
  CHECK(dispatch::plan_decode(d, kSm90a, 132).split.bias == BiasType::none);
}

TEST_CASE("choose and supports: the bias's type is compiled in, and never packed", "[dispatch][bias]") {
  AttentionProblem p = with_bias();
  for (Algorithm a : {Algorithm::automatic, Algorithm::fa3, Algorithm::fa2, Algorithm::naive}) {
    auto c = dispatch::choose(p, kSm90a, a);
    REQUIRE(c.ok());
    INFO(readable_name(*c));
    CHECK(c->bias == BiasType::bf16);
    CHECK(readable_name(*c).find("_biasbf16_") != std::string::npos);
    CHECK(dispatch::supports(*c, p, kSm90a).ok());
  }
  // A short window over grouped heads packs them (heuristics_test), but not with a bias.
  p.seqlen_q = p.seqlen_k = 8192, p.heads_q = 64, p.heads_kv = 8, p.mask = MaskKind::sliding_window;
  p.window_left = 128, p.window_right = 0;
  p.bias_strides = BiasStrides::contiguous(p.heads_q, p.seqlen_q, p.seqlen_k);
  AttentionProblem plain = p;
  plain.bias = nullptr, plain.bias_type = BiasType::none;
  REQUIRE(dispatch::choose(plain, kSm90a)->pack_gqa);
  auto c = dispatch::choose(p, kSm90a);
  REQUIRE(c.ok());
  CHECK_FALSE(c->pack_gqa);
  CHECK(validate(*c).empty());
  auto st = dispatch::supports(*c, plain, kSm90a);
  REQUIRE_FALSE(st.ok());
  CHECK(contains(st.error().message, "the kernel reads a bf16 bias but the problem has none"));
  KernelConfig none = *c;
  none.bias = BiasType::none;
  st = dispatch::supports(none, p, kSm90a);
  REQUIRE_FALSE(st.ok());
  CHECK(contains(st.error().message, "the problem has a bf16 bias but the kernel has none: set bias=bf16"));
  p.bias_type = BiasType::fp32;
  st = dispatch::supports(*c, p, kSm90a);
  REQUIRE_FALSE(st.ok());
  CHECK(contains(st.error().message, "the kernel reads a bf16 bias but the problem has fp32"));
}

TEST_CASE("fit_bias_tma: fa3 stages a bias TMA can read, supports() refuses a staged kernel one it cannot",
          "[dispatch][bias][bias_tma]") {
  AttentionProblem p = with_bias();
  p.seqlen_q = p.seqlen_k = 4096, p.heads_q = 32, p.heads_kv = 8, p.head_dim = 128, p.mask = MaskKind::causal;
  p.bias_strides = BiasStrides::contiguous(p.heads_q, p.seqlen_q, p.seqlen_k);
  // choose() does not stage yet (the staged kernels have not run on a GPU); fit_bias_tma opts in.
  auto staged = [](const AttentionProblem& q, Algorithm a = Algorithm::automatic) {
    auto c = dispatch::choose(q, kSm90a, a);
    REQUIRE(c.ok());
    CHECK_FALSE(c->bias_tma);
    dispatch::fit_bias_tma(*c, q);
    return *c;
  };
  const KernelConfig c = staged(p);
  INFO(readable_name(c));
  CHECK(c.algorithm == Algorithm::fa3);
  CHECK(c.bias_tma);
  CHECK(c.block_n * 2 % 128 == 0);
  CHECK(validate(c).empty());
  CHECK(dispatch::supports(c, p, kSm90a).ok());
  CHECK_FALSE(staged(p, Algorithm::fa2).bias_tma);
  // What TMA cannot read stays loaded per thread, and a staged kernel refuses it by name.
  struct Unstaged {
    const char* why;
    void (*change)(AttentionProblem&);
  };
  const Unstaged cases[] = {
      {"its keys are not contiguous (k stride 4096)",
       [](AttentionProblem& q) { q.bias_strides.q = 1, q.bias_strides.k = 4096; }},
      {"its rows are broadcast (q stride 0)", [](AttentionProblem& q) { q.bias_strides.q = 0; }},
      {"its base is not 16-byte aligned", [](AttentionProblem& q) { q.bias = fake(0x50008); }},
      {"its q stride (4100 entries of 2 bytes) is not a multiple of 16 bytes",
       [](AttentionProblem& q) { q.bias_strides.q = 4100; }},
      {"its head stride (1001 entries", [](AttentionProblem& q) { q.bias_strides.head = 1001; }},
  };
  for (const Unstaged& u : cases) {
    AttentionProblem q = p;
    u.change(q);
    INFO(u.why);
    CHECK_FALSE(staged(q).bias_tma);
    auto st = dispatch::supports(c, q, kSm90a);
    REQUIRE_FALSE(st.ok());
    CHECK(contains(st.error().message, std::string("a bias_tma kernel stages the bias through TMA, but ") + u.why));
  }
  // Broadcast heads and batch entries (stride 0) are staged: their views have one index there.
  AttentionProblem shared = p;
  shared.bias_strides.batch = shared.bias_strides.head = 0;
  CHECK(staged(shared).bias_tma);
  // fp32 entries keep the 96-key tiles (384-byte rows); bool entries go from d128's 112-key tiles to 128; nothing
  // above d192 is staged.
  AttentionProblem f32 = p;
  f32.bias_type = BiasType::fp32;
  const KernelConfig c32 = staged(f32);
  CHECK(c32.bias_tma);
  CHECK(c32.block_n * 4 % 128 == 0);
  AttentionProblem boolean = p;
  boolean.bias_type = BiasType::boolean;
  const KernelConfig cb = staged(boolean);
  CHECK(cb.bias_tma);
  CHECK(cb.block_n == 128);
  AttentionProblem d256 = p;
  d256.head_dim = 256;
  CHECK_FALSE(staged(d256).bias_tma);
  // Nor beside a relative-logits table or key counts over contiguous keys (their register fits count no staged tile).
  AttentionProblem rel = p;
  rel.rel_bias = static_cast<const float*>(fake(0x60000)), rel.rel_bias_extent = 7;
  CHECK_FALSE(staged(rel).bias_tma);
  AttentionProblem used = p;
  used.seqused_k = static_cast<const int*>(fake(0x70000));
  CHECK_FALSE(staged(used).bias_tma);
}
