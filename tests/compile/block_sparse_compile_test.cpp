// NVRTC compiles (no GPU needed) of the block-sparse prefill kernels the dispatcher picks for block masks (fa3 at
// head dims 64 to 256 with and without a mask_mod, fa2 on sm_80, the reference kernel) and of the block_mask
// kernels: no spills.
#include <string>
#include <vector>

#include "dispatch/heuristics.hpp"
#include "support/catch.hpp"
#include "support/compile_all.hpp"

using namespace flashjit;

namespace {

const char* kMod = R"(
__device__ bool mask_mod(int b, int h, int q_idx, int kv_idx, const flashjit::ModContext& ctx) {
  const int* doc = ctx.pointer<int>(0);
  return doc[q_idx] == doc[kv_idx];
}
)";

// Placeholders that check() accepts: the dispatcher reads the problem's shape, not its memory.
const void* const kAddress = reinterpret_cast<const void*>(std::uintptr_t{256});

AttentionProblem sparse_problem(int head_dim, MaskKind mask, int q_block, int kv_block, bool with_mod) {
  AttentionProblem p;
  p.batch = 1, p.seqlen_q = p.seqlen_k = 4096, p.heads_q = 8, p.heads_kv = 2, p.head_dim = head_dim, p.mask = mask;
  p.q = p.k = p.v = kAddress;
  p.o = const_cast<void*>(kAddress);
  p.block_mask.kv_num_blocks = p.block_mask.kv_indices = static_cast<const int*>(kAddress);
  p.block_mask.q_block = q_block, p.block_mask.kv_block = kv_block;
  p.block_mask.num_q_blocks = 4096 / q_block, p.block_mask.num_kv_blocks = 4096 / kv_block;
  if (with_mod) p.mask_mod = kMod;
  return p;
}

}  // namespace

TEST_CASE("nvrtc block sparsity: the dispatcher's block-sparse kernels and the block_mask kernels compile without "
          "spills", "[compile][block_sparse]") {
  std::vector<KernelConfig> configs;
  for (const Arch arch : {Arch{90, true}, Arch{80, false}})
    for (int d : {64, 96, 128, 256})
      for (bool mod : {false, true}) {
        const AttentionProblem p = sparse_problem(d, d == 96 ? MaskKind::none : MaskKind::causal, 128, 128, mod);
        REQUIRE(check(p).ok());
        auto c = dispatch::choose(p, arch);
        REQUIRE(c.ok());
        CHECK(c->block_sparse);
        CHECK(c->algorithm == (arch.accelerated ? Algorithm::fa3 : Algorithm::fa2));
        configs.push_back(*c);
      }
  auto small = dispatch::choose(sparse_problem(128, MaskKind::causal, 64, 64, true), Arch{90, true});
  REQUIRE(small.ok());
  CHECK(small->block_m == 64);
  CHECK(small->block_n == 64);
  configs.push_back(*small);
  auto reference = dispatch::choose(sparse_problem(128, MaskKind::causal, 16, 16, true), Arch{90, true});
  REQUIRE(reference.ok());
  CHECK(reference->algorithm == Algorithm::naive);
  configs.push_back(*reference);
  for (const auto& o : test::compile_all(configs)) test::check_compiled(o, /*no_spills=*/true);

  std::vector<BlockMaskKernelConfig> masks;
  for (MaskKind m : {MaskKind::none, MaskKind::causal, MaskKind::sliding_window, MaskKind::chunked_causal})
    for (bool mod : {false, true}) {
      BlockMaskKernelConfig c;
      c.mask = m, c.warps = 8;
      if (mod) c.mask_mod = kMod;
      masks.push_back(c);
    }
  for (const auto& o : test::compile_all(masks)) test::check_compiled(o, /*no_spills=*/true);
}
