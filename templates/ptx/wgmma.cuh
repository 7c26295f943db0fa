// wgmma (sm_90a): shared-memory matrix descriptors for 128-byte-swizzled tiles, and the fence / commit /
// wait that bracket asynchronous warpgroup MMAs. The MMA shapes themselves are in wgmma_ops.cuh.
#pragma once

#include "ptx/wgmma_ops.cuh"

namespace flashjit::ptx {

// Descriptor of a 128B-swizzled operand at shared address `addr` (1024-byte aligned atoms):
// bits 0-13 start >> 4, 16-29 leading byte offset >> 4, 32-45 stride byte offset >> 4, 62-63 swizzle (1 = 128B).
// K-major: stride = 1024 (next 8 rows), leading unused (1). MN-major: leading = next 64-element block of
// the MN dimension, stride = 1024 (next 8 rows of K).
// Other swizzle widths (mode 2 = 64B, 3 = 32B; rows of 64 or 32 bytes): the same with stride = 8 rows of that
// width (512, 256 bytes).
__device__ __forceinline__ unsigned long long smem_descriptor(unsigned addr, unsigned leading_bytes,
                                                              unsigned stride_bytes, unsigned swizzle_mode = 1) {
  unsigned long long d = 0;
  d |= static_cast<unsigned long long>((addr & 0x3ffff) >> 4);
  d |= static_cast<unsigned long long>((leading_bytes >> 4) & 0x3fff) << 16;
  d |= static_cast<unsigned long long>((stride_bytes >> 4) & 0x3fff) << 32;
  d |= static_cast<unsigned long long>(swizzle_mode & 3) << 62;
  return d;
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// Keeps the compiler from moving accumulator reads or writes across an in-flight wgmma.
template <int A, int B>
__device__ __forceinline__ void fence_registers(float (&d)[A][B]) {
#pragma unroll
  for (int i = 0; i < A; ++i)
#pragma unroll
    for (int j = 0; j < B; ++j) asm volatile("" : "+f"(d[i][j])::"memory");
}

}  // namespace flashjit::ptx
