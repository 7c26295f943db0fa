// NVRTC compiles of every shipped kernel variant (no GPU needed): generate + compile + options_for for the FA2
// heuristic configs (sm_90a: mask x head_dim x dtype; sm_80: mask x head_dim in bf16), the FA3 heuristic
// configs (sm_90a: mask x {64, 128, 256} x dtype), the reference kernel (sm_90a: mask x {64, 128, 256, 40}
// x dtype) and the varlen variants of the heuristic configs. Each must compile to a non-empty cubin with a ptxas
// report; the heuristic configs must not spill. Plus the error path: a broken source is ErrorCode::compile with
// the NVRTC log.
//
// This is the slow suite (about 190 NVRTC runs). Compiles run on all cores (NVRTC programs are independent)
// and each result is kept for the process, so the test cases that look at the same kernels share one compile.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "codegen/generate.hpp"
#include "compile/nvrtc.hpp"
#include "dispatch/heuristics.hpp"
#include "support/catch.hpp"

using flashjit::Algorithm;
using flashjit::Arch;
using flashjit::AttentionProblem;
using flashjit::DType;
using flashjit::ErrorCode;
using flashjit::KernelConfig;
using flashjit::MaskKind;
using flashjit::Result;
using flashjit::codegen::GeneratedSource;
using flashjit::compile::CompiledKernel;

namespace {

const MaskKind kMasks[] = {MaskKind::none, MaskKind::causal, MaskKind::sliding_window, MaskKind::chunked,
                           MaskKind::chunked_causal};
const Arch kSm80{80, false};
const Arch kSm90a{90, true};

struct Outcome {
  KernelConfig config;
  std::string entry;
  bool generated = false;
  std::string generate_error;
  std::unique_ptr<Result<CompiledKernel>> result;  // null when generation failed
};

// Compiles each config once per process, in parallel; later calls return the stored outcomes.
class CompileCache {
 public:
  static CompileCache& get() {
    static CompileCache cache;
    return cache;
  }

  std::vector<const Outcome*> compile_all(const std::vector<KernelConfig>& configs) {
    std::vector<KernelConfig> todo;
    {
      std::lock_guard lock(mutex_);
      for (const auto& c : configs)
        if (!done_.count(to_json(c)) && std::find(todo.begin(), todo.end(), c) == todo.end()) todo.push_back(c);
    }
    std::vector<std::unique_ptr<Outcome>> fresh(todo.size());
    std::atomic<std::size_t> next{0};
    auto worker = [&] {
      for (std::size_t i; (i = next++) < todo.size();) {
        auto o = std::make_unique<Outcome>();
        o->config = todo[i];
        auto g = flashjit::codegen::generate(todo[i]);
        if (g.ok()) {
          o->generated = true;
          o->entry = g->entry;
          o->result = std::make_unique<Result<CompiledKernel>>(
              flashjit::compile::compile(*g, flashjit::compile::options_for(todo[i].arch), flashjit::log::Logger{}));
        } else {
          o->generate_error = g.error().to_string();
        }
        fresh[i] = std::move(o);
      }
    };
    const unsigned n = std::max(1u, std::min<unsigned>(std::thread::hardware_concurrency(), 8));
    auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < n && t < todo.size(); ++t) threads.emplace_back(worker);
    for (auto& t : threads) t.join();
    seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    compiles_ += todo.size();

    std::lock_guard lock(mutex_);
    for (auto& o : fresh) done_.emplace(to_json(o->config), std::move(o));
    std::vector<const Outcome*> out;
    for (const auto& c : configs) out.push_back(done_.at(to_json(c)).get());
    return out;
  }

  double seconds() const { return seconds_; }
  std::size_t compiles() const { return compiles_; }

 private:
  std::mutex mutex_;
  std::map<std::string, std::unique_ptr<Outcome>> done_;
  double seconds_ = 0;
  std::size_t compiles_ = 0;
};

// The FA2 heuristic's configs for an arch: every mask x the given head dims x the given dtypes.
std::vector<KernelConfig> fa2_configs(const Arch& arch, std::initializer_list<int> head_dims,
                                      std::initializer_list<DType> dtypes) {
  std::vector<KernelConfig> out;
  for (MaskKind m : kMasks)
    for (int d : head_dims)
      for (DType t : dtypes) out.push_back(flashjit::dispatch::fa2_heuristic(t, d, m, arch));
  return out;
}

std::vector<KernelConfig> fa2_sm90a_configs() {
  return fa2_configs(kSm90a, {64, 96, 128, 256}, {DType::bf16, DType::fp16});
}

std::vector<KernelConfig> reference_configs() {
  std::vector<KernelConfig> out;
  for (MaskKind m : kMasks)
    for (int d : {64, 128, 256, 40})
      for (DType t : {DType::bf16, DType::fp16}) out.push_back(flashjit::dispatch::naive_config(t, d, m, kSm90a));
  return out;
}

// Must hold for every kernel that is expected to compile.
void check_compiled(const Outcome& o) {
  INFO(readable_name(o.config));
  INFO(o.generate_error);
  CHECK(o.generated);  // CHECK and return, not REQUIRE: one bad variant must not hide the others
  if (!o.generated) return;
  const auto& r = *o.result;
  if (!r.ok()) FAIL_CHECK(r.error().to_string());
  if (!r.ok()) return;
  INFO(r->log);
  CHECK(!r->cubin.empty());
  CHECK(r->cubin.size() > 4);
  CHECK(r->cubin.compare(0, 4, "\x7f" "ELF") == 0);  // a cubin is an ELF image
  CHECK(r->ptxas.registers > 0);
  CHECK(r->ptxas.registers <= 255);
  CHECK(r->compile_ms > 0);
  CHECK(r->log.find(o.entry) != std::string::npos);  // the ptxas report is about this entry
}

void check_no_spills(const Outcome& o) {
  INFO(readable_name(o.config));
  INFO(o.generate_error);
  CHECK((o.result != nullptr && o.result->ok()));  // reported in detail by the "compiles" test cases
  if (o.result == nullptr || !o.result->ok()) return;
  const auto& r = **o.result;
  INFO(r.log);
  CHECK(r.ptxas.spill_stores == 0);
  CHECK(r.ptxas.spill_loads == 0);
  CHECK(r.ptxas.stack_frame == 0);
}

}  // namespace

TEST_CASE("nvrtc: every FA2 heuristic variant for sm_90a compiles without spills", "[compile]") {
  auto outcomes = CompileCache::get().compile_all(fa2_sm90a_configs());
  REQUIRE(outcomes.size() == 5 * 4 * 2);
  for (const auto* o : outcomes) {
    check_compiled(*o);
    check_no_spills(*o);
  }
}

TEST_CASE("nvrtc: the FA2 heuristic variants for sm_80 (bf16; head_dim 64 96 128) compile without spills",
          "[compile]") {
  auto outcomes = CompileCache::get().compile_all(fa2_configs(kSm80, {64, 96, 128}, {DType::bf16}));
  REQUIRE(outcomes.size() == 5 * 3);
  for (const auto* o : outcomes) {
    check_compiled(*o);
    check_no_spills(*o);
  }
}

// The sm_80 heuristic for head_dim 256 must be a valid, spill-free config (sm_80 has 163 KB of shared memory).
TEST_CASE("nvrtc: the FA2 heuristic variants for sm_80 (bf16; head_dim 256) compile without spills",
          "[compile]") {
  auto outcomes = CompileCache::get().compile_all(fa2_configs(kSm80, {256}, {DType::bf16}));
  REQUIRE(outcomes.size() == 5);
  for (const auto* o : outcomes) {
    check_compiled(*o);
    check_no_spills(*o);
  }
}

std::vector<KernelConfig> fa3_sm90a_configs() {
  std::vector<KernelConfig> out;
  for (MaskKind m : kMasks)
    for (int d : {64, 128, 256})
      for (DType t : {DType::bf16, DType::fp16}) out.push_back(flashjit::dispatch::fa3_heuristic(t, d, m, kSm90a));
  return out;
}

// The kernels choose() picks on sm_90a. setmaxnreg must not be dropped (ptxas C7508).
TEST_CASE("nvrtc: every FA3 heuristic variant for sm_90a compiles without spills", "[compile]") {
  auto outcomes = CompileCache::get().compile_all(fa3_sm90a_configs());
  REQUIRE(outcomes.size() == 5 * 3 * 2);
  for (const auto* o : outcomes) {
    check_compiled(*o);
    check_no_spills(*o);
    if (o->result && o->result->ok()) {
      INFO(readable_name(o->config));
      CHECK_FALSE((*o->result)->ptxas.setmaxnreg_ignored);
    }
  }
}

// Every head dim (multiples of 8 up to 256: each column-block structure and tile choice) and head_dim_v, one
// mask (causal) and one dtype each; FA3 on sm_90a, FA2 on sm_80 at the odd multiples of 8.
TEST_CASE("nvrtc: the FA3 heuristic at every head dim and head_dim_v compiles without spills", "[compile]") {
  std::vector<KernelConfig> configs;
  for (int d = 8; d <= 256; d += 8) configs.push_back(flashjit::dispatch::fa3_heuristic(DType::bf16, d, MaskKind::causal, kSm90a));
  for (auto [d, dv] : {std::pair{192, 128}, {128, 192}, {72, 96}, {64, 256}, {256, 40}})
    configs.push_back(flashjit::dispatch::fa3_heuristic(DType::bf16, d, MaskKind::causal, kSm90a, dv));
  for (int d : {8, 24, 40, 72, 136, 200, 248})
    configs.push_back(flashjit::dispatch::fa2_heuristic(DType::bf16, d, MaskKind::causal, kSm80));
  auto outcomes = CompileCache::get().compile_all(configs);
  REQUIRE(outcomes.size() == configs.size());
  for (const auto* o : outcomes) {
    check_compiled(*o);
    check_no_spills(*o);
    if (o->result && o->result->ok() && o->config.algorithm == flashjit::Algorithm::fa3) {
      INFO(readable_name(o->config));
      CHECK_FALSE((*o->result)->ptxas.setmaxnreg_ignored);
    }
  }
}

// The short-window tiles fa3_config takes (fa3/consumer.cuh's per-warpgroup key tiles with three warpgroups up
// to d64, two warpgroups up to d128) at every head dim they reach, persistent, with and without every variant,
// plain and with packed GQA rows.
TEST_CASE("nvrtc: fa3_config's short-window kernels compile without spills", "[compile]") {
  std::vector<KernelConfig> configs;
  for (int d = 8; d <= 128; d += 8)
    for (bool variants : {false, true}) {
      AttentionProblem p;
      p.dtype = DType::bf16, p.batch = 1, p.seqlen_q = p.seqlen_k = 8192, p.heads_q = 64, p.heads_kv = 8;
      p.head_dim = d, p.mask = MaskKind::sliding_window, p.window_left = 128, p.window_right = 0;
      KernelConfig c = flashjit::dispatch::fa3_config(p, kSm90a);
      c.softcap = c.alibi = c.sinks = variants;
      configs.push_back(c);  // unpacked (ALiBi does not pack)
      // What choose() takes for GQA: packed rows (fit_pack_gqa), for windows of 128 and 512 keys; varlen too.
      if (variants) p.softcap = 30.f, p.sinks = reinterpret_cast<const float*>(std::uintptr_t{0x70000});
      for (int window : {128, 512}) {
        p.window_left = window;
        auto packed = flashjit::dispatch::choose(p, kSm90a);
        REQUIRE(packed.ok());
        CHECK(packed->pack_gqa);
        configs.push_back(*packed);
        if (d % 64 == 0) {
          packed->varlen = true;
          configs.push_back(*packed);
        }
      }
    }
  auto outcomes = CompileCache::get().compile_all(configs);
  REQUIRE(outcomes.size() == configs.size());
  for (const auto* o : outcomes) {
    check_compiled(*o);
    check_no_spills(*o);
    INFO(readable_name(o->config));
    CHECK(o->config.block_n == 64);
    if (o->result && o->result->ok()) CHECK_FALSE((*o->result)->ptxas.setmaxnreg_ignored);
  }
}

// Softcap, ALiBi and sinks together (their union has the most live values) in the kernels choose() picks at
// the head dims where the tiles sit at a register ceiling (three consumer warpgroups, d256) and d128, causal
// (the per-element masking on top): no spills, setmaxnreg kept; FA2 on sm_80 and the reference kernel compile.
TEST_CASE("nvrtc: the heuristic kernels with every variant compile without spills", "[compile][variant]") {
  std::vector<KernelConfig> configs;
  auto add = [&](Algorithm a, int d, const Arch& arch, bool varlen) {
    AttentionProblem p;
    p.dtype = DType::bf16, p.batch = 4, p.seqlen_q = p.seqlen_k = 4096, p.heads_q = p.heads_kv = 16;
    p.head_dim = d, p.mask = MaskKind::causal, p.softcap = 30.f;
    p.alibi_slopes = p.sinks = reinterpret_cast<const float*>(std::uintptr_t{0x1000});
    auto c = flashjit::dispatch::choose(p, arch, a);
    REQUIRE(c.ok());
    c->varlen = varlen;
    configs.push_back(*c);
  };
  for (int d : {64, 96, 128, 256}) add(Algorithm::fa3, d, kSm90a, false);
  add(Algorithm::fa3, 128, kSm90a, true);
  add(Algorithm::fa2, 128, kSm80, false);
  add(Algorithm::naive, 128, kSm90a, false);
  auto outcomes = CompileCache::get().compile_all(configs);
  REQUIRE(outcomes.size() == configs.size());
  for (const auto* o : outcomes) {
    check_compiled(*o);
    if (o->config.algorithm == Algorithm::naive) continue;
    check_no_spills(*o);
    if (o->result && o->result->ok() && o->config.algorithm == Algorithm::fa3) {
      INFO(readable_name(o->config));
      CHECK_FALSE((*o->result)->ptxas.setmaxnreg_ignored);
    }
  }
}

// User snippets compile into every kernel kind (with their helpers and each kind of auxiliary argument), and a
// broken one is a compile error whose NVRTC log names the snippet's own line.
TEST_CASE("nvrtc: score_mod and mask_mod snippets compile; a broken one's log names its line", "[compile][variant]") {
  const std::string score_mod = R"(
__device__ float bias(const flashjit::ModContext& ctx, int h) { return ctx.pointer<float>(0)[h] * ctx.scalar(0); }
__device__ float score_mod(float score, int b, int h, int q_idx, int kv_idx, const flashjit::ModContext& ctx) {
  return score + bias(ctx, h) * float(q_idx - kv_idx);
}
)";
  const std::string mask_mod = R"(
__device__ bool mask_mod(int b, int h, int q_idx, int kv_idx, const flashjit::ModContext& ctx) {
  const int* doc = ctx.pointer<int>(1);
  return doc[kv_idx] == doc[q_idx + ctx.seqlen_k - ctx.seqlen_q] && kv_idx < ctx.integer(0);
}
)";
  std::vector<KernelConfig> configs = {
      flashjit::dispatch::fa3_heuristic(DType::bf16, 128, MaskKind::causal, kSm90a),
      flashjit::dispatch::fa3_heuristic(DType::bf16, 64, MaskKind::none, kSm90a),
      flashjit::dispatch::fa2_heuristic(DType::fp16, 128, MaskKind::causal, kSm80),
      flashjit::dispatch::naive_config(DType::bf16, 64, MaskKind::none, kSm90a)};
  for (auto& c : configs) c.score_mod = score_mod, c.mask_mod = mask_mod;
  auto outcomes = CompileCache::get().compile_all(configs);
  REQUIRE(outcomes.size() == configs.size());
  for (const auto* o : outcomes) {
    check_compiled(*o);
    if (o->config.algorithm != Algorithm::naive) check_no_spills(*o);
  }
  KernelConfig broken = configs[0];
  broken.score_mod = "__device__ float score_mod(float score, int b, int h, int q, int k, const flashjit::ModContext& c) {\n"
                     "  return score + undefined_thing;\n}\n";
  auto source = flashjit::codegen::generate(broken);
  REQUIRE(source.ok());
  auto compiled = flashjit::compile::compile(*source, flashjit::compile::options_for(broken.arch), flashjit::log::Logger{});
  REQUIRE_FALSE(compiled.ok());
  INFO(compiled.error().to_string());
  CHECK(compiled.error().code == ErrorCode::compile);
  CHECK(compiled.error().to_string().find("score_mod(2): error") != std::string::npos);
}

// The varlen variants of the kernels choose() picks (the heuristic tiles with varlen set): FA3 on sm_90a, FA2 on
// sm_90a (head dims FA3 does not cover, and explicit requests) and sm_80 (the Ampere path), bf16 (fp16 has the
// same registers); no spills, setmaxnreg kept. The reference kernel's varlen variants compile.
std::vector<KernelConfig> varlen_configs() {
  std::vector<KernelConfig> out;
  for (MaskKind m : kMasks) {
    for (int d : {64, 128, 256}) out.push_back(flashjit::dispatch::fa3_heuristic(DType::bf16, d, m, kSm90a));
    for (int d : {64, 96, 128, 256}) out.push_back(flashjit::dispatch::fa2_heuristic(DType::bf16, d, m, kSm90a));
    for (int d : {64, 128}) out.push_back(flashjit::dispatch::fa2_heuristic(DType::bf16, d, m, kSm80));
    out.push_back(flashjit::dispatch::naive_config(DType::bf16, 128, m, kSm90a));
  }
  KernelConfig persistent = flashjit::dispatch::fa3_heuristic(DType::bf16, 128, MaskKind::causal, kSm90a);
  persistent.scheduler = flashjit::Scheduler::persistent;
  out.push_back(persistent);
  for (auto& c : out) c.varlen = true;
  return out;
}

TEST_CASE("nvrtc: the varlen variants of the heuristic configs compile without spills", "[compile][varlen]") {
  auto outcomes = CompileCache::get().compile_all(varlen_configs());
  REQUIRE(outcomes.size() == 5 * (3 + 4 + 2 + 1) + 1);
  for (const auto* o : outcomes) {
    check_compiled(*o);
    if (o->config.algorithm == flashjit::Algorithm::naive) continue;
    check_no_spills(*o);
    if (o->result && o->result->ok()) {
      INFO(readable_name(o->config));
      CHECK_FALSE((*o->result)->ptxas.setmaxnreg_ignored);
    }
  }
}

// The dispatcher's paged configs (fit_pages): fa3 at head dims 64 / 80 / 128 / 256 with gathered pages (1, 8),
// boxed pages smaller than a key tile (16) and larger (256), ragged queries; the short-window tiles whose
// warpgroups pass key tiles (Consumer::pass_tile); fa2 (sm_80 and sm_90a) and the reference kernel.
std::vector<KernelConfig> paged_configs() {
  std::vector<KernelConfig> out;
  auto paged = [&](KernelConfig c, int page_size, bool varlen) {
    flashjit::AttentionProblem p;
    p.page_table = reinterpret_cast<const int*>(std::uintptr_t{0x1000});
    p.page_size = page_size;
    flashjit::dispatch::fit_pages(c, p);
    c.varlen = varlen;
    out.push_back(c);
  };
  for (MaskKind m : {MaskKind::none, MaskKind::causal})
    for (int d : {64, 80, 128, 256})
      for (int ps : {1, 8, 16, 256}) paged(flashjit::dispatch::fa3_heuristic(DType::bf16, d, m, kSm90a), ps, m == MaskKind::causal);
  KernelConfig window = flashjit::dispatch::fa3_heuristic(DType::bf16, 64, MaskKind::sliding_window, kSm90a);
  window.block_m = 192, window.consumer_warpgroups = 3, window.block_n = 96;  // the short-window tile (per warpgroup)
  for (int ps : {1, 4, 32}) paged(window, ps, true);
  for (int ps : {1, 16, 256}) {
    paged(flashjit::dispatch::fa2_heuristic(DType::bf16, 128, MaskKind::causal, kSm90a), ps, true);
    paged(flashjit::dispatch::fa2_heuristic(DType::fp16, 64, MaskKind::sliding_window, kSm80), ps, false);
  }
  paged(flashjit::dispatch::naive_config(DType::bf16, 128, MaskKind::causal, kSm90a), 16, true);
  return out;
}

TEST_CASE("nvrtc: the dispatcher's paged configs compile without spills", "[compile][paged]") {
  auto outcomes = CompileCache::get().compile_all(paged_configs());
  REQUIRE(outcomes.size() == 2 * 4 * 4 + 3 + 2 * 3 + 1);
  for (const auto* o : outcomes) {
    check_compiled(*o);
    CHECK(o->config.page_size > 0);
    if (o->config.algorithm != flashjit::Algorithm::naive) check_no_spills(*o);
  }
}

TEST_CASE("nvrtc: every reference variant compiles", "[compile]") {
  auto outcomes = CompileCache::get().compile_all(reference_configs());
  REQUIRE(outcomes.size() == 5 * 4 * 2);
  for (const auto* o : outcomes) check_compiled(*o);
}

TEST_CASE("nvrtc: NVRTC 12.9+ compiles without its own cache (whose repeat compiles bring no ptxas report)",
          "[compile]") {
  // The cache lives in the driver's compute cache, so this machine (no driver) cannot show the missing report;
  // tests/gpu/compile_test.cpp does. Here: the option is there exactly where NVRTC knows it.
  const auto options = flashjit::compile::options_for(kSm90a);
  const bool no_cache = std::find(options.begin(), options.end(), "--no-cache") != options.end();
  const std::string version = flashjit::compile::nvrtc_version();
  const int major = std::stoi(version), minor = std::stoi(version.substr(version.find('.') + 1));
  INFO("NVRTC " << version);
  CHECK(no_cache == (major > 12 || (major == 12 && minor >= 9)));
}

TEST_CASE("nvrtc: a broken source is ErrorCode::compile with the NVRTC log", "[compile]") {
  GeneratedSource src;
  src.name = "broken_source";
  src.entry = "flashjit_broken_source";
  src.text =
      "#include \"attention/params.cuh\"\n"
      "extern \"C\" __global__ void flashjit_broken_source(const flashjit::AttentionParams params) {\n"
      "  int x = ;\n"
      "}\n";
  auto r = flashjit::compile::compile(src, flashjit::compile::options_for(kSm90a), flashjit::log::Logger{});
  REQUIRE(!r.ok());
  const auto& e = r.error();
  INFO(e.to_string());
  CHECK(e.code == ErrorCode::compile);
  CHECK(e.message.find("nvrtcCompileProgram") != std::string::npos);
  CHECK(e.details.find("error") != std::string::npos);
  CHECK(e.details.find("broken_source.cu") != std::string::npos);  // the log points at the source line
  CHECK(e.details.find("(3)") != std::string::npos);
  bool names_it = false;
  for (const auto& ctx : e.context) names_it = names_it || ctx.find("broken_source") != std::string::npos;
  CHECK(names_it);
  CHECK(e.to_string().find(e.details) != std::string::npos);
}

TEST_CASE("nvrtc: includes resolve to the embedded templates only", "[compile]") {
  SECTION("an embedded template") {
    GeneratedSource src{"embedded_include", "flashjit_embedded_include",
                        "#include \"common/math.cuh\"\n"
                        "extern \"C\" __global__ void flashjit_embedded_include(float* x) {\n"
                        "  x[threadIdx.x] = flashjit::exp2_approx(x[threadIdx.x]);\n"
                        "}\n"};
    auto r = flashjit::compile::compile(src, flashjit::compile::options_for(kSm80), flashjit::log::Logger{});
    if (!r.ok()) FAIL_CHECK(r.error().to_string());
    REQUIRE(r.ok());
    CHECK(!r->cubin.empty());
    CHECK(r->ptxas.registers > 0);
  }
  SECTION("a header that is not embedded") {
    GeneratedSource src{"missing_include", "flashjit_missing_include",
                        "#include \"fa2/not_a_template.cuh\"\n"
                        "extern \"C\" __global__ void flashjit_missing_include() {}\n"};
    auto r = flashjit::compile::compile(src, flashjit::compile::options_for(kSm80), flashjit::log::Logger{});
    REQUIRE(!r.ok());
    INFO(r.error().to_string());
    CHECK(r.error().code == ErrorCode::compile);
    CHECK(r.error().details.find("not_a_template.cuh") != std::string::npos);
  }
}

// Configs validate() accepts beyond the heuristic ones: they must compile too (the autotuner and the CLI can
// ask for any valid config).
TEST_CASE("nvrtc: other valid FA2 tiles compile", "[compile]") {
  std::vector<KernelConfig> configs;
  auto make = [](int d, int bm, int bn, int stages, int warps, MaskKind m, DType t = DType::bf16) {
    KernelConfig c;
    c.algorithm = flashjit::Algorithm::fa2;
    c.arch = kSm90a;
    c.dtype = t;
    c.head_dim = d, c.block_m = bm, c.block_n = bn, c.stages = stages, c.warps = warps;
    c.mask = m;
    return c;
  };
  configs.push_back(make(16, 16, 16, 2, 1, MaskKind::causal));
  configs.push_back(make(80, 64, 32, 3, 2, MaskKind::sliding_window, DType::fp16));
  configs.push_back(make(160, 64, 32, 2, 4, MaskKind::chunked_causal));
  configs.push_back(make(64, 256, 64, 4, 8, MaskKind::none));
  for (const auto& c : configs) {
    INFO(readable_name(c));
    REQUIRE(validate(c).empty());
  }
  for (const auto* o : CompileCache::get().compile_all(configs)) check_compiled(*o);
}

// The FA2 pipeline needs two stages (the kernel static_asserts it): validate() must say so before NVRTC does.
TEST_CASE("nvrtc: a single-stage FA2 config is rejected by validate, naming stages", "[compile]") {
  KernelConfig c;
  c.algorithm = flashjit::Algorithm::fa2;
  c.arch = kSm90a;
  c.head_dim = 64, c.block_m = 64, c.block_n = 64, c.stages = 1, c.warps = 4;
  auto issues = validate(c);
  REQUIRE(issues.size() == 1);
  CHECK(issues[0].field == "stages");
}

TEST_CASE("nvrtc: compile timing summary", "[compile]") {
  auto& cache = CompileCache::get();
  // Make sure the grids are compiled when this test runs alone.
  (void)cache.compile_all(fa2_sm90a_configs());
  (void)cache.compile_all(fa2_configs(kSm80, {64, 96, 128, 256}, {DType::bf16}));
  (void)cache.compile_all(reference_configs());
  (void)cache.compile_all(fa3_sm90a_configs());
  (void)cache.compile_all(varlen_configs());
  WARN("compiled " << cache.compiles() << " kernels with NVRTC in " << cache.seconds() << " s ("
                   << std::thread::hardware_concurrency() << " threads)");
  CHECK(cache.compiles() >= 5 * 4 * 2 + 5 * 4 + 5 * 4 * 2 + 5 * 3 * 2 + 5 * 10 + 1);
}
