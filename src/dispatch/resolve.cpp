#include "dispatch/resolve.hpp"

#include <algorithm>

#include "config/kinds.hpp"
#include "dispatch/heuristics.hpp"

namespace flashjit::dispatch {
namespace {

KernelConfig heuristic(Algorithm a, const KernelConfig& c) {
  switch (a) {
    case Algorithm::fa3: return fa3_heuristic(c.dtype, c.head_dim, c.mask, c.arch, c.head_dim_v);
    case Algorithm::fa2: return fa2_heuristic(c.dtype, c.head_dim, c.mask, c.arch, c.head_dim_v);
    default: return naive_config(c.dtype, c.head_dim, c.mask, c.arch, c.head_dim_v);
  }
}

KernelConfig resolve_prefill(const KernelConfig& given_config, const std::vector<std::string>& given) {
  Algorithm algorithm = given_config.algorithm;
  if (algorithm == Algorithm::automatic) {
    // As choose() does without a problem: the fastest algorithm whose heuristic config is valid here.
    algorithm = Algorithm::naive;
    for (Algorithm a : {Algorithm::fa3, Algorithm::fa2}) {
      if (validate(heuristic(a, given_config)).empty()) {
        algorithm = a;
        break;
      }
    }
  }
  KernelConfig out = heuristic(algorithm, given_config);
  std::vector<std::string> fields = given;
  std::erase(fields, "algorithm");  // resolved above
  config::copy_fields(out, given_config, fields);
  return out;
}

}  // namespace

AnyKernelConfig resolve(const PartialConfig& p) {
  if (const auto* prefill = p.config.get_if<KernelConfig>()) return resolve_prefill(*prefill, p.given);
  return p.config;
}

}  // namespace flashjit::dispatch
