// From a problem and a config to kernel arguments, grid and a cuLaunchKernelEx on the caller's stream.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "attention/params.cuh"
#include "config/variants.hpp"
#include "flashjit/config.hpp"
#include "flashjit/problem.hpp"
#include "launch/launch_kernel.hpp"

namespace flashjit::launch {

AttentionParams make_params(const AttentionProblem& problem);
// The snippets' auxiliary arguments as the kernels' params hold them (prefill and decode).
ModAuxParams aux_params(const ModAux& aux);

// The bias fields of a kernel's params (AttentionParams, DecodeParams: bias, its strides, bias_pairs) from a
// problem's bias; all zero without one.
template <class Params>
void set_bias(Params& out, const void* bias, BiasType type, const BiasStrides& s) {
  if (bias == nullptr || type == BiasType::none) return;
  out.bias = bias;
  out.bias_batch = s.batch, out.bias_head = s.head, out.bias_q = s.q, out.bias_k = s.k;
  // Keys 2j and 2j + 1 of a row in one aligned load: adjacent entries, and every row starting on an even entry.
  const auto pair_bytes = static_cast<std::uintptr_t>(2 * config::bias_element_bytes(type));
  const bool even = s.batch % 2 == 0 && s.head % 2 == 0 && s.q % 2 == 0;
  out.bias_pairs = s.k == 1 && even && reinterpret_cast<std::uintptr_t>(bias) % pair_bytes == 0 ? 1 : 0;
}

// The launch grid; a persistent config gets min(work tiles, `sms`) CTAs.
Grid grid_for(const KernelConfig& config, const AttentionProblem& problem, int sms);

// Launches `function` (compiled from `config`) on a device of `sms` multiprocessors.
Status launch(CUfunction function, const KernelConfig& config, const AttentionProblem& problem, int sms);

}  // namespace flashjit::launch
