// The relative-logits table (AttentionProblem::rel_bias; templates/attention/variant.cuh, RelBias) in the FA3, FA2
// and reference kernels against the float64 reference, which adds table[h][clamp(a - j + offset, 0, extent - 1)]
// (a: the key query i is aligned to) to each score after softcap and ALiBi: extents 1, short ones and longer than
// Sq + Sk (every entry reachable, both clamps), offsets 0, negative and positive, one row for every head (stride
// 0) and padded rows, the masks none / causal / sliding window, top-left alignment, GQA, ALiBi and softcap beside
// it, LSE; ragged batches (varlen) with distances within each sequence. Outputs poisoned (NaN) beforehand. The
// configs are the dispatcher's (dispatch::choose).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "checks.hpp"
#include "dispatch/heuristics.hpp"
#include "harness.hpp"
#include "support/catch.hpp"

using namespace flashjit;
using namespace flashjit::test;

namespace {

constexpr Arch kSm90a{90, true};

SeedSequence fresh_seed{0x2e1b1a5};

struct Table {
  int extent = 1, offset = 0;
  int head_stride = -1;  // -1: extent (rows back to back); 0: one row for every head; else that stride
  int stride(int heads) const { return heads == 0 ? 0 : head_stride < 0 ? extent : head_stride; }
};

// A table's host values (uniform in [-3, 3], so that it moves the softmax well past rounding) and its device copy.
struct DeviceTable {
  std::vector<float> host;
  cuda::DeviceBuffer dev;
  Table t;
  int heads = 0;

  static Result<DeviceTable> make(const Table& t, int heads, std::uint64_t seed) {
    DeviceTable d;
    d.t = t, d.heads = heads;
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> u(-3.f, 3.f);
    const int rows = t.head_stride == 0 ? 1 : heads;
    d.host.resize(std::size_t(std::max(rows - 1, 0)) * t.stride(heads) + t.extent);
    for (float& x : d.host) x = u(rng);
    auto buf = cuda::DeviceBuffer::allocate(d.host.size() * 4);
    if (!buf.ok()) return std::move(buf).error();
    d.dev = std::move(*buf);
    FLASHJIT_TRY(d.dev.upload(d.host.data(), d.host.size() * 4));
    return d;
  }
  void apply(AttentionProblem& p) const {
    p.rel_bias = static_cast<const float*>(dev.get());
    p.rel_bias_head_stride = t.head_stride == 0 ? 0 : t.stride(heads);
    p.rel_bias_extent = t.extent, p.rel_bias_offset = t.offset;
  }
  // The entry of head h for query aligned to key a and key j.
  double at(int h, long a, int j) const {
    const long index = std::clamp<long>(a - j + t.offset, 0, t.extent - 1);
    return host[std::size_t(h) * (t.head_stride == 0 ? 0 : t.stride(heads)) + index];
  }
};

KernelConfig chosen(const AttentionProblem& p, Algorithm algorithm) {
  auto c = dispatch::choose(p, kSm90a, algorithm, nullptr);
  REQUIRE(c.ok());
  CHECK(c->rel_bias);
  CHECK_FALSE(c->pack_gqa);
  return *c;
}

void check_dense(Algorithm algorithm, const Shape& shape, const Table& table) {
  ensure_context();
  auto c = Case::make(shape, fresh_seed());
  REQUIRE(c.ok());
  auto rel = DeviceTable::make(table, shape.heads_q, fresh_seed());
  REQUIRE(rel.ok());
  AttentionProblem problem = c->problem();
  rel->apply(problem);
  const KernelConfig config = chosen(problem, algorithm);
  INFO(shape.to_string() << fmt::format(" rel_bias extent {} offset {} stride {}", table.extent, table.offset,
                                        problem.rel_bias_head_stride)
                         << " with " << readable_name(config));
  auto st = runtime().forward(problem, config);
  if (!st.ok()) FAIL(st.error().to_string());
  std::vector<float> o, lse;
  REQUIRE(c->read_outputs(o, lse).ok());
  std::vector<double> ref_o, ref_lse;
  reference_attention(shape, c->q(), c->k(), c->v(), ref_o, ref_lse,
                      [&](int, int h, int i, int j) { return rel->at(h, shape.aligned(i), j); });
  check_ok(compare(shape, o, lse, ref_o, ref_lse), shape.dtype);
}

struct MaskOf {
  MaskKind kind;
  int left, right;
};
const MaskOf kRelMasks[] = {{MaskKind::none, -1, -1}, {MaskKind::causal, -1, -1}, {MaskKind::sliding_window, 37, 5}};

// Tables: extent 1 (one value for every pair), short ones (both clamps bite), longer than Sq + Sk (every distance
// its own entry), negative and positive offsets, one row for every head, padded rows.
const Table kTables[] = {{1, 0, -1}, {33, 16, -1}, {700, 350, -1}, {9, -4, 0}, {64, 70, 80}, {2000, 1000, -1}};

struct Lengths {
  int sq, sk, group, batch;
};
const Lengths kLengths[] = {{17, 17, 4, 2}, {128, 300, 8, 1}, {300, 128, 1, 1}, {1, 257, 4, 2}, {257, 513, 2, 1}};

// Every table on every mask at one head dim, the lengths rotating; softcap and ALiBi beside the table on every
// third case, top-left on every fifth.
void check_tables(Algorithm algorithm, int head_dim) {
  int index = head_dim / 64;
  for (const auto& t : kTables)
    for (const auto& m : kRelMasks) {
      const Lengths& l = kLengths[index % std::size(kLengths)];
      Shape s;
      s.batch = l.batch, s.seqlen_q = l.sq, s.seqlen_k = l.sk, s.heads_q = 8, s.heads_kv = 8 / l.group;
      s.head_dim = head_dim, s.dtype = index % 2 ? DType::bf16 : DType::fp16;
      s.mask = m.kind, s.window_left = m.left, s.window_right = m.right;
      if (index % 3 == 0) s.softcap = 30.f, s.alibi = 1;
      s.top_left = index % 5 == 0;
      ++index;
      check_dense(algorithm, s, t);
    }
}

// A ragged batch packed in one Case's [1, total, H, D] tensors (O and LSE [Hq, total_q] alike), against float64
// per sequence with its own lengths.
void check_varlen(Algorithm algorithm, const Table& table, MaskKind mask) {
  ensure_context();
  const std::vector<int> len_q{77, 1, 300, 5}, len_k{300, 7, 129, 5};
  std::vector<int> cu_q{0}, cu_k{0};
  for (std::size_t b = 0; b < len_q.size(); ++b) cu_q.push_back(cu_q.back() + len_q[b]), cu_k.push_back(cu_k.back() + len_k[b]);
  Shape packed;
  packed.seqlen_q = cu_q.back(), packed.seqlen_k = cu_k.back(), packed.heads_q = 8, packed.heads_kv = 2;
  packed.head_dim = 128, packed.mask = mask;
  auto c = Case::make(packed, fresh_seed());
  REQUIRE(c.ok());
  auto rel = DeviceTable::make(table, packed.heads_q, fresh_seed());
  REQUIRE(rel.ok());
  auto ints = [](const std::vector<int>& v) {
    auto buf = cuda::DeviceBuffer::allocate(v.size() * 4);
    REQUIRE(buf.ok());
    REQUIRE(buf->upload(v.data(), v.size() * 4).ok());
    return std::move(*buf);
  };
  const cuda::DeviceBuffer dcu_q = ints(cu_q), dcu_k = ints(cu_k);
  AttentionProblem p = c->problem();
  p.batch = static_cast<int>(len_q.size());
  p.seqlen_q = *std::max_element(len_q.begin(), len_q.end()), p.seqlen_k = *std::max_element(len_k.begin(), len_k.end());
  p.cu_seqlens_q = static_cast<const int*>(dcu_q.get()), p.cu_seqlens_k = static_cast<const int*>(dcu_k.get());
  p.total_q = cu_q.back(), p.total_k = cu_k.back();
  p.q_strides.batch = p.k_strides.batch = p.v_strides.batch = p.o_strides.batch = 0;
  rel->apply(p);
  const KernelConfig config = chosen(p, algorithm);
  CHECK(config.varlen);
  INFO(fmt::format("varlen rel_bias extent {} offset {}, {}", table.extent, table.offset, readable_name(config)));
  auto st = runtime().forward(p, config);
  if (!st.ok()) FAIL(st.error().to_string());
  std::vector<float> o, lse;
  REQUIRE(c->read_outputs(o, lse).ok());
  const int Hq = packed.heads_q, Hkv = packed.heads_kv, D = packed.head_dim, total_q = cu_q.back();
  ComparisonSum sum;
  for (std::size_t b = 0; b < len_q.size(); ++b) {
    Shape one = packed;
    one.seqlen_q = len_q[b], one.seqlen_k = len_k[b];
    const auto rows = [&](const std::vector<float>& x, int first, int count, int heads) {
      return std::vector<float>(x.begin() + std::size_t(first) * heads * D, x.begin() + std::size_t(first + count) * heads * D);
    };
    std::vector<double> ref_o, ref_lse;
    reference_attention(one, rows(c->q(), cu_q[b], len_q[b], Hq), rows(c->k(), cu_k[b], len_k[b], Hkv),
                        rows(c->v(), cu_k[b], len_k[b], Hkv), ref_o, ref_lse,
                        [&](int, int h, int i, int j) { return rel->at(h, one.aligned(i), j); });
    for (int i = 0; i < len_q[b]; ++i)
      for (int h = 0; h < Hq; ++h) {
        const std::size_t at = (std::size_t(cu_q[b] + i) * Hq + h) * D;
        for (int d = 0; d < D; ++d) sum.add_output(o[at + d], ref_o[(std::size_t(i) * Hq + h) * D + d]);
        sum.add_lse(lse[std::size_t(h) * total_q + cu_q[b] + i], ref_lse[std::size_t(h) * len_q[b] + i], &o[at], D);
      }
  }
  check_ok(sum.result(), packed.dtype);
}

}  // namespace

TEST_CASE("rel_bias: fa3 tables match float64 on every mask (d64, d128, d256)", "[rel_bias][fa3][gpu]") {
  check_tables(Algorithm::fa3, GENERATE(64, 128, 256));
}

TEST_CASE("rel_bias: fa2 and reference tables match float64 on every mask", "[rel_bias][fa2][reference][gpu]") {
  const Algorithm algorithm = GENERATE(Algorithm::fa2, Algorithm::naive);
  check_tables(algorithm, GENERATE(64, 128));
}

TEST_CASE("rel_bias: varlen distances are within each sequence", "[rel_bias][varlen][fa3][fa2][reference][gpu]") {
  const Algorithm algorithm = GENERATE(Algorithm::automatic, Algorithm::fa2, Algorithm::naive);
  for (MaskKind mask : {MaskKind::none, MaskKind::causal}) {
    check_varlen(algorithm, Table{700, 350, -1}, mask);
    check_varlen(algorithm, Table{16, -3, 0}, mask);
  }
}
