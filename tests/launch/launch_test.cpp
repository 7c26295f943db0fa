// Tests of the launch layer that need no device: kernel arguments (make_params) and grids (grid_for), for
// fixed-length and varlen problems.
#include <cstdint>

#include "dispatch/heuristics.hpp"
#include "launch/launch.hpp"
#include "support/catch.hpp"

using flashjit::Arch;
using flashjit::AttentionProblem;
using flashjit::DType;
using flashjit::KernelConfig;
using flashjit::MaskKind;
using flashjit::Scheduler;
using flashjit::launch::grid_for;
using flashjit::launch::make_params;

namespace {

AttentionProblem fixed_problem() {
  AttentionProblem p;
  p.batch = 3, p.seqlen_q = 300, p.seqlen_k = 1000, p.heads_q = 8, p.heads_kv = 2, p.head_dim = 64;
  p.q = p.k = p.v = reinterpret_cast<const void*>(std::uintptr_t{0x100000});
  p.o = reinterpret_cast<void*>(std::uintptr_t{0x200000});
  p.mask = MaskKind::causal;
  return p;
}

AttentionProblem varlen_problem() {
  AttentionProblem p = fixed_problem();
  p.cu_seqlens_q = reinterpret_cast<const int*>(std::uintptr_t{0x300000});
  p.cu_seqlens_k = reinterpret_cast<const int*>(std::uintptr_t{0x300100});
  p.total_q = 308, p.total_k = 1500;
  return p;
}

}  // namespace

TEST_CASE("make_params: a fixed-length problem", "[launch]") {
  const auto a = make_params(fixed_problem());
  CHECK(a.q_batch == 300 * 8 * 64);
  CHECK(a.k_batch == 1000 * 2 * 64);
  CHECK(a.q_seq == 8 * 64);
  CHECK(a.causal_offset == 700);
  CHECK(a.window_left == -1);
  CHECK(a.window_right == 0);
  CHECK(a.group == 4);
  CHECK(a.cu_seqlens_q == nullptr);
  CHECK(a.cu_seqlens_k == nullptr);
  CHECK(a.total_q == 0);
  CHECK(a.total_k == 0);
}

TEST_CASE("make_params: a varlen problem", "[launch][varlen]") {
  const AttentionProblem p = varlen_problem();
  const auto a = make_params(p);
  CHECK(a.cu_seqlens_q == p.cu_seqlens_q);
  CHECK(a.cu_seqlens_k == p.cu_seqlens_k);
  CHECK(a.total_q == 308);
  CHECK(a.total_k == 1500);
  // Packed tensors: no batch dimension; rows and heads as for contiguous [total, heads, head_dim].
  CHECK(a.q_batch == 0);
  CHECK(a.k_batch == 0);
  CHECK(a.v_batch == 0);
  CHECK(a.o_batch == 0);
  CHECK(a.q_seq == 8 * 64);
  CHECK(a.k_seq == 2 * 64);
  CHECK(a.o_head == 64);
  CHECK(a.batch == 3);
  CHECK(a.seqlen_q == 300);  // the max lengths
  CHECK(a.seqlen_k == 1000);
}

TEST_CASE("grid_for: varlen problems get the grid of their max lengths", "[launch][varlen]") {
  KernelConfig c = flashjit::dispatch::fa3_heuristic(DType::bf16, 64, MaskKind::causal, Arch{90, true});
  c.varlen = true;
  c.scheduler = Scheduler::grid;  // the heuristic's is persistent (below)
  const auto g = grid_for(c, varlen_problem(), 132);
  CHECK(g.x == (300 + 191) / 192);
  CHECK(g.y == 8);
  CHECK(g.z == 3);
  c.scheduler = Scheduler::persistent;
  CHECK(grid_for(c, varlen_problem(), 132).x == 2 * 8 * 3);  // fewer tiles than SMs
  CHECK(grid_for(c, varlen_problem(), 20).x == 20);
}
