#include "tune/precompile_plan.hpp"

#include <algorithm>
#include <set>
#include <string>

#include "dispatch/append_plan.hpp"
#include "dispatch/block_mask_problem.hpp"
#include "dispatch/decode_heuristics.hpp"
#include "dispatch/heuristics.hpp"
#include "tune/candidates.hpp"

namespace flashjit::tune {

using dispatch::ProblemShape;
using dispatch::TunedTables;

namespace {

// Whether Runtime::decode or prepare_decode of the problem loads the combine kernel: decode when its plan
// splits the keys; prepare_decode whenever it reserves a workspace (runtime.cpp), which covers every batch up
// to the prepared one and any max_seqlen_k.
bool loads_combine(const DecodeProblem& p, const Arch& arch, int sms) {
  return dispatch::decode_workspace_reserve(p, arch, sms) > 0;
}

}  // namespace

std::vector<AnyKernelConfig> PrecompilePlan::kernels() const {
  std::vector<AnyKernelConfig> out(configs.begin(), configs.end());
  out.insert(out.end(), decode.begin(), decode.end());
  out.insert(out.end(), combine.begin(), combine.end());
  out.insert(out.end(), merge.begin(), merge.end());
  out.insert(out.end(), append.begin(), append.end());
  out.insert(out.end(), block_mask.begin(), block_mask.end());
  return out;
}

PrecompilePlan precompile_plan(const Sweep& sweep, const std::vector<Arch>& archs, const TunedTables& tables,
                               bool all_candidates, int sms) {
  PrecompilePlan plan;
  std::set<std::string> seen, seen_invalid;
  // Canonical JSON names every kind apart ("kernel" is in the decode and combine forms), so one set dedupes all.
  auto add = [&](auto& list, const auto& c) {
    if (seen.insert(to_json(c)).second) list.push_back(c);
  };
  for (const Arch& arch : archs) {
    std::vector<TunedTables> per_gpu;
    for (const auto& gpu : tables.gpus(arch)) per_gpu.push_back(tables.for_device(gpu, arch));
    for (const ProblemShape& shape : sweep.problems) {
      const AttentionProblem p = to_problem(shape);
      if (auto c = dispatch::choose(p, arch); c.ok()) add(plan.configs, *c);
      if (shape.block_size > 0) {  // the kernel that makes the problem's block mask
        BlockMaskProblem m;
        m.mask = shape.mask, m.mask_mod = p.mask_mod;
        add(plan.block_mask, dispatch::block_mask_kernel(m, arch));
      }
      for (const auto& t : per_gpu)
        if (auto c = dispatch::choose(p, arch, Algorithm::automatic, &t); c.ok()) add(plan.configs, *c);
      if (!all_candidates) continue;
      const Candidates candidates = enumerate(shape, sweep.candidates, arch);
      for (const auto& c : candidates.valid) add(plan.configs, c);
      for (const auto& c : candidates.invalid) seen_invalid.insert(to_json(c));
    }
    // Decode: what Runtime::decode launches and prepare_decode loads for each problem on a GPU of this arch
    // with `sms` SMs (the split kernels of every smaller batch and any max_seqlen_k), and the merge kernel of
    // each (dtype, head dim).
    for (const DecodeShape& shape : sweep.decode) {
      const DecodeProblem problem = to_problem(shape);
      const dispatch::DecodePlan d = dispatch::plan_decode(problem, arch, sms);
      add(plan.decode, d.split);
      for (const DecodeKernelConfig& c : dispatch::decode_prepare_kernels(problem, arch, sms)) add(plan.decode, c);
      if (std::find(plan.combine.begin(), plan.combine.end(), d.combine) == plan.combine.end() &&
          loads_combine(problem, arch, sms))
        add(plan.combine, d.combine);
      // A fused append: the append kernels of any size, as prepare_decode loads them (Runtime::decode's pick for
      // this size is one of them).
      if (problem.new_len > 0) {
        const AppendProblem a = dispatch::append_of(problem, nullptr);
        for (const AppendKernelConfig& c :
             dispatch::append_prepare_kernels(a.dtype, a.head_dim, a.layout, a.page_size, arch))
          add(plan.append, c);
      }
    }
    for (const DecodeShape& shape : sweep.decode)
      add(plan.merge, dispatch::merge_kernel_config(shape.dtype, shape.head_dim, arch));
    // Append: what prepare_append_kv loads for the problem's kind (append_kv loads one of them).
    for (const AppendShape& shape : sweep.append)
      for (const AppendKernelConfig& c :
           dispatch::append_prepare_kernels(shape.dtype, shape.head_dim, shape.layout, shape.page_size, arch))
        add(plan.append, c);
  }
  plan.invalid = static_cast<int>(seen_invalid.size());
  return plan;
}

}  // namespace flashjit::tune
