// The decode calls' checks beyond check(DecodeProblem), and what select_decode reports: a forced cluster merge
// the plan cannot honour, a fused append checked as a problem of its own, the selection of a plan.
#pragma once

#include <string>

#include "dispatch/plans.hpp"
#include "flashjit/decode.hpp"
#include "flashjit/runtime.hpp"
#include "runtime/devices.hpp"

namespace flashjit::runtime {

// A forced cluster merge the plan could not honour (the planner falls back to the combine kernel there); `where`
// names the device ("device 0 (sm_90a)") or the target.
Status check_forced_merge(const DecodeProblem& p, const dispatch::DecodePlan& plan, const std::string& where);
Status check_forced_merge(const DecodeProblem& p, const dispatch::DecodePlan& plan, const Device& dev);

// A decode's fused append (new_len > 0), checked as an AppendProblem (its seqlens_out, when the caller gives none,
// a stand-in for the workspace buffer the runtime picks).
Status check_fused_append(const DecodeProblem& p);

// The kernels, split plan and workspace of a decode on a device of `arch` with `sms` multiprocessors.
DecodeSelection selection_of(const DecodeProblem& p, const dispatch::DecodePlan& plan, const Arch& arch, int sms);

}  // namespace flashjit::runtime
