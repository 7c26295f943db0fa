// NVRTC compiles (no GPU needed) of the seqused_k prefill kernels the dispatcher picks for padded batches (fa3 at
// head dims 64 to 256, grid and persistent up to d128, the grid scheduler above, dense and ragged keys; fa2 on
// sm_80; the reference kernel): no spills.
#include <vector>

#include "dispatch/heuristics.hpp"
#include "support/catch.hpp"
#include "support/compile_all.hpp"

using namespace flashjit;

namespace {

// Placeholders that check() accepts: the dispatcher reads the problem's shape, not its memory.
const void* const kAddress = reinterpret_cast<const void*>(std::uintptr_t{256});

AttentionProblem used_problem(int head_dim, MaskKind mask, bool ragged) {
  AttentionProblem p;
  p.batch = 4, p.seqlen_q = p.seqlen_k = 4096, p.heads_q = 8, p.heads_kv = 2, p.head_dim = head_dim, p.mask = mask;
  p.q = p.k = p.v = kAddress;
  p.o = const_cast<void*>(kAddress);
  p.seqused_k = static_cast<const int*>(kAddress);
  if (ragged) {
    p.cu_seqlens_q = p.cu_seqlens_k = static_cast<const int*>(kAddress);
    p.total_q = p.total_k = 4 * 4096;
  }
  return p;
}

}  // namespace

TEST_CASE("nvrtc seqused_k: the dispatcher's seqused_k kernels compile without spills", "[compile][seqused]") {
  std::vector<KernelConfig> configs;
  for (const Arch arch : {Arch{90, true}, Arch{80, false}})
    for (int d : {64, 128, 256})
      for (MaskKind mask : {MaskKind::none, MaskKind::causal}) {
        const AttentionProblem p = used_problem(d, mask, d == 128 && mask == MaskKind::causal);
        REQUIRE(check(p).ok());
        auto c = dispatch::choose(p, arch);
        REQUIRE(c.ok());
        CHECK(c->seqused_k);
        configs.push_back(*c);
        if (c->algorithm == Algorithm::fa3 && d > 128) CHECK(c->scheduler == Scheduler::grid);  // fit_seqused
        if (c->algorithm == Algorithm::fa3 && d <= 128) {  // the other scheduler too
          KernelConfig other = *c;
          other.scheduler = c->scheduler == Scheduler::persistent ? Scheduler::grid : Scheduler::persistent;
          if (validate(other).empty()) configs.push_back(other);
        }
      }
  auto reference = dispatch::choose(used_problem(128, MaskKind::causal, false), Arch{90, true}, Algorithm::naive);
  REQUIRE(reference.ok());
  configs.push_back(*reference);
  for (const auto& o : test::compile_all(configs)) test::check_compiled(o, /*no_spills=*/true);
}
