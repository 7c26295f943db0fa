// Tests of check(AttentionProblem) (no device: fake pointer values, never dereferenced) and of
// attention_flops (hand-counted visible pairs, plus a brute force written from problem.hpp's mask wording).
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "flashjit/problem.hpp"
#include "support/catch.hpp"
#include "support/checks.hpp"

using flashjit::AttentionProblem;
using flashjit::DType;
using flashjit::ErrorCode;
using flashjit::MaskKind;
using flashjit::Strides;

using flashjit::test::contains;

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

TEST_CASE("check(problem): variants (softcap, alibi_slopes, sinks)", "[dispatch][variant]") {
  AttentionProblem p = valid_problem();
  SECTION("valid values pass") {
    p.softcap = 30.f;
    p.alibi_slopes = reinterpret_cast<const float*>(std::uintptr_t{0x60004});
    p.alibi_slopes_batch_stride = p.heads_q;
    p.sinks = reinterpret_cast<const float*>(std::uintptr_t{0x70008});
    CHECK(check(p).ok());
  }
  SECTION("softcap must be 0 or positive and finite") {
    p.softcap = GENERATE(-1.f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN());
    INFO("softcap " << p.softcap);
    require_invalid(p, "softcap");
  }
  SECTION("misaligned tables") {
    p.alibi_slopes = reinterpret_cast<const float*>(std::uintptr_t{0x60002});
    require_invalid(p, "alibi_slopes must be 4-byte aligned");
    p.alibi_slopes = nullptr;
    p.sinks = reinterpret_cast<const float*>(std::uintptr_t{0x70001});
    require_invalid(p, "sinks must be 4-byte aligned");
  }
  SECTION("snippets: not empty, at most 64 KiB") {
    p.score_mod = "";
    require_invalid(p, "score_mod is empty");
    std::string huge(64 * 1024 + 1, ' ');
    p.score_mod = nullptr;
    p.mask_mod = huge.c_str();
    require_invalid(p, "mask_mod is longer than 65536 bytes");
  }
  SECTION("a slope batch stride needs slopes and a sane value") {
    p.alibi_slopes_batch_stride = 8;
    require_invalid(p, "alibi_slopes is null");
    p.alibi_slopes = reinterpret_cast<const float*>(std::uintptr_t{0x60004});
    p.alibi_slopes_batch_stride = -1;
    require_invalid(p, "alibi_slopes_batch_stride");
  }
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
  SECTION("top-left: Sq = 2, Sk = 5 rows see 1 and 2 keys; Sq = 5, Sk = 2 rows see 1, 2, 2, 2, 2") {
    auto p = flops_problem(2, 5, MaskKind::causal, 64);
    p.alignment = flashjit::Alignment::top_left;
    CHECK(attention_flops(p) == 4.0 * (1 + 2) * 64);
    p = flops_problem(5, 2, MaskKind::causal, 64);
    p.alignment = flashjit::Alignment::top_left;
    CHECK(attention_flops(p) == 4.0 * (1 + 2 + 2 + 2 + 2) * 64);
    CHECK(check(p).ok());
    p.alignment = static_cast<flashjit::Alignment>(7);
    require_invalid(p, "alignment must be bottom_right (0) or top_left (1), got 7");
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

namespace {

// valid_problem() as a ragged batch of 2: packed q/o [300, 8, 64], k/v [500, 2, 64], max lengths 128 / 256.
AttentionProblem valid_varlen_problem() {
  AttentionProblem p = valid_problem();
  p.cu_seqlens_q = reinterpret_cast<const int*>(std::uintptr_t{0x60000});
  p.cu_seqlens_k = reinterpret_cast<const int*>(std::uintptr_t{0x60100});
  p.total_q = 300;
  p.total_k = 500;
  return p;
}

}  // namespace

TEST_CASE("check(problem): a valid varlen problem passes", "[dispatch][varlen]") {
  AttentionProblem p = valid_varlen_problem();
  CHECK(p.varlen());
  CHECK_FALSE(valid_problem().varlen());
  CHECK(check(p).ok());
  SECTION("explicit seq and head strides (padded rows); lse; every mask") {
    p.q_strides = {0, 1024, 128};
    p.k_strides = {0, 0, 64};
    p.lse = reinterpret_cast<float*>(std::uintptr_t{0x50004});
    for (MaskKind m : {MaskKind::none, MaskKind::causal, MaskKind::sliding_window, MaskKind::chunked,
                       MaskKind::chunked_causal}) {
      p.mask = m;
      p.chunk_size = 64;
      CHECK(check(p).ok());
    }
  }
  SECTION("max lengths above the totals (a loose bound) are accepted") {
    p.seqlen_q = 4096, p.total_q = 17;
    CHECK(check(p).ok());
  }
}

TEST_CASE("check(problem): varlen offsets come in pairs", "[dispatch][varlen]") {
  AttentionProblem p = valid_varlen_problem();
  SECTION("only cu_seqlens_q") {
    p.cu_seqlens_k = nullptr;
    require_invalid(p, "cu_seqlens_k is a null pointer but cu_seqlens_q is set");
  }
  SECTION("only cu_seqlens_k") {
    p.cu_seqlens_q = nullptr;
    require_invalid(p, "cu_seqlens_q is a null pointer but cu_seqlens_k is set");
  }
}

TEST_CASE("check(problem): misaligned varlen offsets", "[dispatch][varlen]") {
  AttentionProblem p = valid_varlen_problem();
  std::string name = GENERATE(as<std::string>{}, "cu_seqlens_q", "cu_seqlens_k");
  const int* bad = reinterpret_cast<const int*>(std::uintptr_t{0x60002});
  (name == "cu_seqlens_q" ? p.cu_seqlens_q : p.cu_seqlens_k) = bad;
  require_invalid(p, name + " (");
  require_invalid(p, "must be 4-byte aligned");
}

TEST_CASE("check(problem): varlen totals", "[dispatch][varlen]") {
  AttentionProblem p = valid_varlen_problem();
  SECTION("total_q missing") {
    p.total_q = 0;
    require_invalid(p, "total_q (rows of the packed q and o) must be >= 1");
  }
  SECTION("total_k negative") {
    p.total_k = -5;
    require_invalid(p, "total_k (rows of the packed k and v) must be >= 1");
  }
  SECTION("totals without offsets") {
    AttentionProblem f = valid_problem();
    f.total_q = 300;
    require_invalid(f, "total_q and total_k (300 and 0) are for varlen problems");
    f.total_q = 0, f.total_k = 7;
    require_invalid(f, "total_q and total_k (0 and 7) are for varlen problems");
  }
}

TEST_CASE("check(problem): varlen tensors have no batch stride", "[dispatch][varlen]") {
  AttentionProblem p = valid_varlen_problem();
  std::string name = GENERATE(as<std::string>{}, "q", "k", "v", "o");
  Strides& s = name == "q" ? p.q_strides : name == "k" ? p.k_strides : name == "v" ? p.v_strides : p.o_strides;
  s.batch = 128 * 8 * 64;
  require_invalid(p, name + "_strides.batch must be 0 for a varlen problem");
  SECTION("seq and head strides are checked as usual") {
    s.batch = 0;
    s.seq = 12;
    require_invalid(p, name + " sequence stride must be a positive multiple of 8");
  }
}

TEST_CASE("check(problem): the usual checks apply to varlen problems", "[dispatch][varlen]") {
  AttentionProblem p = valid_varlen_problem();
  p.seqlen_q = 0;  // the max length
  p.k = nullptr;
  auto st = check(p);
  REQUIRE(!st.ok());
  INFO(st.error().message);
  CHECK(contains(st.error().message, "seqlen_q must be >= 1"));
  CHECK(contains(st.error().message, "k is a null pointer"));
}

TEST_CASE("resolved strides: varlen tensors are packed [total, heads, head_dim]", "[dispatch][varlen]") {
  AttentionProblem p = valid_varlen_problem();  // Hq 8, Hkv 2, D 64
  auto q = resolved_q_strides(p);
  CHECK(q.batch == 0);
  CHECK(q.seq == 8 * 64);
  CHECK(q.head == 64);
  auto k = resolved_kv_strides(p, p.k_strides);
  CHECK(k.batch == 0);
  CHECK(k.seq == 2 * 64);
  CHECK(k.head == 64);
  p.o_strides = {0, 1024, 0};
  CHECK(resolved_o_strides(p).seq == 1024);
  CHECK(resolved_o_strides(p).batch == 0);
}

TEST_CASE("attention_flops: varlen", "[dispatch][varlen]") {
  AttentionProblem p = valid_varlen_problem();
  p.batch = 3, p.heads_q = 2, p.heads_kv = 1, p.head_dim = 8, p.mask = MaskKind::causal;
  const int cu_q[] = {0, 4, 4, 6}, cu_k[] = {0, 4, 9, 10};  // (4, 4), (0, 5), (2, 1)
  p.seqlen_q = 4, p.seqlen_k = 5;
  SECTION("without host lengths: every sequence at the max lengths (an upper bound)") {
    CHECK(attention_flops(p) == 3 * attention_flops(flops_problem(4, 5, MaskKind::causal, 8)) * 2);
  }
  SECTION("with host offsets: exact") {
    // (4, 4): 1 + 2 + 3 + 4 = 10 pairs; (0, 5): none; (2, 1): the last row sees its one key.
    CHECK(attention_flops(p, cu_q, cu_k) == 4.0 * 2 * (10 + 0 + 1) * 8);
    p.mask = MaskKind::none;
    CHECK(attention_flops(p, cu_q, cu_k) == 4.0 * 2 * (16 + 0 + 2) * 8);
  }
}

// Issue 29: strides had no upper bound (k_strides.batch = INT64_MAX - 7 passed, and the offsets it makes wrap).
TEST_CASE("problem check: strides that put a tensor past the address space are refused", "[dispatch]") {
  AttentionProblem p = valid_problem();
  p.k_strides.batch = INT64_MAX - 7;
  require_invalid(p, "k strides (9223372036854775800, ");
  require_invalid(p, "more than 2^48 bytes");
  p = valid_problem();
  p.q_strides.head = std::int64_t(1) << 46;  // 7 x 2^46 elements x 2 bytes > 2^48
  require_invalid(p, "q strides");
  p = valid_problem();
  p.v_strides.seq = std::int64_t(1) << 40;  // 256 rows: about 2^49 bytes
  require_invalid(p, "v strides");
  // Large but reachable strides are fine: a batch 2^36 elements apart.
  p = valid_problem();
  p.k_strides.batch = std::int64_t(1) << 36;
  p.v_strides.batch = std::int64_t(1) << 36;
  CHECK(check(p).ok());
}

// The fuzz run (UBSan): contiguous strides are resolved before check() looks at the dimensions, and
// seqlen * heads * head_dim of dimensions up to INT_MAX overflowed int64. It saturates; check() refuses the shape.
TEST_CASE("resolved strides: a contiguous batch stride past int64 saturates", "[dispatch]") {
  constexpr int big = std::numeric_limits<int>::max();
  CHECK(flashjit::contiguous_bshd({}, big, big, big).batch == std::numeric_limits<std::int64_t>::max());
  CHECK(flashjit::contiguous_bshd({}, big, big, big).seq == std::int64_t(big) * big);
  CHECK(flashjit::contiguous_bshd({}, big, -big, big).batch == std::numeric_limits<std::int64_t>::min());
  CHECK(flashjit::contiguous_bshd({}, 1 << 20, 1 << 20, 1 << 20).batch == std::int64_t(1) << 60);  // exact below
  AttentionProblem p = valid_problem();
  p.seqlen_q = big, p.heads_q = 65535, p.head_dim = big;
  require_invalid(p, "head_dim must be a multiple of 8");
}
