// Register fits of the optional features that add live values to a kernel: the tiles (or the scheduler) of a
// config with a relative-logits table or seqused_k over contiguous keys, where the heuristic ones spill.
#include <algorithm>

#include "dispatch/heuristics.hpp"

namespace flashjit::dispatch {

// A relative-logits table is read per score (one load and a clamped index each, templates/attention/variant.cuh),
// whose values the kernels keep live across a tile. NVRTC 13.0, -Xptxas=-v, spill bytes of the heuristic tiles: fa3
// three consumer warpgroups d64 96-key 88-136 (80-key 32-104, 64-key 0); two warpgroups persistent d128 128-key
// 12-24 (96-key 0), d256 80-key 40-52 (64-key causal 52; the grid scheduler 0 at 80 keys). FA2's 64-key tiles of
// 32 rows per warp: d128 20-40, d64 with softcap and ALiBi on sm_80 12; its 32-key tiles of three stages 0.
void fit_rel_bias_registers(KernelConfig& c) {
  KernelConfig k = c;
  if (c.algorithm == Algorithm::fa2) {
    if (c.block_n == 64 && c.block_m == 32 * c.warps) k.block_n = 32, k.stages = 3;
  } else if (c.consumer_warpgroups == 3) {
    k.block_n = std::min(c.block_n, 64);
  } else if (c.consumer_warpgroups == 2 && c.scheduler == Scheduler::persistent) {
    if (std::max(c.head_dim, value_head_dim(c)) > 128)
      k.scheduler = Scheduler::grid;
    else if (c.head_dim > 64)
      k.block_n = std::min(c.block_n, 96);
  }
  if (validate(k).empty()) c = k;
}

// seqused_k over contiguous keys: fa3's producer warp copies the V tiles that run past a sequence's keys and takes
// 8 of the two consumer warpgroups' registers for it (templates/fa3/kernel.cuh, RegisterSplit): above d128 their
// 232 spill with the persistent scheduler's state (NVRTC 13.0, -Xptxas=-v, d256 80-key tiles: 32 bytes), the grid
// scheduler's fit (0 bytes).
void fit_seqused(KernelConfig& c, const AttentionProblem& p) {
  c.seqused_k = p.seqused_k != nullptr && !p.paged();
  if (!c.seqused_k || c.algorithm != Algorithm::fa3 || c.consumer_warpgroups != 2) return;
  if (std::max(c.head_dim, value_head_dim(c)) > 128) c.scheduler = Scheduler::grid;
}

}  // namespace flashjit::dispatch
