// Programmatic dependent launch (sm_90+): a kernel launched with programmatic stream serialization may
// start while the kernel before it on the stream still runs; it calls grid_dependency_wait() before reading
// what that kernel wrote. The kernel before it calls launch_dependents() to let it start early. Both are
// no-ops below sm_90 and when the launch did not ask for it.
#pragma once

namespace flashjit::ptx {

__device__ __forceinline__ void grid_dependency_wait() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void launch_dependents() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// A 32-bit global load of what the kernel before this one may have written (lengths, page tables), for use after
// grid_dependency_wait(). Not ld.global.nc (__ldg): ptxas takes such data as fixed for the kernel's whole life
// and may hoist its loads above griddepcontrol.wait (it did so with seqlens_k in 17 of 19 decode kernels), where
// they can read what that kernel has not written yet.
__device__ __forceinline__ int load_after_wait(const int* ptr) {
  int v;
  asm volatile("ld.global.b32 %0, [%1];\n" : "=r"(v) : "l"(ptr));
  return v;
}

}  // namespace flashjit::ptx
