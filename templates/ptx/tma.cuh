// TMA (sm_90): bulk tensor copies global -> shared described by a host-encoded tensor map, completing on
// an mbarrier with transaction bytes. Out-of-bounds elements of a box are zero-filled.
#pragma once

#include "common/tensor_map.cuh"

namespace flashjit::ptx {

__device__ __forceinline__ void tma_prefetch_descriptor(const TensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<unsigned long long>(map)) : "memory");
}

// 4-D box load: coordinates innermost first (element units).
__device__ __forceinline__ void tma_load_4d(unsigned dst, const TensorMap* map, unsigned bar, int c0, int c1,
                                            int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6}], "
      "[%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}

// 5-D box load (packed-GQA views of Q: head_dim, head in group, sequence, KV head, batch).
__device__ __forceinline__ void tma_load_5d(unsigned dst, const TensorMap* map, unsigned bar, int c0, int c1,
                                            int c2, int c3, int c4) {
  asm volatile(
      "cp.async.bulk.tensor.5d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6, %7}], "
      "[%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4)
      : "memory");
}

// 3-D box load (the packed varlen views: head_dim, row, head).
__device__ __forceinline__ void tma_load_3d(unsigned dst, const TensorMap* map, unsigned bar, int c0, int c1,
                                            int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], "
      "[%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}

}  // namespace flashjit::ptx
