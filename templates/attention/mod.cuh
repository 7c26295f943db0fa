// User snippets compiled into a kernel (issue 26): a score_mod that rewrites each score and a mask_mod that
// hides (query, key) pairs, given as CUDA C++ source text (AttentionProblem / DecodeProblem score_mod and
// mask_mod) and placed by the generated translation unit in namespace flashjit_user, where they must define
//
//   __device__ float score_mod(float score, int b, int h, int q_idx, int kv_idx, const flashjit::ModContext& ctx);
//   __device__ bool mask_mod(int b, int h, int q_idx, int kv_idx, const flashjit::ModContext& ctx);
//
// score: the natural logit (softmax_scale · q·k, after softcap and ALiBi when those are on); b: the batch entry
// (varlen: the sequence); h: the query head; q_idx: the query's row in its sequence (decode: the new token,
// 0 .. q_len - 1); kv_idx: the key's position. The built-in mask applies first; mask_mod can only hide more
// (a row it hides entirely gets O = 0 and LSE = -inf, or the sink's logit). ctx holds the sequence's lengths
// (decode: seqlen_q = q_len, seqlen_k the cached keys, so the query sits at key seqlen_k - seqlen_q + q_idx)
// (with AttentionProblem::alignment top_left the query sits at key q_idx instead) and the call's auxiliary
// arguments: up to kModPointers device pointers, kModScalars floats and integers
// (AttentionProblem::aux). A snippet may define helpers beside them; it sees this header (and what it
// includes), not the CUDA toolkit's.
#pragma once

#include "attention/mod_aux.cuh"

namespace flashjit {

struct ModContext {
  int seqlen_q, seqlen_k;
  const ModAuxParams* aux;

  template <class T>
  __device__ __forceinline__ const T* pointer(int i) const { return static_cast<const T*>(aux->pointers[i]); }
  template <class T>
  __device__ __forceinline__ T* mutable_pointer(int i) const { return static_cast<T*>(const_cast<void*>(aux->pointers[i])); }
  __device__ __forceinline__ float scalar(int i) const { return aux->scalars[i]; }
  __device__ __forceinline__ long long integer(int i) const { return aux->integers[i]; }
};

// No snippet: the Variant's default for both.
struct NoMod {
  static constexpr bool kOn = false;
};

}  // namespace flashjit
