// The TMA descriptors of one FA3 launch (second kernel parameter), encoded by the host launcher:
// 4-D views (head_dim, sequence, head, batch) of Q, K and V with 64 x rows boxes and 128-byte swizzling.
#pragma once

#include "common/tensor_map.cuh"

namespace flashjit::fa3 {

struct TensorMaps {
  TensorMap q, k, v;
};

}  // namespace flashjit::fa3
