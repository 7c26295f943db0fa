// seqused_k over contiguous keys on the GPU (AttentionProblem::seqused_k without a page table): a padded batch
// K, V [B, Sk, Hkv, D] of which sequence b uses its first seqused_k[b] keys (0, 1, odd counts, Sk, counts that end
// a key tile and that end one key into it), or a ragged one (cu_seqlens_k) using a prefix of each sequence's keys.
// Every key past a sequence's count holds junk (NaN, +-inf, the dtype's largest finite values) that must never
// reach an output. Masks none / causal / sliding window aligned to the counts (bottom-right, top-left), GQA
// groups 1 and 4, FA3 d64 / d128 (pack_gqa once), FA2 d64 / d128, the reference kernel; LSE checked, outputs
// poisoned (NaN) beforehand, float64 CPU reference per sequence over its used keys only. Also: the dispatcher
// picks a seqused_k kernel, and check_seqlens refuses a count above seqlen_k (or a sequence's own keys).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "checks.hpp"
#include "config/half.hpp"
#include "dispatch/heuristics.hpp"
#include "harness.hpp"
#include "support/catch.hpp"

using namespace flashjit;
using namespace flashjit::test;

namespace {

constexpr Arch kSm90a{90, true};

struct UsedShape {
  std::vector<int> used;  // per sequence: the keys it uses
  std::vector<int> len_k;  // varlen: each sequence's keys in cu_seqlens_k (>= used); empty: dense [B, Sk]
  int seqlen_q = 77, seqlen_k = 300;  // dense Sk (varlen: the max of len_k)
  int heads_q = 8, heads_kv = 2, head_dim = 64;
  DType dtype = DType::bf16;
  MaskKind mask = MaskKind::none;
  int window_left = -1, window_right = -1;
  bool top_left = false;

  int batch() const { return static_cast<int>(used.size()); }
  bool varlen() const { return !len_k.empty(); }
  int keys_of(int b) const { return varlen() ? len_k[b] : seqlen_k; }  // rows sequence b has in K and V
  int key_row(int b) const {  // its first row
    return varlen() ? std::accumulate(len_k.begin(), len_k.begin() + b, 0) : b * seqlen_k;
  }
  int key_rows() const { return varlen() ? std::max(1, std::accumulate(len_k.begin(), len_k.end(), 0)) : batch() * seqlen_k; }
  std::string to_string() const {
    return fmt::format("used {} {}Sq {} Hq{} Hkv{} D{} {} {} (w {} {}){}", fmt::join(used, ","),
                       varlen() ? fmt::format("len_k {} ", fmt::join(len_k, ",")) : fmt::format("Sk {} ", seqlen_k),
                       seqlen_q, heads_q, heads_kv, head_dim, flashjit::to_string(dtype), flashjit::to_string(mask),
                       window_left, window_right, top_left ? " top-left" : "");
  }
};

// The junk of padding key row r: NaN, +inf, -inf, then the largest finite magnitudes, cycled.
std::uint16_t junk_bits(DType dtype, int r) {
  static constexpr std::uint16_t kBf16[] = {0x7fc0, 0x7f80, 0xff80, 0x7f7f, 0xff7f};
  static constexpr std::uint16_t kFp16[] = {0x7e00, 0x7c00, 0xfc00, 0x7bff, 0xfbff};
  return (dtype == DType::bf16 ? kBf16 : kFp16)[r % 5];
}

class UsedCase {
 public:
  static Result<UsedCase> make(const UsedShape& s, std::uint64_t seed) {
    UsedCase c;
    c.shape_ = s;
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> uq(-2.f, 2.f), ukv(-1.f, 1.f);
    const std::size_t q_n = std::size_t(s.batch()) * s.seqlen_q * s.heads_q * s.head_dim;
    const std::size_t kv_n = std::size_t(s.key_rows()) * s.heads_kv * s.head_dim;
    std::vector<std::uint16_t> q_bits(q_n), k_bits(kv_n), v_bits(kv_n);
    c.q_.resize(q_n), c.k_.resize(kv_n), c.v_.resize(kv_n);
    for (std::size_t i = 0; i < q_n; ++i) c.q_[i] = from_half_bits(s.dtype, q_bits[i] = to_half_bits(s.dtype, uq(rng)));
    const std::size_t row = std::size_t(s.heads_kv) * s.head_dim;
    for (int b = 0; b < s.batch(); ++b)
      for (int j = 0; j < s.keys_of(b); ++j) {
        const std::size_t at = std::size_t(s.key_row(b) + j) * row;
        for (std::size_t e = 0; e < row; ++e) {
          const bool padding = j >= s.used[b];
          k_bits[at + e] = padding ? junk_bits(s.dtype, j + int(e)) : to_half_bits(s.dtype, ukv(rng));
          v_bits[at + e] = padding ? junk_bits(s.dtype, j + int(e) + 2) : to_half_bits(s.dtype, ukv(rng));
          c.k_[at + e] = from_half_bits(s.dtype, k_bits[at + e]), c.v_[at + e] = from_half_bits(s.dtype, v_bits[at + e]);
        }
      }
    std::vector<int> cu_k(s.batch() + 1, 0), cu_q(s.batch() + 1, 0);
    for (int b = 0; b < s.batch(); ++b) cu_k[b + 1] = cu_k[b] + s.keys_of(b), cu_q[b + 1] = cu_q[b] + s.seqlen_q;
    const std::size_t lse_n = std::size_t(s.batch()) * s.heads_q * s.seqlen_q;
    auto upload = [](cuda::DeviceBuffer& dev, const void* host, std::size_t bytes) -> Status {
      auto buf = cuda::DeviceBuffer::allocate(bytes);
      if (!buf.ok()) return std::move(buf).error();
      dev = std::move(*buf);
      return host != nullptr ? dev.upload(host, bytes) : dev.fill_bytes(0xff);  // outputs poisoned (NaN)
    };
    FLASHJIT_TRY(upload(c.dq_, q_bits.data(), q_n * 2));
    FLASHJIT_TRY(upload(c.dk_, k_bits.data(), kv_n * 2));
    FLASHJIT_TRY(upload(c.dv_, v_bits.data(), kv_n * 2));
    FLASHJIT_TRY(upload(c.do_, nullptr, q_n * 2));
    FLASHJIT_TRY(upload(c.dlse_, nullptr, lse_n * 4));
    FLASHJIT_TRY(upload(c.dused_, s.used.data(), s.used.size() * 4));
    FLASHJIT_TRY(upload(c.dcu_q_, cu_q.data(), cu_q.size() * 4));
    FLASHJIT_TRY(upload(c.dcu_k_, cu_k.data(), cu_k.size() * 4));
    return c;
  }

  // Dense: [B, Sq, Hq, D] and [B, Sk, Hkv, D]. Varlen: the same Q / O memory packed [B * Sq, Hq, D], K and V
  // packed by cu_seqlens_k.
  AttentionProblem problem() const {
    const UsedShape& s = shape_;
    AttentionProblem p;
    p.dtype = s.dtype;
    p.batch = s.batch(), p.seqlen_q = s.seqlen_q;
    p.seqlen_k = s.varlen() ? std::max(1, *std::max_element(s.len_k.begin(), s.len_k.end())) : s.seqlen_k;
    p.heads_q = s.heads_q, p.heads_kv = s.heads_kv, p.head_dim = s.head_dim;
    p.q = dq_.get(), p.k = dk_.get(), p.v = dv_.get(), p.o = do_.get();
    p.lse = static_cast<float*>(dlse_.get());
    p.seqused_k = static_cast<const int*>(dused_.get());
    if (s.varlen()) {
      p.cu_seqlens_q = static_cast<const int*>(dcu_q_.get()), p.cu_seqlens_k = static_cast<const int*>(dcu_k_.get());
      p.total_q = s.batch() * s.seqlen_q, p.total_k = s.key_rows();
    }
    p.mask = s.mask;
    p.window_left = s.window_left, p.window_right = s.window_right;
    p.alignment = s.top_left ? Alignment::top_left : Alignment::bottom_right;
    return p;
  }

  // LSE element of (sequence, head, row): [B, Hq, Sq] dense, [Hq, B * Sq] varlen.
  std::size_t lse_index(int b, int h, int i) const {
    const UsedShape& s = shape_;
    if (s.varlen()) return std::size_t(h) * s.batch() * s.seqlen_q + std::size_t(b) * s.seqlen_q + i;
    return (std::size_t(b) * s.heads_q + h) * s.seqlen_q + i;
  }

  // Compares the outputs with float64 attention of each sequence over its used keys.
  Result<Comparison> compare() const {
    const UsedShape& s = shape_;
    FLASHJIT_TRY(cuda::check((*cuda::api())->cuCtxSynchronize(), "cuCtxSynchronize"));
    std::vector<std::uint16_t> o_bits(do_.size() / 2);
    std::vector<float> lse(dlse_.size() / 4);
    FLASHJIT_TRY(do_.download(o_bits.data(), do_.size()));
    FLASHJIT_TRY(dlse_.download(lse.data(), dlse_.size()));
    const int D = s.head_dim, group = s.heads_q / s.heads_kv;
    const double scale = 1.0 / std::sqrt(double(D));
    ComparisonSum sum;
    std::vector<double> scores, ref(D);
    std::vector<float> out(D);
    for (int b = 0; b < s.batch(); ++b)
      for (int h = 0; h < s.heads_q; ++h)
        for (int i = 0; i < s.seqlen_q; ++i) {
          const int used = s.used[b];
          const long a = i + (s.top_left ? 0 : long(used) - s.seqlen_q);
          const std::size_t q_at = ((std::size_t(b) * s.seqlen_q + i) * s.heads_q + h) * D;
          scores.assign(std::max(1, used), -INFINITY);
          double mx = -INFINITY;
          for (int j = 0; j < used; ++j) {
            if (!mask_visible(s.mask, s.window_left, s.window_right, 0, a, j)) continue;
            const float* kr = &k_[(std::size_t(s.key_row(b) + j) * s.heads_kv + h / group) * D];
            double acc = 0;
            for (int d = 0; d < D; ++d) acc += double(q_[q_at + d]) * kr[d];
            mx = std::max(mx, scores[j] = acc * scale);
          }
          std::fill(ref.begin(), ref.end(), 0.0);
          double total = 0;
          for (int j = 0; j < used && mx > -INFINITY; ++j) {
            if (scores[j] == -INFINITY) continue;
            const double w = std::exp(scores[j] - mx);
            total += w;
            const float* vr = &v_[(std::size_t(s.key_row(b) + j) * s.heads_kv + h / group) * D];
            for (int d = 0; d < D; ++d) ref[d] += w * vr[d];
          }
          for (int d = 0; d < D; ++d) {
            out[d] = from_half_bits(s.dtype, o_bits[q_at + d]);
            sum.add_output(out[d], total > 0 ? ref[d] / total : 0.0);
          }
          sum.add_lse(lse[lse_index(b, h, i)], total > 0 ? mx + std::log(total) : -INFINITY, out.data(), D);
        }
    return sum.result();
  }

 private:
  UsedShape shape_;
  std::vector<float> q_, k_, v_;
  cuda::DeviceBuffer dq_, dk_, dv_, do_, dlse_, dused_, dcu_q_, dcu_k_;
};

SeedSequence fresh_seed{0x5e905ed};

KernelConfig used_config(Algorithm algorithm, const UsedShape& s) {
  KernelConfig c = algorithm == Algorithm::fa3   ? dispatch::fa3_heuristic(s.dtype, s.head_dim, s.mask, kSm90a)
                   : algorithm == Algorithm::fa2 ? dispatch::fa2_heuristic(s.dtype, s.head_dim, s.mask, kSm90a)
                                                 : dispatch::naive_config(s.dtype, s.head_dim, s.mask, kSm90a);
  c.varlen = s.varlen();
  c.seqused_k = true;
  return c;
}

void check_against_fp64(const UsedShape& shape, const KernelConfig& config) {
  ensure_context();
  INFO(shape.to_string() << " with " << readable_name(config));
  auto c = UsedCase::make(shape, fresh_seed());
  REQUIRE(c.ok());
  auto st = runtime().forward(c->problem(), config);
  if (!st.ok()) FAIL(st.error().to_string());
  auto cmp = c->compare();
  REQUIRE(cmp.ok());
  check_ok(*cmp, shape.dtype);
}

struct MaskOf {
  MaskKind kind;
  int left, right;
};
const MaskOf kUsedMasks[] = {{MaskKind::none, -1, -1}, {MaskKind::causal, -1, -1}, {MaskKind::sliding_window, 37, 5}};

// Counts of a padded batch of Sk = 300 (key tiles of 64, 128 or 176: 128 ends one, 129 is one key into the next).
const std::vector<int> kCounts[] = {{0, 1, 300, 77, 129}, {128, 0, 299, 5}, {300, 300}, {1, 63, 64, 65}};

// Every mask and two count sets each, GQA groups 1 and 4 alternating, one set top-left.
void check_dense(Algorithm algorithm, int head_dim, DType dtype = DType::bf16) {
  int index = 0;
  for (const auto& m : kUsedMasks)
    for (int r = 0; r < 2; ++r, ++index) {
      UsedShape s;
      s.used = kCounts[index % std::size(kCounts)];
      s.heads_kv = index % 2 == 0 ? 8 : 2, s.head_dim = head_dim, s.dtype = dtype;
      s.mask = m.kind, s.window_left = m.left, s.window_right = m.right;
      s.top_left = index == 3;
      check_against_fp64(s, used_config(algorithm, s));
    }
}

}  // namespace

TEST_CASE("seqused_k: fa3 d64 and d128 on padded batches match float64, junk keys unused", "[seqused][fa3][gpu]") {
  check_dense(Algorithm::fa3, 64);
  check_dense(Algorithm::fa3, 128);
  check_dense(Algorithm::fa3, 128, DType::fp16);
}

TEST_CASE("seqused_k: fa2 d64 and d128 on padded batches match float64, junk keys unused", "[seqused][fa2][gpu]") {
  check_dense(Algorithm::fa2, 64);
  check_dense(Algorithm::fa2, 128, DType::fp16);
}

TEST_CASE("seqused_k: the reference kernel on padded batches matches float64", "[seqused][reference][gpu]") {
  check_dense(Algorithm::naive, 64);
}

TEST_CASE("seqused_k: fa3 packed GQA and the persistent scheduler", "[seqused][fa3][gpu]") {
  UsedShape s;
  s.used = {0, 1, 299, 77, 129, 300};
  s.heads_q = 8, s.heads_kv = 2, s.head_dim = 128, s.mask = MaskKind::causal;
  KernelConfig packed = used_config(Algorithm::fa3, s);
  packed.pack_gqa = true;
  check_against_fp64(s, packed);
  KernelConfig persistent = used_config(Algorithm::fa3, s);
  persistent.scheduler = Scheduler::persistent;
  check_against_fp64(s, persistent);
}

TEST_CASE("seqused_k: ragged keys (cu_seqlens_k) use a prefix of each sequence", "[seqused][varlen][fa3][fa2][reference][gpu]") {
  UsedShape s;
  s.used = {0, 1, 200, 77, 129};
  s.len_k = {5, 1, 300, 77, 250};
  for (const auto& m : kUsedMasks) {
    s.mask = m.kind, s.window_left = m.left, s.window_right = m.right;
    for (Algorithm a : {Algorithm::fa3, Algorithm::fa2, Algorithm::naive}) check_against_fp64(s, used_config(a, s));
  }
}

TEST_CASE("seqused_k: the dispatcher's kernel, and check_seqlens refuses counts past the keys", "[seqused][gpu]") {
  ensure_context();
  UsedShape s;
  s.used = {300, 17, 0};
  s.head_dim = 128, s.mask = MaskKind::causal;
  auto c = UsedCase::make(s, fresh_seed());
  REQUIRE(c.ok());
  auto chosen = runtime().select(c->problem());
  REQUIRE(chosen.ok());
  CHECK(chosen->seqused_k);
  REQUIRE(runtime().forward(c->problem()).ok());
  auto cmp = c->compare();
  REQUIRE(cmp.ok());
  check_ok(*cmp, s.dtype);

  s.used = {301, 0, 0};
  auto over = UsedCase::make(s, fresh_seed());
  REQUIRE(over.ok());
  AttentionProblem p = over->problem();
  p.check_seqlens = true;
  auto st = runtime().forward(p);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message.find("seqused_k[0] = 301 is outside [0, seqlen_k = 300]") != std::string::npos);

  s.used = {6, 0, 0}, s.len_k = {5, 1, 300};
  auto ragged = UsedCase::make(s, fresh_seed());
  REQUIRE(ragged.ok());
  p = ragged->problem();
  p.check_seqlens = true;
  st = runtime().forward(p);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message.find("seqused_k[0] = 6 is more keys than sequence 0 has in cu_seqlens_k (5)") !=
        std::string::npos);
}
