// flashjit_bench: times flashjit kernels on attention shapes with CUDA events (warm-up, median of N samples
// of back-to-back launches, inputs rotated so the 60 MB L2 does not flatter small shapes), checks each
// kernel against the reference kernel first, and measures host overheads (launch on an in-process hit;
// disk-cache hit -> launchable). Writes JSON lines, one per shape x config: the tool for tile sweeps of
// explicit configs; tools/bench/attention_bench.py compares with torch's kernels in one process.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "config/half.hpp"
#include "cuda/driver.hpp"
#include "dispatch/heuristics.hpp"
#include "flashjit/runtime.hpp"

using namespace flashjit;

namespace {

struct Shape {
  int batch, sq, sk, hq, hkv, d;
  MaskKind mask;
};

// One set of device tensors.
struct Tensors {
  cuda::DeviceBuffer q, k, v, o, lse;
};

Result<Tensors> make_tensors(const Shape& s, DType dtype, std::mt19937& rng) {
  Tensors t;
  auto fill = [&](cuda::DeviceBuffer& buf, std::size_t n) -> Status {
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    std::vector<std::uint16_t> bits(n);
    for (auto& b : bits) b = to_half_bits(dtype, u(rng));
    auto r = cuda::DeviceBuffer::allocate(n * 2);
    if (!r.ok()) return std::move(r).error();
    buf = std::move(*r);
    return buf.upload(bits.data(), n * 2);
  };
  const std::size_t nq = std::size_t(s.batch) * s.sq * s.hq * s.d, nk = std::size_t(s.batch) * s.sk * s.hkv * s.d;
  FLASHJIT_TRY(fill(t.q, nq));
  FLASHJIT_TRY(fill(t.k, nk));
  FLASHJIT_TRY(fill(t.v, nk));
  auto o = cuda::DeviceBuffer::allocate(nq * 2);
  if (!o.ok()) return std::move(o).error();
  t.o = std::move(*o);
  auto lse = cuda::DeviceBuffer::allocate(std::size_t(s.batch) * s.hq * s.sq * 4);
  if (!lse.ok()) return std::move(lse).error();
  t.lse = std::move(*lse);
  return t;
}

AttentionProblem problem_for(const Shape& s, DType dtype, const Tensors& t, bool with_lse) {
  AttentionProblem p;
  p.dtype = dtype;
  p.batch = s.batch, p.seqlen_q = s.sq, p.seqlen_k = s.sk, p.heads_q = s.hq, p.heads_kv = s.hkv, p.head_dim = s.d;
  p.q = t.q.get(), p.k = t.k.get(), p.v = t.v.get(), p.o = t.o.get();
  p.lse = with_lse ? static_cast<float*>(t.lse.get()) : nullptr;
  p.mask = s.mask;
  return p;
}

Result<std::vector<float>> read_o(const Tensors& t, DType dtype) {
  FLASHJIT_TRY(cuda::check((*cuda::api())->cuCtxSynchronize(), "cuCtxSynchronize"));
  std::vector<std::uint16_t> bits(t.o.size() / 2);
  FLASHJIT_TRY(t.o.download(bits.data(), t.o.size()));
  std::vector<float> out(bits.size());
  for (std::size_t i = 0; i < bits.size(); ++i) out[i] = from_half_bits(dtype, bits[i]);
  return out;
}

double rel_l2(const std::vector<float>& a, const std::vector<float>& ref) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i])) return INFINITY;
    num += (double(a[i]) - ref[i]) * (double(a[i]) - ref[i]);
    den += double(ref[i]) * ref[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

std::vector<Shape> llama3_sweep(bool causal) {
  std::vector<Shape> out;
  for (int s : {32, 64, 128, 256, 512, 1024, 1536, 2048, 4096, 8192, 16384})
    out.push_back({1, s, s, 32, 8, 128, causal ? MaskKind::causal : MaskKind::none});
  return out;
}

// FA3-paper grid: 16k tokens, hidden 2048 (heads = 2048 / d), batch = 16384 / seqlen; here seqlen 16k.
std::vector<Shape> fa3_grid(bool causal) {
  std::vector<Shape> out;
  for (int d : {64, 128, 256}) out.push_back({1, 16384, 16384, 2048 / d, 2048 / d, d, causal ? MaskKind::causal : MaskKind::none});
  return out;
}

Result<Shape> parse_shape(const std::string& text) {
  // B,Sq,Sk,Hq,Hkv,D[,mask]
  Shape s{};
  char mask[64] = "none";
  int n = std::sscanf(text.c_str(), "%d,%d,%d,%d,%d,%d,%63s", &s.batch, &s.sq, &s.sk, &s.hq, &s.hkv, &s.d, mask);
  auto m = parse_mask(mask);
  if (n < 6 || !m) return Error(ErrorCode::invalid_argument, fmt::format("bad shape '{}': want B,Sq,Sk,Hq,Hkv,D[,mask]", text));
  s.mask = *m;
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"flashjit_bench: time flashjit attention kernels (JSON lines on stdout or --out)"};
  std::vector<std::string> sweeps, shape_texts, config_texts;
  std::string dtype_text = "bf16", out_path;
  int iters = 30, warmup = 5;
  bool overheads = false;
  app.add_option("--sweep", sweeps, "llama3, llama3_causal, fa3, fa3_causal");
  app.add_option("--shape", shape_texts, "B,Sq,Sk,Hq,Hkv,D[,mask] (repeatable)");
  app.add_option("--config", config_texts, "'key=value ...' explicit config to time (repeatable; default: dispatcher)");
  app.add_option("--dtype", dtype_text, "bf16 or fp16");
  app.add_option("--iters", iters, "timed launches per case");
  app.add_option("--warmup", warmup, "untimed launches per case");
  app.add_option("--out", out_path, "JSON-lines output file (default stdout)");
  app.add_flag("--overheads", overheads, "measure host launch overhead and cache-hit load time");
  CLI11_PARSE(app, argc, argv);

  auto fail = [](const Error& e) {
    fmt::print(stderr, "flashjit_bench: {}\n", e.to_string());
    return 1;
  };
  const auto dtype = parse_dtype(dtype_text);
  if (!dtype) return fail(Error(ErrorCode::invalid_argument, "--dtype must be bf16 or fp16"));
  std::vector<Shape> shapes;
  for (const auto& sw : sweeps) {
    std::vector<Shape> add;
    if (sw == "llama3") add = llama3_sweep(false);
    else if (sw == "llama3_causal") add = llama3_sweep(true);
    else if (sw == "fa3") add = fa3_grid(false);
    else if (sw == "fa3_causal") add = fa3_grid(true);
    else return fail(Error(ErrorCode::invalid_argument, "unknown sweep " + sw));
    shapes.insert(shapes.end(), add.begin(), add.end());
  }
  for (const auto& t : shape_texts) {
    auto s = parse_shape(t);
    if (!s.ok()) return fail(s.error());
    shapes.push_back(*s);
  }
  auto dev = cuda::device_info(0);
  if (!dev.ok()) return fail(dev.error());
  auto ctx = cuda::ContextScope::enter(0);
  if (!ctx.ok()) return fail(ctx.error());
  auto rt = Runtime::create();
  if (!rt.ok()) return fail(rt.error());
  Runtime& runtime = **rt;
  std::ofstream file;
  if (!out_path.empty()) file.open(out_path, std::ios::app);
  auto emit = [&](const std::string& line) {
    if (file.is_open()) file << line << "\n" << std::flush;
    fmt::print("{}\n", line);
  };

  std::mt19937 rng(1234);
  for (const Shape& s : shapes) {
    AttentionProblem proto = problem_for(s, *dtype, Tensors{}, false);
    // Rotate input sets so that their total exceeds the L2 several times over (at most 8 sets).
    const double set_bytes = 2.0 * (double(s.batch) * s.sq * s.hq * s.d * 2 + 2.0 * s.batch * s.sk * s.hkv * s.d);
    const int sets = std::clamp(int(std::ceil(240e6 / set_bytes)), 1, 8);
    std::vector<Tensors> tensors;
    for (int i = 0; i < sets; ++i) {
      auto t = make_tensors(s, *dtype, rng);
      if (!t.ok()) return fail(t.error());
      tensors.push_back(std::move(*t));
    }
    // Reference output once per shape (skipped above 8k keys: the naive kernel would dominate the run).
    std::vector<float> ref;
    const bool check = double(s.sq) * s.sk * s.hq <= 4096.0 * 4096 * 32;
    if (check) {
      auto st = runtime.forward(problem_for(s, *dtype, tensors[0], false), dispatch::naive_config(*dtype, s.d, s.mask, dev->arch));
      if (!st.ok()) return fail(st.error());
      auto r = read_o(tensors[0], *dtype);
      if (!r.ok()) return fail(r.error());
      ref = std::move(*r);
    }
    std::vector<KernelConfig> configs;
    if (config_texts.empty()) {
      auto c = runtime.select(problem_for(s, *dtype, tensors[0], false));
      if (!c.ok()) return fail(c.error());
      configs.push_back(*c);
    }
    for (const auto& text : config_texts) {
      std::vector<std::string> pairs;
      std::istringstream ss(text);
      for (std::string tok; ss >> tok;) pairs.push_back(tok);
      auto c = config_from_pairs(pairs);
      if (!c.ok()) return fail(c.error());
      c->arch = dev->arch, c->dtype = *dtype, c->head_dim = s.d, c->mask = s.mask;
      configs.push_back(*c);
    }
    for (const auto& config : configs) {
      auto run = [&](int i) { return runtime.forward(problem_for(s, *dtype, tensors[i % sets], false), config); };
      auto compiled = runtime.compile(config);
      if (!compiled.ok()) {
        emit(fmt::format(R"({{"shape":"{}","config":"{}","error":{}}})", fmt::format("{},{},{},{},{},{},{}", s.batch, s.sq, s.sk, s.hq, s.hkv, s.d, to_string(s.mask)),
                         readable_name(config), nlohmann::json(compiled.error().to_string()).dump()));
        continue;
      }
      double err = -1;
      if (check) {
        if (auto st = tensors[0].o.fill_bytes(0xff); !st.ok()) return fail(st.error());
        if (auto st = run(0); !st.ok()) return fail(st.error());
        auto o = read_o(tensors[0], *dtype);
        if (!o.ok()) return fail(o.error());
        err = rel_l2(*o, ref);
      }
      for (int i = 0; i < warmup; ++i)
        if (auto st = run(i); !st.ok()) return fail(st.error());
      std::vector<float> times;
      auto timer = cuda::EventTimer::create();
      if (!timer.ok()) return fail(timer.error());
      // Each sample is `calls` launches back to back (about 2 ms of work), so the GPU never idles between
      // kernels waiting for the host: one launch per event pair with a synchronize after it let the GPU cool
      // and overstated sustained throughput (bench/NOTES.md, 2026-11-29).
      auto sample = [&](int first, int calls) -> Result<float> {
        FLASHJIT_TRY(timer->start(nullptr));
        for (int c = 0; c < calls; ++c) FLASHJIT_TRY(run(first + c));
        FLASHJIT_TRY(timer->stop(nullptr));
        auto ms = timer->elapsed_ms();
        if (!ms.ok()) return ms.error();
        return *ms / calls;
      };
      auto probe = sample(0, 1);
      if (!probe.ok()) return fail(probe.error());
      const int calls = std::clamp(static_cast<int>(std::ceil(2.0 / std::max(*probe, 1e-4f))), 2, 256);
      for (int i = 0; i < iters; ++i) {
        auto ms = sample(i * calls, calls);
        if (!ms.ok()) return fail(ms.error());
        times.push_back(*ms);
      }
      std::sort(times.begin(), times.end());
      const double median = times[times.size() / 2];
      const double tflops = attention_flops(proto) / (median * 1e-3) / 1e12;
      emit(fmt::format(
          R"({{"impl":"flashjit","shape":"{},{},{},{},{},{},{}","dtype":"{}","config":"{}","median_ms":{:.5f},"min_ms":{:.5f},"tflops":{:.1f},"rel_l2":{:.3e},"registers":{},"spill_bytes":{},"compile_ms":{:.0f}}})",
          s.batch, s.sq, s.sk, s.hq, s.hkv, s.d, to_string(s.mask), to_string(*dtype), readable_name(config), median,
          times.front(), tflops, err, compiled->ptxas.registers, compiled->ptxas.spill_stores + compiled->ptxas.spill_loads,
          compiled->compile_ms));
    }
  }

  if (overheads) {
    // Host cost of a call on an in-process hit: the median over rounds of 200 calls of a small problem, host
    // clock only (200 calls of at most two kernels each stay within the device's launch queue, so the host
    // never waits for the GPU inside a round).
    auto host_us = [&](auto&& call) -> Result<double> {
      for (int i = 0; i < 20; ++i) FLASHJIT_TRY(call());
      std::vector<double> rounds;
      for (int r = 0; r < 9; ++r) {
        FLASHJIT_TRY(cuda::check((*cuda::api())->cuCtxSynchronize(), "cuCtxSynchronize"));
        const int n = 200;
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < n; ++i) FLASHJIT_TRY(call());
        auto t1 = std::chrono::steady_clock::now();
        rounds.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / n);
      }
      FLASHJIT_TRY(cuda::check((*cuda::api())->cuCtxSynchronize(), "cuCtxSynchronize"));
      std::nth_element(rounds.begin(), rounds.begin() + rounds.size() / 2, rounds.end());
      return rounds[rounds.size() / 2];
    };
    Shape tiny{1, 1, 64, 1, 1, 64, MaskKind::none};
    auto t = make_tensors(tiny, *dtype, rng);
    if (!t.ok()) return fail(t.error());
    AttentionProblem p = problem_for(tiny, *dtype, *t, false);
    auto forward_us = host_us([&] { return runtime.forward(p); });
    if (!forward_us.ok()) return fail(forward_us.error());
    // Decode, B1 Sk 512 H32/KV8 D128 on a contiguous cache: one kernel (one split), and split kernel +
    // combine kernel (four splits) through the runtime's workspace.
    Shape dshape{1, 1, 512, 32, 8, 128, MaskKind::none};
    auto dt = make_tensors(dshape, *dtype, rng);
    if (!dt.ok()) return fail(dt.error());
    auto lens = cuda::DeviceBuffer::allocate(sizeof(int));
    if (!lens.ok()) return fail(lens.error());
    const int len = dshape.sk;
    if (auto st = lens->upload(&len, sizeof len); !st.ok()) return fail(st.error());
    DecodeProblem d;
    d.dtype = *dtype, d.heads_q = dshape.hq, d.heads_kv = dshape.hkv, d.head_dim = dshape.d;
    d.q = dt->q.get(), d.o = dt->o.get(), d.k_cache = dt->k.get(), d.v_cache = dt->v.get();
    d.seqlens_k = static_cast<const int*>(lens->get()), d.max_seqlen_k = dshape.sk;
    d.num_splits = 1;
    auto decode1_us = host_us([&] { return runtime.decode(d); });
    if (!decode1_us.ok()) return fail(decode1_us.error());
    d.num_splits = 4;
    auto decode4_us = host_us([&] { return runtime.decode(d); });
    if (!decode4_us.ok()) return fail(decode4_us.error());
    // Disk-cache hit -> launchable: a fresh Runtime (empty in-process tables) running an already cached kernel.
    auto rt2 = Runtime::create();
    if (!rt2.ok()) return fail(rt2.error());
    auto t2 = std::chrono::steady_clock::now();
    if (auto st = (*rt2)->forward(p); !st.ok()) return fail(st.error());
    auto t3 = std::chrono::steady_clock::now();
    const double load_ms = std::chrono::duration<double, std::milli>(t3 - t2).count();
    emit(fmt::format(R"({{"overheads":{{"forward_host_us":{:.2f},"decode_host_us":{:.2f},)"
                     R"("decode_split4_host_us":{:.2f},"cache_hit_to_launch_ms":{:.2f}}}}})",
                     *forward_us, *decode1_us, *decode4_us, load_ms));
  }
  return 0;
}
