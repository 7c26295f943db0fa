// The autotuner's measurements on device 0: CUDA events around back-to-back launches (so that kernels
// shorter than a launch are not timed as launch latency alone), median of N samples after warm-up, input sets
// rotated so that their total exceeds the L2 several times (as tools/bench/bench_attention.cpp does), and
// the check of an output against the reference kernel's.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <tuple>

#include "autotune_bench.hpp"
#include "cli.hpp"
#include "cuda/driver.hpp"
#include "dispatch/heuristics.hpp"
#include "host_tensors.hpp"
#include "tune/candidates.hpp"

namespace flashjit::cli {
namespace {

constexpr double kRotateBytes = 240e6;   // input sets rotated per problem: at least this many bytes, 8 sets at most
constexpr int kMaxSets = 8;
constexpr double kSampleMs = 1.0;        // a timed sample lasts about this long (back-to-back launches)
constexpr int kMaxLaunchesPerSample = 64;
// Problems above this many (query, key, head) triples are not checked: the reference kernel would dominate.
constexpr double kMaxCheckedScores = 4096.0 * 4096 * 32;


Result<cuda::DeviceBuffer> upload(const std::vector<std::uint16_t>& host, const char* what) {
  auto b = cuda::DeviceBuffer::allocate(host.size() * 2);
  if (!b.ok()) return std::move(b).error().with(fmt::format("while allocating {} ({})", what, human_bytes(host.size() * 2)));
  FLASHJIT_TRY(b->upload(host.data(), host.size() * 2));
  return std::move(*b);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

class DeviceBench final : public tune::ProblemBench {
 public:
  DeviceBench(Runtime& runtime, const dispatch::ProblemShape& shape, const Arch& arch, const BenchSettings& settings)
      : runtime_(runtime), shape_(shape), arch_(arch), settings_(settings) {}

  Status allocate() {
    auto nq = elements({shape_.batch, shape_.seqlen_q, shape_.heads_q, shape_.head_dim}, "Q");
    if (!nq.ok()) return std::move(nq).error();
    auto nk = elements({shape_.batch, shape_.seqlen_k, shape_.heads_kv, shape_.head_dim}, "K");
    if (!nk.ok()) return std::move(nk).error();
    q_count_ = *nq;
    const double set_bytes = 2.0 * (2.0 * *nq + 2.0 * *nk);  // Q, O, K, V
    const int sets = std::clamp(static_cast<int>(std::ceil(kRotateBytes / set_bytes)), 1, kMaxSets);
    std::mt19937 rng(2024);
    std::vector<std::uint16_t> q(*nq), k(*nk), v(*nk);
    fill_uniform(q, shape_.dtype, rng);
    fill_uniform(k, shape_.dtype, rng);
    fill_uniform(v, shape_.dtype, rng);
    for (int i = 0; i < sets; ++i) {
      Set s;
      for (auto [buffer, host, what] : {std::tuple{&s.q, &q, "Q"}, {&s.k, &k, "K"}, {&s.v, &v, "V"}, {&s.o, &q, "O"}}) {
        auto b = upload(*host, what);
        if (!b.ok()) return std::move(b).error();
        *buffer = std::move(*b);
      }
      sets_.push_back(std::move(s));
    }
    return allocate_variants(rng);
  }

  Result<double> median_ms(const KernelConfig& config) override {
    for (int i = 0; i < settings_.warmup; ++i) FLASHJIT_TRY(launch(config));
    auto timer = cuda::EventTimer::create();
    if (!timer.ok()) return std::move(timer).error();
    auto sample = [&](int launches) -> Result<double> {
      FLASHJIT_TRY(timer->start(nullptr));
      for (int i = 0; i < launches; ++i) FLASHJIT_TRY(launch(config));
      FLASHJIT_TRY(timer->stop(nullptr));
      auto ms = timer->elapsed_ms();
      if (!ms.ok()) return std::move(ms).error();
      return static_cast<double>(*ms) / launches;
    };
    auto estimate = sample(4);
    if (!estimate.ok()) return std::move(estimate).error();
    const int launches =
        std::clamp(static_cast<int>(std::ceil(kSampleMs / std::max(*estimate, 1e-4))), 1, kMaxLaunchesPerSample);
    std::vector<double> ms;
    for (int i = 0; i < settings_.iters; ++i) {
      auto t = sample(launches);
      if (!t.ok()) return std::move(t).error();
      ms.push_back(*t);
    }
    return median(std::move(ms));
  }

  Result<std::optional<double>> rel_l2(const KernelConfig& config) override {
    if (double(shape_.seqlen_q) * shape_.seqlen_k * shape_.heads_q > kMaxCheckedScores) return std::optional<double>();
    if (reference_.empty()) FLASHJIT_TRY(run_reference());
    auto out = run_once(config, sets_[0].o);
    if (!out.ok()) return std::move(out).error();
    const Comparison c = compare(*out, reference_, shape_.dtype);
    if (c.non_finite > 0) return std::optional<double>(INFINITY);
    return std::optional<double>(c.rel_l2);
  }

 private:
  struct Set {
    cuda::DeviceBuffer q, k, v, o;
  };

  // The variants' arrays (shared by the input sets): ALiBi's geometric slopes 2^(-8 (h + 1) / H), sink logits
  // uniform in [-1, 1].
  Status allocate_variants(std::mt19937& rng) {
    const int heads = shape_.heads_q;
    auto upload_floats = [&](const std::vector<float>& host, cuda::DeviceBuffer& buffer, const char* what) -> Status {
      auto b = cuda::DeviceBuffer::allocate(host.size() * 4);
      if (!b.ok()) return std::move(b).error().with(fmt::format("while allocating {}", what));
      FLASHJIT_TRY(b->upload(host.data(), host.size() * 4));
      buffer = std::move(*b);
      return {};
    };
    if (shape_.alibi) {
      std::vector<float> slopes(heads);
      for (int h = 0; h < heads; ++h) slopes[h] = std::exp2(-8.f * float(h + 1) / float(heads));
      FLASHJIT_TRY(upload_floats(slopes, alibi_, "the ALiBi slopes"));
    }
    if (shape_.sinks) {
      std::uniform_real_distribution<float> logit(-1.f, 1.f);
      std::vector<float> sinks(heads);
      for (float& x : sinks) x = logit(rng);
      FLASHJIT_TRY(upload_floats(sinks, sinks_, "the sinks"));
    }
    return {};
  }

  AttentionProblem problem(const Set& s, const cuda::DeviceBuffer& o) const {
    AttentionProblem p = dispatch::to_problem(shape_);
    p.q = s.q.get(), p.k = s.k.get(), p.v = s.v.get(), p.o = o.get();
    // to_problem's stand-ins replaced by the device arrays.
    p.alibi_slopes = shape_.alibi ? static_cast<const float*>(alibi_.get()) : nullptr;
    p.sinks = shape_.sinks ? static_cast<const float*>(sinks_.get()) : nullptr;
    return p;
  }

  Status launch(const KernelConfig& config) {
    const Set& s = sets_[next_++ % sets_.size()];
    return runtime_.forward(problem(s, s.o), config);
  }

  // O of one run on the first set, written into `o` (poisoned first: unwritten elements read as NaN).
  Result<std::vector<std::uint16_t>> run_once(const KernelConfig& config, cuda::DeviceBuffer& o) {
    FLASHJIT_TRY(o.fill_bytes(0xFF));
    FLASHJIT_TRY(runtime_.forward(problem(sets_[0], o), config));
    std::vector<std::uint16_t> out(q_count_);
    FLASHJIT_TRY(o.download(out.data(), out.size() * 2));  // synchronous: waits for the kernel
    return out;
  }

  Status run_reference() {
    auto o = cuda::DeviceBuffer::allocate(q_count_ * 2);
    if (!o.ok()) return std::move(o).error().with("while allocating the reference output");
    auto ref = run_once(tune::reference_config(shape_, arch_), *o);
    if (!ref.ok()) return std::move(ref).error().with("while running the reference kernel");
    reference_ = std::move(*ref);
    return {};
  }

  Runtime& runtime_;
  dispatch::ProblemShape shape_;
  Arch arch_;
  BenchSettings settings_;
  std::size_t q_count_ = 0;
  std::vector<Set> sets_;
  cuda::DeviceBuffer alibi_, sinks_;
  std::size_t next_ = 0;
  std::vector<std::uint16_t> reference_;
};

}  // namespace

Result<std::unique_ptr<tune::ProblemBench>> make_device_bench(Runtime& runtime, const dispatch::ProblemShape& shape,
                                                               const Arch& arch, const BenchSettings& settings) {
  if (!shape.score_mod.empty() || !shape.mask_mod.empty())
    return Error(ErrorCode::unsupported,
                 fmt::format("{}: kernels with user snippets are not autotuned (what their aux arguments point at is "
                             "the caller's); precompile them instead",
                             dispatch::describe(shape)));
  auto bench = std::make_unique<DeviceBench>(runtime, shape, arch, settings);
  if (auto st = bench->allocate(); !st.ok())
    return std::move(st).error().with(fmt::format("while preparing {} on the GPU", dispatch::describe(shape)));
  return std::unique_ptr<tune::ProblemBench>(std::move(bench));
}

}  // namespace flashjit::cli
