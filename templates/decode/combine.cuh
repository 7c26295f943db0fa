// Combine / merge of attention states over disjoint key sets: O = Σ_i exp(lse_i - lse) · O_i with
// lse = log Σ_i exp(lse_i). Serves the split-KV pass (fp32 partials in the workspace) and the merge API
// (states in the output type: shared-prefix cascades, context parallelism). One warp per output row
// (batch, position, head); lane i reads state i's LSE, so up to 32 states. Rows whose states are all -inf
// (no key anywhere) get O = 0 and LSE = -inf. Precise expf / logf: a row costs D multiply-adds per state.
#pragma once

#include "common/math.cuh"
#include "common/types.cuh"
#include "decode/params.cuh"
#include "ptx/griddep.cuh"

namespace flashjit::decode {

template <class TIn> __device__ __forceinline__ float load_state(const void* base, long long i);
template <> __device__ __forceinline__ float load_state<float>(const void* base, long long i) {
  return static_cast<const float*>(base)[i];
}
template <> __device__ __forceinline__ float load_state<bf16>(const void* base, long long i) {
  return to_float(static_cast<const bf16*>(base)[i]);
}
template <> __device__ __forceinline__ float load_state<fp16>(const void* base, long long i) {
  return to_float(static_cast<const fp16*>(base)[i]);
}

template <class TIn, class TOut, int kHeadDim, int kWarps>
struct CombineKernel {
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kSmemBytes = 0;
  static constexpr int kColsPerLane = (kHeadDim + 31) / 32;
  static_assert(CombineParams::kMaxStates == 32, "one state per lane");

  static __device__ void run(const CombineParams& p) {
    // Launched right behind the split kernel (programmatic dependent launch on sm_90): wait for its
    // partials here; a plain launch (the merge API) passes straight through.
    ptx::grid_dependency_wait();
    const int lane = threadIdx.x % 32;
    const long long row = static_cast<long long>(blockIdx.x) * kWarps + threadIdx.x / 32;
    if (row >= static_cast<long long>(p.batch) * p.seqlen * p.heads) return;
    const int head = static_cast<int>(row % p.heads);
    const int pos = static_cast<int>((row / p.heads) % p.seqlen);
    const int batch = static_cast<int>(row / (static_cast<long long>(p.heads) * p.seqlen));
    const long long lse_index = (static_cast<long long>(batch) * p.heads + head) * p.seqlen + pos;

    const float my_lse = lane < p.num_states ? p.lse_in[lane][lse_index] : neg_infinity();
    const float m = warp_max(my_lse);
    const float w = (my_lse == neg_infinity()) ? 0.f : expf(my_lse - m);
    const float sum = warp_sum(w);

    float acc[kColsPerLane];
#pragma unroll
    for (int c = 0; c < kColsPerLane; ++c) acc[c] = 0.f;
    const long long in_offset = batch * p.in_batch + pos * p.in_seq + head * p.in_head;
    // Eight states per step, their loads all in flight before the first multiply-add (the partials sit in
    // L2: one round trip per step rather than per state).
    constexpr int kUnroll = 8;
    for (int i0 = 0; i0 < p.num_states; i0 += kUnroll) {
      float x[kUnroll][kColsPerLane], wi[kUnroll];
#pragma unroll
      for (int j = 0; j < kUnroll; ++j) {
        const int i = i0 + j;
        wi[j] = __shfl_sync(0xffffffffu, w, i % 32);
        // A state without keys (or a negligible one) is not read: its O may be anything.
        const bool read = i < p.num_states && wi[j] != 0.f;
#pragma unroll
        for (int c = 0; c < kColsPerLane; ++c) {
          const int d = lane + 32 * c;
          x[j][c] = read && d < kHeadDim ? load_state<TIn>(p.o_in[i], in_offset + d) : 0.f;
        }
        if (!read) wi[j] = 0.f;
      }
#pragma unroll
      for (int j = 0; j < kUnroll; ++j)
#pragma unroll
        for (int c = 0; c < kColsPerLane; ++c) acc[c] = fmaf(wi[j], x[j][c], acc[c]);
    }
    const bool empty = !(sum > 0.f);
    TOut* out = static_cast<TOut*>(p.o) + batch * p.o_batch + pos * p.o_seq + head * p.o_head;
#pragma unroll
    for (int c = 0; c < kColsPerLane; ++c) {
      const int d = lane + 32 * c;
      if (d < kHeadDim) out[d] = from_float<TOut>(empty ? 0.f : acc[c] / sum);
    }
    if (p.lse != nullptr && lane == 0) p.lse[lse_index] = empty ? neg_infinity() : m + logf(sum);
  }
};

}  // namespace flashjit::decode
