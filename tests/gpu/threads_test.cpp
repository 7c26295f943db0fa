// One Runtime serving eight host threads, as in an inference server: each thread launches decodes (split keys,
// merged by the combine kernel through the runtime's workspace), a prefill and a merge back to back, with no
// host synchronization between them, on its own stream, on one stream shared by every thread of its device,
// on the legacy default stream, or on the per-thread default stream; with several GPUs the threads spread over
// them. The Runtime starts on an empty kernel cache, so the first round compiles and loads its kernels while
// other threads ask for the same ones and launch. Every result is checked against float64, every round.
//
// Only these: flashjit_gpu_tests "[threads]"
#include <fmt/format.h>

#include <algorithm>
#include <barrier>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "decode_harness.hpp"
#include "harness.hpp"
#include "support/catch.hpp"
#include "support/temp_dir.hpp"

using namespace flashjit;
using namespace flashjit::test;

namespace {

constexpr int kThreads = 8;
constexpr int kRounds = 3;

enum class Streams { own, shared, legacy, per_thread };

const char* to_string(Streams s) {
  switch (s) {
    case Streams::own: return "a stream per thread";
    case Streams::shared: return "one stream shared by every thread of a device";
    case Streams::legacy: return "the legacy default stream (as nullptr and as CU_STREAM_LEGACY)";
    case Streams::per_thread: return "the per-thread default stream";
  }
  return "?";
}

// A non-blocking stream of the current context.
class Stream {
 public:
  static Result<Stream> create() {
    Stream s;
    FLASHJIT_TRY(cuda::check((*cuda::api())->cuStreamCreate(&s.handle_, CU_STREAM_NON_BLOCKING), "cuStreamCreate"));
    return s;
  }
  Stream(Stream&& o) noexcept : handle_(std::exchange(o.handle_, nullptr)) {}
  Stream& operator=(Stream&&) = delete;
  ~Stream() {
    if (handle_) (*cuda::api())->cuStreamDestroy(handle_);
  }
  CUstream get() const { return handle_; }

 private:
  Stream() = default;
  CUstream handle_ = nullptr;
};

// Split counts from 2 to 32 (so workspaces of different sizes on one stream), planned ones, contiguous and
// paged caches (1-, 16- and 64-token pages), q_len 1 and 4, head dims 64 / 128 / 256, bf16 and fp16.
std::vector<DecodeShape> decode_shapes() {
  auto shape = [](DType dtype, int head_dim, int heads_q, int heads_kv, int q_len, std::vector<int> lens,
                  KvLayout layout, int page_size, int splits) {
    DecodeShape s;
    s.dtype = dtype, s.head_dim = head_dim, s.heads_q = heads_q, s.heads_kv = heads_kv, s.q_len = q_len;
    s.seqlens = std::move(lens), s.layout = layout, s.page_size = page_size, s.num_splits = splits;
    return s;
  };
  std::vector<DecodeShape> v;
  v.push_back(shape(DType::bf16, 128, 8, 2, 1, {300, 4097, 7}, KvLayout::contiguous, 0, 7));
  v.push_back(shape(DType::bf16, 128, 16, 2, 4, {1000, 65, 2000}, KvLayout::paged, 16, 2));
  v.push_back(shape(DType::fp16, 64, 3, 3, 1, {513, 1, 2048}, KvLayout::paged, 1, 0));
  v.push_back(shape(DType::bf16, 128, 32, 8, 1, {16384}, KvLayout::contiguous, 0, 0));
  v.push_back(shape(DType::bf16, 256, 8, 2, 1, {700, 3000}, KvLayout::paged, 64, 32));
  v.push_back(shape(DType::bf16, 128, 8, 2, 1, {1500, 30, 800, 1200}, KvLayout::contiguous, 0, 3));
  v.back().with_lse = false;
  v.back().split_merge = SplitMerge::combine_kernel;
  return v;
}

Shape prefill_shape() {
  Shape s;
  s.seqlen_q = 200, s.seqlen_k = 777, s.heads_q = 8, s.heads_kv = 2, s.head_dim = 128;
  s.mask = MaskKind::causal;
  return s;
}

MergeShape merge_shape() {
  MergeShape s;
  s.num_states = 3, s.seqlen = 4, s.heads = 4, s.keys = {100, 1000, 9};
  return s;
}

// One thread's problems (on its device), their float64 references and what went wrong.
class Worker {
 public:
  // Thread `index` of kThreads, on device index % devices.
  Worker(int index, int devices, Runtime& rt, Streams streams)
      : index_(index), device_(index % devices), ordinal_(index / devices), rt_(rt), streams_(streams) {}

  // Runs on its own thread; `sync` lines the threads up: once the shared streams exist, before each round's
  // launches, and before the shared streams go. shared[d]: the stream of device d that its threads share
  // (Streams::shared), created and destroyed by the device's first thread, in its context.
  void run(std::barrier<>& sync, std::vector<CUstream>& shared) {
    auto scope = cuda::ContextScope::enter(device_);
    if (!scope.ok()) fail(fmt::format("entering device {}: {}", device_, scope.error().to_string()));
    bool ready = scope.ok() && setup(shared);
    sync.arrive_and_wait();
    ready = ready && pick_stream(shared);
    for (int round = 0; round < kRounds; ++round) {
      const bool poisoned = ready && poison(round);
      sync.arrive_and_wait();
      if (poisoned && launch(round)) check(round);
    }
    sync.arrive_and_wait();
    // Device memory and streams go in this thread, where their context is current.
    decodes_.clear();
    prefill_.reset();
    merge_.reset();
    own_.reset();
    if (owns_shared()) shared[device_] = nullptr;
    shared_.reset();
  }

  const std::vector<std::string>& failures() const { return failures_; }

 private:
  void fail(const std::string& what) {
    failures_.push_back(fmt::format("thread {} (device {}): {}", index_, device_, what));
  }

  std::uint64_t seed(int i) const { return 0x7e57ull * 1000003 + index_ * 64 + i; }
  bool owns_shared() const { return streams_ == Streams::shared && ordinal_ == 0; }

  bool pick_stream(const std::vector<CUstream>& shared) {
    stream_ = streams_ == Streams::own       ? own_->get()
              : streams_ == Streams::shared  ? shared[device_]
              : streams_ == Streams::legacy  ? (ordinal_ % 2 ? CU_STREAM_LEGACY : nullptr)  // one stream, two names
                                             : CU_STREAM_PER_THREAD;
    if (streams_ == Streams::shared && stream_ == nullptr) fail("the device's shared stream was not created");
    return streams_ != Streams::shared || stream_ != nullptr;
  }

  bool setup(std::vector<CUstream>& shared) {
    if (streams_ == Streams::own || owns_shared()) {
      auto s = Stream::create();
      if (!s.ok()) return fail(s.error().to_string()), false;
      auto& slot = streams_ == Streams::own ? own_ : shared_;
      slot.emplace(std::move(*s));
      if (owns_shared()) shared[device_] = shared_->get();
    }
    for (const DecodeShape& s : decode_shapes()) {
      auto c = DecodeCase::make(s, seed(static_cast<int>(decodes_.size())));
      if (!c.ok()) return fail(c.error().to_string()), false;
      DecodeRef r;
      c->reference(r.o, r.lse);
      decodes_.push_back(std::move(*c));
      decode_refs_.push_back(std::move(r));
    }
    auto p = Case::make(prefill_shape(), seed(32));
    if (!p.ok()) return fail(p.error().to_string()), false;
    prefill_ = std::make_unique<Case>(std::move(*p));
    reference_attention(prefill_->shape(), prefill_->q(), prefill_->k(), prefill_->v(), prefill_o_, prefill_lse_);
    auto m = MergeCase::make(merge_shape(), seed(33));
    if (!m.ok()) return fail(m.error().to_string()), false;
    merge_ = std::make_unique<MergeCase>(std::move(*m));
    return true;
  }

  // Fresh NaN outputs, on the device before any launch of the round (the poisoning is not on their stream).
  bool poison(int round) {
    Status st;
    for (auto& c : decodes_) st = st.ok() ? c.poison_outputs() : st;
    if (st.ok()) st = prefill_->poison_outputs();
    if (st.ok()) st = merge_->poison_outputs();
    if (st.ok()) st = cuda::check((*cuda::api())->cuCtxSynchronize(), "cuCtxSynchronize");
    if (!st.ok()) fail(fmt::format("round {}: poisoning the outputs: {}", round, st.error().to_string()));
    return st.ok();
  }

  // Every problem once, back to back, starting at a different one per thread and round.
  bool launch(int round) {
    const int n = static_cast<int>(decodes_.size()) + 2;
    for (int i = 0; i < n; ++i) {
      const int item = (index_ + round + i) % n;
      Status st;
      std::string what;
      if (item < static_cast<int>(decodes_.size())) {
        DecodeProblem p = decodes_[item].problem();
        p.stream = stream_;
        st = rt_.decode(p);
        what = "decode " + decodes_[item].shape().to_string();
      } else if (item == n - 2) {
        AttentionProblem p = prefill_->problem();
        p.stream = stream_;
        st = rt_.forward(p);
        what = "prefill " + prefill_->shape().to_string();
      } else {
        MergeProblem p = merge_->problem();
        p.stream = stream_;
        st = rt_.merge(p);
        what = "merge " + merge_->shape().to_string();
      }
      if (!st.ok()) return fail(fmt::format("round {}: {}: {}", round, what, st.error().to_string())), false;
    }
    return true;
  }

  void check(int round) {
    for (std::size_t i = 0; i < decodes_.size(); ++i) {
      const DecodeCase& c = decodes_[i];
      std::vector<float> o, lse;
      std::int64_t stray = 0;
      if (auto st = c.read_outputs(o, lse, stray); !st.ok()) return fail(st.error().to_string());
      const SequenceCheck r = check_sequences(c.shape().output_shape(), o, lse, decode_refs_[i].o,
                                              decode_refs_[i].lse, tolerance(c.shape().dtype), kLseTolerance);
      if (!r.failures.empty() || stray != 0)
        fail(fmt::format("round {}: decode {}: {} stray writes\n{}", round, c.shape().to_string(), stray, r.failures));
    }
    {
      std::vector<float> o, lse;
      if (auto st = prefill_->read_outputs(o, lse); !st.ok()) return fail(st.error().to_string());
      const Comparison cmp = compare(prefill_->shape(), o, lse, prefill_o_, prefill_lse_);
      if (cmp.nan_count != 0 || cmp.empty_row_violations != 0 || cmp.rel_l2 > tolerance(prefill_->shape().dtype) ||
          cmp.lse_max_abs > kPrefillLseTolerance)
        fail(fmt::format("round {}: prefill {}: {}", round, prefill_->shape().to_string(), cmp.to_string()));
    }
    {
      std::vector<float> o, lse;
      std::int64_t stray = 0;
      if (auto st = merge_->read_outputs(o, lse, stray); !st.ok()) return fail(st.error().to_string());
      const MergeShape& s = merge_->shape();
      const SequenceCheck r = check_sequences(s.output_shape(), o, lse, merge_->union_o(), merge_->union_lse(),
                                              tolerance(s.dtype), kLseTolerance);
      if (!r.failures.empty() || stray != 0)
        fail(fmt::format("round {}: merge {}: {} stray writes\n{}", round, s.to_string(), stray, r.failures));
    }
  }

  struct DecodeRef {
    std::vector<double> o, lse;
  };

  int index_, device_, ordinal_;  // ordinal_: among the threads of the device
  Runtime& rt_;
  Streams streams_;
  std::optional<Stream> own_, shared_;
  CUstream stream_ = nullptr;
  std::vector<DecodeCase> decodes_;
  std::vector<DecodeRef> decode_refs_;
  std::unique_ptr<Case> prefill_;
  std::vector<double> prefill_o_, prefill_lse_;
  std::unique_ptr<MergeCase> merge_;
  std::vector<std::string> failures_;
};

}  // namespace

TEST_CASE("runtime: eight threads share one Runtime from an empty cache; decodes, prefills and merges match float64",
          "[threads][decode][merge][gpu]") {
  const Streams streams = GENERATE(Streams::own, Streams::shared, Streams::legacy, Streams::per_thread);
  auto count = cuda::device_count();
  REQUIRE(count.ok());
  const int devices = std::min(*count, kThreads);  // thread t on device t % devices
  INFO(kThreads << " threads over " << devices << " device(s) on " << to_string(streams) << ", " << kRounds
                << " rounds");
  TempDir cache("flashjit-threads-test");
  RuntimeOptions options;
  options.cache_dir = cache.path;
  auto rt = Runtime::create(options);
  if (!rt.ok()) FAIL(rt.error().to_string());

  std::vector<CUstream> shared(devices, nullptr);
  std::vector<std::unique_ptr<Worker>> workers;
  for (int t = 0; t < kThreads; ++t) workers.push_back(std::make_unique<Worker>(t, devices, **rt, streams));
  std::barrier<> sync(kThreads);
  std::vector<std::thread> threads;
  for (auto& w : workers) threads.emplace_back([&sync, &shared, w = w.get()] { w->run(sync, shared); });
  for (auto& t : threads) t.join();

  std::string failures;
  for (const auto& w : workers)
    for (const auto& f : w->failures()) failures += f + "\n";
  INFO(failures);
  CHECK(failures.empty());
  auto stats = (*rt)->cache_stats();
  REQUIRE(stats.ok());
  CHECK(stats->entries > 0);  // compiled in this test, stored once each
}
