// Combine / merge of attention states over disjoint key sets: O = Σ_i exp(lse_i - lse) · O_i with
// lse = log Σ_i exp(lse_i). Serves the split-KV pass (fp32 partials in the workspace) and the merge API
// (states in the output type: shared-prefix cascades, context parallelism). One warp per output row
// (batch, position, head), up to 32 states in rounds of kRound (lane j holds the LSE of the round's state j)
// merged online. Rows whose states are all -inf (no key anywhere) get O = 0 and LSE = -inf. Precise
// expf / logf: a row costs D multiply-adds per state.
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
  // States per round: every load of a round (the states' LSEs and all their O columns) is issued before the
  // first one is used, so a round costs one L2 round trip; at most 64 O values per lane bound the registers
  // (the largest power of two of states that keeps to that, at most a warp's lanes).
  static constexpr int round_states() {
    int n = 1;
    while (2 * n <= 32 && 2 * n * kColsPerLane <= 64) n *= 2;
    return n;
  }
  static constexpr int kRound = round_states();
  static_assert(CombineParams::kMaxStates == 32 && 32 % kRound == 0, "whole rounds of at most a warp");

  static __device__ void run(const CombineParams& p) {
    // Launched with programmatic dependent launch (sm_90) right behind the kernel that wrote its inputs (the
    // split kernel, or the caller's last kernel for the merge API): wait for that kernel's completion before
    // reading them; a plain launch passes straight through. Then the kernel behind this one may launch (it
    // waits the same way for this one's completion); not before, so that its CTAs find the SMs free.
    ptx::grid_dependency_wait();
    ptx::launch_dependents();
    const int lane = threadIdx.x % 32;
    const long long row = static_cast<long long>(blockIdx.x) * kWarps + threadIdx.x / 32;
    if (row >= static_cast<long long>(p.batch) * p.seqlen * p.heads) return;
    const int head = static_cast<int>(row % p.heads);
    const int pos = static_cast<int>((row / p.heads) % p.seqlen);
    const int batch = static_cast<int>(row / (static_cast<long long>(p.heads) * p.seqlen));
    const long long lse_index = (static_cast<long long>(batch) * p.heads + head) * p.seqlen + pos;
    const long long in_offset = batch * p.in_batch + pos * p.in_seq + head * p.in_head;

    // Running max (natural-log units), sum of weights and weighted O over the rounds so far.
    float m = neg_infinity(), sum = 0.f, acc[kColsPerLane];
#pragma unroll
    for (int c = 0; c < kColsPerLane; ++c) acc[c] = 0.f;
    for (int i0 = 0; i0 < p.num_states; i0 += kRound) {
      // Lane j < kRound holds the LSE of state i0 + j. A state without keys (LSE -inf) may have left its O
      // unwritten: it is read with the others and then selected away, never multiplied in.
      const int mine = i0 + lane;
      const float my_lse = lane < kRound && mine < p.num_states ? p.lse_in[mine][lse_index] : neg_infinity();
      float x[kRound][kColsPerLane];
#pragma unroll
      for (int j = 0; j < kRound; ++j)
#pragma unroll
        for (int c = 0; c < kColsPerLane; ++c) {
          const int d = lane + 32 * c;
          x[j][c] = i0 + j < p.num_states && d < kHeadDim ? load_state<TIn>(p.o_in[i0 + j], in_offset + d) : 0.f;
        }
      const float m_new = fmaxf(m, warp_max(my_lse));
      if (m_new == neg_infinity()) continue;  // no key in any state so far
      const float w = my_lse == neg_infinity() ? 0.f : expf(my_lse - m_new);
      const float carry = m == neg_infinity() ? 0.f : expf(m - m_new);
      sum = sum * carry + warp_sum(w);
      m = m_new;
#pragma unroll
      for (int c = 0; c < kColsPerLane; ++c) acc[c] *= carry;
#pragma unroll
      for (int j = 0; j < kRound; ++j) {
        const float wj = __shfl_sync(0xffffffffu, w, j);
#pragma unroll
        for (int c = 0; c < kColsPerLane; ++c)
          if (wj != 0.f) acc[c] = fmaf(wj, x[j][c], acc[c]);
      }
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
