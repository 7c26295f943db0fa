// Combine / merge of attention states over disjoint key sets: O = Σ_i exp(lse_i - lse) · O_i with
// lse = log Σ_i exp(lse_i). Serves the split-KV pass (fp32 partials in the workspace) and the merge API
// (states in the output type: shared-prefix cascades, context parallelism). One warp per output row
// (batch, position, head), up to 32 states in rounds of kRound (lane j holds the LSE of the round's state j)
// merged online. Rows whose states are all -inf (no key anywhere) get O = 0 and LSE = -inf. Precise
// expf / logf: a row costs D multiply-adds per state.
#pragma once

#include "attention/variant.cuh"
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

// kVec columns of a row from src (16-, 8- or 4-byte loads of fp32 partials; one element otherwise) and to dst.
template <class TIn, int kVec> __device__ __forceinline__ void load_cols(const TIn* src, float* v) {
  static_assert(kVec == 1, "vector loads of fp32 partials only");
  v[0] = load_state<TIn>(src, 0);
}
template <> __device__ __forceinline__ void load_cols<float, 4>(const float* src, float* v) {
  const float4 x = *reinterpret_cast<const float4*>(src);
  v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w;
}
template <> __device__ __forceinline__ void load_cols<float, 2>(const float* src, float* v) {
  const float2 x = *reinterpret_cast<const float2*>(src);
  v[0] = x.x, v[1] = x.y;
}
template <class TOut, int kVec> __device__ __forceinline__ void store_cols(TOut* dst, const float* v) {
  if constexpr (kVec == 4) {
    *reinterpret_cast<uint2*>(dst) = make_uint2(pack2<TOut>(v[0], v[1]), pack2<TOut>(v[2], v[3]));
  } else if constexpr (kVec == 2) {
    *reinterpret_cast<unsigned*>(dst) = pack2<TOut>(v[0], v[1]);
  } else {
    *dst = from_float<TOut>(v[0]);
  }
}

template <class T> struct IsFp32 { static constexpr bool value = false; };
template <> struct IsFp32<float> { static constexpr bool value = true; };

// kSinks (split-KV only): each merged row's sink logit (p.sinks[head]) joins its state (Variant::apply_sink).
template <class TIn, class TOut, int kHeadDim, int kWarps, bool kSinks = false>
struct CombineKernel {
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kSmemBytes = 0;
  // Columns a lane moves per access. The split pass's fp32 partials (rows of the runtime's workspace, 16-byte
  // aligned) and its output (rows 16-byte aligned: decode checks it) go in vectors of up to four columns,
  // lanes taking consecutive vectors; the merge API's states and output (2-byte aligned) one column at a time.
  static constexpr int kVec = !IsFp32<TIn>::value ? 1 : kHeadDim % 128 == 0 ? 4 : kHeadDim % 64 == 0 ? 2 : 1;
  static constexpr int kVecsPerLane = (kHeadDim / kVec + 31) / 32;
  static constexpr int kColsPerLane = kVecsPerLane * kVec;
  // States per round: every load of a round (the states' LSEs and all their O columns) is issued before the
  // first one is used, so a round costs one L2 round trip; at most 64 O values and 16 state addresses per
  // lane bound the registers (the largest power of two of states that keeps to both).
  static constexpr int round_states() {
    int n = 1;
    while (2 * n <= 16 && 2 * n * kColsPerLane <= 64) n *= 2;
    return n;
  }
  static constexpr int kRound = round_states();
  static_assert(CombineParams::kMaxStates == 32 && 32 % kRound == 0, "whole rounds of at most a warp");
  static_assert(kHeadDim % kVec == 0, "whole vectors");

  // The first column of the lane's vector v.
  static __device__ __forceinline__ int column(int lane, int v) { return (lane + 32 * v) * kVec; }

  // Where round i0's states are read: the row of state i0 + j at src[j] (null past the last state), and the
  // LSE of state i0 + lane for lanes below kRound. Split partials: at fixed distances from state 0 (uniform
  // parameters); merge states: their pointers, parameters read with indexed constant loads.
  static __device__ __forceinline__ void locate(const CombineParams& p, int i0, int lane, long long in_offset,
                                                long long lse_index, const TIn* (&src)[kRound], const float*& lse) {
    const bool here = lane < kRound && i0 + lane < p.num_states;
    if constexpr (IsFp32<TIn>::value) {
      const TIn* o0 = static_cast<const TIn*>(p.o_in[0]) + in_offset;
#pragma unroll
      for (int j = 0; j < kRound; ++j) src[j] = i0 + j < p.num_states ? o0 + (i0 + j) * p.o_state : nullptr;
      lse = here ? p.lse_in[0] + (i0 + lane) * p.lse_state + lse_index : nullptr;
    } else {
#pragma unroll
      for (int j = 0; j < kRound; ++j)
        src[j] = i0 + j < p.num_states ? static_cast<const TIn*>(p.o_in[i0 + j]) + in_offset : nullptr;
      lse = here ? p.lse_in[i0 + lane] + lse_index : nullptr;
    }
  }

  static __device__ void run(const CombineParams& p) {
    // The row's indices and the first round's state addresses come before the wait, under the tail of the
    // kernel that writes the states, and stay in registers across it. (H200, B1 Sk 32k, 16 splits: with the
    // states' pointers, indexed constant loads, read after the wait, 2.2 µs passed from the wait to the stores,
    // now 1.0-1.3; each address computed at its load instead cost 0.3-1.8 µs per split call.)
    const int lane = threadIdx.x % 32;
    const long long row = static_cast<long long>(blockIdx.x) * kWarps + threadIdx.x / 32;
    const bool live = row < static_cast<long long>(p.batch) * p.seqlen * p.heads;
    const int head = static_cast<int>(row % p.heads);
    const int pos = static_cast<int>((row / p.heads) % p.seqlen);
    const int batch = static_cast<int>(row / (static_cast<long long>(p.heads) * p.seqlen));
    const long long lse_index = (static_cast<long long>(batch) * p.heads + head) * p.seqlen + pos;
    const long long in_offset = batch * p.in_batch + pos * p.in_seq + head * p.in_head;
    const TIn* src[kRound];
    const float* lse_src;
    locate(p, 0, lane, in_offset, lse_index, src, lse_src);
    // Launched with programmatic dependent launch (sm_90) right behind the kernel that wrote its inputs (the
    // split kernel, or the caller's last kernel for the merge API): wait for that kernel's completion before
    // reading them; a plain launch passes straight through. Then the kernel behind this one may launch (it
    // waits the same way for this one's completion); not before, so that its CTAs find the SMs free.
    ptx::grid_dependency_wait();
    ptx::launch_dependents();
    if (!live) return;

    // Running max (natural-log units), sum of weights and weighted O over the rounds so far.
    float m = neg_infinity(), sum = 0.f, acc[kColsPerLane];
#pragma unroll
    for (int c = 0; c < kColsPerLane; ++c) acc[c] = 0.f;
    for (int i0 = 0; i0 < p.num_states; i0 += kRound) {
      if (i0 > 0) locate(p, i0, lane, in_offset, lse_index, src, lse_src);
      // Lane j < kRound holds the LSE of state i0 + j. A state without keys (LSE -inf) may have left its O
      // unwritten: it is read with the others and then selected away, never multiplied in.
      const float my_lse = lse_src != nullptr ? *lse_src : neg_infinity();
      float x[kRound][kColsPerLane];
#pragma unroll
      for (int j = 0; j < kRound; ++j)
#pragma unroll
        for (int v = 0; v < kVecsPerLane; ++v) {
          float* dst = x[j] + v * kVec;
          if (src[j] != nullptr && column(lane, v) < kHeadDim) {
            load_cols<TIn, kVec>(src[j] + column(lane, v), dst);
          } else {
#pragma unroll
            for (int e = 0; e < kVec; ++e) dst[e] = 0.f;
          }
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
    float inv = empty ? 0.f : 1.f / sum, sink_lse = 0.f;
    if constexpr (kSinks) {  // (without sinks the LSE is computed at its store, as it always was)
      sink_lse = empty ? neg_infinity() : m + logf(sum);
      Variant<false, false, kSinks>::apply_sink(p.sinks, head, sink_lse, inv);
    }
    TOut* out = static_cast<TOut*>(p.o) + batch * p.o_batch + pos * p.o_seq + head * p.o_head;
#pragma unroll
    for (int v = 0; v < kVecsPerLane; ++v) {
      float y[kVec];
#pragma unroll
      for (int e = 0; e < kVec; ++e) y[e] = acc[v * kVec + e] * inv;
      if (column(lane, v) < kHeadDim) store_cols<TOut, kVec>(out + column(lane, v), y);
    }
    if (p.lse != nullptr && lane == 0) p.lse[lse_index] = kSinks ? sink_lse : empty ? neg_infinity() : m + logf(sum);
  }
};

}  // namespace flashjit::decode
