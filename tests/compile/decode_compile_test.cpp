// NVRTC compiles of the decode kernels (no GPU needed): the split kernel as decode_kernel_config() picks it
// for bf16 / fp16, head dims 64 / 128 / 256, contiguous and paged caches (no spills; the short-cache kernels'
// registers let the CTAs per SM the planner counts on fit), the row counts of
// groups 1 / 4 / 8 with q_len 1 / 4 / 16 and the window variant, and the combine kernel for fp32 partials
// and for the merge API's bf16 / fp16 states.
#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "dispatch/decode_heuristics.hpp"
#include "support/catch.hpp"
#include "support/compile_all.hpp"

using flashjit::Arch;
using flashjit::CombineKernelConfig;
using flashjit::DecodeKernelConfig;
using flashjit::DType;
using flashjit::KvLayout;
using flashjit::Result;
using flashjit::codegen::GeneratedSource;
using flashjit::test::check_compiled;
using flashjit::test::compile_all;
using flashjit::test::on_two_threads;

namespace {

const Arch kSm90a{90, true};
const Arch kSm80{80, false};

}  // namespace

TEST_CASE("nvrtc decode: the planned split kernels compile without spills", "[compile][decode]") {
  std::vector<DecodeKernelConfig> configs;
  for (DType t : {DType::bf16, DType::fp16})
    for (int d : {64, 128, 256})
      for (KvLayout layout : {KvLayout::contiguous, KvLayout::paged})
        configs.push_back(flashjit::dispatch::decode_kernel_config(t, d, 4, 1, layout, 16, flashjit::MaskKind::causal, kSm90a));
  // Every page-size regime of kv_loads.cuh: per-row gather (1, 8), several pages per tile (32), one page
  // per tile (64, 256).
  for (int page : {1, 8, 32, 64, 256})
    configs.push_back(flashjit::dispatch::decode_kernel_config(DType::bf16, 128, 8, 1, KvLayout::paged, page, flashjit::MaskKind::causal,
                                                                kSm90a));
  // Rows of groups 1 / 8 with q_len 1 / 4 / 16 (16, 32, 64, 128 rows), the window, sm_80.
  for (auto [group, q_len] : {std::pair{1, 1}, {8, 4}, {4, 16}, {8, 16}})
    configs.push_back(flashjit::dispatch::decode_kernel_config(DType::bf16, 128, group, q_len, KvLayout::paged, 16,
                                                                flashjit::MaskKind::causal, kSm90a));
  configs.push_back(
      flashjit::dispatch::decode_kernel_config(DType::bf16, 64, 8, 16, KvLayout::paged, 16, flashjit::MaskKind::causal, kSm90a));
  configs.push_back(
      flashjit::dispatch::decode_kernel_config(DType::bf16, 128, 4, 4, KvLayout::contiguous, 0, flashjit::MaskKind::sliding_window, kSm90a));
  configs.push_back(flashjit::dispatch::decode_kernel_config(DType::fp16, 256, 8, 1, KvLayout::paged, 64, flashjit::MaskKind::sliding_window, kSm80));
  // Chunks (the shared mask policy's chunked-causal mask), contiguous and paged.
  configs.push_back(flashjit::dispatch::decode_kernel_config(DType::bf16, 128, 4, 2, KvLayout::contiguous, 0,
                                                              flashjit::MaskKind::chunked_causal, kSm90a));
  configs.push_back(flashjit::dispatch::decode_kernel_config(DType::bf16, 64, 8, 1, KvLayout::paged, 16,
                                                              flashjit::MaskKind::chunked_causal, kSm90a));
  // sm_86 (99 KB per CTA): d128 in two stages, d256 with two key groups of 32-key tiles.
  for (int d : {128, 256})
    configs.push_back(flashjit::dispatch::decode_kernel_config(DType::bf16, d, 4, 1, KvLayout::contiguous, 0, flashjit::MaskKind::causal,
                                                                flashjit::Arch{86, false}));
  // d256 x 128 rows on sm_80: one warp per m-tile, no merge buffer, 32-key tiles (128 KB).
  configs.push_back(
      flashjit::dispatch::decode_kernel_config(DType::bf16, 256, 8, 16, KvLayout::contiguous, 0, flashjit::MaskKind::causal, kSm80));
  // Odd m-tile counts (48, 80, 112 rows: three, five, seven warps, of which the K/V copies use a power of
  // two of rows per pass) and a head dim of twelve chunks (d96).
  for (auto [group, q_len] : {std::pair{4, 12}, {8, 10}, {8, 14}})
    for (KvLayout layout : {KvLayout::contiguous, KvLayout::paged})
      configs.push_back(flashjit::dispatch::decode_kernel_config(DType::bf16, 128, group, q_len, layout,
                                                                  layout == KvLayout::paged ? 16 : 0, flashjit::MaskKind::causal, kSm90a));
  configs.push_back(
      flashjit::dispatch::decode_kernel_config(DType::fp16, 96, 4, 1, KvLayout::paged, 16, flashjit::MaskKind::causal, kSm90a));
  // The small-CTA kernels of short caches over many CTAs (plan_decode): one warp (contiguous d128), two.
  for (int d : {64, 128}) {
    auto p = flashjit::DecodeProblem{};
    p.batch = 64, p.heads_q = 32, p.heads_kv = 8, p.head_dim = d, p.max_seqlen_k = 256;
    configs.push_back(flashjit::dispatch::plan_decode(p, kSm90a, 132).split);
    p.layout = KvLayout::paged, p.page_size = 16;
    configs.push_back(flashjit::dispatch::plan_decode(p, kSm90a, 132).split);
    // One tile of at most 64 keys, up to two CTAs per SM: column groups on 32 keys, key slices on 64, contiguous
    // and 1-token pages.
    p.batch = 16;
    for (int keys : {32, 64})
      for (int page : {0, 1}) {
        p.max_seqlen_k = keys, p.layout = page > 0 ? KvLayout::paged : KvLayout::contiguous, p.page_size = page;
        configs.push_back(flashjit::dispatch::plan_decode(p, kSm90a, 132).split);
        CHECK(configs.back().column_groups == (keys <= 32 ? 4 : 1));
        CHECK(configs.back().stages == 2);
      }
  }
  // Two column groups in three stages: paged d128 short caches over more than two CTAs per SM, 16-token and
  // 1-token pages.
  for (int page : {1, 16}) {
    auto p = flashjit::DecodeProblem{};
    p.batch = 40, p.heads_q = 32, p.heads_kv = 8, p.head_dim = 128, p.max_seqlen_k = 256;
    p.layout = KvLayout::paged, p.page_size = page;
    configs.push_back(flashjit::dispatch::plan_decode(p, kSm90a, 132).split);
    CHECK(configs.back().column_groups == 2);
    CHECK(configs.back().stages == 3);
  }
  // The cluster-merge variants: key groups merged in shared memory first (16 rows, four warps), one key group
  // (d256 x 128 rows), column groups (at most 32 keys), paged.
  for (std::size_t i : {std::size_t{2}, std::size_t{3}, configs.size() - 1}) {
    DecodeKernelConfig c = configs[i];
    c.cluster_merge = true;
    configs.push_back(c);
  }
  DecodeKernelConfig d256 =
      flashjit::dispatch::decode_kernel_config(DType::bf16, 256, 8, 16, KvLayout::contiguous, 0, flashjit::MaskKind::causal, kSm90a);
  d256.cluster_merge = true;
  configs.push_back(d256);
  auto short_cache = flashjit::DecodeProblem{};
  short_cache.batch = 16, short_cache.heads_q = 32, short_cache.heads_kv = 8, short_cache.head_dim = 128;
  short_cache.max_seqlen_k = 32, short_cache.num_splits = 2, short_cache.split_merge = flashjit::SplitMerge::cluster;
  configs.push_back(flashjit::dispatch::plan_decode(short_cache, kSm90a, 132).split);
  CHECK(configs.back().column_groups == 4);
  CHECK(configs.back().cluster_merge);
  for (const auto& c : configs) {
    INFO(readable_name(c));
    REQUIRE(validate(c).empty());
  }
  for (const auto& o : compile_all(configs)) check_compiled(o, true);
}

TEST_CASE("nvrtc decode: the planner's kernels with every variant, and the sinks combine kernel, compile without spills",
          "[compile][decode][variant]") {
  // Softcap, ALiBi and sinks together: key groups merged in shared memory (the long-cache kernel), column
  // groups (short caches), paged caches, the cluster merge, a window, d256; and the combine kernel with sinks.
  std::vector<DecodeKernelConfig> configs;
  auto p = flashjit::DecodeProblem{};
  p.batch = 4, p.heads_q = 32, p.heads_kv = 8, p.head_dim = 128, p.max_seqlen_k = 8192;
  p.softcap = 30.f;
  p.alibi_slopes = p.sinks = reinterpret_cast<const float*>(std::uintptr_t{0x1000});
  configs.push_back(flashjit::dispatch::plan_decode(p, kSm90a, 132).split);
  p.max_seqlen_k = 32, p.batch = 16;
  configs.push_back(flashjit::dispatch::plan_decode(p, kSm90a, 132).split);
  p.max_seqlen_k = 4096, p.layout = KvLayout::paged, p.page_size = 16;
  configs.push_back(flashjit::dispatch::plan_decode(p, kSm90a, 132).split);
  p.layout = KvLayout::contiguous, p.page_size = 0, p.head_dim = 256, p.window_left = 100;
  configs.push_back(flashjit::dispatch::plan_decode(p, kSm90a, 132).split);
  DecodeKernelConfig cluster = configs[0];
  cluster.cluster_merge = true;
  configs.push_back(cluster);
  for (const auto& c : configs) {
    INFO(readable_name(c));
    CHECK(c.softcap);
    CHECK(c.alibi);
    CHECK(c.sinks);
    REQUIRE(validate(c).empty());
  }
  for (const auto& o : compile_all(configs)) check_compiled(o, true);
  CombineKernelConfig combine = flashjit::dispatch::plan_decode(p, kSm90a, 132).combine;
  CHECK(combine.sinks);
  for (const auto& o : compile_all(std::vector<CombineKernelConfig>{combine})) check_compiled(o, true);
}

TEST_CASE("nvrtc decode: the planner's kernels of more CTAs than SMs keep the CTAs per SM it counts on",
          "[compile][decode]") {
  // Short caches over many CTAs (one warp in three and two stages, with and without a window; two warps at
  // d64; column groups), four warps on key slices of 64-key tiles in two stages (33-64 keys, short d128
  // caches up to two CTAs per SM, longer caches over more CTAs than SMs; contiguous, 16- and 1-token pages,
  // the kernels paged short caches up to two CTAs per SM take too): their
  // registers must let ctas_per_sm() CTAs share an SM (the H200 lost 13% at B256 Sk 32 when a short-cache
  // kernel went from 168 to 176 registers).
  std::vector<DecodeKernelConfig> configs;
  for (auto [batch, keys, window, d, page] :
       {std::tuple{64, 32, -1, 128, 0}, {256, 32, -1, 128, 0}, {64, 32768, 100, 128, 0}, {256, 32, 100, 128, 0},
        {64, 256, -1, 64, 0}, {16, 64, -1, 128, 0}, {24, 128, -1, 128, 0}, {20, 8192, -1, 128, 0},
        {20, 8192, -1, 128, 16}, {16, 64, -1, 128, 1}, {16, 32, -1, 128, 0}, {64, 128, -1, 128, 16}}) {
    auto p = flashjit::DecodeProblem{};
    p.batch = batch, p.heads_q = 32, p.heads_kv = 8, p.head_dim = d, p.max_seqlen_k = keys, p.window_left = window;
    if (page > 0) {
      p.layout = flashjit::KvLayout::paged, p.page_size = page;
      p.max_pages_per_seq = (keys + page - 1) / page, p.num_pages = batch * p.max_pages_per_seq;
    }
    configs.push_back(flashjit::dispatch::plan_decode(p, kSm90a, 132).split);
  }
  REQUIRE(configs[0].warps == 1);
  REQUIRE(configs[0].stages == 3);
  REQUIRE(configs[1].stages == 2);
  REQUIRE(configs[2].mask == flashjit::MaskKind::sliding_window);
  REQUIRE(configs[4].warps == 2);
  for (std::size_t i = 5; i < 10; ++i) {
    INFO(readable_name(configs[i]));
    REQUIRE(configs[i].block_n == 64);
    REQUIRE(configs[i].warps == 4);
    REQUIRE(configs[i].stages == 2);
  }
  REQUIRE(configs[10].column_groups == 4);
  REQUIRE(configs[11].column_groups == 2);
  const auto outcomes = compile_all(configs);
  for (std::size_t i = 0; i < configs.size(); ++i) {
    check_compiled(outcomes[i], true);
    if (!outcomes[i].compiled.ok()) continue;
    INFO(readable_name(configs[i]) << ": " << outcomes[i].compiled->ptxas.registers << " registers, "
                                   << flashjit::ctas_per_sm(configs[i]) << " CTAs per SM");
    // Registers are allocated per warp in units of 256 (eight per thread).
    const int allocated = (outcomes[i].compiled->ptxas.registers + 7) / 8 * 8;
    CHECK(allocated * flashjit::threads_per_cta(configs[i]) * flashjit::ctas_per_sm(configs[i]) <= 64 * 1024);
  }
}

TEST_CASE("nvrtc decode: the combine and merge kernels compile", "[compile][decode]") {
  std::vector<CombineKernelConfig> configs;
  for (int d : {64, 96, 128, 160, 192, 256})
    for (bool fp32 : {true, false})
      for (DType t : {DType::bf16, DType::fp16}) {
        CombineKernelConfig c;
        c.arch = kSm90a, c.dtype = t, c.fp32_inputs = fp32, c.head_dim = d;
        configs.push_back(c);
      }
  for (const auto& o : compile_all(configs)) check_compiled(o, true);
}

TEST_CASE("decode configs: validate names the field", "[compile][decode]") {
  DecodeKernelConfig c =
      flashjit::dispatch::decode_kernel_config(DType::bf16, 128, 4, 1, KvLayout::paged, 16, flashjit::MaskKind::causal, kSm90a);
  REQUIRE(validate(c).empty());
  auto first_field = [](const DecodeKernelConfig& x) {
    auto issues = validate(x);
    return issues.empty() ? std::string() : issues[0].field;
  };
  DecodeKernelConfig bad = c;
  bad.rows = 24;
  CHECK(first_field(bad) == "rows");
  bad = c, bad.warps = 3, bad.rows = 32;
  CHECK(first_field(bad) == "warps");
  bad = c, bad.block_n = 48;  // 4 key slices of 12 keys
  CHECK(first_field(bad) == "block_n");
  bad = c, bad.rows = 24, bad.block_n = 8;  // block_n is checked also where the rows are not whole m-tiles
  const auto issues = validate(bad);
  CHECK(std::any_of(issues.begin(), issues.end(), [](const auto& i) { return i.field == "block_n"; }));
  bad = c, bad.stages = 1;
  CHECK(first_field(bad) == "stages");
  bad = c, bad.head_dim = 256, bad.stages = 5, bad.block_n = 128;
  CHECK(first_field(bad) == "stages");  // shared memory
  bad = c, bad.arch = Arch{75, false};
  CHECK(first_field(bad) == "arch");
  bad = c, bad.page_size = 24;
  CHECK(first_field(bad) == "page_size");
  bad = c, bad.arch = Arch{89, false}, bad.cluster_merge = true;  // clusters start at sm_90
  CHECK(first_field(bad) == "cluster_merge");
  // The cluster's fp32 state takes shared memory beyond the K/V stages where they are smaller.
  bad = flashjit::dispatch::decode_kernel_config(DType::bf16, 256, 8, 16, KvLayout::contiguous, 0, flashjit::MaskKind::causal, kSm90a);
  const int without = shared_memory_bytes(bad);
  bad.cluster_merge = true;
  CHECK(shared_memory_bytes(bad) == 128 * 256 * 2 + std::max(without - 128 * 256 * 2, 128 * 257 * 4));
  bad = c, bad.page_size = 0;
  CHECK(first_field(bad) == "page_size");
  bad = c, bad.layout = KvLayout::contiguous;  // page_size 16 on a contiguous cache
  CHECK(first_field(bad) == "page_size");
  // Column groups: warps = m-tiles x groups, whole 16-column slices, a power of two.
  DecodeKernelConfig cols = c;
  cols.column_groups = 4;
  CHECK(validate(cols).empty());
  CHECK(readable_name(cols) == "decode_bf16_d128_r16_bn128_s3_w4c4_paged16_sm90a");
  bad = cols, bad.warps = 8;
  CHECK(first_field(bad) == "warps");
  bad = cols, bad.column_groups = 3;
  CHECK(first_field(bad) == "column_groups");
  bad = cols, bad.head_dim = 96;  // 24 columns per warp
  CHECK(first_field(bad) == "column_groups");
  bad = cols, bad.block_n = 40;
  CHECK(first_field(bad) == "block_n");
  CHECK(readable_name(c) == "decode_bf16_d128_r16_bn128_s3_w4_paged16_sm90a");
  CombineKernelConfig m;
  m.fp32_inputs = false;
  CHECK(readable_name(m) == "combine_bf16_bf16_d128_w4_sm90a");
  m.head_dim = 12;
  REQUIRE(!check(m).ok());
  CHECK(check(m).error().message.find("head_dim") != std::string::npos);
}

TEST_CASE("nvrtc decode: kernels launched with programmatic dependent launch read nothing through ld.global.nc",
          "[compile][decode]") {
  // Decode and combine kernels may start while the kernel before them runs and wait for it in-kernel
  // (griddepcontrol.wait) before reading what it wrote. ptxas takes ld.global.nc data (__ldg) as fixed for the
  // kernel's life and moved such a load of seqlens_k above the wait in 17 of 19 decode kernels (fourteenth
  // session): their PTX must have none. The planner's split kernels (contiguous, 1- to 256-token pages, window,
  // column groups, one warp, d64 / d96 / d256, 32 rows; a forced cluster merge) and the combine kernels.
  std::vector<GeneratedSource> sources;
  for (auto [batch, keys, window, d, page, group] :
       {std::tuple{1, 32768, -1, 128, 0, 4}, {16, 8192, -1, 128, 0, 4}, {20, 8192, -1, 128, 1, 4},
        {20, 8192, -1, 128, 16, 4}, {20, 8192, -1, 128, 64, 4}, {20, 8192, -1, 128, 256, 4},
        {16, 8192, -1, 128, 16, 4}, {64, 256, -1, 128, 0, 4}, {64, 32768, 100, 128, 16, 4},
        {64, 256, -1, 128, 16, 4}, {16, 32, -1, 128, 0, 4}, {4, 4096, -1, 64, 0, 4}, {4, 4096, -1, 256, 0, 4},
        {4, 4096, -1, 96, 16, 4}, {4, 4096, -1, 128, 0, 8}, {6, 8192, -1, 128, 0, 1}}) {
    auto p = flashjit::DecodeProblem{};
    p.batch = batch, p.heads_kv = 8, p.heads_q = 8 * group, p.head_dim = d, p.max_seqlen_k = keys;
    p.window_left = window, p.q_len = group == 8 ? 4 : 1;
    if (group == 1) p.split_merge = flashjit::SplitMerge::cluster;
    if (page > 0) {
      p.layout = KvLayout::paged, p.page_size = page;
      p.max_pages_per_seq = (keys + page - 1) / page, p.num_pages = batch * p.max_pages_per_seq;
    }
    const auto plan = flashjit::dispatch::plan_decode(p, kSm90a, 132);
    auto source = flashjit::codegen::generate(plan.split);
    REQUIRE(source.ok());
    sources.push_back(*source);
  }
  CombineKernelConfig combine;
  for (bool fp32 : {true, false}) {
    combine.fp32_inputs = fp32;
    auto source = flashjit::codegen::generate(combine);
    REQUIRE(source.ok());
    sources.push_back(*source);
  }
  std::vector<Result<std::string>> ptx(sources.size(), flashjit::Error());
  on_two_threads(sources.size(), [&](std::size_t i) {
    ptx[i] = flashjit::compile::compile_ptx(sources[i], kSm90a, flashjit::log::Logger{});
  });
  bool cluster = false, column_groups = false, window = false;
  for (std::size_t i = 0; i < sources.size(); ++i) {
    INFO(sources[i].name);
    REQUIRE(ptx[i].ok());
    CHECK(ptx[i]->find("griddepcontrol.wait") != std::string::npos);
    CHECK(ptx[i]->find("ld.global.nc") == std::string::npos);
    cluster = cluster || sources[i].name.find("cluster") != std::string::npos;
    column_groups = column_groups || sources[i].name.find("c2_") != std::string::npos;
    window = window || sources[i].name.find("window") != std::string::npos;
  }
  CHECK(cluster);
  CHECK(column_groups);
  CHECK(window);
}
