// The TMA descriptors of one FA3 launch (second kernel parameter), encoded by the host launcher: 4-D views
// (head_dim, sequence, head, batch) of Q, K and V (3-D (head_dim, row, head) for packed varlen tensors), one
// per column-block width a tile has (fa3/columns.cuh): [0] 64-column boxes with 128-byte swizzling, [1]
// 32-column boxes with 64-byte, [2] 16-column boxes with 32-byte. Maps a head dim does not use stay zero. `bias`:
// the bias tensor's view of kernels that stage its tiles (fa3/bias_tile.cuh), zero otherwise.
#pragma once

#include "common/tensor_map.cuh"

namespace flashjit::fa3 {

struct TensorMaps {
  TensorMap q[3], k[3], v[3];
  TensorMap bias;
};

}  // namespace flashjit::fa3
