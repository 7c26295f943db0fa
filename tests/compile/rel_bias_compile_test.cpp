// NVRTC compiles (no GPU needed) of the kernels the dispatcher picks for a relative-logits table (rel_bias): fa3 at
// head dims 64, 128 and 256 (causal and not, alone and with ALiBi and softcap, dense and varlen), fa2 on sm_90 and
// sm_80, the reference kernel: no spills, fa3's setmaxnreg kept.
#include <vector>

#include "dispatch/heuristics.hpp"
#include "support/catch.hpp"
#include "support/compile_all.hpp"

using namespace flashjit;

namespace {

// Placeholders that check() accepts: the dispatcher reads the problem's shape, not its memory.
const void* const kAddress = reinterpret_cast<const void*>(std::uintptr_t{256});

AttentionProblem rel_problem(int head_dim, MaskKind mask, bool others, bool varlen) {
  AttentionProblem p;
  p.batch = 4, p.seqlen_q = p.seqlen_k = 4096, p.heads_q = 16, p.heads_kv = 4, p.head_dim = head_dim, p.mask = mask;
  p.q = p.k = p.v = kAddress;
  p.o = const_cast<void*>(kAddress);
  p.rel_bias = static_cast<const float*>(kAddress), p.rel_bias_extent = 256;
  if (others) p.alibi_slopes = static_cast<const float*>(kAddress), p.softcap = 30.f;
  if (varlen) {
    p.cu_seqlens_q = p.cu_seqlens_k = static_cast<const int*>(kAddress);
    p.total_q = p.total_k = 4 * 4096;
  }
  return p;
}

}  // namespace

TEST_CASE("nvrtc rel_bias: the dispatcher's rel_bias kernels compile without spills", "[compile][rel_bias]") {
  std::vector<KernelConfig> configs;
  auto add = [&](const AttentionProblem& p, const Arch& arch, Algorithm a) {
    REQUIRE(check(p).ok());
    auto c = dispatch::choose(p, arch, a);
    REQUIRE(c.ok());
    CHECK(c->rel_bias);
    configs.push_back(*c);
  };
  for (int d : {64, 128, 256})
    for (MaskKind mask : {MaskKind::none, MaskKind::causal})
      for (bool others : {false, true}) add(rel_problem(d, mask, others, false), Arch{90, true}, Algorithm::automatic);
  add(rel_problem(128, MaskKind::causal, true, true), Arch{90, true}, Algorithm::automatic);
  for (int d : {64, 128}) {
    add(rel_problem(d, MaskKind::causal, false, false), Arch{90, true}, Algorithm::fa2);
    add(rel_problem(d, MaskKind::causal, true, false), Arch{80, false}, Algorithm::automatic);
  }
  add(rel_problem(128, MaskKind::causal, true, false), Arch{90, true}, Algorithm::naive);
  for (const auto& o : test::compile_all(configs)) {
    test::check_compiled(o, /*no_spills=*/true);
    if (o.compiled.ok() && o.name.rfind("fa3_", 0) == 0) {
      INFO(o.name);
      CHECK_FALSE(o.compiled->ptxas.setmaxnreg_ignored);
    }
  }
}
