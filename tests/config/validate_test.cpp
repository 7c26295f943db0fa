// Tests of validate() / check(KernelConfig) and the resource formulas next to them: every bad field gives an
// issue naming that field, valid configs give none, check() carries every issue's text.
#include <algorithm>
#include <initializer_list>
#include <set>
#include <string>
#include <vector>

#include "dispatch/heuristics.hpp"
#include "flashjit/config.hpp"
#include "support/catch.hpp"

using flashjit::Algorithm;
using flashjit::Arch;
using flashjit::ConfigIssue;
using flashjit::DType;
using flashjit::ErrorCode;
using flashjit::KernelConfig;
using flashjit::MaskKind;

namespace {

const Arch kSm80{80, false};
const Arch kSm86{86, false};
const Arch kSm89{89, false};
const Arch kSm90a{90, true};

// The set of fields named by the issues.
std::set<std::string> fields(const std::vector<ConfigIssue>& issues) {
  std::set<std::string> out;
  for (const auto& i : issues) out.insert(i.field);
  return out;
}

std::string describe(const std::vector<ConfigIssue>& issues) {
  std::string s;
  for (const auto& i : issues) s += i.field + ": " + i.message + "\n";
  return s.empty() ? "(no issues)" : s;
}

// A valid fa2 config (the d128 heuristic tile for sm_90a), spelled out so the tests do not depend on defaults.
KernelConfig fa2_base() {
  KernelConfig c;
  c.algorithm = Algorithm::fa2;
  c.arch = kSm90a;
  c.dtype = DType::bf16;
  c.head_dim = 128;
  c.block_m = 128;
  c.block_n = 64;
  c.stages = 2;
  c.warps = 8;
  c.mask = MaskKind::none;
  return c;
}

KernelConfig naive_base() {
  KernelConfig c;
  c.algorithm = Algorithm::naive;
  c.arch = kSm90a;
  c.dtype = DType::bf16;
  c.head_dim = 128;
  c.block_m = 1;
  c.block_n = 128;
  c.stages = 1;
  c.warps = 4;
  c.mask = MaskKind::none;
  return c;
}

}  // namespace

TEST_CASE("validate: the base configs of these tests are valid", "[config]") {
  for (const auto& c : {fa2_base(), naive_base(), KernelConfig{}}) {
    auto issues = validate(c);
    INFO(readable_name(c) << "\n" << describe(issues));
    CHECK(issues.empty());
  }
}

TEST_CASE("validate: algorithm auto is not compilable", "[config]") {
  for (KernelConfig c : {fa2_base(), naive_base()}) {
    c.algorithm = Algorithm::automatic;
    auto issues = validate(c);
    INFO(describe(issues));
    REQUIRE(fields(issues) == std::set<std::string>{"algorithm"});
    CHECK(!issues[0].message.empty());
  }
}

TEST_CASE("validate: fa3 constraints", "[config]") {
  // The sm_90a d128 tile: 2 consumer warpgroups of 64 rows, 128 keys, 2 stages.
  KernelConfig base = fa2_base();
  base.algorithm = Algorithm::fa3;
  base.block_m = 128, base.consumer_warpgroups = 2, base.block_n = 128, base.stages = 2;
  REQUIRE(validate(base).empty());
  auto [field, mutate] = GENERATE(table<std::string, void (*)(KernelConfig&)>({
      {"arch", [](KernelConfig& c) { c.arch = Arch{90, false}; }},
      {"arch", [](KernelConfig& c) { c.arch = Arch{80, false}; }},
      {"arch", [](KernelConfig& c) { c.arch = Arch{100, true}; }},
      {"head_dim", [](KernelConfig& c) { c.head_dim = 100; }},
      {"head_dim", [](KernelConfig& c) { c.head_dim = 264; }},
      {"head_dim_v", [](KernelConfig& c) { c.head_dim_v = 12; }},
      {"head_dim_v", [](KernelConfig& c) { c.head_dim_v = 264; }},
      {"consumer_warpgroups", [](KernelConfig& c) { c.consumer_warpgroups = 0; }},
      {"consumer_warpgroups", [](KernelConfig& c) { c.consumer_warpgroups = 4; }},
      {"block_m", [](KernelConfig& c) { c.block_m = 64; }},  // 2 warpgroups need 128 rows
      {"block_n", [](KernelConfig& c) { c.block_n = 48; }},
      {"block_n", [](KernelConfig& c) { c.block_n = 72; }},
      {"block_n", [](KernelConfig& c) { c.block_n = 272; }},
      {"stages", [](KernelConfig& c) { c.stages = 1; }},
      {"stages", [](KernelConfig& c) { c.stages = 5; }},
      // register budget: 3 consumer warpgroups get 160 registers; d256 with 128 keys needs about 264
      {"block_n", [](KernelConfig& c) { c.consumer_warpgroups = 3, c.block_m = 192, c.head_dim = 256; }},
      // shared memory: d256, 80 keys, 4 stages is over sm_90a's 227 KiB
      {"stages", [](KernelConfig& c) { c.head_dim = 256, c.block_n = 80, c.stages = 4; }},
  }));
  KernelConfig c = base;
  mutate(c);
  auto issues = validate(c);
  INFO(to_json(c) << "\n" << describe(issues));
  CHECK(fields(issues) == std::set<std::string>{field});
}

TEST_CASE("validate: bad arch", "[config]") {
  SECTION("an 'a' target below sm_90 (sm_80a), fa2 and naive") {
    for (KernelConfig c : {fa2_base(), naive_base()}) {
      c.arch = Arch{80, true};
      auto issues = validate(c);
      INFO(describe(issues));
      CHECK(fields(issues) == std::set<std::string>{"arch"});
    }
  }
  SECTION("fa2 below sm_80") {
    KernelConfig c = fa2_base();
    c.arch = Arch{75, false};
    auto issues = validate(c);
    INFO(describe(issues));
    CHECK(fields(issues) == std::set<std::string>{"arch"});
  }
  SECTION("naive runs below sm_80") {
    KernelConfig c = naive_base();
    c.arch = Arch{75, false};
    CHECK(validate(c).empty());
  }
}

TEST_CASE("validate: bad fa2 head_dim", "[config]") {
  int d = GENERATE(0, -16, 4, 12, 65, 100, 264, 272, 512);
  KernelConfig c = fa2_base();
  c.head_dim = d;
  auto issues = validate(c);
  INFO("head_dim " << d << "\n" << describe(issues));
  CHECK(fields(issues) == std::set<std::string>{"head_dim"});
}

TEST_CASE("validate: fa2 accepts every multiple of 8 up to 256 with a fitting tile", "[config]") {
  int d = GENERATE(8, 16, 24, 32, 48, 64, 72, 80, 96, 112, 128, 136, 144, 160, 176, 192, 200, 208, 224, 240, 256);
  KernelConfig c = fa2_base();
  c.head_dim = d;
  c.block_m = 64, c.warps = 4, c.block_n = 32;  // 16 rows per warp, the smallest key tile the heuristic uses
  auto issues = validate(c);
  INFO("head_dim " << d << "\n" << describe(issues));
  CHECK(issues.empty());
}

TEST_CASE("validate: bad fa2 warps", "[config]") {
  int w = GENERATE(0, -4, 3, 5, 6, 16);
  KernelConfig c = fa2_base();
  c.warps = w;
  auto issues = validate(c);
  INFO("warps " << w << "\n" << describe(issues));
  CHECK(fields(issues) == std::set<std::string>{"warps"});
}

TEST_CASE("validate: fa2 block_m must give 16 or 32 rows per warp", "[config]") {
  // block_m for 4 warps: 64 (16 rows) and 128 (32 rows) are the only valid ones.
  int bm = GENERATE(0, 16, 32, 48, 96, 100, 192, 256);
  KernelConfig c = fa2_base();
  c.warps = 4;
  c.block_m = bm;
  auto issues = validate(c);
  INFO("block_m " << bm << "\n" << describe(issues));
  CHECK(fields(issues) == std::set<std::string>{"block_m"});
}

TEST_CASE("validate: fa2 block_m of 16 and 32 rows per warp are valid", "[config]") {
  int w = GENERATE(1, 2, 4, 8);
  int rows = GENERATE(16, 32);
  KernelConfig c = fa2_base();
  c.warps = w;
  c.block_m = rows * w;
  c.block_n = 32;
  auto issues = validate(c);
  INFO(readable_name(c) << "\n" << describe(issues));
  CHECK(issues.empty());
}

TEST_CASE("validate: bad fa2 block_n", "[config]") {
  int bn = GENERATE(0, -16, 8, 24, 40, 272);
  KernelConfig c = fa2_base();
  c.block_n = bn;
  auto issues = validate(c);
  INFO("block_n " << bn << "\n" << describe(issues));
  CHECK(fields(issues) == std::set<std::string>{"block_n"});
}

TEST_CASE("validate: bad fa2 stages", "[config]") {
  int s = GENERATE(-1, 0, 6, 8);
  KernelConfig c = fa2_base();
  c.stages = s;
  auto issues = validate(c);
  INFO("stages " << s << "\n" << describe(issues));
  CHECK(fields(issues) == std::set<std::string>{"stages"});
}

TEST_CASE("validate: every bad field is reported (not only the first)", "[config]") {
  KernelConfig c = fa2_base();
  c.head_dim = 65;
  c.block_n = 24;
  c.stages = 0;
  c.warps = 3;
  auto issues = validate(c);
  INFO(describe(issues));
  CHECK(fields(issues) == std::set<std::string>{"head_dim", "block_n", "stages", "warps"});
}

TEST_CASE("validate: shared memory over the architecture's limit names 'stages'", "[config]") {
  SECTION("fa2 head_dim 256, block_n 128, 3 stages on sm_86") {
    KernelConfig c = fa2_base();
    c.arch = kSm86;
    c.head_dim = 256;
    c.block_m = 64, c.warps = 4;  // 16 rows per warp: within the register budget
    c.block_n = 128;
    c.stages = 3;
    // 64 x 256 x 2 (Q) + 2 x 3 x 128 x 256 x 2 (K, V) bytes
    CHECK(shared_memory_bytes(c) == 64 * 256 * 2 + 2 * 3 * 128 * 256 * 2);
    auto issues = validate(c);
    INFO(describe(issues));
    REQUIRE(fields(issues) == std::set<std::string>{"stages"});
    CHECK(issues[0].message.find(std::to_string(shared_memory_bytes(c))) != std::string::npos);
  }
  SECTION("128 KiB fits sm_80 (163 KiB) and sm_90a (227 KiB), not sm_86 / sm_89 (99 KiB)") {
    KernelConfig c = fa2_base();  // d128, bm128, bn64
    c.stages = 3;
    REQUIRE(shared_memory_bytes(c) == 128 * 1024);
    for (Arch a : {kSm80, kSm90a}) {
      c.arch = a;
      INFO(a.to_string() << "\n" << describe(validate(c)));
      CHECK(validate(c).empty());
    }
    for (Arch a : {kSm86, kSm89}) {
      c.arch = a;
      auto issues = validate(c);
      INFO(a.to_string() << "\n" << describe(issues));
      CHECK(fields(issues) == std::set<std::string>{"stages"});
    }
  }
  SECTION("sm_90a: 5 stages of d256 / bn128 do not fit 227 KiB") {
    KernelConfig c = fa2_base();
    c.head_dim = 256, c.block_m = 64, c.warps = 4, c.block_n = 128, c.stages = 5;
    auto issues = validate(c);
    INFO(describe(issues));
    CHECK(fields(issues) == std::set<std::string>{"stages"});
  }
}

TEST_CASE("validate: register budget (block_m 256 with 8 warps and head_dim 256)", "[config]") {
  KernelConfig c = fa2_base();
  c.block_m = 256;
  c.warps = 8;
  c.head_dim = 256;
  auto issues = validate(c);
  INFO(describe(issues));
  REQUIRE(fields(issues) == std::set<std::string>{"block_m"});
  CHECK(issues[0].message.find("register") != std::string::npos);

  SECTION("16 rows per warp of the same head dim fit") {
    c.block_m = 128;
    c.block_n = 32;
    INFO(describe(validate(c)));
    CHECK(validate(c).empty());
  }
}

TEST_CASE("validate: naive constraints", "[config]") {
  SECTION("head_dim must be a multiple of 8 in [8, 256]") {
    int d = GENERATE(0, 4, 12, 20, 100, 264, 272);
    KernelConfig c = naive_base();
    c.head_dim = d;
    auto issues = validate(c);
    INFO("head_dim " << d << "\n" << describe(issues));
    CHECK(fields(issues) == std::set<std::string>{"head_dim"});
  }
  SECTION("head dims fa2 does not cover are fine") {
    int d = GENERATE(8, 24, 40, 72, 88, 200, 248, 256);
    KernelConfig c = naive_base();
    c.head_dim = d;
    INFO("head_dim " << d << "\n" << describe(validate(c)));
    CHECK(validate(c).empty());
  }
  SECTION("block_m must be 1") {
    int bm = GENERATE(0, 2, 16, 128);
    KernelConfig c = naive_base();
    c.block_m = bm;
    auto issues = validate(c);
    INFO("block_m " << bm << "\n" << describe(issues));
    CHECK(fields(issues) == std::set<std::string>{"block_m"});
  }
  SECTION("block_n must be 32 * warps") {
    int bn = GENERATE(0, 32, 64, 96, 256);
    KernelConfig c = naive_base();  // 4 warps
    c.block_n = bn;
    auto issues = validate(c);
    INFO("block_n " << bn << "\n" << describe(issues));
    CHECK(fields(issues) == std::set<std::string>{"block_n"});
  }
  SECTION("stages must be 1") {
    int s = GENERATE(0, 2, 3);
    KernelConfig c = naive_base();
    c.stages = s;
    auto issues = validate(c);
    INFO("stages " << s << "\n" << describe(issues));
    CHECK(fields(issues) == std::set<std::string>{"stages"});
  }
  SECTION("warps in [1, 8]") {
    int w = GENERATE(0, -1, 9, 16);
    KernelConfig c = naive_base();
    c.warps = w;
    c.block_n = 32 * w;  // keep block_n consistent so only warps is wrong
    auto issues = validate(c);
    INFO("warps " << w << "\n" << describe(issues));
    CHECK(fields(issues) == std::set<std::string>{"warps"});
  }
  SECTION("every warp count in [1, 8] with block_n = 32 * warps is valid") {
    int w = GENERATE(1, 2, 3, 4, 5, 6, 7, 8);  // (no range(): it needs another header in Catch2 v3)
    KernelConfig c = naive_base();
    c.warps = w;
    c.block_n = 32 * w;
    INFO("warps " << w << "\n" << describe(validate(c)));
    CHECK(validate(c).empty());
  }
}

namespace {

// Every fa2_heuristic config for the head dims and arches, checked with validate().
void check_heuristic_configs(std::initializer_list<int> head_dims, std::initializer_list<Arch> arches) {
  for (int d : head_dims)
    for (MaskKind mask : {MaskKind::none, MaskKind::causal, MaskKind::sliding_window, MaskKind::chunked,
                          MaskKind::chunked_causal})
      for (DType dtype : {DType::bf16, DType::fp16})
        for (Arch a : arches) {
          auto c = flashjit::dispatch::fa2_heuristic(dtype, d, mask, a);
          auto issues = validate(c);
          INFO(readable_name(c) << "\n" << describe(issues));
          CHECK(issues.empty());
        }
}

}  // namespace

TEST_CASE("validate: the fa2 heuristic configs for head_dim 64 96 128 256 on sm_90 and sm_90a are valid",
          "[config]") {
  check_heuristic_configs({64, 96, 128, 256}, {Arch{90, false}, kSm90a});
}

TEST_CASE("validate: the fa2 heuristic configs for head_dim 64 96 128 on sm_80 sm_86 sm_89 are valid",
          "[config]") {
  check_heuristic_configs({64, 96, 128}, {kSm80, kSm86, kSm89});
}

// The heuristic's head_dim 256 tile must fit sm_80's 163 KB and sm_86 / sm_89's 99 KB of shared memory
// (the H200-tuned 128 x 64 tile needs 192 KB).
TEST_CASE("validate: the fa2 heuristic configs for head_dim 256 on sm_80 sm_86 sm_89 are valid",
          "[config]") {
  check_heuristic_configs({256}, {kSm80, kSm86, kSm89});
}

TEST_CASE("validate: the naive configs are valid", "[config]") {
  for (int d : {8, 40, 64, 96, 128, 256})
    for (MaskKind mask : {MaskKind::none, MaskKind::causal, MaskKind::sliding_window, MaskKind::chunked,
                          MaskKind::chunked_causal})
      for (DType dtype : {DType::bf16, DType::fp16})
        for (Arch a : {Arch{75, false}, kSm80, kSm86, kSm89, Arch{90, false}, kSm90a}) {
          auto c = flashjit::dispatch::naive_config(dtype, d, mask, a);
          auto issues = validate(c);
          INFO(readable_name(c) << "\n" << describe(issues));
          CHECK(issues.empty());
        }
}

TEST_CASE("check(config) is invalid_config with every issue's message", "[config]") {
  SECTION("valid") { CHECK(check(fa2_base()).ok()); }
  SECTION("invalid") {
    KernelConfig c = fa2_base();
    c.head_dim = 65;
    c.block_n = 24;
    c.stages = 6;
    auto issues = validate(c);
    REQUIRE(issues.size() >= 3);
    auto st = check(c);
    REQUIRE(!st.ok());
    CHECK(st.error().code == ErrorCode::invalid_config);
    const std::string& msg = st.error().message;
    INFO(msg);
    CHECK(msg.find(readable_name(c)) != std::string::npos);
    for (const auto& i : issues) {
      CHECK(msg.find(i.field) != std::string::npos);
      CHECK(msg.find(i.message) != std::string::npos);
    }
  }
  SECTION("auto") {
    KernelConfig c = fa2_base();
    c.algorithm = Algorithm::automatic;
    auto st = check(c);
    REQUIRE(!st.ok());
    CHECK(st.error().code == ErrorCode::invalid_config);
    CHECK(st.error().message.find("algorithm") != std::string::npos);
  }
}

TEST_CASE("resource formulas", "[config]") {
  SECTION("threads per CTA") {
    KernelConfig c = fa2_base();
    CHECK(threads_per_cta(c) == 256);
    c.warps = 4;
    CHECK(threads_per_cta(c) == 128);
    CHECK(threads_per_cta(naive_base()) == 128);
  }
  SECTION("fa2 shared memory pads rows to 64 elements") {
    KernelConfig c = fa2_base();  // bm128, bn64, s2
    c.head_dim = 64;
    CHECK(shared_memory_bytes(c) == 128 * 64 * 2 + 2 * 2 * 64 * 64 * 2);
    c.head_dim = 96;  // padded to 128
    CHECK(shared_memory_bytes(c) == 128 * 128 * 2 + 2 * 2 * 64 * 128 * 2);
    c.head_dim = 128;
    CHECK(shared_memory_bytes(c) == 128 * 128 * 2 + 2 * 2 * 64 * 128 * 2);
    c.head_dim = 16;  // padded to 64
    CHECK(shared_memory_bytes(c) == 128 * 64 * 2 + 2 * 2 * 64 * 64 * 2);
  }
  SECTION("naive shared memory: key chunk, reduction scratch and query row as floats") {
    KernelConfig c = naive_base();
    c.head_dim = 40;
    CHECK(shared_memory_bytes(c) == (128 + 64 + 40) * 4);
  }
}

TEST_CASE("validate: the persistent scheduler is fa3's only", "[config]") {
  KernelConfig c;  // fa2 by default
  c.scheduler = flashjit::Scheduler::persistent;
  auto issues = validate(c);
  REQUIRE(issues.size() == 1);
  CHECK(issues[0].field == "scheduler");
  c.algorithm = flashjit::Algorithm::fa3;
  c.arch = flashjit::Arch{90, true};
  c.block_m = 128, c.warps = 2, c.block_n = 128, c.stages = 2;
  CHECK(validate(c).empty());
}

TEST_CASE("shared memory: persistent fa3 takes a second Q buffer when it fits", "[config]") {
  KernelConfig c;
  c.algorithm = flashjit::Algorithm::fa3;
  c.arch = flashjit::Arch{90, true};
  c.head_dim = 128, c.block_m = 128, c.warps = 2, c.block_n = 128, c.stages = 2;
  const int q = 128 * 128 * 2, kv = 2 * 2 * 128 * 128 * 2;
  CHECK(shared_memory_bytes(c) == q + kv + (2 + 4 * 2) * 8 + 1024);
  c.scheduler = flashjit::Scheduler::persistent;
  CHECK(shared_memory_bytes(c) == 2 * q + kv + (4 + 4 * 2) * 8 + 1024);
  // d256 with 80-key tiles: a second 64 KB Q buffer would pass 227 KB, so one.
  c.head_dim = 256, c.block_n = 80;
  CHECK(shared_memory_bytes(c) == 128 * 256 * 2 + 2 * 2 * 80 * 256 * 2 + (2 + 4 * 2) * 8 + 1024);
}

// The stage bound on its own (issue 29, a mutant that survived): at d64 with 64 keys, 5 stages fit the shared
// memory, so nothing but the rule itself refuses them.
TEST_CASE("validate: fa3 refuses 5 stages where they would fit the shared memory", "[config]") {
  KernelConfig c = fa2_base();
  c.algorithm = Algorithm::fa3;
  c.block_m = 128, c.consumer_warpgroups = 2, c.head_dim = 64, c.block_n = 64;
  c.stages = 4;
  INFO(describe(validate(c)));
  REQUIRE(validate(c).empty());
  REQUIRE(shared_memory_bytes(c) * 5 / 4 < 227 * 1024);
  c.stages = 5;
  auto issues = validate(c);
  INFO(describe(issues));
  REQUIRE(fields(issues) == std::set<std::string>{"stages"});
  CHECK(describe(issues).find("fa3 needs 2 to 4 stages, got 5") != std::string::npos);
}
