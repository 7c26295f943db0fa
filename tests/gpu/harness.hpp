// GPU test harness: a problem with device tensors filled with fresh random data, outputs poisoned, and a
// float64 CPU reference of the same attention (on the same bf16/fp16-rounded inputs).
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "cuda/driver.hpp"
#include "flashjit/problem.hpp"
#include "flashjit/runtime.hpp"

namespace flashjit::test {

// problem.hpp's mask wording: whether a query aligned to key position a (i + Sk - Sq, bottom-right) sees
// key j. The prefill and varlen references share it.
bool mask_visible(MaskKind mask, int window_left, int window_right, int chunk_size, long a, int j);

// The masks the prefill tests sweep (kind, window_left, window_right, chunk_size).
struct MaskCase {
  MaskKind kind;
  int left, right, chunk;
};
inline const MaskCase kMasks[] = {{MaskKind::none, -1, -1, 0},
                                  {MaskKind::causal, -1, -1, 0},
                                  {MaskKind::sliding_window, 37, 5, 0},
                                  {MaskKind::chunked, -1, -1, 48},
                                  {MaskKind::chunked_causal, -1, -1, 100}};

struct Shape {
  int batch = 1, seqlen_q = 1, seqlen_k = 1, heads_q = 1, heads_kv = 1, head_dim = 64;
  int head_dim_v = 0;  // V's and O's when it differs (0: head_dim)
  int dv() const { return head_dim_v > 0 ? head_dim_v : head_dim; }
  DType dtype = DType::bf16;
  MaskKind mask = MaskKind::none;
  int window_left = -1, window_right = -1, chunk_size = 0;
  // Variants (templates/attention/variant.cuh): softcap > 0; ALiBi slopes [Hq] (alibi 1) or [B, Hq] (alibi 2);
  // sink logits [Hq]. The slope and sink values are functions of the shape (alibi_slope, sink_logit below).
  float softcap = 0.f;
  int alibi = 0;
  bool sinks = false;
  bool top_left = false;  // AttentionProblem::alignment top_left: query i aligned to key i
  // The key query i is aligned to.
  long aligned(int i) const { return static_cast<long>(i) + (top_left ? 0 : seqlen_k - seqlen_q); }
  std::string to_string() const;
};

// The ALiBi slope of (batch entry, head) and the sink logit of a head that the tests upload and the references
// use: slopes 2^(-8 (h + 1) / Hq), scaled per batch entry for [B, Hq] tables; sinks around log(Sk), within
// ±3 of it, so that they matter without swamping the keys.
double alibi_slope(const Shape& s, int batch, int head);
double sink_logit(const Shape& s, int head);
// The scaled score x of query i and key j after the variants' score transforms (softcap, then ALiBi).
double variant_score(const Shape& s, double x, int batch, int head, int i, int j);

// Host copies (as rounded floats) and device buffers of one problem.
class Case {
 public:
  static Result<Case> make(const Shape& shape, std::uint64_t seed);
  AttentionProblem problem() const;  // O and LSE point at the poisoned output buffers
  Status poison_outputs();           // 0xFF bytes: NaN in bf16/fp16 and float
  Status read_outputs(std::vector<float>& o, std::vector<float>& lse) const;
  const Shape& shape() const { return shape_; }
  const std::vector<float>& q() const { return q_; }
  const std::vector<float>& k() const { return k_; }
  const std::vector<float>& v() const { return v_; }

 private:
  Shape shape_;
  std::vector<float> q_, k_, v_;
  cuda::DeviceBuffer dq_, dk_, dv_, do_, dlse_, dslopes_, dsinks_;
};

// An additive bias's entry of (batch entry, query head, query row, key) in natural units; -inf hides the pair.
using BiasFn = std::function<double(int b, int h, int i, int j)>;
// Which (batch entry, query head, query, key) pairs a test's mask_mod or block mask lets through.
using PairFilter = std::function<bool(int b, int h, int i, int j)>;

// float64 attention over BSHD float tensors; o [B, Sq, Hq, D], lse [B, Hq, Sq] (-inf for empty rows). bias, when
// set, is added to each visible pair's score after the variants' transforms; also_visible (when set) hides the
// pairs it refuses, on top of the shape's mask.
void reference_attention(const Shape& s, const std::vector<float>& q, const std::vector<float>& k,
                         const std::vector<float>& v, std::vector<double>& o, std::vector<double>& lse,
                         const BiasFn& bias = {}, const PairFilter& also_visible = {});

struct Comparison {
  double rel_l2 = 0;          // ||out - ref|| / ||ref||
  double max_abs = 0;
  double lse_max_abs = 0;     // over rows with finite reference LSE
  std::int64_t nan_count = 0;
  std::int64_t empty_row_violations = 0;  // rows with no visible key whose O is not exactly 0 / LSE not -inf
  std::string to_string() const;
};
// A Comparison built element by element (the layouts of O and LSE are the caller's): each output element against
// its reference, then each row's LSE.
class ComparisonSum {
 public:
  void add_output(float x, double ref);
  // One row's LSE; where the reference has no visible key (-inf) the LSE must be -inf and the row's d output
  // elements (o_row) exactly 0.
  void add_lse(float l, double ref, const float* o_row, int d);
  Comparison result() const;  // with rel_l2

 private:
  Comparison c_;
  double num_ = 0, den_ = 0;
};

// A comparison of outputs surrounded by guard rows (and pad elements) that no kernel may write.
struct GuardedComparison {
  Comparison cmp;
  std::int64_t guard_written = 0;  // guard rows / pad elements of O and LSE that are no longer the poison
  std::string to_string() const;
};

Comparison compare(const Shape& s, const std::vector<float>& o, const std::vector<float>& lse,
                   const std::vector<double>& ref_o, const std::vector<double>& ref_lse);
Comparison compare(const Shape& s, const std::vector<float>& o, const std::vector<float>& lse,
                   const std::vector<float>& ref_o, const std::vector<float>& ref_lse);

// Relative L2 tolerance for a dtype (bf16 1e-2, fp16 2e-3).
double tolerance(DType d);
// Prefill and varlen LSE tolerance (absolute).
inline constexpr double kPrefillLseTolerance = 2e-2;

// The seeds of one test file's cases, called as fresh_seed(): from the file's own start, each the last plus
// 2^64 / phi.
class SeedSequence {
 public:
  explicit constexpr SeedSequence(std::uint64_t start) : n_(start) {}
  std::uint64_t operator()() { return n_ += 0x9e3779b97f4a7c15ull; }

 private:
  std::uint64_t n_;
};

// One Runtime for the whole test executable (cache under FLASHJIT_CACHE_DIR or the default).
Runtime& runtime();
// The primary context of device 0, current for the whole test executable.
void ensure_context();

}  // namespace flashjit::test
