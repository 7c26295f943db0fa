#include "runtime/decode_checks.hpp"

#include <fmt/format.h>

#include <cstdint>

#include "dispatch/append_plan.hpp"

namespace flashjit::runtime {

Status check_forced_merge(const DecodeProblem& p, const dispatch::DecodePlan& plan, const std::string& where) {
  if (p.split_merge != SplitMerge::cluster || plan.splits.num_splits < 2 || plan.split.cluster_merge) return {};
  return Error(ErrorCode::invalid_argument,
               fmt::format("split_merge cluster cannot run {} in {} splits on {}: thread-block "
                           "clusters need sm_90 or newer, and the kernel's cluster buffer must fit its shared memory",
                           readable_name(plan.split), plan.splits.num_splits, where));
}

Status check_forced_merge(const DecodeProblem& p, const dispatch::DecodePlan& plan, const Device& dev) {
  return check_forced_merge(p, plan, fmt::format("device {} ({})", dev.info.ordinal, dev.info.arch.to_string()));
}

Status check_fused_append(const DecodeProblem& p) {
  if (p.new_len <= 0) return {};
  int* const workspace = reinterpret_cast<int*>(std::uintptr_t{512});  // aligned, and not the 256 of a target's placeholders
  Status st = check(dispatch::append_of(p, dispatch::fused_lengths_bytes(p) > 0 ? workspace : p.seqlens_out));
  if (!st.ok()) return std::move(st).error().with("in the decode's fused append (k_new, v_new, new_len)");
  return {};
}

DecodeSelection selection_of(const DecodeProblem& p, const dispatch::DecodePlan& plan, const Arch& arch, int sms) {
  DecodeSelection s;
  s.split = plan.split;
  s.num_splits = plan.splits.num_splits;
  s.keys_per_split = plan.splits.keys_per_split;
  if (plan.splits.num_splits > 1 && !plan.split.cluster_merge) s.combine = plan.combine;
  if (p.new_len > 0) s.append = dispatch::append_kernel(dispatch::append_of(p, nullptr), arch, sms);
  s.workspace_bytes = plan.workspace_bytes + dispatch::fused_lengths_bytes(p);
  return s;
}

}  // namespace flashjit::runtime
