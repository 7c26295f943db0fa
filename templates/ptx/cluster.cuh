// Thread-block clusters (sm_90+): the CTA's rank in its cluster, the cluster-wide barrier, and loads from
// another CTA's shared memory (distributed shared memory). A CTA's shared memory may be read by the others
// only between two cluster barriers that both sides pass: the first orders its writes before their reads,
// the second keeps it from exiting while they still read. Below sm_90 (no clusters) each of them traps.
#pragma once

namespace flashjit::ptx {

__device__ __forceinline__ unsigned cluster_ctarank() {
  unsigned r = 0;
#if __CUDA_ARCH__ >= 900
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
#else
  __trap();
#endif
  return r;
}

// Every thread of every CTA of the cluster: shared-memory writes before it are visible to the cluster's
// reads after it. All threads of a warp call it together (.aligned).
__device__ __forceinline__ void cluster_sync() {
#if __CUDA_ARCH__ >= 900
  asm volatile(
      "barrier.cluster.arrive.release.aligned;\n"
      "barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#else
  __trap();
#endif
}

// The address in CTA `rank`'s shared memory of the variable at `addr` (a shared-window address) in this
// CTA's: a shared::cluster address for the loads below.
__device__ __forceinline__ unsigned cluster_map(unsigned addr, unsigned rank) {
  unsigned out = addr;
#if __CUDA_ARCH__ >= 900
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(out) : "r"(addr), "r"(rank));
#else
  __trap();
#endif
  return out;
}

__device__ __forceinline__ float cluster_load_f32(unsigned addr) {
  float v = 0.f;
#if __CUDA_ARCH__ >= 900
  asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(addr));
#else
  __trap();
#endif
  return v;
}

__device__ __forceinline__ float4 cluster_load_f32x4(unsigned addr) {
  float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
#if __CUDA_ARCH__ >= 900
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(addr));
#else
  __trap();
#endif
  return v;
}

}  // namespace flashjit::ptx
