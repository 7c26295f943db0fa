// The dispatcher: which config runs a problem. One pure heuristic function per algorithm and architecture,
// with the reason for each choice next to it; support checks shared with explicit-config calls.
#pragma once

#include <string>

#include "flashjit/config.hpp"
#include "flashjit/problem.hpp"

namespace flashjit::dispatch {

class TunedTables;

// FA2 tile choice for a head dim on an architecture.
// head_dim_v: V's head dim when it differs (0: the same).
KernelConfig fa2_heuristic(DType dtype, int head_dim, MaskKind mask, const Arch& arch, int head_dim_v = 0);
// FA3 (sm_90a) tile choice for a head dim.
KernelConfig fa3_heuristic(DType dtype, int head_dim, MaskKind mask, const Arch& arch, int head_dim_v = 0);
// fa3_heuristic adjusted to the problem's grid (smaller tiles when 128-row tiles leave most SMs idle).
KernelConfig fa3_config(const AttentionProblem& problem, const Arch& arch);
// The reference kernel's config.
KernelConfig naive_config(DType dtype, int head_dim, MaskKind mask, const Arch& arch, int head_dim_v = 0);

// Picks a config for the problem on a device of `arch`. `requested` = automatic takes the closest bucket of
// the tuned tables when given and one matches, else the fastest algorithm by the heuristics that supports
// the problem (fa3 on sm_90a, else fa2, else naive). A varlen problem gets the same tiles as its padded
// fixed-length twin, with varlen set.
Result<KernelConfig> choose(const AttentionProblem& problem, const Arch& arch,
                            Algorithm requested = Algorithm::automatic, const TunedTables* tuned = nullptr);

// The tiles of an fa3 config with variants on (softcap, alibi, sinks, a bias tensor), narrowed where the heuristic
// tiles would spill registers with them (a bias: two consumer warpgroups, or one at d256); other configs as they
// are. choose() applies it.
void fit_variant_registers(KernelConfig& config);
// Its part for a relative-logits table (rel_bias; src/dispatch/register_fits.cpp): fa3 64-key tiles on three
// consumer warpgroups, 96 on two with the persistent scheduler (the grid scheduler above d128), fa2 32-key tiles of
// three stages.
void fit_rel_bias_registers(KernelConfig& config);

// fa3 configs for problems whose key range per row is short (sliding windows of at most 512 keys) with grouped
// query heads: pack_gqa on (192-row tiles of 64 keys up to head dim 128), where the group divides block_m and
// the variants allow it (config::pack_gqa_mismatch). choose() applies it.
void fit_pack_gqa(KernelConfig& config, const AttentionProblem& problem);
// The problem's page size (0: contiguous keys) into the config; fa3 tiles of 80, 96 or 112 keys take the power
// of two below when the page size does not divide them (fa3 needs block_n and page_size to divide one another),
// and the grid scheduler when pages are smaller than the key tile; fa2 then 64-row tiles.
void fit_pages(KernelConfig& config, const AttentionProblem& problem);
// The problem's seqused_k over contiguous keys (not paged) into the config, and for fa3 above head dim 128 on two
// consumer warpgroups the grid scheduler (the persistent one spills there). choose() applies it.
void fit_seqused(KernelConfig& config, const AttentionProblem& problem);

// The problem's block mask (AttentionProblem::block_mask) into the config: block_sparse on, and tiles that lie
// within one block (fa3: 128 or 64 rows, the widest key tile of at least 64 that divides kv_block; fa2: likewise
// with 16 or 32 rows per warp and key tiles of 16 or more). False when no such tile is valid (choose() then takes
// the reference kernel, which looks up each key's block).
bool fit_block_mask(KernelConfig& config, const AttentionProblem& problem);

// fa3 up to d192 with a bias tensor TMA can read (config::bias_tma_layout_issue): bias_tma on, the key tile rounded down to
// whole 128-byte rows of entries, where that config is valid (shared memory: a bias tile per stage) and still
// divides the block mask's blocks, applied to a config choose() made. Not yet applied by choose(): the staged
// kernels have not run on a GPU (bench/NOTES.md, 2026-12-04, twenty-eighth session); until they have, a caller
// opts in with this or with bias_tma in an explicit config.
void fit_bias_tma(KernelConfig& config, const AttentionProblem& problem);

// Why the dispatcher falls back to the reference kernel (fp32, far slower) for the problem on `arch`: what
// fa3 and fa2 lack there, e.g. "fa2: needs sm_80 or newer ...". Empty when a fast kernel runs it.
std::string reference_fallback_reason(const AttentionProblem& problem, const Arch& arch);

// Whether a (valid) config can run the problem on a device of `device_arch`; the error says what differs.
Status supports(const KernelConfig& config, const AttentionProblem& problem, const Arch& device_arch);

}  // namespace flashjit::dispatch
