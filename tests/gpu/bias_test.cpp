// Additive bias tensors (AttentionProblem::bias, DecodeProblem::bias; templates/attention/bias.cuh) against the
// float64 references: every element type (fp32, bf16, fp16, bool), dense and broadcast over the batch, the heads,
// the query rows (a key padding mask) or the keys (a query padding mask), rows of odd length (entries read one by
// one) and of even length (in pairs), padding between rows that holds NaN (never read), odd lengths, the causal
// and sliding masks, softcap and sinks on top; FA3 at d64, d128 and d256, FA2 (forced) and the reference kernel;
// rows a bool bias hides entirely (O = 0, LSE = -inf, or the sink's logit); FA3 staging the bias through TMA
// (bias_tma) and loading it per thread on the same problems, rows padded to 16 bytes, keys and rows past a tile's
// zero-filled; decode over contiguous and paged caches, in one split and several.
#include <fmt/format.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "checks.hpp"
#include "config/half.hpp"
#include "decode_harness.hpp"
#include "dispatch/heuristics.hpp"
#include "harness.hpp"
#include "support/catch.hpp"

using namespace flashjit;
using namespace flashjit::test;

namespace {

constexpr Arch kSm90a{90, true};
SeedSequence fresh_seed{0xb1a5};

// Which of the bias's [B, H, rows, keys] dimensions it has (the others broadcast, stride 0), and the padding
// after each row (entries; odd: rows start on odd entries, so no pair load).
struct BiasLayout {
  const char* name;
  std::array<bool, 4> present;
  int row_pad;
};
const BiasLayout kDense{"dense", {true, true, true, true}, 0};
const BiasLayout kPerHead{"[1, H, Sq, Sk] + 3 pad", {false, true, true, true}, 3};
const BiasLayout kPerBatch{"[B, 1, Sq, Sk]", {true, false, true, true}, 0};
const BiasLayout kPlane{"[Sq, Sk] + 1 pad", {false, false, true, true}, 1};
const BiasLayout kKeyPadding{"[B, 1, 1, Sk]", {true, false, false, true}, 0};
const BiasLayout kQueryPadding{"[B, 1, Sq, 1]", {true, false, true, false}, 0};

// A bias tensor on the device and its entries on the host, in natural units (-inf: hidden). Float entries are
// uniform in [-3, 3] rounded to the type; bools true with probability 0.8, and with query rows, every row i with
// i % 5 == 2 all false (hidden). The padding holds NaN (false for bools): a kernel that read it would show.
class BiasTensor {
 public:
  static Result<BiasTensor> make(BiasType type, std::array<int, 4> dims, const BiasLayout& layout, std::uint64_t seed) {
    BiasTensor t;
    t.type_ = type;
    std::array<std::int64_t, 4> extent{};
    for (int i = 0; i < 4; ++i) extent[i] = layout.present[i] ? dims[i] : 1;
    const std::int64_t row = extent[3] + layout.row_pad, plane = extent[2] * row, volume = extent[1] * plane;
    t.strides_ = {layout.present[0] ? volume : 0, layout.present[1] ? plane : 0, layout.present[2] ? row : 0,
                  layout.present[3] ? 1 : 0};
    const std::size_t n = static_cast<std::size_t>(extent[0] * volume), bytes = n * element_bytes(type);
    std::vector<unsigned char> raw(bytes);
    t.values_.assign(n, 0.0);
    FastRng rng(seed);
    for (std::size_t e = 0; e < n; ++e) {
      const std::int64_t i = (static_cast<std::int64_t>(e) % plane) / row, j = static_cast<std::int64_t>(e) % row;
      const bool pad = j >= extent[3];
      const bool hidden_row = layout.present[2] && i % 5 == 2;
      t.values_[e] = t.store(raw.data(), e, pad, hidden_row, rng);
    }
    auto buf = cuda::DeviceBuffer::allocate(bytes);
    if (!buf.ok()) return std::move(buf).error();
    t.dev_ = std::move(*buf);
    FLASHJIT_TRY(t.dev_.upload(raw.data(), bytes));
    return t;
  }

  double at(int b, int h, int i, int j) const {
    return values_[static_cast<std::size_t>(b * strides_.batch + h * strides_.head + i * strides_.q + j * strides_.k)];
  }
  template <class Problem>
  void apply(Problem& p) const {
    p.bias = dev_.get(), p.bias_type = type_, p.bias_strides = strides_;
  }
  BiasFn fn() const {
    return [this](int b, int h, int i, int j) { return at(b, h, i, j); };
  }

 private:
  static std::size_t element_bytes(BiasType t) { return t == BiasType::fp32 ? 4 : t == BiasType::boolean ? 1 : 2; }

  // Writes entry e's bytes and returns its value.
  double store(unsigned char* raw, std::size_t e, bool pad, bool hidden_row, FastRng& rng) const {
    const float x = pad ? NAN : rng.uniform(-3.f, 3.f);
    switch (type_) {
      case BiasType::boolean: {
        const bool on = !pad && !hidden_row && rng.below(10) < 8;
        raw[e] = on ? 1 : 0;
        return on ? 0.0 : -INFINITY;
      }
      case BiasType::fp32: std::memcpy(raw + 4 * e, &x, 4); return x;
      default: {
        const DType d = type_ == BiasType::bf16 ? DType::bf16 : DType::fp16;
        const std::uint16_t bits = to_half_bits(d, x);
        std::memcpy(raw + 2 * e, &bits, 2);
        return from_half_bits(d, bits);
      }
    }
  }

  BiasType type_ = BiasType::none;
  BiasStrides strides_{};
  std::vector<double> values_;  // by storage offset
  cuda::DeviceBuffer dev_;
};

struct Lengths {
  int sq, sk, group, batch;
};

std::string describe(BiasType type, const BiasLayout& layout) {
  return fmt::format("{} bias {}", to_string(type), layout.name);
}

// How a test takes the dispatcher's fa3 config: as it is, staging the bias through TMA (dispatch::fit_bias_tma, else
// 128-key tiles), or loading it per thread (bias_tma off).
enum class Staging { as_chosen, tma, per_thread };

// One prefill problem with a bias, run by the config the dispatcher picks for `algorithm` (FA2 forced by it).
void check_prefill(Algorithm algorithm, Shape s, BiasType type, const BiasLayout& layout,
                   Staging staging = Staging::as_chosen) {
  ensure_context();
  auto c = Case::make(s, fresh_seed());
  REQUIRE(c.ok());
  auto bias = BiasTensor::make(type, {s.batch, s.heads_q, s.seqlen_q, s.seqlen_k}, layout, fresh_seed());
  REQUIRE(bias.ok());
  AttentionProblem p = c->problem();
  bias->apply(p);
  auto config = dispatch::choose(p, kSm90a, algorithm, nullptr);
  REQUIRE(config.ok());
  if (staging == Staging::tma) {
    dispatch::fit_bias_tma(*config, p);
    if (!config->bias_tma) config->block_n = 128, config->bias_tma = true;  // e.g. bools on a window's 64-key tiles
  } else if (staging == Staging::per_thread) {
    config->bias_tma = false;
  }
  INFO(s.to_string() << ", " << describe(type, layout) << " with " << readable_name(*config));
  CHECK(config->bias == type);
  CHECK(config->algorithm == (algorithm == Algorithm::automatic ? Algorithm::fa3 : algorithm));
  auto st = runtime().forward(p, *config);
  if (!st.ok()) FAIL(st.error().to_string());
  std::vector<float> o, lse;
  REQUIRE(c->read_outputs(o, lse).ok());
  std::vector<double> ref_o, ref_lse;
  reference_attention(s, c->q(), c->k(), c->v(), ref_o, ref_lse, bias->fn());
  check_ok(compare(s, o, lse, ref_o, ref_lse), s.dtype);
}

Shape shape_of(const Lengths& l, int head_dim, DType dtype, const MaskCase& m) {
  Shape s;
  s.batch = l.batch, s.seqlen_q = l.sq, s.seqlen_k = l.sk, s.heads_q = 8, s.heads_kv = 8 / l.group;
  s.head_dim = head_dim, s.dtype = dtype;
  s.mask = m.kind, s.window_left = m.left, s.window_right = m.right, s.chunk_size = m.chunk;
  return s;
}

const BiasType kTypes[] = {BiasType::fp32, BiasType::bf16, BiasType::fp16, BiasType::boolean};
const BiasLayout kLayouts[] = {kDense, kPerHead, kPerBatch, kPlane, kKeyPadding, kQueryPadding};
const Lengths kLengths[] = {{1000, 777, 4, 2}, {17, 17, 1, 2}, {1, 1000, 8, 2}, {300, 301, 2, 1}, {257, 4097, 4, 1}};
const MaskCase kBiasMasks[] = {kMasks[0], kMasks[1], kMasks[2]};  // none, causal, sliding window (37, 5)

// Each type on each mask at one head dim; layouts and lengths rotate so that each type meets each of them.
void check_types(Algorithm algorithm, int head_dim) {
  int index = head_dim / 16;
  for (BiasType type : kTypes)
    for (const MaskCase& m : kBiasMasks) {
      const Lengths& l = kLengths[index % std::size(kLengths)];
      const BiasLayout& layout = kLayouts[index % std::size(kLayouts)];
      ++index;
      check_prefill(algorithm, shape_of(l, head_dim, index % 2 ? DType::bf16 : DType::fp16, m), type, layout);
    }
}

}  // namespace

TEST_CASE("fa3 bias of each type matches float64 (d64, d128, d256)", "[fa3][bias][gpu]") {
  check_types(Algorithm::fa3, GENERATE(64, 128, 256));
}

TEST_CASE("fa2 and reference bias of each type matches float64", "[fa2][reference][bias][gpu]") {
  const Algorithm algorithm = GENERATE(Algorithm::fa2, Algorithm::naive);
  check_types(algorithm, GENERATE(64, 128));
}

TEST_CASE("every bias layout, dense and broadcast, matches float64 (fa3 d128, fa2 d64)", "[fa3][fa2][bias][gpu]") {
  const Algorithm algorithm = GENERATE(Algorithm::fa3, Algorithm::fa2);
  const BiasLayout layout = GENERATE(kDense, kPerHead, kPerBatch, kPlane, kKeyPadding, kQueryPadding);
  Shape s = shape_of({1000, 777, 4, 2}, algorithm == Algorithm::fa3 ? 128 : 64, DType::bf16, kMasks[1]);
  check_prefill(algorithm, s, GENERATE(BiasType::bf16, BiasType::boolean), layout);
}

TEST_CASE("a bool bias that hides whole rows gives O = 0 and LSE = -inf, or the sink's logit, with softcap",
          "[fa3][fa2][reference][bias][gpu]") {
  const Algorithm algorithm = GENERATE(Algorithm::fa3, Algorithm::fa2, Algorithm::naive);
  const bool sinks = GENERATE(false, true);
  const MaskCase& mask = kMasks[GENERATE(0, 2)];
  for (const BiasLayout& layout : {kQueryPadding, kDense}) {
    Shape s = shape_of({300, 301, 2, 2}, 128, DType::fp16, mask);
    s.softcap = 30.f, s.sinks = sinks;
    check_prefill(algorithm, s, BiasType::boolean, layout);
  }
}

TEST_CASE("a bias with softcap, ALiBi and sinks matches float64", "[fa3][fa2][bias][variant][gpu]") {
  const Algorithm algorithm = GENERATE(Algorithm::fa3, Algorithm::fa2);
  const int head_dim = GENERATE(64, 128, 256);
  Shape s = shape_of({1000, 777, 4, 2}, head_dim, DType::bf16, kMasks[1]);
  s.softcap = 0.9f, s.alibi = 2, s.sinks = true;
  check_prefill(algorithm, s, GENERATE(BiasType::fp32, BiasType::fp16), kPerHead);
}

TEST_CASE("fa3 staging the bias through TMA matches float64, as the per-thread loads do", "[fa3][bias][bias_tma][gpu]") {
  // Rows padded to a multiple of 16 bytes (what TMA reads): 777 keys of fp32 pad to 780, of 2-byte entries to 784,
  // bools to 784; odd key and row counts leave the last tiles partly past the tensor (TMA fills zeros there).
  const BiasType type = GENERATE(BiasType::fp32, BiasType::bf16, BiasType::fp16, BiasType::boolean);
  const int head_dim = GENERATE(64, 128);
  const int per16 = 16 / (type == BiasType::fp32 ? 4 : type == BiasType::boolean ? 1 : 2);
  int index = head_dim / 64;
  for (const Lengths& l : {Lengths{1000, 777, 4, 2}, Lengths{17, 17, 1, 2}, Lengths{257, 1000, 2, 1}}) {
    const int pad = (per16 - l.sk % per16) % per16;
    for (const BiasLayout& layout : {BiasLayout{"dense, rows padded to 16 bytes", {true, true, true, true}, pad},
                                     BiasLayout{"[1, H, Sq, Sk], padded", {false, true, true, true}, pad + per16},
                                     BiasLayout{"[B, 1, Sq, Sk], padded", {true, false, true, true}, pad}}) {
      const MaskCase& m = kBiasMasks[index++ % std::size(kBiasMasks)];
      const Shape s = shape_of(l, head_dim, index % 2 ? DType::bf16 : DType::fp16, m);
      check_prefill(Algorithm::fa3, s, type, layout, Staging::tma);
      check_prefill(Algorithm::fa3, s, type, layout, Staging::per_thread);
    }
  }
}

TEST_CASE("fit_bias_tma stages a bias TMA can read, and the others stay loaded per thread", "[fa3][bias][bias_tma][gpu]") {
  ensure_context();
  const Shape s = shape_of({300, 304, 4, 2}, 128, DType::bf16, kMasks[1]);
  auto c = Case::make(s, fresh_seed());
  REQUIRE(c.ok());
  struct Expect {
    BiasType type;
    BiasLayout layout;
    bool staged;
  };
  for (const Expect& e : {Expect{BiasType::bf16, kDense, true}, Expect{BiasType::fp32, kPerBatch, true},
                          Expect{BiasType::bf16, kPlane, false} /* 305-entry rows */,
                          Expect{BiasType::bf16, kKeyPadding, false} /* rows broadcast */,
                          Expect{BiasType::boolean, kDense, true} /* 112-key tiles -> 128 */}) {
    auto bias = BiasTensor::make(e.type, {s.batch, s.heads_q, s.seqlen_q, s.seqlen_k}, e.layout, fresh_seed());
    REQUIRE(bias.ok());
    AttentionProblem p = c->problem();
    bias->apply(p);
    auto config = dispatch::choose(p, kSm90a, Algorithm::automatic, nullptr);
    REQUIRE(config.ok());
    dispatch::fit_bias_tma(*config, p);
    INFO(describe(e.type, e.layout) << ": " << readable_name(*config));
    CHECK(config->bias_tma == e.staged);
    // A staged config refuses a bias TMA cannot read, naming why, and launches nothing.
    if (!e.staged && config->algorithm == Algorithm::fa3 && e.type != BiasType::boolean) {
      KernelConfig staged = *config;
      staged.bias_tma = true;
      staged.block_n = 128;
      const Status st = runtime().forward(p, staged);
      REQUIRE_FALSE(st.ok());
      CHECK(st.error().to_string().find("TMA") != std::string::npos);
    }
  }
}

namespace {

// One decode with a bias [B, Hq, q_len, max_seqlen_k] against the float64 decode reference.
void check_decode(DecodeShape s, BiasType type, const BiasLayout& layout) {
  ensure_context();
  const std::uint64_t seed = fresh_seed();
  auto c = DecodeCase::make(s, seed);
  REQUIRE(c.ok());
  auto bias = BiasTensor::make(type, {s.batch(), s.heads_q, s.q_len, c->max_seqlen_k()}, layout, fresh_seed());
  REQUIRE(bias.ok());
  DecodeProblem p = c->problem();
  bias->apply(p);
  INFO(s.to_string() << ", " << describe(type, layout) << ", seed " << seed);
  auto st = runtime().decode(p);
  if (!st.ok()) FAIL(st.error().to_string());
  std::vector<float> o, lse;
  std::int64_t stray = 0;
  REQUIRE(c->read_outputs(o, lse, stray).ok());
  std::vector<double> ref_o, ref_lse;
  reference_decode(s, c->q(), c->kv(), ref_o, ref_lse, bias->fn());
  const SequenceCheck r = check_sequences(s.output_shape(), o, lse, ref_o, ref_lse, tolerance(s.dtype), kLseTolerance);
  INFO("per sequence:\n" << r.summary);
  CHECK(r.failures.empty());
  CHECK(stray == 0);
}

}  // namespace

TEST_CASE("decode bias of each type matches float64, contiguous and paged, one split and several",
          "[decode][bias][gpu]") {
  struct Run {
    KvLayout layout;
    int page_size, q_len, splits;
    std::vector<int> lens;
    int window;
  };
  const Run run = GENERATE(Run{KvLayout::contiguous, 0, 1, 1, {777, 1, 0, 300}, -1},
                           Run{KvLayout::contiguous, 0, 4, 5, {4097, 33}, -1},
                           Run{KvLayout::paged, 16, 1, 0, {1000, 7}, 100}, Run{KvLayout::paged, 1, 8, 3, {300, 65}, -1});
  const BiasType type = GENERATE(BiasType::fp32, BiasType::bf16, BiasType::fp16, BiasType::boolean);
  DecodeShape s;
  s.dtype = type == BiasType::fp16 ? DType::fp16 : DType::bf16;
  s.heads_q = 16, s.heads_kv = 4, s.head_dim = 128, s.q_len = run.q_len, s.seqlens = run.lens;
  s.layout = run.layout, s.page_size = run.page_size, s.num_splits = run.splits, s.window_left = run.window;
  s.sinks = type == BiasType::boolean;
  for (const BiasLayout& layout : {kDense, kPerHead, kKeyPadding, kQueryPadding}) check_decode(s, type, layout);
}
