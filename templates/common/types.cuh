// 16-bit float types and conversions without the toolkit's cuda_bf16.h / cuda_fp16.h.
#pragma once

namespace flashjit {

struct bf16 { unsigned short bits; };
struct fp16 { unsigned short bits; };

// Two floats to one 32-bit register holding (lo, hi) as bf16 / fp16, round to nearest even.
template <class T> __device__ __forceinline__ unsigned pack2(float lo, float hi);

template <> __device__ __forceinline__ unsigned pack2<bf16>(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

template <> __device__ __forceinline__ unsigned pack2<fp16>(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

template <class T> __device__ __forceinline__ float to_float(T x);

template <> __device__ __forceinline__ float to_float<bf16>(bf16 x) {
  return __uint_as_float(static_cast<unsigned>(x.bits) << 16);
}

template <> __device__ __forceinline__ float to_float<fp16>(fp16 x) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x.bits));
  return f;
}

template <class T> __device__ __forceinline__ T from_float(float f);

template <> __device__ __forceinline__ bf16 from_float<bf16>(float f) {
  unsigned short b;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b) : "f"(f));
  return bf16{b};
}

template <> __device__ __forceinline__ fp16 from_float<fp16>(float f) {
  unsigned short b;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(b) : "f"(f));
  return fp16{b};
}

// mma.sync operand-type name of T, for the PTX strings.
template <class T> struct MmaName;
template <> struct MmaName<bf16> { static constexpr bool is_bf16 = true; };
template <> struct MmaName<fp16> { static constexpr bool is_bf16 = false; };

}  // namespace flashjit
