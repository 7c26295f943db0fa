// GPU test harness of decode and merge: DecodeProblem / MergeProblem instances with fresh random data, a
// contiguous or paged KV cache whose unused slots and pages hold huge garbage values, shuffled page
// tables, optional padded strides (the padding holds garbage in inputs and must stay untouched in outputs),
// poisoned outputs (0xFF bytes: NaN) with guard regions behind them, and float64 CPU references computed on
// the same bf16/fp16-rounded inputs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cuda/driver.hpp"
#include "flashjit/decode.hpp"
#include "flashjit/runtime.hpp"
#include "harness.hpp"

namespace flashjit::test {

// splitmix64: fast, seeded, good enough for test data (the caches hold millions of values).
class FastRng {
 public:
  explicit FastRng(std::uint64_t seed) : s_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  float uniform(float lo, float hi) { return lo + (hi - lo) * static_cast<float>(next() >> 40) * 0x1p-24f; }
  int below(int n) { return static_cast<int>(next() % static_cast<std::uint64_t>(n)); }

 private:
  std::uint64_t s_;
};

// The finite part of what unused cache slots, unused pages and input padding hold: +-1e4 (with +inf and
// NaN besides, decode_harness.cpp); a key read past a sequence's length then moves the row's max score
// (LSE) and its output by orders of magnitude, or makes them NaN.
inline constexpr float kGarbage = 1e4f;

// Decode and merge LSE: fp32 arithmetic on every path (split partials, combine): far tighter than O.
inline constexpr double kLseTolerance = 1e-3;

struct DecodeShape {
  DType dtype = DType::bf16;
  int heads_q = 8, heads_kv = 2, head_dim = 128;
  int q_len = 1;
  std::vector<int> seqlens = {1};  // keys per sequence; batch = seqlens.size()
  KvLayout layout = KvLayout::contiguous;
  int page_size = 16;              // paged only
  // Paged: the dense table [B, max_pages_per_seq], or FlashInfer's CSR one (page_indptr and the flat indices) with
  // the counts from seqlens_k (each sequence then owns one garbage page past those it uses) or last_page_len.
  enum class Table { dense, csr_seqlens, csr_last_page } table = Table::dense;
  int window_left = -1;
  int chunk_size = 0;              // 0: no chunks (not with window_left >= 0)
  bool with_lse = true;
  int num_splits = 0;              // 0: the planner
  SplitMerge split_merge = SplitMerge::automatic;
  bool strided = false;            // padded q / o / cache strides (o in [B, H, q_len, D] order)
  int bound_slack = 0;             // max_seqlen_k = max(seqlens) + bound_slack (a looser host bound)
  float softmax_scale = 0;         // 0: the default 1/sqrt(D)
  // Variants, as the prefill Shape's: softcap > 0; ALiBi slopes [Hq] (alibi 1) or [B, Hq] (alibi 2); sinks [Hq].
  float softcap = 0.f;
  int alibi = 0;
  bool sinks = false;

  int batch() const { return static_cast<int>(seqlens.size()); }
  int group() const { return heads_q / heads_kv; }
  int max_seqlen_k() const;  // the problem's host bound: the longest sequence + bound_slack, at least 1
  std::string to_string() const;
  // The prefill harness's Shape with the same [B, q_len, Hq, D] / [B, Hq, q_len] output layout, for compare().
  Shape output_shape() const;
  // The variants' values: the prefill harness's slopes (alibi_slope) and sinks (sink_logit) for this batch,
  // heads and longest sequence.
  Shape variant_shape() const;
};

// Keys and values per sequence on the host, rounded to the dtype: sequence b's rows [len[b], Hkv, D] start
// at offset[b].
struct HostKv {
  std::vector<int> len;
  std::vector<std::size_t> offset;
  std::vector<float> k, v;
  const float* k_row(int b, int j, int h, int heads_kv, int head_dim) const {
    return &k[offset[b] + (static_cast<std::size_t>(j) * heads_kv + h) * head_dim];
  }
  const float* v_row(int b, int j, int h, int heads_kv, int head_dim) const {
    return &v[offset[b] + (static_cast<std::size_t>(j) * heads_kv + h) * head_dim];
  }
};

// Concatenation, per sequence, of a's keys then b's (same heads and head dim).
HostKv concat(const HostKv& a, const HostKv& b, int heads_kv, int head_dim);

// float64 decode attention (decode.hpp's semantics: token t of sequence b sits at a = len[b] - q_len + t and
// sees keys max(0, a - window_left) <= j <= a, or with chunks floor(a / chunk_size) * chunk_size <= j <= a):
// o [B, q_len, Hq, D], lse [B, Hq, q_len] (-inf, O = 0 for rows with no visible key). Lengths come from kv.len;
// shape gives heads, q_len, window, chunk size and scale. bias, when set, is added to each visible pair's score
// (its row is the new token t, its key j; -inf hides the pair).
void reference_decode(const DecodeShape& s, const std::vector<float>& q, const HostKv& kv, std::vector<double>& o,
                      std::vector<double>& lse, const BiasFn& bias = {});

// What a DecodeCase uploads: dtype bits of q and of the caches (padding, unused slots and pages: garbage),
// lengths, the page table, and the layouts. Built without a device, so the harness itself can be checked
// on a machine without a GPU.
struct DecodeImage {
  std::vector<std::uint16_t> q, k, v;
  std::vector<int> seqlens, page_table;
  std::vector<int> page_indptr, page_indices, last_page_len;  // CSR tables (page_table: the dense one they came from)
  Strides q_strides{}, o_strides{}, cache_strides{};  // resolved (never zero)
  int max_seqlen_k = 0;
  int cache_seqlen = 0;  // contiguous: the cache's capacity
  int num_pages = 0, max_pages_per_seq = 0;
  std::size_t o_elems = 0, lse_elems = 0;  // output buffer sizes in elements, guards included
};

class DecodeCase {
 public:
  // Fresh random q (or the given one, [B, q_len, Hq, D] already rounded) and cache for the shape.
  static Result<DecodeCase> make(const DecodeShape& shape, std::uint64_t seed, const std::vector<float>* q = nullptr);
  // The host side alone (no device buffers): the same data make() would upload for the same seed.
  static DecodeCase host_only(const DecodeShape& shape, std::uint64_t seed, const std::vector<float>* q,
                              DecodeImage& image);

  // Outputs point at the poisoned buffers; workspace null (the runtime's own).
  DecodeProblem problem() const;
  Status poison_outputs();
  // Synchronizes, then gathers O into [B, q_len, Hq, D] and LSE [B, Hq, q_len] (empty without LSE);
  // stray_writes counts output padding and guard elements that are no longer 0xFF bytes.
  Status read_outputs(std::vector<float>& o, std::vector<float>& lse, std::int64_t& stray_writes) const;
  // Raw output bytes (O buffer then LSE buffer) for bitwise repeatability checks.
  Status read_raw(std::vector<unsigned char>& bytes) const;
  void reference(std::vector<double>& o, std::vector<double>& lse) const { reference_decode(shape_, q_, kv_, o, lse); }

  // Overwrites the device seqlens_k (the host reference keeps the shape's lengths).
  Status upload_seqlens(const std::vector<int>& lens);
  // Overwrites one page-table entry on the device (paged only).
  Status set_page_entry(int b, int index, int page);

  const DecodeShape& shape() const { return shape_; }
  const std::vector<float>& q() const { return q_; }
  const HostKv& kv() const { return kv_; }
  int max_seqlen_k() const { return max_seqlen_k_; }
  int num_pages() const { return num_pages_; }
  int max_pages_per_seq() const { return max_pages_per_seq_; }
  std::size_t csr_entries() const { return csr_entries_; }  // CSR tables: the flat page indices' length

 private:
  DecodeShape shape_;
  std::vector<float> q_;
  HostKv kv_;
  Strides q_strides_{}, o_strides_{}, cache_strides_{};
  int max_seqlen_k_ = 0, cache_seqlen_ = 0, num_pages_ = 0, max_pages_per_seq_ = 0;
  std::size_t o_elems_ = 0, lse_elems_ = 0;  // buffer sizes in elements (guards included)
  std::vector<int> page_table_;              // host copy (paged)
  std::size_t csr_entries_ = 0;
  cuda::DeviceBuffer dq_, do_, dlse_, dk_, dv_, dseqlens_, dpages_, dslopes_, dsinks_, dindptr_, dindices_, dlast_;
};

// Merge of attention states. Each sequence b has keys [0, keys[b]) and `seqlen` query positions, aligned
// bottom-right (position s sees keys j <= keys[b] - seqlen + s, so with keys[b] < seqlen some rows see no key);
// the keys are cut at random points into num_states ranges (some empty), each state being the float64
// attention over its range, O rounded to the dtype and LSE to float. A state's O rows whose LSE is -inf are
// NaN: a merge must not read them.
struct MergeShape {
  DType dtype = DType::bf16;
  int seqlen = 4, heads = 4, head_dim = 128;
  std::vector<int> keys = {100};  // batch = keys.size()
  int num_states = 2;
  bool with_lse = true;
  bool strided = false;  // padded input strides, output in [B, H, S, D] order
  int batch() const { return static_cast<int>(keys.size()); }
  std::string to_string() const;
  Shape output_shape() const;
};

// What a MergeCase uploads: each state's O bits (padding garbage, rows of empty states NaN) and LSE.
struct MergeImage {
  std::vector<std::vector<std::uint16_t>> o_in;
  std::vector<std::vector<float>> lse_in;
  Strides in_strides{}, o_strides{};  // resolved
  std::size_t o_elems = 0, lse_elems = 0;
};

class MergeCase {
 public:
  static Result<MergeCase> make(const MergeShape& shape, std::uint64_t seed);
  static MergeCase host_only(const MergeShape& shape, std::uint64_t seed, MergeImage& image);
  MergeProblem problem() const;
  Status poison_outputs();
  Status read_outputs(std::vector<float>& o, std::vector<float>& lse, std::int64_t& stray_writes) const;
  const MergeShape& shape() const { return shape_; }
  // float64 attention over the union of the key sets (the exact answer).
  const std::vector<double>& union_o() const { return union_o_; }
  const std::vector<double>& union_lse() const { return union_lse_; }
  // The float64 merge of the rounded input states (what the kernel computes, before its output rounding).
  const std::vector<double>& merged_o() const { return merged_o_; }
  const std::vector<double>& merged_lse() const { return merged_lse_; }
  // Rows (of B * H * S) where at least one state but not every state is empty, and rows empty everywhere.
  std::int64_t partly_empty_rows() const { return partly_empty_rows_; }
  std::int64_t empty_rows() const { return empty_rows_; }

 private:
  MergeShape shape_;
  Strides in_strides_{}, o_strides_{};
  std::size_t o_elems_ = 0, lse_elems_ = 0;
  std::vector<double> union_o_, union_lse_, merged_o_, merged_lse_;
  std::int64_t partly_empty_rows_ = 0, empty_rows_ = 0;
  std::vector<cuda::DeviceBuffer> din_o_, din_lse_;
  cuda::DeviceBuffer do_, dlse_;
};

// Per-sequence check of decode or merge outputs (a long sequence's O has a small norm: its errors would hide
// under a short one's in a batch-wide relative L2): relative L2 of O within o_tol, LSE within lse_tol, no
// NaN, rows without a visible key exactly O = 0 and LSE = -inf. `lse` empty: the problem had no LSE output
// (only O is checked; empty rows still need O = 0). A line per sequence in `summary`, the failing ones also
// in `failures` (empty when every sequence passes). No Catch2 inside: callable from any thread.
struct SequenceCheck {
  std::string summary, failures;
};
SequenceCheck check_sequences(const Shape& out, const std::vector<float>& o, const std::vector<float>& lse,
                              const std::vector<double>& ref_o, const std::vector<double>& ref_lse, double o_tol,
                              double lse_tol);

// Elements a strided [B, S, H, D] tensor spans.
std::size_t strided_extent(const Strides& s, int batch, int seqlen, int heads, int head_dim);

}  // namespace flashjit::test
