// The TMA view of a bias tensor for fa3 kernels that stage its tiles (KernelConfig::bias_tma;
// templates/fa3/bias_tile.cuh).
#pragma once

#include "cuda/driver.hpp"
#include "flashjit/config.hpp"
#include "flashjit/problem.hpp"
#include "common/tensor_map.cuh"

namespace flashjit::launch {

// 4-D (keys, rows, heads, batch) of the problem's bias [B, Hq, Sq, Sk], a broadcast head or batch a dimension of
// one; boxes of 128 bytes of keys x block_m rows with 128-byte swizzling. An error names what TMA cannot read.
Status encode_bias_map(const cuda::Api& api, TensorMap& map, const KernelConfig& config, const AttentionProblem& problem);

}  // namespace flashjit::launch
