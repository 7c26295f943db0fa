// Tests of check(AttentionProblem) (no device: fake pointer values, never dereferenced) and of
// attention_flops (hand-counted visible pairs, plus a brute force written from problem.hpp's mask wording).
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "flashjit/problem.hpp"
#include "support/catch.hpp"

using flashjit::AttentionProblem;
using flashjit::DType;
using flashjit::ErrorCode;
using flashjit::MaskKind;
using flashjit::Strides;

namespace {

const void* fake(std::uintptr_t address) { return reinterpret_cast<const void*>(address); }
void* fake_mut(std::uintptr_t address) { return reinterpret_cast<void*>(address); }

// A valid problem: GQA 8/2, Sq != Sk, 16-byte aligned fake pointers, contiguous strides.
AttentionProblem valid_problem() {
  AttentionProblem p;
  p.dtype = DType::bf16;
  p.batch = 2;
  p.seqlen_q = 128;
  p.seqlen_k = 256;
  p.heads_q = 8;
  p.heads_kv = 2;
  p.head_dim = 64;
  p.q = fake(0x10000);
  p.k = fake(0x20000);
  p.v = fake(0x30000);
  p.o = fake_mut(0x40000);
  return p;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// check() must fail with invalid_argument and a message containing `part`.
void require_invalid(const AttentionProblem& p, const std::string& part) {
  auto st = check(p);
  REQUIRE(!st.ok());
  INFO(st.error().message);
  CHECK(st.error().code == ErrorCode::invalid_argument);
  CHECK(contains(st.error().message, part));
}

AttentionProblem flops_problem(int sq, int sk, MaskKind mask, int d = 1) {
  AttentionProblem p = valid_problem();
  p.batch = 1;
  p.heads_q = 1;
  p.heads_kv = 1;
  p.seqlen_q = sq;
  p.seqlen_k = sk;
  p.head_dim = d;
  p.mask = mask;
  return p;
}

// Visible (q, k) pairs, straight from the wording in problem.hpp.
double brute_force_pairs(const AttentionProblem& p) {
  double pairs = 0;
  for (long i = 0; i < p.seqlen_q; ++i) {
    const long a = i + p.seqlen_k - p.seqlen_q;  // i'
    for (long j = 0; j < p.seqlen_k; ++j) {
      bool visible = true;
      switch (p.mask) {
        case MaskKind::none: break;
        case MaskKind::causal: visible = j <= a; break;
        case MaskKind::sliding_window:
          visible = (p.window_left < 0 || j >= a - p.window_left) && (p.window_right < 0 || j <= a + p.window_right);
          break;
        case MaskKind::chunked:
        case MaskKind::chunked_causal: {
          // Same chunk: floor(a / c) == floor(j / c) with floor division for negative a.
          auto chunk_of = [&](long x) { return static_cast<long>(std::floor(double(x) / p.chunk_size)); };
          visible = chunk_of(a) == chunk_of(j);
          if (p.mask == MaskKind::chunked_causal) visible = visible && j <= a;
          break;
        }
      }
      pairs += visible;
    }
  }
  return pairs;
}

}  // namespace

TEST_CASE("check(problem): a valid problem passes", "[dispatch]") {
  AttentionProblem p = valid_problem();
  CHECK(check(p).ok());
  SECTION("every mask with sensible constants") {
    p.mask = MaskKind::sliding_window;
    p.window_left = -1, p.window_right = 0;
    CHECK(check(p).ok());
    p.window_left = 0, p.window_right = -1;
    CHECK(check(p).ok());
    p.mask = MaskKind::chunked;
    p.chunk_size = 1;
    CHECK(check(p).ok());
    p.mask = MaskKind::chunked_causal;
    p.chunk_size = 4096;
    CHECK(check(p).ok());
  }
  SECTION("an aligned lse and an explicit scale") {
    p.lse = reinterpret_cast<float*>(std::uintptr_t{0x50004});
    p.softmax_scale = 0.125f;
    CHECK(check(p).ok());
  }
  SECTION("explicit strides: padded heads and batch-strided views") {
    p.q_strides = {/*batch=*/p.seqlen_q * 1024L, /*seq=*/1024, /*head=*/128};  // rows padded to 128
    p.k_strides = {/*batch=*/0, /*seq=*/0, /*head=*/0};                        // contiguous
    p.v_strides = {/*batch=*/8, /*seq=*/p.heads_kv * 64L * 2, /*head=*/64};
    CHECK(check(p).ok());
  }
  SECTION("every head_dim multiple of 8 in [8, 256]") {
    for (int d = 8; d <= 256; d += 8) {
      p.head_dim = d;
      INFO("head_dim " << d);
      CHECK(check(p).ok());
    }
  }
}

TEST_CASE("check(problem): null pointers", "[dispatch]") {
  AttentionProblem p = valid_problem();
  std::string name = GENERATE(as<std::string>{}, "q", "k", "v", "o");
  if (name == "q") p.q = nullptr;
  if (name == "k") p.k = nullptr;
  if (name == "v") p.v = nullptr;
  if (name == "o") p.o = nullptr;
  require_invalid(p, name + " is a null pointer");
}

TEST_CASE("check(problem): misaligned pointers", "[dispatch]") {
  AttentionProblem p = valid_problem();
  std::string name = GENERATE(as<std::string>{}, "q", "k", "v", "o");
  std::uintptr_t offset = GENERATE(std::uintptr_t{2}, std::uintptr_t{8});
  if (name == "q") p.q = fake(0x10000 + offset);
  if (name == "k") p.k = fake(0x20000 + offset);
  if (name == "v") p.v = fake(0x30000 + offset);
  if (name == "o") p.o = fake_mut(0x40000 + offset);
  INFO(name << " + " << offset);
  require_invalid(p, name + " (");
  require_invalid(p, "16-byte aligned");
}

TEST_CASE("check(problem): misaligned lse", "[dispatch]") {
  AttentionProblem p = valid_problem();
  p.lse = reinterpret_cast<float*>(std::uintptr_t{0x50002});
  require_invalid(p, "lse");
}

TEST_CASE("check(problem): heads and sizes", "[dispatch]") {
  AttentionProblem p = valid_problem();
  SECTION("Hq % Hkv != 0") {
    p.heads_q = 6;
    p.heads_kv = 4;
    require_invalid(p, "multiple of heads_kv");
  }
  SECTION("more kv heads than q heads") {
    p.heads_q = 2;
    p.heads_kv = 8;
    require_invalid(p, "multiple of heads_kv");
  }
  SECTION("zero heads") {
    p.heads_kv = 0;
    require_invalid(p, "heads_kv");
  }
  SECTION("batch 0") {
    p.batch = 0;
    require_invalid(p, "batch");
  }
  SECTION("seqlen_q 0") {
    p.seqlen_q = 0;
    require_invalid(p, "seqlen_q");
  }
  SECTION("seqlen_k -1") {
    p.seqlen_k = -1;
    require_invalid(p, "seqlen_k");
  }
  SECTION("grid limits") {
    p.batch = 65536;
    require_invalid(p, "65535");
  }
}

TEST_CASE("check(problem): bad head_dim", "[dispatch]") {
  AttentionProblem p = valid_problem();
  int d = GENERATE(0, 4, 12, 100, 264, 512);
  p.head_dim = d;
  INFO("head_dim " << d);
  require_invalid(p, "head_dim");
}

TEST_CASE("check(problem): bad strides", "[dispatch]") {
  AttentionProblem p = valid_problem();
  std::string expected;
  SECTION("q head stride not a multiple of 8") {
    p.q_strides.head = 68;
    expected = "q head stride";
  }
  SECTION("k sequence stride not a multiple of 8") {
    p.k_strides.seq = 132;
    expected = "k sequence stride";
  }
  SECTION("v batch stride negative") {
    p.v_strides.batch = -8;
    expected = "v batch stride";
  }
  SECTION("o sequence stride odd") {
    p.o_strides.seq = 513;
    expected = "o sequence stride";
  }
  SECTION("q batch stride negative") {
    p.q_strides.batch = -1024;
    expected = "q batch stride";
  }
  require_invalid(p, expected);
}

TEST_CASE("check(problem): mask constants", "[dispatch]") {
  AttentionProblem p = valid_problem();
  SECTION("window_left -2") {
    p.mask = MaskKind::sliding_window;
    p.window_left = -2;
    p.window_right = 0;
    require_invalid(p, "window");
  }
  SECTION("window_right -5") {
    p.mask = MaskKind::sliding_window;
    p.window_left = 16;
    p.window_right = -5;
    require_invalid(p, "window");
  }
  SECTION("chunk_size 0 for chunked") {
    p.mask = MaskKind::chunked;
    p.chunk_size = 0;
    require_invalid(p, "chunk_size");
  }
  SECTION("chunk_size -4 for chunked_causal") {
    p.mask = MaskKind::chunked_causal;
    p.chunk_size = -4;
    require_invalid(p, "chunk_size");
  }
  SECTION("the constants of other masks are not looked at") {
    p.mask = MaskKind::causal;
    p.window_left = -2;
    p.chunk_size = 0;
    CHECK(check(p).ok());
  }
}

TEST_CASE("check(problem): softmax_scale must be positive and finite", "[dispatch]") {
  AttentionProblem p = valid_problem();
  float s = GENERATE(-0.125f, 0.f, -0.f, std::numeric_limits<float>::infinity(),
                     -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN());
  p.softmax_scale = s;
  INFO("scale " << s);
  require_invalid(p, "softmax_scale");
}

TEST_CASE("check(problem): every issue is listed", "[dispatch]") {
  AttentionProblem p = valid_problem();
  p.q = nullptr;
  p.k = fake(0x20004);
  p.heads_q = 6, p.heads_kv = 4;
  p.softmax_scale = -1.f;
  auto st = check(p);
  REQUIRE(!st.ok());
  const auto& msg = st.error().message;
  INFO(msg);
  CHECK(contains(msg, "q is a null pointer"));
  CHECK(contains(msg, "16-byte aligned"));
  CHECK(contains(msg, "multiple of heads_kv"));
  CHECK(contains(msg, "softmax_scale"));
}

TEST_CASE("resolved strides: zeros mean contiguous BSHD", "[dispatch]") {
  AttentionProblem p = valid_problem();  // Sq 128, Sk 256, Hq 8, Hkv 2, D 64
  auto q = resolved_q_strides(p);
  CHECK(q.head == 64);
  CHECK(q.seq == 8 * 64);
  CHECK(q.batch == 128 * 8 * 64);
  auto k = resolved_kv_strides(p, p.k_strides);
  CHECK(k.head == 64);
  CHECK(k.seq == 2 * 64);
  CHECK(k.batch == 256 * 2 * 64);
  p.o_strides = {0, 1024, 0};
  auto o = resolved_o_strides(p);
  CHECK(o.seq == 1024);
  CHECK(o.head == 64);
  CHECK(o.batch == 128 * 8 * 64);  // contiguous default, independent of the explicit seq stride
}

TEST_CASE("attention_flops: no mask is 4 B H Sq Sk D", "[dispatch]") {
  AttentionProblem p = valid_problem();
  p.batch = 2, p.heads_q = 3, p.heads_kv = 1, p.seqlen_q = 5, p.seqlen_k = 7, p.head_dim = 64;
  CHECK(attention_flops(p) == 4.0 * 2 * 3 * 5 * 7 * 64);
  p.heads_kv = 3;  // kv heads do not change the work
  CHECK(attention_flops(p) == 4.0 * 2 * 3 * 5 * 7 * 64);
  SECTION("large sizes do not overflow") {
    p.batch = 64, p.heads_q = 128, p.heads_kv = 8, p.seqlen_q = 131072, p.seqlen_k = 131072, p.head_dim = 256;
    CHECK(attention_flops(p) == 4.0 * 64 * 128 * 131072.0 * 131072.0 * 256);
  }
}

TEST_CASE("attention_flops: causal counts the visible pairs", "[dispatch]") {
  SECTION("Sq = Sk = 4: 1 + 2 + 3 + 4 = 10 pairs") {
    auto p = flops_problem(4, 4, MaskKind::causal, 64);
    CHECK(attention_flops(p) == 4.0 * 10 * 64);
  }
  SECTION("Sq = 2, Sk = 5, bottom-right: rows see 4 and 5 keys") {
    auto p = flops_problem(2, 5, MaskKind::causal, 64);
    CHECK(attention_flops(p) == 4.0 * (4 + 5) * 64);
  }
  SECTION("Sq = 5, Sk = 2: the first three rows see nothing, then 1 and 2") {
    auto p = flops_problem(5, 2, MaskKind::causal, 64);
    CHECK(attention_flops(p) == 4.0 * (1 + 2) * 64);
  }
  SECTION("batch and heads multiply") {
    auto p = flops_problem(4, 4, MaskKind::causal, 128);
    p.batch = 3, p.heads_q = 4, p.heads_kv = 2;
    CHECK(attention_flops(p) == 4.0 * 3 * 4 * 10 * 128);
  }
}

TEST_CASE("attention_flops: sliding window", "[dispatch]") {
  SECTION("Sq = Sk = 6, left 1, right 0: row 0 sees 1 key, the others 2") {
    auto p = flops_problem(6, 6, MaskKind::sliding_window);
    p.window_left = 1, p.window_right = 0;
    CHECK(attention_flops(p) == 4.0 * (1 + 5 * 2));
  }
  SECTION("Sq = Sk = 6, left 2, right 1: 2 3 4 4 4 3 keys") {
    auto p = flops_problem(6, 6, MaskKind::sliding_window);
    p.window_left = 2, p.window_right = 1;
    CHECK(attention_flops(p) == 4.0 * (2 + 3 + 4 + 4 + 4 + 3));
  }
  SECTION("Sq = 2, Sk = 6, left 1, right 1: i' = 4, 5 see keys 3..5 and 4..5") {
    auto p = flops_problem(2, 6, MaskKind::sliding_window);
    p.window_left = 1, p.window_right = 1;
    CHECK(attention_flops(p) == 4.0 * (3 + 2));
  }
  SECTION("unbounded both sides is no mask") {
    auto p = flops_problem(6, 9, MaskKind::sliding_window);
    p.window_left = -1, p.window_right = -1;
    CHECK(attention_flops(p) == 4.0 * 6 * 9);
  }
  SECTION("left unbounded, right 0 is causal") {
    auto p = flops_problem(4, 4, MaskKind::sliding_window);
    p.window_left = -1, p.window_right = 0;
    CHECK(attention_flops(p) == 4.0 * 10);
  }
  SECTION("left 0, right 0 is the diagonal") {
    auto p = flops_problem(5, 5, MaskKind::sliding_window);
    p.window_left = 0, p.window_right = 0;
    CHECK(attention_flops(p) == 4.0 * 5);
  }
}

TEST_CASE("attention_flops: chunked", "[dispatch]") {
  SECTION("chunked, Sq = Sk = 10, chunk 4: chunks of 4, 4 and 2 keys") {
    auto p = flops_problem(10, 10, MaskKind::chunked);
    p.chunk_size = 4;
    CHECK(attention_flops(p) == 4.0 * (4 * 4 + 4 * 4 + 2 * 2));
  }
  SECTION("chunked_causal, Sq = Sk = 10, chunk 4: 1+2+3+4, 1+2+3+4, 1+2") {
    auto p = flops_problem(10, 10, MaskKind::chunked_causal);
    p.chunk_size = 4;
    CHECK(attention_flops(p) == 4.0 * (10 + 10 + 3));
  }
  SECTION("chunked, Sq = 3, Sk = 10, chunk 4: i' = 7, 8, 9 see 4, 2, 2 keys") {
    auto p = flops_problem(3, 10, MaskKind::chunked);
    p.chunk_size = 4;
    CHECK(attention_flops(p) == 4.0 * (4 + 2 + 2));
  }
  SECTION("chunked_causal, Sq = 3, Sk = 10, chunk 4: i' = 7, 8, 9 see 4, 1, 2 keys") {
    auto p = flops_problem(3, 10, MaskKind::chunked_causal);
    p.chunk_size = 4;
    CHECK(attention_flops(p) == 4.0 * (4 + 1 + 2));
  }
  SECTION("chunk larger than the sequence is no mask (chunked) / causal (chunked_causal)") {
    auto p = flops_problem(4, 4, MaskKind::chunked);
    p.chunk_size = 100;
    CHECK(attention_flops(p) == 4.0 * 16);
    p.mask = MaskKind::chunked_causal;
    CHECK(attention_flops(p) == 4.0 * 10);
  }
  SECTION("Sq > Sk: rows with i' < 0 see nothing") {
    auto p = flops_problem(6, 4, MaskKind::chunked_causal);  // i' = -2 .. 3
    p.chunk_size = 2;
    CHECK(attention_flops(p) == 4.0 * (0 + 0 + 1 + 2 + 1 + 2));
  }
}

TEST_CASE("attention_flops agrees with a brute-force count", "[dispatch]") {
  auto mask = GENERATE(MaskKind::none, MaskKind::causal, MaskKind::sliding_window, MaskKind::chunked,
                       MaskKind::chunked_causal);
  for (int sq : {1, 2, 5, 17, 33})
    for (int sk : {1, 3, 5, 16, 40})
      for (int param : {1, 2, 3, 7, 64}) {
        auto p = flops_problem(sq, sk, mask, 8);
        p.chunk_size = param;
        p.window_left = param - 2;   // -1 (unbounded), 0, 1, 5, 62
        p.window_right = (param * 3) % 5 - 1;  // 2, 0, 3, 0, 1
        INFO(to_string(mask) << " Sq " << sq << " Sk " << sk << " window (" << p.window_left << ", "
                             << p.window_right << ") chunk " << p.chunk_size);
        CHECK(attention_flops(p) == 4.0 * 8 * brute_force_pairs(p));
      }
}
