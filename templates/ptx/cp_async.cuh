// cp.async (sm_80+): asynchronous 16-byte global->shared copies grouped into commit groups.
#pragma once

namespace flashjit::ptx {

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// Copies 16 bytes, or writes 16 zero bytes when !valid (src is not read then).
__device__ __forceinline__ void cp_async_16(unsigned dst, const void* src, bool valid) {
  int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes)
               : "memory");
}

// Writes 16 zero bytes now (what cp_async_16 writes when !valid), e.g. over a landed copy this thread made.
__device__ __forceinline__ void st_shared_zero_16(unsigned dst) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" ::"r"(dst), "r"(0) : "memory");
}

// Brings the 128-byte line holding `p` into L2 (no register result, nothing waits on it).
__device__ __forceinline__ void prefetch_l2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

// An arrival on the mbarrier at `bar` once every cp.async this thread issued so far has landed, without a
// pending-count increment (.noinc): the barrier counts it as one of its expected arrivals.
__device__ __forceinline__ void cp_async_mbarrier_arrive_noinc(unsigned bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}

// Orders this thread's earlier shared-memory writes (st.shared, landed cp.async copies) before the async proxy's
// later reads of them (wgmma operands, TMA).
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Waits until at most N groups issued by this thread are still pending.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

}  // namespace flashjit::ptx
