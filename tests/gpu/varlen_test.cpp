// Ragged (varlen) batches on the GPU: packed Q/K/V with device cu_seqlens, lengths from {0, 1, 7, 300, 4097}
// mixed separately for queries and keys (len_k < len_q, so causal rows without keys; empty sequences on
// either side), every mask, FA3 / FA2 / reference, bf16 and fp16, GQA groups 1/4/8, head dims 64/128 (256
// once), padded row strides once. Fresh random data, outputs poisoned (NaN) including guard rows after the
// last sequence that no kernel may write, float64 CPU reference per sequence; the long sequences are checked
// against the reference kernel (itself checked against float64 on a 4097-row case).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <thread>

#include "checks.hpp"
#include "config/half.hpp"
#include "dispatch/heuristics.hpp"
#include "harness.hpp"
#include "support/catch.hpp"

using namespace flashjit;
using namespace flashjit::test;

namespace {

constexpr Arch kSm90a{90, true};
constexpr int kGuardRows = 67;  // poisoned rows after total_q in O (and after each head's rows in LSE)

struct VarlenShape {
  std::vector<int> len_q, len_k;
  int heads_q = 8, heads_kv = 2, head_dim = 64;
  DType dtype = DType::bf16;
  MaskKind mask = MaskKind::none;
  int window_left = -1, window_right = -1, chunk_size = 0;
  int row_pad = 0;  // extra elements per packed row (seq stride = heads * head_dim + row_pad)
  bool top_left = false;  // AttentionProblem::alignment top_left: query i of each sequence at key i

  int batch() const { return static_cast<int>(len_q.size()); }
  int total_q() const { return std::accumulate(len_q.begin(), len_q.end(), 0); }
  int total_k() const { return std::accumulate(len_k.begin(), len_k.end(), 0); }
  int max_q() const { return *std::max_element(len_q.begin(), len_q.end()); }
  int max_k() const { return *std::max_element(len_k.begin(), len_k.end()); }
  std::string to_string() const {
    return fmt::format("len_q {} len_k {} Hq{} Hkv{} D{} {} {} (w {} {}, chunk {}) pad {}{}", fmt::join(len_q, ","),
                       fmt::join(len_k, ","), heads_q, heads_kv, head_dim, flashjit::to_string(dtype),
                       flashjit::to_string(mask), window_left, window_right, chunk_size, row_pad,
                       top_left ? " top-left" : "");
  }
};

std::vector<int> offsets(const std::vector<int>& lens) {
  std::vector<int> cu(lens.size() + 1, 0);
  for (std::size_t b = 0; b < lens.size(); ++b) cu[b + 1] = cu[b] + lens[b];
  return cu;
}

// Per sequence: query i of a sequence with lengths (lq, lk) is aligned to key i + lk - lq (top-left: i).
bool visible(const VarlenShape& s, int lq, int lk, int i, int j) {
  return mask_visible(s.mask, s.window_left, s.window_right, s.chunk_size,
                      static_cast<long>(i) + (s.top_left ? 0 : lk - lq), j);
}

// Packed tensors (host copies as rounded floats, device buffers) of one ragged batch.
class VarlenCase {
 public:
  static Result<VarlenCase> make(const VarlenShape& s, std::uint64_t seed) {
    VarlenCase c;
    c.shape_ = s;
    c.cu_q_ = offsets(s.len_q), c.cu_k_ = offsets(s.len_k);
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> uq(-2.f, 2.f), ukv(-1.f, 1.f);
    // Rows of `heads` x head_dim values (pad elements are random too: never read).
    auto fill = [&](std::vector<float>& host, int rows, int heads, std::uniform_real_distribution<float>& dist,
                    cuda::DeviceBuffer& dev) -> Status {
      const std::size_t row = std::size_t(heads) * s.head_dim + s.row_pad, n = std::max<std::size_t>(1, rows) * row;
      host.assign(n, 0.f);
      std::vector<std::uint16_t> bits(n);
      for (std::size_t i = 0; i < n; ++i) {
        bits[i] = to_half_bits(s.dtype, dist(rng));
        host[i] = from_half_bits(s.dtype, bits[i]);
      }
      auto buf = cuda::DeviceBuffer::allocate(n * 2);
      if (!buf.ok()) return std::move(buf).error();
      dev = std::move(*buf);
      return dev.upload(bits.data(), n * 2);
    };
    FLASHJIT_TRY(fill(c.q_, s.total_q(), s.heads_q, uq, c.dq_));
    FLASHJIT_TRY(fill(c.k_, s.total_k(), s.heads_kv, ukv, c.dk_));
    FLASHJIT_TRY(fill(c.v_, s.total_k(), s.heads_kv, ukv, c.dv_));
    auto alloc = [](cuda::DeviceBuffer& dev, std::size_t bytes) -> Status {
      auto buf = cuda::DeviceBuffer::allocate(bytes);
      if (!buf.ok()) return std::move(buf).error();
      dev = std::move(*buf);
      return {};
    };
    FLASHJIT_TRY(alloc(c.do_, c.o_row() * (s.total_q() + kGuardRows) * 2));
    FLASHJIT_TRY(alloc(c.dlse_, std::size_t(s.heads_q) * (s.total_q() + kGuardRows) * 4));
    FLASHJIT_TRY(alloc(c.dcu_q_, c.cu_q_.size() * 4));
    FLASHJIT_TRY(alloc(c.dcu_k_, c.cu_k_.size() * 4));
    FLASHJIT_TRY(c.dcu_q_.upload(c.cu_q_.data(), c.cu_q_.size() * 4));
    FLASHJIT_TRY(c.dcu_k_.upload(c.cu_k_.data(), c.cu_k_.size() * 4));
    FLASHJIT_TRY(c.poison());
    return c;
  }

  // LSE is [Hq, total_q]; the buffer has kGuardRows more columns, so LSE row h starts at h * total_q and the
  // guard is the tail after Hq * total_q.
  AttentionProblem problem() const {
    const VarlenShape& s = shape_;
    AttentionProblem p;
    p.dtype = s.dtype;
    p.batch = s.batch(), p.seqlen_q = std::max(1, s.max_q()), p.seqlen_k = std::max(1, s.max_k());
    p.heads_q = s.heads_q, p.heads_kv = s.heads_kv, p.head_dim = s.head_dim;
    p.q = dq_.get(), p.k = dk_.get(), p.v = dv_.get(), p.o = do_.get();
    p.lse = static_cast<float*>(dlse_.get());
    p.cu_seqlens_q = static_cast<const int*>(dcu_q_.get());
    p.cu_seqlens_k = static_cast<const int*>(dcu_k_.get());
    p.total_q = std::max(1, s.total_q()), p.total_k = std::max(1, s.total_k());
    p.q_strides = p.o_strides = {0, static_cast<std::int64_t>(o_row()), s.head_dim};
    p.k_strides = p.v_strides = {0, std::int64_t(s.heads_kv) * s.head_dim + s.row_pad, s.head_dim};
    p.mask = s.mask;
    p.window_left = s.window_left, p.window_right = s.window_right, p.chunk_size = s.chunk_size;
    p.alignment = s.top_left ? Alignment::top_left : Alignment::bottom_right;
    return p;
  }

  Status poison() {
    FLASHJIT_TRY(do_.fill_bytes(0xff));
    return dlse_.fill_bytes(0xff);
  }

  // O as floats [total_q + guard rows][o_row()], LSE [Hq * total_q + guard].
  Status read(std::vector<float>& o, std::vector<float>& lse) const {
    FLASHJIT_TRY(cuda::check((*cuda::api())->cuCtxSynchronize(), "cuCtxSynchronize"));
    std::vector<std::uint16_t> bits(do_.size() / 2);
    FLASHJIT_TRY(do_.download(bits.data(), do_.size()));
    o.resize(bits.size());
    for (std::size_t i = 0; i < bits.size(); ++i) o[i] = from_half_bits(shape_.dtype, bits[i]);
    lse.resize(dlse_.size() / 4);
    return dlse_.download(lse.data(), dlse_.size());
  }

  // float64 attention per sequence: o [total_q][Hq][D], lse [Hq][total_q].
  void reference(std::vector<double>& o, std::vector<double>& lse) const {
    const VarlenShape& s = shape_;
    const int D = s.head_dim, group = s.heads_q / s.heads_kv, total_q = s.total_q();
    const double scale = 1.0 / std::sqrt(double(D));
    o.assign(std::size_t(total_q) * s.heads_q * D, 0.0);
    lse.assign(std::size_t(s.heads_q) * total_q, -INFINITY);
    const std::size_t q_row = std::size_t(s.heads_q) * D + s.row_pad, k_row = std::size_t(s.heads_kv) * D + s.row_pad;
    const int jobs = s.batch() * s.heads_q;
    const int workers = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
    auto work = [&](int w) {
      std::vector<double> scores;
      for (int job = w; job < jobs; job += workers) {
        const int b = job / s.heads_q, h = job % s.heads_q, hk = h / group;
        const int lq = s.len_q[b], lk = s.len_k[b];
        scores.assign(std::max(1, lk), 0.0);
        for (int i = 0; i < lq; ++i) {
          const int qi = cu_q_[b] + i;
          const float* qr = &q_[qi * q_row + std::size_t(h) * D];
          double mx = -INFINITY;
          for (int j = 0; j < lk; ++j) {
            if (!visible(s, lq, lk, i, j)) {
              scores[j] = -INFINITY;
              continue;
            }
            const float* kr = &k_[(cu_k_[b] + j) * k_row + std::size_t(hk) * D];
            double acc = 0;
            for (int d = 0; d < D; ++d) acc += double(qr[d]) * kr[d];
            scores[j] = acc * scale;
            mx = std::max(mx, scores[j]);
          }
          if (mx == -INFINITY) continue;  // no visible key: O = 0, LSE = -inf
          double sum = 0;
          double* orow = &o[(std::size_t(qi) * s.heads_q + h) * D];
          for (int j = 0; j < lk; ++j) {
            if (scores[j] == -INFINITY) continue;
            const double p = std::exp(scores[j] - mx);
            sum += p;
            const float* vr = &v_[(cu_k_[b] + j) * k_row + std::size_t(hk) * D];
            for (int d = 0; d < D; ++d) orow[d] += p * vr[d];
          }
          for (int d = 0; d < D; ++d) orow[d] /= sum;
          lse[std::size_t(h) * total_q + qi] = mx + std::log(sum);
        }
      }
    };
    std::vector<std::thread> threads;
    for (int w = 0; w < workers; ++w) threads.emplace_back(work, w);
    for (auto& t : threads) t.join();
  }

  const VarlenShape& shape() const { return shape_; }
  std::size_t o_row() const { return std::size_t(shape_.heads_q) * shape_.head_dim + shape_.row_pad; }

 private:
  VarlenShape shape_;
  std::vector<int> cu_q_, cu_k_;
  std::vector<float> q_, k_, v_;
  cuda::DeviceBuffer dq_, dk_, dv_, do_, dlse_, dcu_q_, dcu_k_;
};

bool poisoned_half(float x) { return std::isnan(x); }

// out / out_lse from read(); ref_o [total_q][Hq][D] and ref_lse [Hq][total_q] (double or float).
template <class Ref>
GuardedComparison compare_varlen(const VarlenCase& c, const std::vector<float>& out, const std::vector<float>& out_lse,
                                 const std::vector<Ref>& ref_o, const std::vector<Ref>& ref_lse) {
  const VarlenShape& s = c.shape();
  const int D = s.head_dim, Hq = s.heads_q, total_q = s.total_q();
  const std::size_t row = c.o_row();
  GuardedComparison r;
  ComparisonSum sum;
  for (int qi = 0; qi < total_q + kGuardRows; ++qi)
    for (std::size_t e = 0; e < row; ++e) {
      const float x = out[qi * row + e];
      const int h = static_cast<int>(e / D), d = static_cast<int>(e % D);
      if (qi >= total_q || h >= Hq) {  // guard rows and pad elements: never written
        if (!poisoned_half(x)) ++r.guard_written;
        continue;
      }
      sum.add_output(x, ref_o[(std::size_t(qi) * Hq + h) * D + d]);
    }
  for (int h = 0; h < Hq; ++h)
    for (int qi = 0; qi < total_q; ++qi) {
      const std::size_t li = std::size_t(h) * total_q + qi;
      sum.add_lse(out_lse[li], ref_lse[li], out.data() + qi * row + std::size_t(h) * D, D);
    }
  r.cmp = sum.result();
  for (std::size_t i = std::size_t(Hq) * total_q; i < out_lse.size(); ++i)
    if (!std::isnan(out_lse[i])) ++r.guard_written;
  return r;
}

SeedSequence fresh_seed{0x7a71e5};

KernelConfig varlen_config(Algorithm algorithm, DType dtype, int head_dim, MaskKind mask) {
  KernelConfig c = algorithm == Algorithm::fa3   ? dispatch::fa3_heuristic(dtype, head_dim, mask, kSm90a)
                   : algorithm == Algorithm::fa2 ? dispatch::fa2_heuristic(dtype, head_dim, mask, kSm90a)
                                                 : dispatch::naive_config(dtype, head_dim, mask, kSm90a);
  c.varlen = true;
  return c;
}

bool algorithm_enabled(Algorithm a) {
  // FLASHJIT_TEST_ALGORITHMS=fa3,naive limits the sweeps (as in attention_test.cpp).
  const char* only = std::getenv("FLASHJIT_TEST_ALGORITHMS");
  return only == nullptr || std::string(only).find(to_string(a)) != std::string::npos;
}

// Runs `config` on a fresh case and checks it against float64.
void check_against_fp64(const VarlenShape& shape, const KernelConfig& config) {
  ensure_context();
  INFO(shape.to_string() << " with " << readable_name(config));
  auto c = VarlenCase::make(shape, fresh_seed());
  REQUIRE(c.ok());
  auto st = runtime().forward(c->problem(), config);
  if (!st.ok()) FAIL(st.error().to_string());
  std::vector<float> o, lse;
  REQUIRE(c->read(o, lse).ok());
  std::vector<double> ref_o, ref_lse;
  c->reference(ref_o, ref_lse);
  check_ok(compare_varlen(*c, o, lse, ref_o, ref_lse), shape.dtype);
}

struct Ragged {
  std::vector<int> len_q, len_k;
};
// Short ragged batches (float64 is cheap): lengths from {0, 1, 7, 300} paired differently for q and k,
// len_k < len_q (causal rows with no key), empty query and empty key sequences.
const Ragged kShort[] = {
    {{1, 7, 300, 0, 7}, {7, 300, 1, 5, 0}},
    {{300, 1, 7}, {300, 7, 1}},
    {{7, 0, 300, 1}, {300, 1, 7, 0}},
    {{300, 300}, {7, 1}},
};

VarlenShape make_shape(const Ragged& r, const MaskCase& m, DType dtype, int head_dim, int group) {
  VarlenShape s;
  s.len_q = r.len_q, s.len_k = r.len_k;
  s.heads_q = 8, s.heads_kv = 8 / group, s.head_dim = head_dim, s.dtype = dtype;
  s.mask = m.kind, s.window_left = m.left, s.window_right = m.right, s.chunk_size = m.chunk;
  return s;
}

}  // namespace

namespace {

// Every mask of one algorithm's varlen config at this dtype and head dim, each on two short ragged batches
// (rotating, so that every set meets every mask and GQA group). One test case per algorithm below.
void check_short_batches(Algorithm algorithm, DType dtype, int head_dim) {
  if (!algorithm_enabled(algorithm)) return;
  const int groups[] = {1, 4, 8};
  int index = 0;
  for (const auto& m : kMasks) {
    const KernelConfig config = varlen_config(algorithm, dtype, head_dim, m.kind);
    for (int r = 0; r < 2; ++r, ++index) {
      const Ragged& lengths = kShort[(index + head_dim / 64) % std::size(kShort)];
      check_against_fp64(make_shape(lengths, m, dtype, head_dim, groups[index % 3]), config);
    }
  }
}

}  // namespace

TEST_CASE("varlen fa3 kernels match float64 on short ragged batches, every mask", "[varlen][fa3][gpu]") {
  const DType dtype = GENERATE(DType::bf16, DType::fp16);
  const int head_dim = GENERATE(64, 128, 80, 200);
  check_short_batches(Algorithm::fa3, dtype, head_dim);
}

// Packed GQA rows over ragged batches (templates/fa3/rows.cuh): each sequence's m-blocks count positions, and a
// sequence's last tile holds positions past its length (never stored) of every head of the group.
TEST_CASE("varlen fa3 packed GQA kernels match float64 on short ragged batches, every mask", "[varlen][fa3][gpu]") {
  const int head_dim = GENERATE(64, 128);
  const int groups[] = {2, 4, 8};
  int index = 0;
  for (const auto& m : kMasks) {
    KernelConfig config = varlen_config(Algorithm::fa3, DType::bf16, head_dim, m.kind);
    config.pack_gqa = true;
    for (int r = 0; r < 2; ++r, ++index) {
      const Ragged& lengths = kShort[(index + head_dim / 64) % std::size(kShort)];
      check_against_fp64(make_shape(lengths, m, DType::bf16, head_dim, groups[index % 3]), config);
    }
  }
}

TEST_CASE("varlen: top-left alignment per sequence matches float64, every mask and kernel",
          "[varlen][fa3][fa2][reference][gpu]") {
  const Algorithm algorithm = GENERATE(Algorithm::fa3, Algorithm::fa2, Algorithm::naive);
  if (!algorithm_enabled(algorithm)) return;
  int index = 0;
  for (const auto& m : kMasks) {
    if (m.kind == MaskKind::none) continue;
    VarlenShape s = make_shape(kShort[index % std::size(kShort)], m, index % 2 ? DType::bf16 : DType::fp16, 128,
                               index % 3 == 0 ? 1 : 4);
    ++index;
    s.top_left = true;
    check_against_fp64(s, varlen_config(algorithm, s.dtype, s.head_dim, m.kind));
  }
}

TEST_CASE("varlen fa2 kernels match float64 on short ragged batches, every mask", "[varlen][fa2][gpu]") {
  const DType dtype = GENERATE(DType::bf16, DType::fp16);
  const int head_dim = GENERATE(64, 128);
  check_short_batches(Algorithm::fa2, dtype, head_dim);
}

TEST_CASE("varlen reference kernels match float64 on short ragged batches, every mask", "[varlen][reference][gpu]") {
  const DType dtype = GENERATE(DType::bf16, DType::fp16);
  const int head_dim = GENERATE(64, 128);
  check_short_batches(Algorithm::naive, dtype, head_dim);
}

TEST_CASE("varlen kernels: head_dim 256 and padded row strides", "[varlen][fa3][fa2][reference][gpu]") {
  const Algorithm algorithm = GENERATE(Algorithm::fa3, Algorithm::fa2, Algorithm::naive);
  if (!algorithm_enabled(algorithm)) return;
  SECTION("head_dim 256, causal, GQA 4") {
    const VarlenShape s = make_shape(kShort[0], kMasks[1], DType::bf16, 256, 4);
    check_against_fp64(s, varlen_config(algorithm, DType::bf16, 256, MaskKind::causal));
  }
  SECTION("rows padded by 64 elements (seq strides not heads x head_dim)") {
    VarlenShape s = make_shape(kShort[2], kMasks[2], DType::fp16, 128, 8);
    s.row_pad = 64;
    check_against_fp64(s, varlen_config(algorithm, DType::fp16, 128, MaskKind::sliding_window));
  }
}

TEST_CASE("varlen: a 4097-row sequence among short ones matches float64", "[varlen][fa3][fa2][reference][gpu]") {
  const Algorithm algorithm = GENERATE(Algorithm::fa3, Algorithm::fa2, Algorithm::naive);
  if (!algorithm_enabled(algorithm)) return;
  // Few heads and D 64 keep the float64 reference at a few seconds.
  VarlenShape s;
  s.len_q = {7, 4097, 1, 300}, s.len_k = {4097, 4097, 7, 0};
  s.heads_q = 4, s.heads_kv = 1, s.head_dim = 64, s.dtype = DType::bf16, s.mask = MaskKind::causal;
  check_against_fp64(s, varlen_config(algorithm, s.dtype, s.head_dim, s.mask));
}

// Long ragged batches against the reference kernel on the same inputs, then the same kernel again
// (bitwise identical: a tile writing another sequence's rows would race with that sequence's own tile).
void check_against_reference_kernel(const VarlenShape& shape, const KernelConfig& config) {
  ensure_context();
  INFO(shape.to_string() << " with " << readable_name(config));
  auto c = VarlenCase::make(shape, fresh_seed());
  REQUIRE(c.ok());
  KernelConfig reference = dispatch::naive_config(shape.dtype, shape.head_dim, shape.mask, kSm90a);
  reference.varlen = true;
  REQUIRE(runtime().forward(c->problem(), reference).ok());
  std::vector<float> ref_o_full, ref_lse, o, lse;
  REQUIRE(c->read(ref_o_full, ref_lse).ok());
  // The reference's O as [total_q][Hq][D] (without pad elements and guard rows).
  const int D = shape.head_dim, Hq = shape.heads_q, total_q = shape.total_q();
  std::vector<float> ref_o(std::size_t(total_q) * Hq * D);
  for (int qi = 0; qi < total_q; ++qi)
    std::memcpy(&ref_o[std::size_t(qi) * Hq * D], &ref_o_full[qi * c->o_row()], std::size_t(Hq) * D * sizeof(float));
  REQUIRE(c->poison().ok());
  auto st = runtime().forward(c->problem(), config);
  if (!st.ok()) FAIL(st.error().to_string());
  REQUIRE(c->read(o, lse).ok());
  check_ok(compare_varlen(*c, o, lse, ref_o, ref_lse), shape.dtype);

  REQUIRE(c->poison().ok());
  REQUIRE(runtime().forward(c->problem(), config).ok());
  std::vector<float> o2, lse2;
  REQUIRE(c->read(o2, lse2).ok());
  CHECK(std::memcmp(o.data(), o2.data(), o.size() * sizeof(float)) == 0);
}

TEST_CASE("varlen: long ragged batches match the reference kernel", "[varlen][fa3][fa2][gpu]") {
  const MaskCase m = GENERATE(kMasks[0], kMasks[1], MaskCase{MaskKind::sliding_window, 1024, 0, 0});
  const Algorithm algorithm = GENERATE(Algorithm::fa3, Algorithm::fa2);
  if (!algorithm_enabled(algorithm)) return;
  VarlenShape s;
  s.len_q = {4097, 300, 0, 7, 1, 4097}, s.len_k = {4097, 4097, 300, 0, 7, 300};
  s.heads_q = 8, s.heads_kv = 2, s.head_dim = 128, s.dtype = DType::bf16;
  s.mask = m.kind, s.window_left = m.left, s.window_right = m.right;
  check_against_reference_kernel(s, varlen_config(algorithm, s.dtype, s.head_dim, s.mask));
}

TEST_CASE("varlen: the persistent fa3 scheduler skips the m-blocks past each sequence", "[varlen][fa3][gpu]") {
  if (!algorithm_enabled(Algorithm::fa3)) return;
  const MaskCase m = GENERATE(kMasks[0], kMasks[1]);
  const int head_dim = GENERATE(64, 128);
  VarlenShape s;
  // 33 (d128) or 22 (d64) m-blocks x 8 heads x 7 sequences: more work tiles than SMs, most of them past
  // their sequence.
  s.len_q = {1, 4097, 0, 300, 7, 2000, 129}, s.len_k = {4097, 1, 7, 300, 0, 2500, 128};
  s.heads_q = 8, s.heads_kv = 1, s.head_dim = head_dim, s.dtype = DType::fp16;
  s.mask = m.kind;
  KernelConfig c = varlen_config(Algorithm::fa3, s.dtype, head_dim, m.kind);
  c.scheduler = Scheduler::persistent;
  check_against_reference_kernel(s, c);
}

TEST_CASE("varlen: the dispatcher picks a varlen kernel", "[varlen][gpu]") {
  ensure_context();
  const VarlenShape s = make_shape(kShort[0], kMasks[1], DType::bf16, 128, 4);
  auto c = VarlenCase::make(s, fresh_seed());
  REQUIRE(c.ok());
  auto chosen = runtime().select(c->problem());
  REQUIRE(chosen.ok());
  INFO(readable_name(*chosen));
  CHECK(chosen->varlen);
  auto st = runtime().forward(c->problem());
  if (!st.ok()) FAIL(st.error().to_string());
  std::vector<float> o, lse;
  REQUIRE(c->read(o, lse).ok());
  std::vector<double> ref_o, ref_lse;
  c->reference(ref_o, ref_lse);
  check_ok(compare_varlen(*c, o, lse, ref_o, ref_lse), s.dtype);
}

TEST_CASE("varlen: bad arguments are rejected before any launch", "[varlen][runtime][gpu]") {
  ensure_context();
  const VarlenShape s = make_shape(kShort[1], kMasks[0], DType::bf16, 64, 1);
  auto c = VarlenCase::make(s, fresh_seed());
  REQUIRE(c.ok());
  auto expect_untouched = [&] {
    std::vector<float> o, lse;
    REQUIRE(c->read(o, lse).ok());
    for (float x : o) REQUIRE(std::isnan(x));  // still poisoned: nothing ran
  };
  SECTION("a fixed-length config") {
    KernelConfig fixed = varlen_config(Algorithm::fa2, DType::bf16, 64, MaskKind::none);
    fixed.varlen = false;
    auto st = runtime().forward(c->problem(), fixed);
    REQUIRE_FALSE(st.ok());
    CHECK(st.error().message.find("varlen") != std::string::npos);
    expect_untouched();
  }
  SECTION("host offsets") {
    const std::vector<int> host = offsets(s.len_q);
    AttentionProblem p = c->problem();
    p.cu_seqlens_q = host.data();
    auto st = runtime().forward(p);
    REQUIRE_FALSE(st.ok());
    CHECK(st.error().message.find("cu_seqlens_q") != std::string::npos);
    expect_untouched();
  }
  SECTION("one offset array") {
    AttentionProblem p = c->problem();
    p.cu_seqlens_k = nullptr;
    auto st = runtime().forward(p);
    REQUIRE_FALSE(st.ok());
    CHECK(st.error().message.find("cu_seqlens_k") != std::string::npos);
    expect_untouched();
  }
}
