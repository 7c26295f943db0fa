#include "harness.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <thread>

#include "config/half.hpp"

namespace flashjit::test {
namespace {

int floor_div(long a, long b) { return static_cast<int>(a >= 0 ? a / b : -((-a + b - 1) / b)); }

}  // namespace

bool mask_visible(MaskKind mask, int window_left, int window_right, int chunk_size, long a, int j) {
  switch (mask) {
    case MaskKind::none: return true;
    case MaskKind::causal: return j <= a;
    case MaskKind::sliding_window:
      return (window_left < 0 || j >= a - window_left) && (window_right < 0 || j <= a + window_right);
    case MaskKind::chunked: return floor_div(a, chunk_size) == floor_div(j, chunk_size);
    case MaskKind::chunked_causal: return floor_div(a, chunk_size) == floor_div(j, chunk_size) && j <= a;
  }
  return false;
}

namespace {

bool visible(const Shape& s, int i, int j) {
  return mask_visible(s.mask, s.window_left, s.window_right, s.chunk_size, s.aligned(i), j);
}

std::size_t elems(int b, int s, int h, int d) { return std::size_t(b) * s * h * d; }

}  // namespace

std::string Shape::to_string() const {
  std::string variants;
  if (softcap > 0) variants += fmt::format(" softcap {}", softcap);
  if (alibi) variants += alibi == 2 ? " alibi [B, Hq]" : " alibi [Hq]";
  if (sinks) variants += " sinks";
  if (top_left) variants += " top-left";
  return fmt::format("B{} Sq{} Sk{} Hq{} Hkv{} D{}{} {} {} (w {} {}, chunk {}){}", batch, seqlen_q, seqlen_k, heads_q,
                     heads_kv, head_dim, dv() != head_dim ? fmt::format(" Dv{}", dv()) : "", flashjit::to_string(dtype),
                     flashjit::to_string(mask), window_left, window_right, chunk_size, variants);
}

double alibi_slope(const Shape& s, int batch, int head) {
  const double base = std::exp2(-8.0 * (head + 1) / s.heads_q);
  return s.alibi == 2 ? base * (1.0 + 0.5 * batch) : base;
}

double sink_logit(const Shape& s, int head) {
  return std::log(double(std::max(s.seqlen_k, 1))) + 0.75 * ((head * 7) % 9 - 4);
}

double variant_score(const Shape& s, double x, int batch, int head, int i, int j) {
  if (s.softcap > 0) x = s.softcap * std::tanh(x / s.softcap);
  if (s.alibi) x -= alibi_slope(s, batch, head) * std::abs(double(s.aligned(i)) - j);
  return x;
}

Result<Case> Case::make(const Shape& s, std::uint64_t seed) {
  Case c;
  c.shape_ = s;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uq(-2.f, 2.f), ukv(-1.f, 1.f);
  auto fill = [&](std::vector<float>& host, std::size_t n, std::uniform_real_distribution<float>& dist,
                  cuda::DeviceBuffer& dev) -> Status {
    host.resize(n);
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
  FLASHJIT_TRY(fill(c.q_, elems(s.batch, s.seqlen_q, s.heads_q, s.head_dim), uq, c.dq_));
  FLASHJIT_TRY(fill(c.k_, elems(s.batch, s.seqlen_k, s.heads_kv, s.head_dim), ukv, c.dk_));
  FLASHJIT_TRY(fill(c.v_, elems(s.batch, s.seqlen_k, s.heads_kv, s.dv()), ukv, c.dv_));
  auto o = cuda::DeviceBuffer::allocate(elems(s.batch, s.seqlen_q, s.heads_q, s.dv()) * 2);
  if (!o.ok()) return std::move(o).error();
  c.do_ = std::move(*o);
  auto lse = cuda::DeviceBuffer::allocate(std::size_t(s.batch) * s.heads_q * s.seqlen_q * 4);
  if (!lse.ok()) return std::move(lse).error();
  c.dlse_ = std::move(*lse);
  // Variant tables, as float32 like the API takes them.
  auto upload = [](const std::vector<float>& host, cuda::DeviceBuffer& dev) -> Status {
    auto buf = cuda::DeviceBuffer::allocate(host.size() * 4);
    if (!buf.ok()) return std::move(buf).error();
    dev = std::move(*buf);
    return dev.upload(host.data(), host.size() * 4);
  };
  if (s.alibi) {
    std::vector<float> slopes;
    for (int b = 0; b < (s.alibi == 2 ? s.batch : 1); ++b)
      for (int h = 0; h < s.heads_q; ++h) slopes.push_back(static_cast<float>(alibi_slope(s, b, h)));
    FLASHJIT_TRY(upload(slopes, c.dslopes_));
  }
  if (s.sinks) {
    std::vector<float> sinks;
    for (int h = 0; h < s.heads_q; ++h) sinks.push_back(static_cast<float>(sink_logit(s, h)));
    FLASHJIT_TRY(upload(sinks, c.dsinks_));
  }
  FLASHJIT_TRY(c.poison_outputs());
  return c;
}

AttentionProblem Case::problem() const {
  AttentionProblem p;
  p.dtype = shape_.dtype;
  p.batch = shape_.batch, p.seqlen_q = shape_.seqlen_q, p.seqlen_k = shape_.seqlen_k;
  p.heads_q = shape_.heads_q, p.heads_kv = shape_.heads_kv, p.head_dim = shape_.head_dim;
  p.head_dim_v = shape_.head_dim_v;
  p.q = dq_.get(), p.k = dk_.get(), p.v = dv_.get(), p.o = do_.get();
  p.lse = static_cast<float*>(dlse_.get());
  p.mask = shape_.mask;
  p.window_left = shape_.window_left, p.window_right = shape_.window_right, p.chunk_size = shape_.chunk_size;
  p.softcap = shape_.softcap;
  p.alignment = shape_.top_left ? Alignment::top_left : Alignment::bottom_right;
  if (shape_.alibi) {
    p.alibi_slopes = static_cast<const float*>(dslopes_.get());
    p.alibi_slopes_batch_stride = shape_.alibi == 2 ? shape_.heads_q : 0;
  }
  if (shape_.sinks) p.sinks = static_cast<const float*>(dsinks_.get());
  return p;
}

Status Case::poison_outputs() {
  FLASHJIT_TRY(do_.fill_bytes(0xff));
  return dlse_.fill_bytes(0xff);
}

Status Case::read_outputs(std::vector<float>& o, std::vector<float>& lse) const {
  FLASHJIT_TRY(cuda::check((*cuda::api())->cuCtxSynchronize(), "cuCtxSynchronize"));
  std::vector<std::uint16_t> bits(do_.size() / 2);
  FLASHJIT_TRY(do_.download(bits.data(), do_.size()));
  o.resize(bits.size());
  for (std::size_t i = 0; i < bits.size(); ++i) o[i] = from_half_bits(shape_.dtype, bits[i]);
  lse.resize(dlse_.size() / 4);
  return dlse_.download(lse.data(), dlse_.size());
}

void reference_attention(const Shape& s, const std::vector<float>& q, const std::vector<float>& k,
                         const std::vector<float>& v, std::vector<double>& o, std::vector<double>& lse,
                         const BiasFn& bias, const PairFilter& also_visible) {
  const int D = s.head_dim, Dv = s.dv(), group = s.heads_q / s.heads_kv;
  const double scale = 1.0 / std::sqrt(double(D));
  o.assign(elems(s.batch, s.seqlen_q, s.heads_q, Dv), 0.0);
  lse.assign(std::size_t(s.batch) * s.heads_q * s.seqlen_q, -INFINITY);
  const int jobs = s.batch * s.heads_q;
  const int workers = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  auto work = [&](int w) {
    std::vector<double> scores(s.seqlen_k);
    for (int job = w; job < jobs; job += workers) {
      const int b = job / s.heads_q, h = job % s.heads_q, hk = h / group;
      for (int i = 0; i < s.seqlen_q; ++i) {
        const float* qr = &q[((std::size_t(b) * s.seqlen_q + i) * s.heads_q + h) * D];
        double mx = -INFINITY;
        for (int j = 0; j < s.seqlen_k; ++j) {
          if (!visible(s, i, j) || (also_visible && !also_visible(b, h, i, j))) {
            scores[j] = -INFINITY;
            continue;
          }
          const float* kr = &k[((std::size_t(b) * s.seqlen_k + j) * s.heads_kv + hk) * D];
          double acc = 0;
          for (int d = 0; d < D; ++d) acc += double(qr[d]) * kr[d];
          scores[j] = variant_score(s, acc * scale, b, h, i, j) + (bias ? bias(b, h, i, j) : 0.0);
          mx = std::max(mx, scores[j]);
        }
        const std::size_t li = (std::size_t(b) * s.heads_q + h) * s.seqlen_q + i;
        const double sink = s.sinks ? sink_logit(s, h) : -INFINITY;
        if (mx == -INFINITY) {  // no visible key: O = 0, LSE = -inf (or the sink's logit)
          lse[li] = sink;
          continue;
        }
        double sum = s.sinks ? std::exp(sink - mx) : 0.0;
        double* orow = &o[((std::size_t(b) * s.seqlen_q + i) * s.heads_q + h) * Dv];
        for (int j = 0; j < s.seqlen_k; ++j) {
          if (scores[j] == -INFINITY) continue;
          const double p = std::exp(scores[j] - mx);
          sum += p;
          const float* vr = &v[((std::size_t(b) * s.seqlen_k + j) * s.heads_kv + hk) * Dv];
          for (int d = 0; d < Dv; ++d) orow[d] += p * vr[d];
        }
        for (int d = 0; d < Dv; ++d) orow[d] /= sum;
        lse[li] = mx + std::log(sum);
      }
    }
  };
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) threads.emplace_back(work, w);
  for (auto& t : threads) t.join();
}

void ComparisonSum::add_output(float x, double ref) {
  if (std::isnan(x)) {
    ++c_.nan_count;
    return;
  }
  const double diff = double(x) - ref;
  num_ += diff * diff;
  den_ += ref * ref;
  c_.max_abs = std::max(c_.max_abs, std::abs(diff));
}

void ComparisonSum::add_lse(float l, double ref, const float* o_row, int d) {
  if (std::isnan(l)) {
    ++c_.nan_count;
  } else if (std::isinf(ref)) {
    bool row_zero = true;
    for (int i = 0; i < d; ++i) row_zero &= o_row[i] == 0.f;
    if (!(std::isinf(l) && l < 0) || !row_zero) ++c_.empty_row_violations;
  } else {
    c_.lse_max_abs = std::max(c_.lse_max_abs, std::abs(double(l) - ref));
  }
}

Comparison ComparisonSum::result() const {
  Comparison c = c_;
  c.rel_l2 = den_ > 0 ? std::sqrt(num_ / den_) : std::sqrt(num_);
  return c;
}

std::string GuardedComparison::to_string() const {
  return fmt::format("{}, guard writes {}", cmp.to_string(), guard_written);
}

template <class Ref>
static Comparison compare_impl(const Shape& s, const std::vector<float>& o, const std::vector<float>& lse,
                               const std::vector<Ref>& ref_o, const std::vector<Ref>& ref_lse) {
  ComparisonSum sum;
  const int D = s.dv();
  for (std::size_t i = 0; i < o.size(); ++i) sum.add_output(o[i], ref_o[i]);
  for (int b = 0; b < s.batch; ++b)
    for (int h = 0; h < s.heads_q; ++h)
      for (int i = 0; i < s.seqlen_q; ++i) {
        const std::size_t li = (std::size_t(b) * s.heads_q + h) * s.seqlen_q + i;
        sum.add_lse(lse[li], ref_lse[li], o.data() + ((std::size_t(b) * s.seqlen_q + i) * s.heads_q + h) * D, D);
      }
  return sum.result();
}

Comparison compare(const Shape& s, const std::vector<float>& o, const std::vector<float>& lse,
                   const std::vector<double>& ref_o, const std::vector<double>& ref_lse) {
  return compare_impl(s, o, lse, ref_o, ref_lse);
}
Comparison compare(const Shape& s, const std::vector<float>& o, const std::vector<float>& lse,
                   const std::vector<float>& ref_o, const std::vector<float>& ref_lse) {
  return compare_impl(s, o, lse, ref_o, ref_lse);
}

std::string Comparison::to_string() const {
  return fmt::format("rel_l2 {:.3e} max_abs {:.3e} lse_max_abs {:.3e} nan {} empty-row violations {}", rel_l2,
                     max_abs, lse_max_abs, nan_count, empty_row_violations);
}

double tolerance(DType d) { return d == DType::bf16 ? 1e-2 : 2e-3; }

Runtime& runtime() {
  static std::unique_ptr<Runtime> rt = [] {
    auto r = Runtime::create();
    if (!r.ok()) {
      std::fprintf(stderr, "cannot create the runtime: %s\n", r.error().to_string().c_str());
      std::exit(1);
    }
    return std::move(*r);
  }();
  return *rt;
}

void ensure_context() {
  static auto scope = cuda::ContextScope::enter(0);
  if (!scope.ok()) {
    std::fprintf(stderr, "cannot enter device 0: %s\n", scope.error().to_string().c_str());
    std::exit(1);
  }
}

}  // namespace flashjit::test
