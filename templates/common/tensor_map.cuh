// An opaque TMA descriptor with the size and alignment of the driver's CUtensorMap (128 bytes, 128-byte
// aligned). Plain data, so the host launcher (which encodes it) and the kernels share the definition.
#pragma once

namespace flashjit {

struct alignas(128) TensorMap {
  unsigned long long opaque[16];
};

}  // namespace flashjit
