// What `flashjit precompile` compiles for a sweep: for each prefill problem and arch the config the
// dispatcher picks, by its heuristics and with each GPU's tuned tables for that arch (so that FLASHJIT_JIT=0
// finds whatever a device of that arch picks), or with all_candidates the whole candidate space after
// validate() pruning; for each decode problem and arch the kernels Runtime::decode and prepare_decode load on
// a GPU with `sms` multiprocessors (dispatch::plan_decode and decode_prepare_kernels: the split kernels of the
// problem and of any smaller batch or other max_seqlen_k, and the combine kernel when the keys are split, or,
// for prepare_decode, when a smaller batch's keys would be), and the merge kernel
// (Runtime::merge) of each distinct (dtype, head dim, arch) of decode problems; for each append problem, and each
// decode problem fused with an append, the append kernels prepare_append_kv (or prepare_decode) loads
// (dispatch::append_prepare_kernels: every size class, among them the one append_kv picks for any size); for each
// block-sparse problem (block_size), the block_mask kernel Runtime::make_block_mask runs for its mask and mask_mod.
#pragma once

#include <vector>

#include "dispatch/tuned_table.hpp"
#include "flashjit/config.hpp"
#include "tune/sweep.hpp"

namespace flashjit::tune {

// The multiprocessors decode plans assume unless told (`flashjit precompile --sms`): H100 SXM and H200.
inline constexpr int kDefaultPrecompileSms = 132;

struct PrecompilePlan {
  std::vector<KernelConfig> configs;         // prefill kernels: distinct, in sweep order
  std::vector<DecodeKernelConfig> decode;    // decode split kernels: distinct, in sweep order
  std::vector<CombineKernelConfig> combine;  // combine kernels (fp32 inputs) of decode plans that split: distinct
  std::vector<CombineKernelConfig> merge;    // merge kernels (inputs in the output type): distinct
  std::vector<AppendKernelConfig> append;    // append kernels of append problems and fused decodes: distinct
  std::vector<BlockMaskKernelConfig> block_mask;  // block_mask kernels of block-sparse problems: distinct
  int invalid = 0;                           // candidates pruned by validate() (all_candidates)

  // Every kernel: the prefill ones, then decode, combine, merge, append and block_mask.
  std::vector<AnyKernelConfig> kernels() const;
};

PrecompilePlan precompile_plan(const Sweep& sweep, const std::vector<Arch>& archs, const dispatch::TunedTables& tables,
                               bool all_candidates, int sms = kDefaultPrecompileSms);

}  // namespace flashjit::tune
