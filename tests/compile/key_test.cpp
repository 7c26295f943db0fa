// Tests of the cache key (kernel_key, templates_hash) and of the ptxas -v log parser.
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "codegen/embedded_templates.hpp"
#include "common/hash.hpp"
#include "codegen/generate.hpp"
#include "compile/key.hpp"
#include "compile/nvrtc.hpp"
#include "support/catch.hpp"

using flashjit::Algorithm;
using flashjit::Arch;
using flashjit::DType;
using flashjit::KernelConfig;
using flashjit::MaskKind;
using flashjit::compile::kernel_key;
using flashjit::compile::options_for;
using flashjit::compile::parse_ptxas;

namespace {

bool is_hex64(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

// One mutation per config field (arch has two parts); each yields a config that differs from the base in
// exactly that field.
struct Mutation {
  const char* field;  // the canonical JSON key it changes
  std::function<void(KernelConfig&)> apply;
};

std::vector<Mutation> mutations() {
  return {
      {"algorithm", [](KernelConfig& c) { c.algorithm = Algorithm::naive; }},
      {"algorithm", [](KernelConfig& c) { c.algorithm = Algorithm::fa3; }},
      {"algorithm", [](KernelConfig& c) { c.algorithm = Algorithm::automatic; }},
      {"arch", [](KernelConfig& c) { c.arch.sm = 80; c.arch.accelerated = false; }},
      {"arch", [](KernelConfig& c) { c.arch.accelerated = false; }},  // sm_90a -> sm_90
      {"arch", [](KernelConfig& c) { c.arch.sm = 100; }},            // sm_90a -> sm_100a
      {"dtype", [](KernelConfig& c) { c.dtype = DType::fp16; }},
      {"head_dim", [](KernelConfig& c) { c.head_dim = 64; }},
      {"head_dim", [](KernelConfig& c) { c.head_dim = 129; }},
      {"block_m", [](KernelConfig& c) { c.block_m = 64; }},
      {"block_n", [](KernelConfig& c) { c.block_n = 128; }},
      {"stages", [](KernelConfig& c) { c.stages = 3; }},
      {"warps", [](KernelConfig& c) { c.warps = 8; }},
      {"mask", [](KernelConfig& c) { c.mask = MaskKind::causal; }},
      {"mask", [](KernelConfig& c) { c.mask = MaskKind::sliding_window; }},
      {"mask", [](KernelConfig& c) { c.mask = MaskKind::chunked; }},
      {"mask", [](KernelConfig& c) { c.mask = MaskKind::chunked_causal; }},
      {"varlen", [](KernelConfig& c) { c.varlen = true; }},
      {"head_dim_v", [](KernelConfig& c) { c.head_dim_v = 64; }},
      // scheduler: Scheduler has a single value, so there is nothing to change yet.
  };
}

// A realistic ptxas -v report (as NVRTC returns it with -Xptxas=-v) for one entry.
std::string ptxas_report(const std::string& entry, const std::string& arch, int stack, int stores, int loads,
                         int regs, int smem) {
  return "ptxas info    : 0 bytes gmem\n"
         "ptxas info    : Compiling entry function '" + entry + "' for '" + arch + "'\n"
         "ptxas info    : Function properties for " + entry + "\n"
         "    " + std::to_string(stack) + " bytes stack frame, " + std::to_string(stores) + " bytes spill stores, " +
         std::to_string(loads) + " bytes spill loads\n"
         "ptxas info    : Used " + std::to_string(regs) + " registers, used 1 barriers, " + std::to_string(smem) +
         " bytes smem, 400 bytes cmem[0]\n";
}

}  // namespace

TEST_CASE("kernel_key: 64 hex characters and equal for equal inputs", "[compile]") {
  KernelConfig a;
  const auto opts = options_for(a.arch);
  const std::string k = kernel_key(a, opts);
  INFO(k);
  CHECK(is_hex64(k));
  CHECK(kernel_key(a, opts) == k);
  KernelConfig b;  // a separately built equal config
  CHECK(kernel_key(b, options_for(b.arch)) == k);
  auto parsed = flashjit::config_from_json(to_json(a));
  REQUIRE(parsed.ok());
  CHECK(kernel_key(*parsed, opts) == k);
}

TEST_CASE("kernel_key: the mutations cover every canonical JSON field", "[compile]") {
  // If KernelConfig gains a field, this fails until a mutation for it is added above.
  auto j = nlohmann::json::parse(to_json(KernelConfig{}));
  std::set<std::string> json_fields;
  for (const auto& [key, value] : j.items()) json_fields.insert(key);
  std::set<std::string> mutated{"scheduler"};  // single-valued for now
  for (const auto& m : mutations()) mutated.insert(m.field);
  CHECK(json_fields == mutated);
}

TEST_CASE("kernel_key: changes when any single config field changes", "[compile]") {
  const KernelConfig base;
  const auto opts = options_for(base.arch);
  const std::string base_key = kernel_key(base, opts);
  std::set<std::string> keys{base_key};
  const auto ms = mutations();
  for (const auto& m : ms) {
    KernelConfig c = base;
    m.apply(c);
    INFO("field " << m.field << ": " << to_json(c));
    REQUIRE(!(c == base));
    const std::string k = kernel_key(c, opts);
    CHECK(is_hex64(k));
    CHECK(k != base_key);
    keys.insert(k);
  }
  CHECK(keys.size() == ms.size() + 1);  // every mutation gives its own key
}

TEST_CASE("kernel_key: changes when the options change", "[compile]") {
  const KernelConfig c;
  const auto opts = options_for(c.arch);
  const std::string k = kernel_key(c, opts);
  SECTION("options of another arch") { CHECK(kernel_key(c, options_for(Arch{80, false})) != k); }
  SECTION("no options") { CHECK(kernel_key(c, {}) != k); }
  SECTION("one more option") {
    auto more = opts;
    more.push_back("-DFLASHJIT_EXTRA=1");
    CHECK(kernel_key(c, more) != k);
  }
  SECTION("one option fewer") {
    REQUIRE(!opts.empty());
    auto fewer = opts;
    fewer.pop_back();
    CHECK(kernel_key(c, fewer) != k);
  }
  SECTION("one option changed") {
    auto changed = opts;
    changed.back() += "x";
    CHECK(kernel_key(c, changed) != k);
  }
  SECTION("an empty option is still an option") {
    auto more = opts;
    more.push_back("");
    CHECK(kernel_key(c, more) != k);
  }
}

TEST_CASE("options_for names the arch", "[compile]") {
  for (Arch a : {Arch{80, false}, Arch{86, false}, Arch{90, true}}) {
    auto opts = options_for(a);
    std::set<std::string> set(opts.begin(), opts.end());
    INFO(a.to_string());
    CHECK(set.count("-arch=" + a.to_string()) == 1);
    CHECK(set.count("-Xptxas=-v") == 1);  // parse_ptxas needs the report
  }
}

TEST_CASE("templates_hash: 64 hex and stable within a process", "[compile]") {
  const std::string& h = flashjit::codegen::templates_hash();
  INFO(h);
  CHECK(is_hex64(h));
  CHECK(flashjit::codegen::templates_hash() == h);
  CHECK(&flashjit::codegen::templates_hash() == &h);
  CHECK(h != flashjit::sha256_hex(""));
  REQUIRE(!flashjit::codegen::embedded_templates().empty());
}

TEST_CASE("nvrtc_version is major.minor", "[compile]") {
  const std::string& v = flashjit::compile::nvrtc_version();
  INFO(v);
  auto dot = v.find('.');
  REQUIRE(dot != std::string::npos);
  CHECK(std::stoi(v.substr(0, dot)) >= 11);
  CHECK(v.find_first_not_of("0123456789.") == std::string::npos);
}

TEST_CASE("parse_ptxas: a report with spills and a C7508 warning", "[compile]") {
  const std::string log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function 'flashjit_x' for 'sm_90a'\n"
      "ptxas info    : Function properties for flashjit_x\n"
      "    8 bytes stack frame, 8 bytes spill stores, 16 bytes spill loads\n"
      "ptxas info    : Used 168 registers, used 1 barriers, 8 bytes smem, 400 bytes cmem[0]\n"
      "ptxas info    : (C7508) Potential Performance Loss: 'setmaxnreg' ignored; unable to determine register "
      "count at entry.\n";
  auto s = parse_ptxas(log, "flashjit_x");
  CHECK(s.registers == 168);
  CHECK(s.stack_frame == 8);
  CHECK(s.spill_stores == 8);
  CHECK(s.spill_loads == 16);
  CHECK(s.static_smem == 8);
  CHECK(s.setmaxnreg_ignored);
}

// Verbatim NVRTC 13.0 logs (-Xptxas=-v -Xptxas=-warn-spills): the spill counts line starts with
// "ptxas         ." and kernels without static shared memory print no "bytes smem".
TEST_CASE("parse_ptxas: NVRTC 13 logs", "[compile]") {
  SECTION("spilling") {
    const std::string log =
        "ptxas warning : Registers are spilled to local memory in function "
        "'flashjit_fa2_bf16_d64_bm128_bn128_s2_w4_none_sm90a', 68 bytes spill stores, 68 bytes spill loads\n"
        "ptxas info    : 52 bytes gmem\n"
        "ptxas info    : Compiling entry function 'flashjit_fa2_bf16_d64_bm128_bn128_s2_w4_none_sm90a' for 'sm_90a'\n"
        "ptxas info    : Function properties for flashjit_fa2_bf16_d64_bm128_bn128_s2_w4_none_sm90a\n"
        "ptxas         .     72 bytes stack frame, 68 bytes spill stores, 68 bytes spill loads\n"
        "ptxas info    : Used 255 registers, used 1 barriers, 72 bytes cumulative stack size\n"
        "ptxas info    : Compile time = 204.861 ms\n";
    auto s = parse_ptxas(log, "flashjit_fa2_bf16_d64_bm128_bn128_s2_w4_none_sm90a");
    CHECK(s.registers == 255);
    CHECK(s.stack_frame == 72);
    CHECK(s.spill_stores == 68);
    CHECK(s.spill_loads == 68);
    CHECK(s.static_smem == 0);
    CHECK_FALSE(s.setmaxnreg_ignored);
  }
  SECTION("clean") {
    const std::string log =
        "ptxas info    : 68 bytes gmem\n"
        "ptxas info    : Compiling entry function 'flashjit_fa2_bf16_d128_bm128_bn64_s2_w8_none_sm90a' for 'sm_90a'\n"
        "ptxas info    : Function properties for flashjit_fa2_bf16_d128_bm128_bn64_s2_w8_none_sm90a\n"
        "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
        "ptxas info    : Used 206 registers, used 1 barriers\n"
        "ptxas info    : Compile time = 100.661 ms\n";
    auto s = parse_ptxas(log, "flashjit_fa2_bf16_d128_bm128_bn64_s2_w8_none_sm90a");
    CHECK(s.registers == 206);
    CHECK(s.stack_frame == 0);
    CHECK(s.spill_stores == 0);
    CHECK(s.spill_loads == 0);
    CHECK(s.static_smem == 0);
  }
}

TEST_CASE("parse_ptxas: a clean report", "[compile]") {
  const std::string log = ptxas_report("flashjit_fa2_bf16_d128_bm128_bn64_s2_w8_none_sm90a", "sm_90a", 0, 0, 0, 126, 0);
  auto s = parse_ptxas(log, "flashjit_fa2_bf16_d128_bm128_bn64_s2_w8_none_sm90a");
  CHECK(s.registers == 126);
  CHECK(s.stack_frame == 0);
  CHECK(s.spill_stores == 0);
  CHECK(s.spill_loads == 0);
  CHECK(s.static_smem == 0);
  CHECK_FALSE(s.setmaxnreg_ignored);
}

TEST_CASE("parse_ptxas: large numbers", "[compile]") {
  auto s = parse_ptxas(ptxas_report("flashjit_big", "sm_80", 1024, 4096, 12288, 255, 49152), "flashjit_big");
  CHECK(s.registers == 255);
  CHECK(s.stack_frame == 1024);
  CHECK(s.spill_stores == 4096);
  CHECK(s.spill_loads == 12288);
  CHECK(s.static_smem == 49152);
}

TEST_CASE("parse_ptxas: no report leaves the defaults", "[compile]") {
  for (const std::string& log : {std::string(), std::string("nvrtc: some unrelated message\n")}) {
    auto s = parse_ptxas(log, "flashjit_x");
    CHECK(s.registers == -1);
    CHECK(s.spill_stores == 0);
    CHECK(s.spill_loads == 0);
    CHECK(s.stack_frame == 0);
    CHECK(s.static_smem == 0);
    CHECK_FALSE(s.setmaxnreg_ignored);
  }
}

TEST_CASE("parse_ptxas: picks the named entry among several", "[compile]") {
  const std::string log = ptxas_report("flashjit_first", "sm_90a", 0, 0, 0, 40, 0) +
                          ptxas_report("flashjit_second", "sm_90a", 24, 24, 32, 200, 16);
  auto first = parse_ptxas(log, "flashjit_first");
  CHECK(first.registers == 40);
  CHECK(first.spill_stores == 0);
  CHECK(first.spill_loads == 0);
  CHECK(first.stack_frame == 0);
  auto second = parse_ptxas(log, "flashjit_second");
  CHECK(second.registers == 200);
  CHECK(second.stack_frame == 24);
  CHECK(second.spill_stores == 24);
  CHECK(second.spill_loads == 32);
  CHECK(second.static_smem == 16);
}

// An entry whose name is a prefix of an earlier one (..._sm90 vs ..._sm90a) must get its own numbers.
TEST_CASE("parse_ptxas: an entry name that is a prefix of another entry's name", "[compile]") {
  const std::string log = ptxas_report("flashjit_k_sm90a", "sm_90a", 8, 8, 8, 200, 0) +
                          ptxas_report("flashjit_k_sm90", "sm_90", 0, 0, 0, 100, 0);
  auto s = parse_ptxas(log, "flashjit_k_sm90");
  CHECK(s.registers == 100);
  CHECK(s.spill_stores == 0);
}

TEST_CASE("kernel_key: covers the generated source (the frame around the templates), not only the config",
          "[compile]") {
  const KernelConfig c;
  const auto opts = options_for(c.arch);
  auto source = flashjit::codegen::generate(c);
  REQUIRE(source.ok());
  const std::string json = to_json(c);
  const std::string k = flashjit::compile::kernel_key(json, source->text, opts);
  CHECK(k == kernel_key(c, opts));  // the config overload hashes the same generated source
  CHECK(flashjit::compile::kernel_key(json, source->text, opts) == k);
  std::string changed = source->text;
  changed.replace(changed.find("__launch_bounds__("), 18, "__launch_bounds__ (");
  CHECK(flashjit::compile::kernel_key(json, changed, opts) != k);
  CHECK(flashjit::compile::kernel_key(json, "", opts) != k);
}
