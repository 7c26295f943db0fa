// NVRTC compiles of the bias kernels (no GPU needed): the configs the dispatcher picks for problems with a bias
// tensor of each element type, at the head dims where FA3's consumers sit at a register ceiling (d64 on three
// warpgroups, d128, d256), causal (the per-element masking on top) and with softcap and sinks, for FA2 (sm_80 and
// sm_90a), the reference kernel and the decode split kernel: each compiles, without spills (the reference aside),
// FA3 keeping its setmaxnreg, and staging a dense bias through TMA (bias_tma) where its tiles allow.
#include <cstdint>
#include <vector>

#include "config/variants.hpp"
#include "dispatch/decode_heuristics.hpp"
#include "dispatch/heuristics.hpp"
#include "support/compile_all.hpp"

using namespace flashjit;

namespace {

const Arch kSm80{80, false};
const Arch kSm90a{90, true};
const void* const kStandIn = reinterpret_cast<const void*>(std::uintptr_t{0x1000});

// dense: a contiguous [1, 32, 4096, 4096] bias, which fa3 stages through TMA (fit_bias_tma); otherwise all strides 0
// (one entry broadcast), which it loads per thread.
KernelConfig chosen(Algorithm algorithm, int head_dim, BiasType bias, const Arch& arch, bool softcap_sinks = false,
                    bool dense = false) {
  AttentionProblem p;
  p.dtype = DType::bf16, p.batch = 1, p.seqlen_q = p.seqlen_k = 4096, p.heads_q = 32, p.heads_kv = 8;
  p.head_dim = head_dim, p.mask = MaskKind::causal;
  p.bias = kStandIn, p.bias_type = bias;
  if (dense) p.bias_strides = BiasStrides::contiguous(p.heads_q, p.seqlen_q, p.seqlen_k);
  if (softcap_sinks) p.softcap = 30.f, p.sinks = static_cast<const float*>(kStandIn);
  auto c = dispatch::choose(p, arch, algorithm);
  REQUIRE(c.ok());
  if (dense) dispatch::fit_bias_tma(*c, p);
  CHECK(c->bias == bias);
  CHECK_FALSE(c->pack_gqa);
  return *c;
}

}  // namespace

TEST_CASE("nvrtc: the dispatcher's bias kernels compile without spills", "[compile][bias]") {
  std::vector<KernelConfig> configs;
  for (BiasType bias : {BiasType::fp32, BiasType::bf16, BiasType::fp16, BiasType::boolean})
    for (int d : {64, 128, 256})
      for (bool dense : {false, true}) {
        configs.push_back(chosen(Algorithm::fa3, d, bias, kSm90a, false, dense));
        // Staged up to d192 (tile rows of whole 128-byte blocks: bools at d128 on 128-key tiles, not 112).
        CHECK(configs.back().bias_tma == (dense && d <= 192));
        if (configs.back().bias_tma) CHECK(configs.back().block_n * config::bias_element_bytes(bias) % 128 == 0);
      }
  configs.push_back(chosen(Algorithm::fa3, 128, BiasType::fp32, kSm90a, true));
  configs.push_back(chosen(Algorithm::fa3, 128, BiasType::bf16, kSm90a, true, true));
  configs.push_back(chosen(Algorithm::fa3, 256, BiasType::bf16, kSm90a, true));
  configs.push_back(chosen(Algorithm::fa3, 192, BiasType::fp16, kSm90a, true, true));
  configs.push_back(chosen(Algorithm::fa3, 160, BiasType::fp32, kSm90a, false, true));
  configs.push_back(chosen(Algorithm::fa2, 128, BiasType::bf16, kSm90a));
  configs.push_back(chosen(Algorithm::fa2, 128, BiasType::fp32, kSm80, true));
  configs.push_back(chosen(Algorithm::fa2, 64, BiasType::boolean, kSm80));
  auto outcomes = test::compile_all(configs);
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    test::check_compiled(outcomes[i], true);
    INFO(outcomes[i].name);
    CHECK(outcomes[i].name.find(std::string("_bias") + to_string(configs[i].bias)) != std::string::npos);
    if (configs[i].algorithm == Algorithm::fa3 && outcomes[i].compiled.ok())
      CHECK_FALSE(outcomes[i].compiled->ptxas.setmaxnreg_ignored);
  }
}

TEST_CASE("nvrtc: the reference kernel reads every bias type", "[compile][bias]") {
  std::vector<KernelConfig> configs;
  for (BiasType bias : {BiasType::fp32, BiasType::bf16, BiasType::fp16, BiasType::boolean})
    configs.push_back(chosen(Algorithm::naive, 128, bias, kSm90a, bias == BiasType::boolean));
  for (const auto& o : test::compile_all(configs)) test::check_compiled(o, false);
}

TEST_CASE("nvrtc decode: the planner's bias kernels compile without spills", "[compile][decode][bias]") {
  // One long cache split over key groups, a short one over column groups, 16-token pages, d256 with a window, the
  // cluster merge; each bias type once, softcap and sinks with the widest.
  DecodeProblem p;
  p.batch = 4, p.heads_q = 32, p.heads_kv = 8, p.head_dim = 128, p.max_seqlen_k = 8192;
  p.bias = kStandIn, p.bias_type = BiasType::bf16;
  std::vector<DecodeKernelConfig> configs{dispatch::plan_decode(p, kSm90a, 132).split};
  p.max_seqlen_k = 32, p.batch = 16, p.bias_type = BiasType::boolean;
  configs.push_back(dispatch::plan_decode(p, kSm90a, 132).split);
  p.max_seqlen_k = 4096, p.layout = KvLayout::paged, p.page_size = 16, p.bias_type = BiasType::fp16;
  configs.push_back(dispatch::plan_decode(p, kSm80, 108).split);
  p.layout = KvLayout::contiguous, p.page_size = 0, p.head_dim = 256, p.window_left = 100;
  p.bias_type = BiasType::fp32, p.softcap = 30.f, p.sinks = static_cast<const float*>(kStandIn);
  configs.push_back(dispatch::plan_decode(p, kSm90a, 132).split);
  DecodeKernelConfig cluster = configs[0];
  cluster.cluster_merge = true;
  configs.push_back(cluster);
  for (const auto& c : configs) {
    INFO(readable_name(c));
    CHECK(c.bias != BiasType::none);
    REQUIRE(validate(c).empty());
  }
  for (const auto& o : test::compile_all(configs)) test::check_compiled(o, true);
}
