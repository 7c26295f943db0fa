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

}  // namespace flashjit::ptx
