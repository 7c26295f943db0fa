#include "tune/candidates.hpp"

#include <algorithm>
#include <unordered_set>

#include "dispatch/heuristics.hpp"

namespace flashjit::tune {

using dispatch::ProblemShape;

namespace {

struct AnyHash {
  std::size_t operator()(const AnyKernelConfig& c) const { return hash_of(c); }
};

std::vector<int> steps(int from, int to, int step) {
  std::vector<int> out;
  for (int v = from; v <= to; v += step) out.push_back(v);
  return out;
}

// The default lists of one algorithm; block_m is empty when it derives from warps.
CandidateSpace defaults(Algorithm a, Density density) {
  const bool full = density == Density::full;
  CandidateSpace s;
  switch (a) {
    case Algorithm::fa3:
      s.warps = {1, 2, 3};
      s.block_n = steps(64, 256, full ? 16 : 32);
      s.stages = full ? std::vector<int>{2, 3} : std::vector<int>{2};
      s.schedulers = {Scheduler::grid, Scheduler::persistent};  // the heuristics use both (d128: persistent)
      break;
    case Algorithm::fa2:
      s.warps = {4, 8};
      s.block_n = full ? std::vector<int>{32, 64, 128} : std::vector<int>{32, 64};
      s.stages = full ? std::vector<int>{2, 3} : std::vector<int>{2};
      break;
    case Algorithm::naive:
      s.warps = {4};
      s.block_m = {1};
      s.stages = {1};
      break;
    case Algorithm::automatic: break;
  }
  return s;
}

// block_m values for a warp count when the space leaves them to the algorithm.
std::vector<int> derived_block_m(Algorithm a, int warps) {
  switch (a) {
    case Algorithm::fa3: return {64 * warps};
    case Algorithm::fa2: return {16 * warps, 32 * warps};
    default: return {1};
  }
}

}  // namespace

Candidates enumerate(const ProblemShape& shape, const CandidateSpace& space, const Arch& arch, Density density) {
  std::vector<Algorithm> algorithms = space.algorithms;
  if (algorithms.empty()) {
    auto chosen = dispatch::choose(to_problem(shape), arch);
    algorithms.push_back(chosen.ok() ? chosen->algorithm : Algorithm::naive);
  }
  Candidates out;
  // Distinct configs in enumeration order, found in a hash set (a list search made large spaces quadratic);
  // enumeration stops at kMaxCandidates configs looked at.
  std::unordered_set<AnyKernelConfig, AnyHash> seen;
  std::size_t looked_at = 0;
  auto add = [&](const KernelConfig& c) {
    if (++looked_at > kMaxCandidates) {
      out.capped = true;
      return;
    }
    if (!seen.insert(AnyKernelConfig(c)).second) return;
    (validate(c).empty() ? out.valid : out.invalid).push_back(c);
  };
  for (Algorithm a : algorithms) {
    const CandidateSpace d = defaults(a, density);
    auto pick = [](const std::vector<int>& given, const std::vector<int>& fallback) {
      return given.empty() ? fallback : given;
    };
    const auto warps = pick(space.warps, d.warps), stages = pick(space.stages, d.stages);
    const auto schedulers = !space.schedulers.empty() ? space.schedulers
                            : !d.schedulers.empty() ? d.schedulers
                                                    : std::vector<Scheduler>{KernelConfig{}.scheduler};
    for (int w : warps) {
      // naive scores one key per thread: its block_n follows the warps.
      const auto block_ns = pick(space.block_n, a == Algorithm::naive ? std::vector<int>{32 * w} : d.block_n);
      for (int bm : pick(space.block_m, pick(d.block_m, derived_block_m(a, w))))
        for (int bn : block_ns)
          for (int st : stages)
            for (Scheduler sched : schedulers) {
              KernelConfig c;
              c.algorithm = a, c.arch = arch, c.dtype = shape.dtype, c.head_dim = shape.head_dim, c.mask = shape.mask;
              c.softcap = shape.softcap, c.alibi = shape.alibi, c.sinks = shape.sinks;
              c.score_mod = shape.score_mod, c.mask_mod = shape.mask_mod;
              c.block_m = bm, c.block_n = bn, c.stages = st, c.scheduler = sched;
              (a == Algorithm::fa3 ? c.consumer_warpgroups : c.warps) = w;
              add(c);
            }
    }
  }
  return out;
}

KernelConfig reference_config(const ProblemShape& shape, const Arch& arch) {
  KernelConfig c = dispatch::naive_config(shape.dtype, shape.head_dim, shape.mask, arch);
  c.softcap = shape.softcap, c.alibi = shape.alibi, c.sinks = shape.sinks;
  c.score_mod = shape.score_mod, c.mask_mod = shape.mask_mod;
  return c;
}

bool spills(const PtxasStats& p) { return p.spill_stores > 0 || p.spill_loads > 0 || p.stack_frame > 0; }

}  // namespace flashjit::tune
