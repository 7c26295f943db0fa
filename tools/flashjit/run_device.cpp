// `flashjit run` on a GPU: tensors on device 0, one checked run against the naive reference kernel, then
// timed launches (CUDA events).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <new>

#include "cli.hpp"
#include "cuda/driver.hpp"
#include "dispatch/heuristics.hpp"
#include "host_tensors.hpp"
#include "run.hpp"

namespace flashjit::cli {
namespace {

constexpr int kWarmup = 5;


struct Tensors {
  cuda::DeviceBuffer q, k, v, o, lse, o_ref, lse_ref;
};

Status allocate(cuda::DeviceBuffer& buffer, std::size_t count, std::size_t elem_bytes, const char* what) {
  std::size_t bytes = 0;
  if (__builtin_mul_overflow(count, elem_bytes, &bytes))
    return Error(ErrorCode::invalid_argument, fmt::format("{} does not fit in 64 bits of bytes", what));
  auto b = cuda::DeviceBuffer::allocate(bytes);
  if (!b.ok()) return std::move(b).error().with(fmt::format("while allocating {} ({}) on the GPU", what, human_bytes(bytes)));
  buffer = std::move(*b);
  return {};
}

Error out_of_host_memory(const char* what, std::size_t bytes) {
  return Error(ErrorCode::internal, fmt::format("out of host memory for {} ({})", what, human_bytes(bytes)));
}

Status upload_random(cuda::DeviceBuffer& buffer, std::vector<std::uint16_t>& host, std::size_t count, DType dtype,
                     std::mt19937& rng) {
  host.resize(count);
  fill_uniform(host, dtype, rng);
  return buffer.upload(host.data(), count * sizeof(std::uint16_t));
}

double median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (static_cast<double>(v[n / 2 - 1]) + v[n / 2]);
}

// One run of the kernel under test and one of the reference; compares O (and reports the LSE difference).
int check_against_reference(Output& out, Runtime& runtime, const AttentionProblem& problem, const Arch& arch,
                            Tensors& t, std::size_t o_count, std::size_t lse_count) {
  AttentionProblem ref = problem;
  ref.o = t.o_ref.get();
  ref.lse = static_cast<float*>(t.lse_ref.get());
  const KernelConfig ref_config = dispatch::naive_config(problem.dtype, problem.head_dim, problem.mask, arch);
  if (auto st = t.o_ref.fill_bytes(0xFF); !st.ok()) return report(st.error());
  if (auto st = runtime.forward(ref, ref_config); !st.ok()) return report(st.error());
  std::vector<std::uint16_t> got, expected;
  std::vector<float> lse, lse_ref;
  try {
    got.resize(o_count), expected.resize(o_count), lse.resize(lse_count), lse_ref.resize(lse_count);
  } catch (const std::bad_alloc&) {
    return report(out_of_host_memory("the outputs", 2 * (o_count * 2 + lse_count * 4)));
  }
  for (auto st : {t.o.download(got.data(), o_count * 2), t.o_ref.download(expected.data(), o_count * 2),
                  t.lse.download(lse.data(), lse_count * 4), t.lse_ref.download(lse_ref.data(), lse_count * 4)})
    if (!st.ok()) return report(st.error());
  const Comparison c = compare(got, expected, problem.dtype);
  const double limit = problem.dtype == DType::bf16 ? 2e-2 : 4e-3;
  out.data()["check"] = {{"rel_l2", c.rel_l2}, {"limit", limit}, {"reference", readable_name(ref_config)},
                         {"lse_max_abs_diff", max_abs_diff(lse, lse_ref)}, {"non_finite", c.non_finite}};
  out.text("check:    relative L2 error {:.3e} (limit {:.0e}) vs {}, LSE max abs diff {:.3e}\n", c.rel_l2, limit,
             readable_name(ref_config), max_abs_diff(lse, lse_ref));
  std::string failure;
  if (c.non_finite > 0)
    failure = fmt::format("{} NaN/inf elements in O or the reference (first at index {})", c.non_finite,
                          c.first_non_finite);
  else if (!(c.rel_l2 <= limit))
    failure = fmt::format("relative L2 error {:.3e} exceeds {:.0e}", c.rel_l2, limit);
  if (!failure.empty()) {
    std::fflush(stdout);
    fmt::print(stderr, "flashjit: check failed: {}\n", failure);
    return kFailure;
  }
  return kOk;
}

int time_kernel(Output& out, Runtime& runtime, const AttentionProblem& problem,
                const std::optional<KernelConfig>& config, int iters) {
  auto launch = [&] { return config ? runtime.forward(problem, *config) : runtime.forward(problem); };
  for (int i = 0; i < kWarmup; ++i)
    if (auto st = launch(); !st.ok()) return report(st.error());
  auto timer = cuda::EventTimer::create();
  if (!timer.ok()) return report(timer.error());
  std::vector<float> ms;
  for (int i = 0; i < iters; ++i) {
    CUstream stream = static_cast<CUstream>(problem.stream);
    if (auto st = timer->start(stream); !st.ok()) return report(st.error());
    if (auto st = launch(); !st.ok()) return report(st.error());
    if (auto st = timer->stop(stream); !st.ok()) return report(st.error());
    auto t = timer->elapsed_ms();
    if (!t.ok()) return report(t.error());
    ms.push_back(*t);
  }
  const double med = median(ms);
  const double tflops = attention_flops(problem) / (med * 1e-3) / 1e12;
  out.data()["time"] = {{"median_ms", med}, {"min_ms", *std::min_element(ms.begin(), ms.end())},
                        {"max_ms", *std::max_element(ms.begin(), ms.end())}, {"launches", iters}, {"tflops", tflops}};
  out.text("time:     median {:.4f} ms (min {:.4f}, max {:.4f}) over {} launches, {:.1f} TFLOP/s\n", med,
             *std::min_element(ms.begin(), ms.end()), *std::max_element(ms.begin(), ms.end()), iters, tflops);
  return kOk;
}

}  // namespace

int run_on_device(Runtime& runtime, const RunPlan& plan) {
  Output& out = *plan.out;
  auto device = cuda::device_info(0);
  if (!device.ok()) return report(device.error());
  out.data()["device"] = {{"name", device->name}, {"arch", device->arch.to_string()}, {"sms", device->sms}};
  out.text("device:   {} ({}, {} SMs, {})\n", device->name, device->arch.to_string(), device->sms,
             human_bytes(device->total_memory));
  auto scope = cuda::ContextScope::enter(0);
  if (!scope.ok()) return report(scope.error());

  AttentionProblem p = plan.problem;
  auto q_count = elements({p.batch, p.seqlen_q, p.heads_q, p.head_dim}, "Q");
  auto kv_count = elements({p.batch, p.seqlen_k, p.heads_kv, p.head_dim}, "K");
  auto lse_count = elements({p.batch, p.heads_q, p.seqlen_q}, "LSE");
  for (const auto* r : {&q_count, &kv_count, &lse_count})
    if (!r->ok()) return report(r->error());

  Tensors t;
  const std::size_t ref = plan.check ? 1 : 0;  // the reference outputs only when checking
  const struct {
    cuda::DeviceBuffer* buffer;
    std::size_t count, elem_bytes;
    const char* what;
  } specs[] = {{&t.q, *q_count, 2, "Q"},
               {&t.k, *kv_count, 2, "K"},
               {&t.v, *kv_count, 2, "V"},
               {&t.o, *q_count, 2, "O"},
               {&t.lse, *lse_count, sizeof(float), "LSE"},
               {&t.o_ref, ref * *q_count, 2, "the reference O"},
               {&t.lse_ref, ref * *lse_count, sizeof(float), "the reference LSE"}};
  for (const auto& s : specs)
    if (auto st = allocate(*s.buffer, s.count, s.elem_bytes, s.what); !st.ok()) return report(st.error());
  {
    std::vector<std::uint16_t> host;
    try {
      host.reserve(std::max(*q_count, *kv_count));
    } catch (const std::bad_alloc&) {
      return report(out_of_host_memory("the inputs", std::max(*q_count, *kv_count) * 2));
    }
    std::mt19937 rng(2024);
    for (auto [buffer, count] : {std::pair{&t.q, *q_count}, std::pair{&t.k, *kv_count}, std::pair{&t.v, *kv_count}})
      if (auto st = upload_random(*buffer, host, count, p.dtype, rng); !st.ok()) return report(st.error());
  }
  p.q = t.q.get(), p.k = t.k.get(), p.v = t.v.get(), p.o = t.o.get();
  p.lse = static_cast<float*>(t.lse.get());

  std::optional<KernelConfig> config = plan.config;
  auto selected = config ? Result<KernelConfig>(*config) : runtime.select(p);
  if (!selected.ok()) return exit_code_of(selected.error()) == kUsage ? report_input(selected.error()) : report(selected.error());
  auto info = runtime.compile(*selected);
  if (!info.ok()) return report(info.error());
  std::string how = config ? "explicit config" : "dispatcher's choice for " + device->arch.to_string();
  if (!config && selected->algorithm == Algorithm::naive)
    how += ": the reference kernel (fp32, slow): " + dispatch::reference_fallback_reason(p, device->arch);
  print_kernel(out, *info, how);

  if (auto st = t.o.fill_bytes(0xFF); !st.ok()) return report(st.error());  // unwritten outputs read as NaN
  if (auto st = config ? runtime.forward(p, *config) : runtime.forward(p); !st.ok()) return report(st.error());
  out.data()["ran"] = true;
  if (plan.check) {
    if (int rc = check_against_reference(out, runtime, p, device->arch, t, *q_count, *lse_count); rc != kOk)
      return out.finish(rc);
  } else {
    out.text("check:    skipped (--no-check)\n");
    out.data()["check"] = nullptr;
  }
  return out.finish(time_kernel(out, runtime, p, config, plan.iters));
}

}  // namespace flashjit::cli
