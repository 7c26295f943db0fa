// AttentionProblem: what the caller has. Tensors are BSHD with the last dimension contiguous:
// Q [B, Sq, Hq, D], K and V [B, Sk, Hkv, D], O like Q, optional LSE [B, Hq, Sq] float32 contiguous.
#pragma once

#include <cstdint>
#include <optional>

#include "flashjit/config.hpp"

namespace flashjit {

// Element strides of a BSHD tensor. Zero means "contiguous BSHD" for that dimension.
struct Strides {
  std::int64_t batch = 0;
  std::int64_t seq = 0;
  std::int64_t head = 0;
};

struct AttentionProblem {
  DType dtype = DType::bf16;
  int batch = 1;
  int seqlen_q = 0;
  int seqlen_k = 0;
  int heads_q = 0;
  int heads_kv = 0;
  int head_dim = 0;

  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  float* lse = nullptr;  // optional: natural-log log-sum-exp of each row's scores, -inf for empty rows

  Strides q_strides{}, k_strides{}, v_strides{}, o_strides{};

  // Masks. Causal with seqlen_k != seqlen_q is bottom-right aligned: query i sees keys
  // j <= i + (seqlen_k - seqlen_q). sliding_window: keys in [i' - window_left, i' + window_right]
  // with i' = i + seqlen_k - seqlen_q; -1 means unbounded on that side. chunked: i' and j in the same
  // chunk of chunk_size keys; chunked_causal: that and j <= i'.
  MaskKind mask = MaskKind::none;
  int window_left = -1;
  int window_right = -1;
  int chunk_size = 0;

  std::optional<float> softmax_scale;  // default 1/sqrt(head_dim)
  void* stream = nullptr;              // CUstream; nullptr is the legacy default stream
};

// `s` with each zero replaced by the stride of a contiguous [batch, seqlen, heads, head_dim] tensor.
Strides contiguous_bshd(const Strides& s, int seqlen, int heads, int head_dim);

// The strides with zeros replaced by contiguous-BSHD values.
Strides resolved_q_strides(const AttentionProblem& p);
Strides resolved_kv_strides(const AttentionProblem& p, const Strides& s);
Strides resolved_o_strides(const AttentionProblem& p);

// Shape, stride and mask-constant checks that need no device (pointers non-null and 16-byte aligned,
// strides multiples of 8 elements, Hq % Hkv == 0, ...). The runtime adds device-side pointer checks.
Status check(const AttentionProblem& p);

// Floating-point operations (4·B·Hq·Σ visible (q,k) pairs·D; for masks only the visible pairs count).
double attention_flops(const AttentionProblem& p);

}  // namespace flashjit
