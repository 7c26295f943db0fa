// The soak run of issue 29: THREADS threads x STREAMS streams for SECONDS of mixed prefill, varlen, decode and
// merge calls with random shapes on one Runtime, about half of them on shapes not seen before (new kernels:
// cold compiles in the worker process, module loads), the rest on a few warm shapes. Every CHECK_EVERY-th call
// of a thread is read back and compared with the float64 reference of the GPU test harness. Host RSS and device
// memory are sampled every second; after the warm-up (the first quarter) both must stay flat.
//
//   build/tests/flashjit_soak --out DIR [--seconds 120] [--threads 8] [--streams 4] [--seed 1] [--check-every 8]
//
// Writes DIR/soak.log (every failure, the summary), DIR/memory.csv (t, host RSS MiB, device used MiB),
// DIR/memory.svg (both over time) and DIR/summary.json; exits 1 on any error, mismatch or memory growth.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cuda/driver.hpp"
#include "gpu/decode_harness.hpp"
#include "gpu/harness.hpp"

namespace fs = std::filesystem;
using namespace flashjit;
using namespace flashjit::test;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  fs::path out;
  double seconds = 120;
  int threads = 8, streams = 4, check_every = 8;
  std::uint64_t seed = 1;
};

struct Sample {
  double t, rss_mib, device_mib;
};

std::mutex g_log_mutex;
std::ofstream g_log;
std::atomic<long> g_calls[4], g_checked{0}, g_failures{0};
std::mutex g_seen_mutex;
std::set<std::string> g_seen;
std::atomic<long> g_new_shapes{0};
const char* kKinds[] = {"prefill", "varlen", "decode", "merge"};

void log_line(const std::string& line) {
  std::lock_guard lock(g_log_mutex);
  g_log << line << std::endl;
  std::fprintf(stderr, "%s\n", line.c_str());
}

void fail(const std::string& what) {
  ++g_failures;
  log_line("FAIL " + what);
}

double rss_mib() {
  std::ifstream in("/proc/self/statm");
  long pages = 0, resident = 0;
  in >> pages >> resident;
  return resident * static_cast<double>(::sysconf(_SC_PAGESIZE)) / (1 << 20);
}

double device_used_mib() {
  std::size_t free = 0, total = 0;
  if ((*cuda::api())->cuMemGetInfo(&free, &total) != CUDA_SUCCESS) return -1;
  return static_cast<double>(total - free) / (1 << 20);
}

bool first_time(const std::string& key) {
  std::lock_guard lock(g_seen_mutex);
  return g_seen.insert(key).second;
}

// A random prefill shape; `warm` picks one of four fixed ones.
Shape prefill_shape(std::mt19937_64& rng, bool warm) {
  auto pick = [&](std::initializer_list<int> v) { return *(v.begin() + rng() % v.size()); };
  Shape s;
  if (warm) {
    const int w = static_cast<int>(rng() % 4);
    s.head_dim = w < 2 ? 128 : 64, s.mask = w % 2 ? MaskKind::causal : MaskKind::none;
    s.batch = 1, s.seqlen_q = s.seqlen_k = 256, s.heads_q = 4, s.heads_kv = 2;
    return s;
  }
  s.dtype = rng() % 2 ? DType::bf16 : DType::fp16;
  s.head_dim = pick({64, 96, 128, 192, 256});
  const MaskCase& m = kMasks[rng() % std::size(kMasks)];
  s.mask = m.kind, s.window_left = m.left, s.window_right = m.right, s.chunk_size = m.chunk;
  s.batch = pick({1, 2, 3});
  s.seqlen_q = pick({1, 17, 64, 200, 384});
  s.seqlen_k = pick({1, 64, 129, 256, 512});
  s.heads_kv = pick({1, 2});
  s.heads_q = s.heads_kv * pick({1, 2, 4});
  return s;
}

DecodeShape decode_shape(std::mt19937_64& rng, bool warm) {
  auto pick = [&](std::initializer_list<int> v) { return *(v.begin() + rng() % v.size()); };
  DecodeShape s;
  if (warm) {
    s.seqlens = {300, 1000};
    return s;
  }
  s.dtype = rng() % 2 ? DType::bf16 : DType::fp16;
  s.head_dim = pick({64, 128, 256});
  s.heads_kv = pick({1, 2});
  s.heads_q = s.heads_kv * pick({1, 4, 8});
  s.q_len = pick({1, 1, 2, 4});
  s.layout = rng() % 2 ? KvLayout::paged : KvLayout::contiguous;
  s.page_size = pick({1, 16, 64});
  const int batch = pick({1, 2, 5});
  s.seqlens.clear();
  for (int b = 0; b < batch; ++b) s.seqlens.push_back(s.q_len + static_cast<int>(rng() % 3000));
  const int mask = static_cast<int>(rng() % 3);
  if (mask == 1) s.window_left = pick({16, 300});
  if (mask == 2) s.chunk_size = pick({64, 500});
  return s;
}

MergeShape merge_shape(std::mt19937_64& rng, bool warm) {
  auto pick = [&](std::initializer_list<int> v) { return *(v.begin() + rng() % v.size()); };
  MergeShape s;
  if (warm) return s;
  s.dtype = rng() % 2 ? DType::bf16 : DType::fp16;
  s.head_dim = pick({64, 128, 256});
  s.seqlen = pick({1, 4, 16});
  s.heads = pick({2, 8});
  s.num_states = pick({1, 2, 3, 5});
  s.keys.clear();
  for (int b = 0, n = pick({1, 3}); b < n; ++b) s.keys.push_back(1 + static_cast<int>(rng() % 400));
  return s;
}

std::string describe(const Comparison& c) { return c.to_string(); }

bool bad(const Comparison& c, DType dtype, double lse_tolerance) {
  return c.nan_count > 0 || c.empty_row_violations > 0 || !(c.rel_l2 <= tolerance(dtype)) ||
         !(c.lse_max_abs <= lse_tolerance);
}

// One call of a kind; `check`: read back and compare with the reference.
void one_call(Runtime& rt, int kind, std::mt19937_64& rng, CUstream stream, bool check, bool warm) {
  const std::uint64_t seed = rng();
  if (kind == 0 || kind == 1) {
    Shape s = prefill_shape(rng, warm);
    if (kind == 1) s.mask = s.mask == MaskKind::causal ? MaskKind::causal : MaskKind::none, s.chunk_size = 0;
    if (kind == 1) s.window_left = s.window_right = -1;
    if (first_time(fmt::format("{} {}", kKinds[kind], s.to_string()))) ++g_new_shapes;
    auto c = Case::make(s, seed);
    if (!c.ok()) return fail(fmt::format("{} {}: {}", kKinds[kind], s.to_string(), c.error().to_string()));
    AttentionProblem p = c->problem();
    p.stream = stream;
    cuda::DeviceBuffer cu;
    if (kind == 1) {
      // The batched tensors packed: equal lengths, so the batched reference holds (LSE layouts differ: none).
      std::vector<int> offsets;
      for (int b = 0; b <= s.batch; ++b) offsets.push_back(b * s.seqlen_q);
      std::vector<int> offsets_k;
      for (int b = 0; b <= s.batch; ++b) offsets_k.push_back(b * s.seqlen_k);
      auto buf = cuda::DeviceBuffer::allocate(2 * offsets.size() * sizeof(int));
      if (!buf.ok()) return fail("varlen offsets: " + buf.error().to_string());
      cu = std::move(*buf);
      offsets.insert(offsets.end(), offsets_k.begin(), offsets_k.end());
      if (auto st = cu.upload(offsets.data(), offsets.size() * sizeof(int)); !st.ok())
        return fail("varlen offsets: " + st.error().to_string());
      p.cu_seqlens_q = static_cast<const int*>(cu.get());
      p.cu_seqlens_k = p.cu_seqlens_q + s.batch + 1;
      p.total_q = s.batch * s.seqlen_q, p.total_k = s.batch * s.seqlen_k;
      p.batch = s.batch;
      p.lse = nullptr;
      p.check_seqlens = rng() % 4 == 0;
    }
    if (auto st = rt.forward(p); !st.ok())
      return fail(fmt::format("{} {}: {}", kKinds[kind], s.to_string(), st.error().to_string()));
    if (!check) {
      (void)(*cuda::api())->cuStreamSynchronize(stream);  // the buffers are freed next
      return;
    }
    std::vector<float> o, lse;
    if (auto st = c->read_outputs(o, lse); !st.ok()) return fail("read back: " + st.error().to_string());
    std::vector<double> ro, rl;
    reference_attention(s, c->q(), c->k(), c->v(), ro, rl);
    if (kind == 1) std::fill(lse.begin(), lse.end(), 0.f), std::fill(rl.begin(), rl.end(), 0.0);
    const Comparison cmp = compare(s, o, lse, ro, rl);
    ++g_checked;
    if (bad(cmp, s.dtype, kPrefillLseTolerance))
      fail(fmt::format("{} {} differs from the reference: {}", kKinds[kind], s.to_string(), describe(cmp)));
    return;
  }
  if (kind == 2) {
    DecodeShape s = decode_shape(rng, warm);
    if (first_time("decode " + s.to_string())) ++g_new_shapes;
    auto c = DecodeCase::make(s, seed);
    if (!c.ok()) return fail(fmt::format("decode {}: {}", s.to_string(), c.error().to_string()));
    DecodeProblem p = c->problem();
    p.stream = stream;
    p.check_pages = rng() % 4 == 0;
    if (auto st = rt.decode(p); !st.ok()) return fail(fmt::format("decode {}: {}", s.to_string(), st.error().to_string()));
    if (!check) {
      (void)(*cuda::api())->cuStreamSynchronize(stream);
      return;
    }
    std::vector<float> o, lse;
    std::int64_t stray = 0;
    if (auto st = c->read_outputs(o, lse, stray); !st.ok()) return fail("read back: " + st.error().to_string());
    std::vector<double> ro, rl;
    c->reference(ro, rl);
    const Comparison cmp = compare(s.output_shape(), o, lse, ro, rl);
    ++g_checked;
    if (stray != 0 || bad(cmp, s.dtype, kLseTolerance))
      fail(fmt::format("decode {} differs from the reference ({} stray writes): {}", s.to_string(), stray, describe(cmp)));
    return;
  }
  MergeShape s = merge_shape(rng, warm);
  if (first_time("merge " + s.to_string())) ++g_new_shapes;
  auto c = MergeCase::make(s, seed);
  if (!c.ok()) return fail(fmt::format("merge {}: {}", s.to_string(), c.error().to_string()));
  MergeProblem p = c->problem();
  p.stream = stream;
  if (auto st = rt.merge(p); !st.ok()) return fail(fmt::format("merge {}: {}", s.to_string(), st.error().to_string()));
  if (!check) {
    (void)(*cuda::api())->cuStreamSynchronize(stream);
    return;
  }
  std::vector<float> o, lse;
  std::int64_t stray = 0;
  if (auto st = c->read_outputs(o, lse, stray); !st.ok()) return fail("read back: " + st.error().to_string());
  const Comparison cmp = compare(s.output_shape(), o, lse, c->union_o(), c->union_lse());
  ++g_checked;
  if (stray != 0 || bad(cmp, s.dtype, kLseTolerance))
    fail(fmt::format("merge {} differs from the reference ({} stray writes): {}", s.to_string(), stray, describe(cmp)));
}

void worker(Runtime& rt, const Options& opt, int index, Clock::time_point end) {
  auto scope = cuda::ContextScope::enter(0);
  if (!scope.ok()) return fail("thread context: " + scope.error().to_string());
  std::vector<CUstream> streams(opt.streams);
  for (auto& s : streams)
    if ((*cuda::api())->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) return fail("cuStreamCreate");
  std::mt19937_64 rng(opt.seed * 1000 + index);
  for (long n = 0; Clock::now() < end && g_failures < 20; ++n) {
    const int kind = static_cast<int>(rng() % 4);
    const bool warm = rng() % 2 == 0;
    one_call(rt, kind, rng, streams[n % streams.size()], n % opt.check_every == 0, warm);
    ++g_calls[kind];
  }
  for (auto s : streams) (*cuda::api())->cuStreamDestroy(s);
}

// A growth verdict: the mean of the last quarter against the mean of the second quarter (after warm-up).
struct Growth {
  double host = 0, device = 0;
};
Growth growth(const std::vector<Sample>& samples) {
  Growth g;
  const std::size_t n = samples.size();
  if (n < 8) return g;
  auto mean = [&](std::size_t from, std::size_t to, auto field) {
    double sum = 0;
    for (std::size_t i = from; i < to; ++i) sum += samples[i].*field;
    return sum / static_cast<double>(to - from);
  };
  g.host = mean(3 * n / 4, n, &Sample::rss_mib) - mean(n / 4, n / 2, &Sample::rss_mib);
  g.device = mean(3 * n / 4, n, &Sample::device_mib) - mean(n / 4, n / 2, &Sample::device_mib);
  return g;
}

void write_svg(const fs::path& path, const std::vector<Sample>& samples) {
  const double w = 800, h = 300, pad = 50;
  double tmax = 1, ymax = 1;
  for (const auto& s : samples) tmax = std::max(tmax, s.t), ymax = std::max({ymax, s.rss_mib, s.device_mib});
  auto line = [&](auto field, const char* color) {
    std::string pts;
    for (const auto& s : samples)
      pts += fmt::format("{:.1f},{:.1f} ", pad + (w - 2 * pad) * s.t / tmax, h - pad - (h - 2 * pad) * (s.*field) / ymax);
    return fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"/>\n", color, pts);
  };
  std::ofstream svg(path);
  svg << fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\">\n", w, h)
      << fmt::format("<rect width=\"{}\" height=\"{}\" fill=\"white\"/>\n", w, h)
      << line(&Sample::rss_mib, "#1f77b4") << line(&Sample::device_mib, "#d62728")
      << fmt::format("<text x=\"{}\" y=\"20\" font-size=\"14\">flashjit soak: host RSS (blue) and device memory used "
                     "(red), MiB; max {:.0f} MiB over {:.0f} s</text>\n",
                     pad, ymax, tmax)
      << "</svg>\n";
}

int usage() {
  std::fprintf(stderr, "usage: flashjit_soak --out DIR [--seconds S] [--threads N] [--streams N] [--seed N] "
                       "[--check-every N]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return usage();
    const std::string v = argv[++i];
    if (a == "--out") opt.out = v;
    else if (a == "--seconds") opt.seconds = std::stod(v);
    else if (a == "--threads") opt.threads = std::stoi(v);
    else if (a == "--streams") opt.streams = std::stoi(v);
    else if (a == "--seed") opt.seed = std::stoull(v);
    else if (a == "--check-every") opt.check_every = std::max(1, std::stoi(v));
    else return usage();
  }
  if (opt.out.empty()) return usage();
  fs::create_directories(opt.out);
  g_log.open(opt.out / "soak.log");
  ensure_context();
  Runtime& rt = runtime();
  log_line(fmt::format("soak: {} threads x {} streams for {:.0f} s, seed {}, cache {}", opt.threads, opt.streams,
                       opt.seconds, opt.seed, rt.cache_dir().string()));

  std::vector<Sample> samples;
  std::atomic<bool> done{false};
  const auto t0 = Clock::now();
  std::thread sampler([&] {
    auto scope = cuda::ContextScope::enter(0);
    while (!done) {
      samples.push_back({std::chrono::duration<double>(Clock::now() - t0).count(), rss_mib(), device_used_mib()});
      for (int i = 0; i < 10 && !done; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  const auto end = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opt.seconds));
  std::vector<std::thread> threads;
  for (int i = 0; i < opt.threads; ++i) threads.emplace_back(worker, std::ref(rt), std::cref(opt), i, end);
  for (auto& t : threads) t.join();
  done = true;
  sampler.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();

  {
    std::ofstream csv(opt.out / "memory.csv");
    csv << "t_s,host_rss_mib,device_used_mib\n";
    for (const auto& s : samples) csv << fmt::format("{:.1f},{:.1f},{:.1f}\n", s.t, s.rss_mib, s.device_mib);
  }
  write_svg(opt.out / "memory.svg", samples);
  const Growth g = growth(samples);
  // Flat: the host within 64 MiB, the device within 512 MiB (new kernels' modules are loaded to the end).
  const bool host_flat = g.host < 64, device_flat = g.device < 512;
  if (!host_flat) fail(fmt::format("host RSS grew {:.0f} MiB after the warm-up", g.host));
  if (!device_flat) fail(fmt::format("device memory grew {:.0f} MiB after the warm-up", g.device));
  const long calls = g_calls[0] + g_calls[1] + g_calls[2] + g_calls[3];
  const std::string summary = fmt::format(
      "{{\"seconds\": {:.1f}, \"threads\": {}, \"streams\": {}, \"calls\": {}, \"prefill\": {}, \"varlen\": {}, "
      "\"decode\": {}, \"merge\": {}, \"new_shapes\": {}, \"checked\": {}, \"failures\": {}, "
      "\"host_growth_mib\": {:.1f}, \"device_growth_mib\": {:.1f}, \"host_flat\": {}, \"device_flat\": {}}}",
      elapsed, opt.threads, opt.streams, calls, g_calls[0].load(), g_calls[1].load(), g_calls[2].load(),
      g_calls[3].load(), g_new_shapes.load(), g_checked.load(), g_failures.load(), g.host, g.device, host_flat,
      device_flat);
  std::ofstream(opt.out / "summary.json") << summary << "\n";
  log_line("summary: " + summary);
  log_line(g_failures == 0 ? "soak passed" : fmt::format("soak FAILED: {} failures", g_failures.load()));
  return g_failures == 0 ? 0 : 1;
}
