#include "decode_harness.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <thread>

#include "config/half.hpp"

namespace flashjit::test {
namespace {

constexpr std::uint16_t kPoison16 = 0xffff;
constexpr std::uint32_t kPoison32 = 0xffffffffu;
constexpr std::size_t kOutputGuard = 256;  // elements behind O
constexpr std::size_t kLseGuard = 32;      // floats behind LSE

int ceil_div(int a, int b) { return (a + b - 1) / b; }

std::size_t dense(int b, int s, int h, int d, int S, int H, int D) {
  return ((static_cast<std::size_t>(b) * S + s) * H + h) * D + d;
}
std::size_t at(const Strides& st, int b, int s, int h) {
  return static_cast<std::size_t>(b * st.batch + s * st.seq + h * st.head);
}

// Runs f(job) for job in [0, jobs) on up to 16 threads.
template <class F>
void parallel_for(int jobs, F f) {
  const int workers = static_cast<int>(std::max(1u, std::min(16u, std::thread::hardware_concurrency())));
  std::vector<std::thread> threads;
  for (int w = 0; w < std::min(workers, jobs); ++w)
    threads.emplace_back([&, w] {
      for (int job = w; job < jobs; job += workers) f(job);
    });
  for (auto& t : threads) t.join();
}

// A new device buffer of `bytes` into dst, holding a copy of `host`.
Status upload(cuda::DeviceBuffer& dst, const void* host, std::size_t bytes) {
  auto buf = cuda::DeviceBuffer::allocate(bytes);
  if (!buf.ok()) return std::move(buf).error();
  FLASHJIT_TRY(buf->upload(host, bytes));
  dst = std::move(*buf);
  return {};
}

// New poisoned (0xff bytes: NaN) output buffers of `o_bytes` and `lse_bytes` into o and lse.
Status poisoned_outputs(cuda::DeviceBuffer& o, std::size_t o_bytes, cuda::DeviceBuffer& lse, std::size_t lse_bytes) {
  for (auto [dst, bytes] : {std::pair{&o, o_bytes}, {&lse, lse_bytes}}) {
    auto buf = cuda::DeviceBuffer::allocate(bytes);
    if (!buf.ok()) return std::move(buf).error();
    FLASHJIT_TRY(buf->fill_bytes(0xff));
    *dst = std::move(*buf);
  }
  return {};
}

Status sync() { return cuda::check((*cuda::api())->cuCtxSynchronize(), "cuCtxSynchronize"); }

// Random values in [lo, hi) rounded to the dtype: host floats and device bits.
void fill_rounded(FastRng& rng, DType dtype, float lo, float hi, std::vector<float>& values) {
  for (auto& x : values) x = from_half_bits(dtype, to_half_bits(dtype, rng.uniform(lo, hi)));
}

// What unused slots hold: huge values of either sign, infinities and NaNs (a kernel that reads a slot it
// should not and lets it reach O shows as a NaN or a huge error, even where it multiplies it by 0).
struct Garbage {
  std::uint16_t values[4];
  explicit Garbage(DType d)
      : values{to_half_bits(d, kGarbage), to_half_bits(d, -kGarbage), to_half_bits(d, INFINITY),
               static_cast<std::uint16_t>(d == DType::bf16 ? 0x7fc0 : 0x7e00)} {}
  void fill(FastRng& rng, std::vector<std::uint16_t>& bits) const {
    for (std::size_t i = 0; i < bits.size(); i += 32) {
      std::uint64_t r = rng.next();
      for (std::size_t j = i; j < std::min(bits.size(), i + 32); ++j, r >>= 2) bits[j] = values[r & 3];
    }
  }
};

// Softmax of one row over keys [lo, hi) given its scores (scaled): O (D doubles) and LSE; -inf and O = 0 if
// the range is empty or every score is -inf. A sink logit (-inf: none) joins the denominator only (an empty row's LSE is the sink).
template <class VRow>
double softmax_rows(const std::vector<double>& scores, int lo, int hi, int D, VRow v_row, double* o,
                    double sink = -INFINITY) {
  std::fill(o, o + D, 0.0);
  if (hi <= lo) return sink;
  double mx = -INFINITY;
  for (int j = lo; j < hi; ++j) mx = std::max(mx, scores[j]);
  if (mx == -INFINITY) return sink;  // every key hidden (a bias of -inf)
  double sum = sink == -INFINITY ? 0.0 : std::exp(sink - mx);
  for (int j = lo; j < hi; ++j) {
    const double p = std::exp(scores[j] - mx);
    sum += p;
    const float* vr = v_row(j);
    for (int d = 0; d < D; ++d) o[d] += p * vr[d];
  }
  for (int d = 0; d < D; ++d) o[d] /= sum;
  return mx + std::log(sum);
}

// Reads a poisoned [B, S, H, D] output (with its strides) and [B, H, S] LSE back as dense floats, counting
// elements written outside the tensor's own (the padding of strided rows, the LSE past its end).
Status read_bshd_outputs(DType dtype, int B, int S, int H, int D, bool with_lse, const cuda::DeviceBuffer& dout,
                         std::size_t o_elems, const Strides& o_strides, const cuda::DeviceBuffer& dlse,
                         std::size_t lse_elems, std::vector<float>& o, std::vector<float>& lse,
                         std::int64_t& stray_writes) {
  std::vector<std::uint16_t> obits(o_elems);
  FLASHJIT_TRY(dout.download(obits.data(), obits.size() * 2));
  std::vector<char> written(o_elems, 0);
  o.resize(static_cast<std::size_t>(B) * S * H * D);
  for (int b = 0; b < B; ++b)
    for (int pos = 0; pos < S; ++pos)
      for (int h = 0; h < H; ++h)
        for (int d = 0; d < D; ++d) {
          const std::size_t i = at(o_strides, b, pos, h) + d;
          o[dense(b, pos, h, d, S, H, D)] = from_half_bits(dtype, obits[i]);
          written[i] = 1;
        }
  stray_writes = 0;
  for (std::size_t i = 0; i < o_elems; ++i) stray_writes += !written[i] && obits[i] != kPoison16;
  std::vector<std::uint32_t> lbits(lse_elems);
  FLASHJIT_TRY(dlse.download(lbits.data(), lbits.size() * 4));
  const std::size_t n = with_lse ? static_cast<std::size_t>(B) * H * S : 0;
  lse.resize(n);
  if (n > 0) std::memcpy(lse.data(), lbits.data(), n * 4);
  for (std::size_t i = n; i < lse_elems; ++i) stray_writes += lbits[i] != kPoison32;
  return {};
}

}  // namespace

SequenceCheck check_sequences(const Shape& out, const std::vector<float>& o, const std::vector<float>& lse,
                              const std::vector<double>& ref_o, const std::vector<double>& ref_lse, double o_tol,
                              double lse_tol) {
  const std::size_t o_per = static_cast<std::size_t>(out.seqlen_q) * out.heads_q * out.head_dim;
  const std::size_t l_per = static_cast<std::size_t>(out.seqlen_q) * out.heads_q;
  Shape one = out;
  one.batch = 1;
  SequenceCheck r;
  for (int b = 0; b < out.batch; ++b) {
    std::vector<float> ob(o.begin() + b * o_per, o.begin() + (b + 1) * o_per), lb(l_per);
    std::vector<double> rob(ref_o.begin() + b * o_per, ref_o.begin() + (b + 1) * o_per);
    std::vector<double> rlb(ref_lse.begin() + b * l_per, ref_lse.begin() + (b + 1) * l_per);
    for (std::size_t i = 0; i < l_per; ++i) lb[i] = lse.empty() ? static_cast<float>(rlb[i]) : lse[b * l_per + i];
    const Comparison c = compare(one, ob, lb, rob, rlb);
    const bool ok = c.nan_count == 0 && c.empty_row_violations == 0 && c.rel_l2 <= o_tol && c.lse_max_abs <= lse_tol;
    const std::string line = fmt::format("  sequence {}: {}\n", b, c.to_string());
    r.summary += line;
    if (!ok) r.failures += line;
  }
  return r;
}

std::size_t strided_extent(const Strides& s, int batch, int seqlen, int heads, int head_dim) {
  return static_cast<std::size_t>((batch - 1) * s.batch + (seqlen - 1) * s.seq + (heads - 1) * s.head + head_dim);
}

// DecodeShape ---------------------------------------------------------------------------------------------
int DecodeShape::max_seqlen_k() const {
  const int max_len = seqlens.empty() ? 0 : *std::max_element(seqlens.begin(), seqlens.end());
  return std::max(1, max_len + bound_slack);
}

Shape DecodeShape::variant_shape() const {
  Shape v;
  v.batch = batch(), v.heads_q = heads_q, v.heads_kv = heads_kv, v.head_dim = head_dim;
  // Square, so that variant_score's alignment i + Sk - Sq is the query's own position.
  v.seqlen_k = v.seqlen_q = std::max(1, seqlens.empty() ? 1 : *std::max_element(seqlens.begin(), seqlens.end()));
  v.softcap = softcap, v.alibi = alibi, v.sinks = sinks;
  return v;
}

std::string DecodeShape::to_string() const {
  std::string lens;
  for (int l : seqlens) lens += fmt::format("{}{}", lens.empty() ? "" : ",", l);
  std::string layout_text = layout == KvLayout::paged ? fmt::format("paged{}", page_size) : "contiguous";
  if (layout == KvLayout::paged && table != Table::dense)
    layout_text += table == Table::csr_seqlens ? " CSR+seqlens_k" : " CSR+last_page_len";
  std::string variants;
  if (softcap > 0) variants += fmt::format(" softcap {}", softcap);
  if (alibi) variants += alibi == 2 ? " alibi [B, Hq]" : " alibi [Hq]";
  if (sinks) variants += " sinks";
  return fmt::format("{} D{} Hq{} Hkv{} q_len{} seqlens[{}] {} window {}{} lse {} splits {} merge {}{}{}{}{}",
                     flashjit::to_string(dtype), head_dim, heads_q, heads_kv, q_len, lens, layout_text, window_left,
                     chunk_size > 0 ? fmt::format(" chunk {}", chunk_size) : "", with_lse ? "on" : "off", num_splits,
                     flashjit::to_string(split_merge), strided ? " strided" : "",
                     bound_slack ? fmt::format(" bound+{}", bound_slack) : "",
                     softmax_scale > 0 ? fmt::format(" scale {}", softmax_scale) : "", variants);
}

Shape DecodeShape::output_shape() const {
  Shape s;
  s.batch = batch(), s.seqlen_q = q_len, s.seqlen_k = 1, s.heads_q = heads_q, s.heads_kv = heads_kv;
  s.head_dim = head_dim, s.dtype = dtype;
  return s;
}

HostKv concat(const HostKv& a, const HostKv& b, int heads_kv, int head_dim) {
  HostKv r;
  const std::size_t row = static_cast<std::size_t>(heads_kv) * head_dim;
  for (std::size_t i = 0; i < a.len.size(); ++i) {
    r.len.push_back(a.len[i] + b.len[i]);
    r.offset.push_back(r.k.size());
    for (const HostKv* src : {&a, &b}) {
      const auto first = static_cast<std::ptrdiff_t>(src->offset[i]);
      const auto last = first + static_cast<std::ptrdiff_t>(src->len[i] * row);
      r.k.insert(r.k.end(), src->k.begin() + first, src->k.begin() + last);
      r.v.insert(r.v.end(), src->v.begin() + first, src->v.begin() + last);
    }
  }
  return r;
}

void reference_decode(const DecodeShape& s, const std::vector<float>& q, const HostKv& kv, std::vector<double>& o,
                      std::vector<double>& lse, const BiasFn& bias) {
  const int B = s.batch(), T = s.q_len, Hq = s.heads_q, Hkv = s.heads_kv, D = s.head_dim, group = s.group();
  const double scale = s.softmax_scale > 0 ? double(s.softmax_scale) : 1.0 / std::sqrt(double(D));
  o.assign(static_cast<std::size_t>(B) * T * Hq * D, 0.0);
  lse.assign(static_cast<std::size_t>(B) * Hq * T, -INFINITY);
  const Shape vs = s.variant_shape();
  parallel_for(B * Hq, [&](int job) {
    const int b = job / Hq, h = job % Hq, hk = h / group, L = kv.len[b];
    std::vector<double> scores(std::max(L, 1));
    for (int t = 0; t < T; ++t) {
      const int a = L - T + t;  // the token's position; it sees keys lo..a
      if (a < 0) {              // no key: O = 0, LSE = -inf (or the sink's logit)
        if (s.sinks) lse[(static_cast<std::size_t>(b) * Hq + h) * T + t] = sink_logit(vs, h);
        continue;
      }
      const int lo = s.window_left >= 0  ? std::max(0, a - s.window_left)
                     : s.chunk_size > 0 ? a / s.chunk_size * s.chunk_size  // a >= 0: the floor
                                        : 0;
      const float* qr = &q[dense(b, t, h, 0, T, Hq, D)];
      for (int j = lo; j <= a; ++j) {
        const float* kr = kv.k_row(b, j, hk, Hkv, D);
        double acc = 0;
        for (int d = 0; d < D; ++d) acc += double(qr[d]) * kr[d];
        // Variants: the prefill reference's transform with query row a of a square problem (aligned to key a).
        scores[j] = variant_score(vs, acc * scale, b, h, a, j) + (bias ? bias(b, h, t, j) : 0.0);
      }
      lse[(static_cast<std::size_t>(b) * Hq + h) * T + t] =
          softmax_rows(scores, lo, a + 1, D, [&](int j) { return kv.v_row(b, j, hk, Hkv, D); },
                       &o[dense(b, t, h, 0, T, Hq, D)], s.sinks ? sink_logit(vs, h) : -INFINITY);
    }
  });
}

// DecodeCase ----------------------------------------------------------------------------------------------
DecodeCase DecodeCase::host_only(const DecodeShape& s, std::uint64_t seed, const std::vector<float>* q_in,
                                 DecodeImage& img) {
  DecodeCase c;
  c.shape_ = s;
  img = DecodeImage{};
  FastRng rng(seed);
  const Garbage garbage(s.dtype);
  const int B = s.batch(), T = s.q_len, Hq = s.heads_q, Hkv = s.heads_kv, D = s.head_dim;
  const int max_len = s.seqlens.empty() ? 0 : *std::max_element(s.seqlens.begin(), s.seqlens.end());
  c.max_seqlen_k_ = s.max_seqlen_k();

  // q: [B, q_len, Hq, D], padding (strided) full of garbage.
  c.q_strides_ = s.strided ? Strides{0, Hq * (D + 8) + 16, D + 8} : Strides{0, Hq * D, D};
  c.q_strides_.batch = T * c.q_strides_.seq + (s.strided ? 24 : 0);
  c.q_.resize(static_cast<std::size_t>(B) * T * Hq * D);
  if (q_in != nullptr) c.q_ = *q_in;
  else fill_rounded(rng, s.dtype, -2.f, 2.f, c.q_);
  img.q.resize(strided_extent(c.q_strides_, B, T, Hq, D));
  garbage.fill(rng, img.q);
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < Hq; ++h)
        for (int d = 0; d < D; ++d)
          img.q[at(c.q_strides_, b, t, h) + d] = to_half_bits(s.dtype, c.q_[dense(b, t, h, d, T, Hq, D)]);

  // Keys and values of each sequence.
  const std::size_t row = static_cast<std::size_t>(Hkv) * D;
  for (int b = 0; b < B; ++b) {
    c.kv_.len.push_back(s.seqlens[b]);
    c.kv_.offset.push_back(c.kv_.k.size());
    c.kv_.k.resize(c.kv_.k.size() + s.seqlens[b] * row);
  }
  c.kv_.v.resize(c.kv_.k.size());
  fill_rounded(rng, s.dtype, -1.f, 1.f, c.kv_.k);
  fill_rounded(rng, s.dtype, -1.f, 1.f, c.kv_.v);

  // The cache: every slot garbage, then each sequence's keys in place.
  const bool paged = s.layout == KvLayout::paged;
  int slots = B, rows = 0;
  if (paged) {
    rows = s.page_size;
    std::vector<int> pages_needed(B, 0);
    int total = 0;
    for (int b = 0; b < B; ++b) total += pages_needed[b] = ceil_div(s.seqlens[b], s.page_size);
    const int spare = std::max(3, total / 4);
    c.num_pages_ = slots = total + spare;
    c.max_pages_per_seq_ = ceil_div(c.max_seqlen_k_, s.page_size) + 2;  // trailing entries point at garbage pages
    // Pages in shuffled order: sequence b gets the next pages_needed[b] of the permutation.
    std::vector<int> perm(c.num_pages_);
    std::iota(perm.begin(), perm.end(), 0);
    for (int i = c.num_pages_ - 1; i > 0; --i) std::swap(perm[i], perm[rng.below(i + 1)]);
    c.page_table_.assign(static_cast<std::size_t>(B) * c.max_pages_per_seq_, 0);
    int next = 0;
    for (int b = 0; b < B; ++b)
      for (int i = 0; i < c.max_pages_per_seq_; ++i)
        c.page_table_[b * c.max_pages_per_seq_ + i] = i < pages_needed[b] ? perm[next++] : perm[total + rng.below(spare)];
  } else {
    // A looser bound uses the default capacity (max_seqlen_k); else a capacity beyond the bound.
    c.cache_seqlen_ = s.bound_slack > 0 ? c.max_seqlen_k_ : max_len + 37;
    rows = c.cache_seqlen_;
  }
  c.cache_strides_ = s.strided ? Strides{0, Hkv * (D + 8) + 8, D + 8} : Strides{0, Hkv * D, D};
  c.cache_strides_.batch = rows * c.cache_strides_.seq + (s.strided ? 16 : 0);
  img.k.resize(strided_extent(c.cache_strides_, slots, rows, Hkv, D));
  img.v.resize(img.k.size());
  garbage.fill(rng, img.k);
  garbage.fill(rng, img.v);
  for (int b = 0; b < B; ++b)
    for (int j = 0; j < s.seqlens[b]; ++j) {
      std::size_t base;
      if (paged) {
        const int page = c.page_table_[b * c.max_pages_per_seq_ + j / s.page_size];
        base = at(c.cache_strides_, page, j % s.page_size, 0);
      } else {
        base = at(c.cache_strides_, b, j, 0);
      }
      for (int h = 0; h < Hkv; ++h) {
        const float* kr = c.kv_.k_row(b, j, h, Hkv, D);
        const float* vr = c.kv_.v_row(b, j, h, Hkv, D);
        std::uint16_t* kd = &img.k[base + h * c.cache_strides_.head];
        std::uint16_t* vd = &img.v[base + h * c.cache_strides_.head];
        for (int d = 0; d < D; ++d) kd[d] = to_half_bits(s.dtype, kr[d]), vd[d] = to_half_bits(s.dtype, vr[d]);
      }
    }

  // Outputs: O (strided: [B, Hq, q_len, D] order, padded), a guard behind it; LSE and its guard.
  c.o_strides_ = s.strided ? Strides{0, D + 8, T * (D + 8)} : Strides{0, Hq * D, D};
  c.o_strides_.batch = s.strided ? Hq * c.o_strides_.head + 8 : T * c.o_strides_.seq;
  c.o_elems_ = strided_extent(c.o_strides_, B, T, Hq, D) + kOutputGuard;
  c.lse_elems_ = static_cast<std::size_t>(B) * Hq * T + kLseGuard;

  img.seqlens = s.seqlens;
  img.page_table = c.page_table_;
  if (paged && s.table != DecodeShape::Table::dense) {
    // FlashInfer's CSR table from the dense one: each sequence's pages back to back (with seqlens_k also the
    // garbage page behind its last), the offsets, and the tokens of each last page (0 without pages).
    const int extra = s.table == DecodeShape::Table::csr_seqlens ? 1 : 0;
    img.page_indptr = {0};
    for (int b = 0; b < B; ++b) {
      const int used = ceil_div(s.seqlens[b], s.page_size);
      for (int i = 0; i < used + extra; ++i) img.page_indices.push_back(c.page_table_[b * c.max_pages_per_seq_ + i]);
      img.page_indptr.push_back(static_cast<int>(img.page_indices.size()));
      img.last_page_len.push_back(used == 0 ? 0 : s.seqlens[b] - (used - 1) * s.page_size);
    }
    c.csr_entries_ = img.page_indices.size();
  }
  img.q_strides = c.q_strides_, img.o_strides = c.o_strides_, img.cache_strides = c.cache_strides_;
  img.max_seqlen_k = c.max_seqlen_k_, img.cache_seqlen = c.cache_seqlen_;
  img.num_pages = c.num_pages_, img.max_pages_per_seq = c.max_pages_per_seq_;
  img.o_elems = c.o_elems_, img.lse_elems = c.lse_elems_;
  return c;
}

Result<DecodeCase> DecodeCase::make(const DecodeShape& s, std::uint64_t seed, const std::vector<float>* q_in) {
  DecodeImage img;
  DecodeCase c = host_only(s, seed, q_in, img);
  FLASHJIT_TRY(upload(c.dq_, img.q.data(), img.q.size() * 2));
  FLASHJIT_TRY(upload(c.dk_, img.k.data(), img.k.size() * 2));
  FLASHJIT_TRY(upload(c.dv_, img.v.data(), img.v.size() * 2));
  FLASHJIT_TRY(upload(c.dseqlens_, img.seqlens.data(), std::max<std::size_t>(img.seqlens.size(), 1) * 4));
  if (s.layout == KvLayout::paged) FLASHJIT_TRY(upload(c.dpages_, img.page_table.data(), img.page_table.size() * 4));
  if (!img.page_indptr.empty()) {
    FLASHJIT_TRY(upload(c.dindptr_, img.page_indptr.data(), img.page_indptr.size() * 4));
    FLASHJIT_TRY(upload(c.dindices_, img.page_indices.data(), std::max<std::size_t>(img.page_indices.size(), 1) * 4));
    FLASHJIT_TRY(upload(c.dlast_, img.last_page_len.data(), img.last_page_len.size() * 4));
  }
  const Shape vs = s.variant_shape();
  if (s.alibi) {
    std::vector<float> slopes;
    for (int b = 0; b < (s.alibi == 2 ? s.batch() : 1); ++b)
      for (int h = 0; h < s.heads_q; ++h) slopes.push_back(static_cast<float>(alibi_slope(vs, b, h)));
    FLASHJIT_TRY(upload(c.dslopes_, slopes.data(), slopes.size() * 4));
  }
  if (s.sinks) {
    std::vector<float> sinks;
    for (int h = 0; h < s.heads_q; ++h) sinks.push_back(static_cast<float>(sink_logit(vs, h)));
    FLASHJIT_TRY(upload(c.dsinks_, sinks.data(), sinks.size() * 4));
  }
  FLASHJIT_TRY(poisoned_outputs(c.do_, c.o_elems_ * 2, c.dlse_, c.lse_elems_ * 4));
  return c;
}

DecodeProblem DecodeCase::problem() const {
  const DecodeShape& s = shape_;
  DecodeProblem p;
  p.dtype = s.dtype;
  p.batch = s.batch(), p.q_len = s.q_len, p.heads_q = s.heads_q, p.heads_kv = s.heads_kv, p.head_dim = s.head_dim;
  p.q = dq_.get(), p.o = do_.get();
  p.lse = s.with_lse ? static_cast<float*>(dlse_.get()) : nullptr;
  if (s.strided) {
    p.q_strides = q_strides_, p.o_strides = o_strides_;
    p.k_strides = cache_strides_, p.v_strides = cache_strides_;
  }  // else zero: the contiguous defaults, which equal the layouts make() used
  p.layout = s.layout;
  p.k_cache = dk_.get(), p.v_cache = dv_.get();
  p.seqlens_k = static_cast<const int*>(dseqlens_.get());
  p.max_seqlen_k = max_seqlen_k_;
  if (s.layout == KvLayout::paged) {
    p.page_table = static_cast<const int*>(dpages_.get());
    p.num_pages = num_pages_, p.page_size = s.page_size, p.max_pages_per_seq = max_pages_per_seq_;
    if (s.table != DecodeShape::Table::dense) {
      p.page_table = static_cast<const int*>(dindices_.get());
      p.page_indptr = static_cast<const int*>(dindptr_.get());
      if (s.table == DecodeShape::Table::csr_last_page)
        p.seqlens_k = nullptr, p.last_page_len = static_cast<const int*>(dlast_.get());
    }
  } else {
    p.cache_seqlen = cache_seqlen_ == max_seqlen_k_ ? 0 : cache_seqlen_;
  }
  p.window_left = s.window_left;
  p.chunk_size = s.chunk_size;
  if (s.softmax_scale > 0) p.softmax_scale = s.softmax_scale;
  p.num_splits = s.num_splits;
  p.split_merge = s.split_merge;
  p.softcap = s.softcap;
  if (s.alibi) {
    p.alibi_slopes = static_cast<const float*>(dslopes_.get());
    p.alibi_slopes_batch_stride = s.alibi == 2 ? s.heads_q : 0;
  }
  if (s.sinks) p.sinks = static_cast<const float*>(dsinks_.get());
  return p;
}

Status DecodeCase::poison_outputs() {
  FLASHJIT_TRY(do_.fill_bytes(0xff));
  return dlse_.fill_bytes(0xff);
}

Status DecodeCase::read_outputs(std::vector<float>& o, std::vector<float>& lse, std::int64_t& stray_writes) const {
  const DecodeShape& s = shape_;
  FLASHJIT_TRY(sync());
  return read_bshd_outputs(s.dtype, s.batch(), s.q_len, s.heads_q, s.head_dim, s.with_lse, do_, o_elems_, o_strides_,
                           dlse_, lse_elems_, o, lse, stray_writes);
}

Status DecodeCase::read_raw(std::vector<unsigned char>& bytes) const {
  FLASHJIT_TRY(sync());
  bytes.resize(o_elems_ * 2 + lse_elems_ * 4);
  FLASHJIT_TRY(do_.download(bytes.data(), o_elems_ * 2));
  return dlse_.download(bytes.data() + o_elems_ * 2, lse_elems_ * 4);
}

Status DecodeCase::upload_seqlens(const std::vector<int>& lens) {
  FLASHJIT_TRY(sync());
  return dseqlens_.upload(lens.data(), std::min(lens.size() * 4, dseqlens_.size()));
}

Status DecodeCase::set_page_entry(int b, int index, int page) {
  page_table_.at(static_cast<std::size_t>(b) * max_pages_per_seq_ + index) = page;
  FLASHJIT_TRY(sync());
  return dpages_.upload(page_table_.data(), page_table_.size() * 4);
}

// MergeShape / MergeCase ----------------------------------------------------------------------------------
std::string MergeShape::to_string() const {
  std::string lens;
  for (int l : keys) lens += fmt::format("{}{}", lens.empty() ? "" : ",", l);
  return fmt::format("{} D{} H{} S{} keys[{}] states {} lse {}{}", flashjit::to_string(dtype), head_dim, heads, seqlen,
                     lens, num_states, with_lse ? "on" : "off", strided ? " strided" : "");
}

Shape MergeShape::output_shape() const {
  Shape s;
  s.batch = batch(), s.seqlen_q = seqlen, s.seqlen_k = 1, s.heads_q = heads, s.heads_kv = heads;
  s.head_dim = head_dim, s.dtype = dtype;
  return s;
}

MergeCase MergeCase::host_only(const MergeShape& s, std::uint64_t seed, MergeImage& img) {
  MergeCase c;
  c.shape_ = s;
  img = MergeImage{};
  FastRng rng(seed);
  const Garbage garbage(s.dtype);
  const int B = s.batch(), S = s.seqlen, H = s.heads, D = s.head_dim, N = s.num_states;
  const double scale = 1.0 / std::sqrt(double(D));

  std::vector<float> q(static_cast<std::size_t>(B) * S * H * D);
  fill_rounded(rng, s.dtype, -2.f, 2.f, q);
  HostKv kv;
  for (int b = 0; b < B; ++b) {
    kv.len.push_back(s.keys[b]);
    kv.offset.push_back(kv.k.size());
    kv.k.resize(kv.k.size() + static_cast<std::size_t>(s.keys[b]) * H * D);
  }
  kv.v.resize(kv.k.size());
  fill_rounded(rng, s.dtype, -1.f, 1.f, kv.k);
  fill_rounded(rng, s.dtype, -1.f, 1.f, kv.v);

  // Cut points: state i covers keys [cuts[b][i], cuts[b][i + 1]). Sequence 0's last state starts at
  // keys - S / 2, so its first S / 2 positions see none of it (LSE -inf in that state only).
  std::vector<std::vector<int>> cuts(B);
  for (int b = 0; b < B; ++b) {
    const int L = s.keys[b];
    auto& cb = cuts[b];
    cb.push_back(0);
    for (int i = 1; i < N; ++i) cb.push_back(rng.below(L + 1));
    if (b == 0 && N >= 2) cb.back() = std::max(0, L - S / 2);
    std::sort(cb.begin(), cb.end());
    cb.push_back(L);
  }

  // Per state, per row (b, s, h): float64 attention over the state's visible keys, O rounded to the dtype
  // (NaN where the state has no key), LSE rounded to float; the union reference; the float64 merge of the
  // rounded states.
  const std::size_t rows_total = static_cast<std::size_t>(B) * S * H;
  std::vector<std::vector<float>> in_o(N, std::vector<float>(rows_total * D));
  std::vector<std::vector<float>> in_lse(N, std::vector<float>(rows_total));
  c.union_o_.assign(rows_total * D, 0.0);
  c.union_lse_.assign(rows_total, -INFINITY);
  c.merged_o_.assign(rows_total * D, 0.0);
  c.merged_lse_.assign(rows_total, -INFINITY);
  std::vector<std::int64_t> partly(B * H, 0), empty(B * H, 0);
  parallel_for(B * H, [&](int job) {
    const int b = job / H, h = job % H, L = s.keys[b];
    std::vector<double> scores(std::max(L, 1)), part(D);
    for (int pos = 0; pos < S; ++pos) {
      const int a = L - S + pos;  // sees keys 0..a
      const std::size_t orow = dense(b, pos, h, 0, S, H, D);
      const std::size_t lrow = (static_cast<std::size_t>(b) * H + h) * S + pos;
      const float* qr = &q[orow];
      for (int j = 0; j <= a; ++j) {
        const float* kr = kv.k_row(b, j, h, H, D);
        double acc = 0;
        for (int d = 0; d < D; ++d) acc += double(qr[d]) * kr[d];
        scores[j] = acc * scale;
      }
      auto v_row = [&](int j) { return kv.v_row(b, j, h, H, D); };
      c.union_lse_[lrow] = softmax_rows(scores, 0, a + 1, D, v_row, &c.union_o_[orow]);
      int empty_states = 0;
      double m = -INFINITY;
      for (int i = 0; i < N; ++i) {
        const double l = softmax_rows(scores, cuts[b][i], std::min(cuts[b][i + 1], a + 1), D, v_row, part.data());
        in_lse[i][lrow] = static_cast<float>(l);
        empty_states += std::isinf(l);
        for (int d = 0; d < D; ++d)
          in_o[i][orow + d] = std::isinf(l) ? NAN : from_half_bits(s.dtype, to_half_bits(s.dtype, float(part[d])));
        m = std::max(m, double(in_lse[i][lrow]));
      }
      partly[job] += empty_states > 0 && empty_states < N;
      empty[job] += empty_states == N;
      if (m == -INFINITY) continue;
      double sum = 0;
      for (int i = 0; i < N; ++i) {
        if (std::isinf(in_lse[i][lrow])) continue;
        const double w = std::exp(double(in_lse[i][lrow]) - m);
        sum += w;
        for (int d = 0; d < D; ++d) c.merged_o_[orow + d] += w * in_o[i][orow + d];
      }
      for (int d = 0; d < D; ++d) c.merged_o_[orow + d] /= sum;
      c.merged_lse_[lrow] = m + std::log(sum);
    }
  });
  c.partly_empty_rows_ = std::accumulate(partly.begin(), partly.end(), std::int64_t{0});
  c.empty_rows_ = std::accumulate(empty.begin(), empty.end(), std::int64_t{0});

  // The states: inputs share in_strides (padding: garbage); O rows of empty states are NaN bits.
  c.in_strides_ = s.strided ? Strides{0, H * (D + 8) + 8, D + 8} : Strides{0, H * D, D};
  c.in_strides_.batch = S * c.in_strides_.seq + (s.strided ? 16 : 0);
  for (int i = 0; i < N; ++i) {
    std::vector<std::uint16_t> bits(strided_extent(c.in_strides_, B, S, H, D));
    garbage.fill(rng, bits);
    for (int b = 0; b < B; ++b)
      for (int pos = 0; pos < S; ++pos)
        for (int h = 0; h < H; ++h)
          for (int d = 0; d < D; ++d) {
            const float x = in_o[i][dense(b, pos, h, d, S, H, D)];
            bits[at(c.in_strides_, b, pos, h) + d] = std::isnan(x) ? kPoison16 : to_half_bits(s.dtype, x);
          }
    img.o_in.push_back(std::move(bits));
    img.lse_in.push_back(std::move(in_lse[i]));
  }
  c.o_strides_ = s.strided ? Strides{0, D + 8, S * (D + 8)} : Strides{0, H * D, D};
  c.o_strides_.batch = s.strided ? H * c.o_strides_.head + 8 : S * c.o_strides_.seq;
  c.o_elems_ = strided_extent(c.o_strides_, B, S, H, D) + kOutputGuard;
  c.lse_elems_ = rows_total + kLseGuard;
  img.in_strides = c.in_strides_, img.o_strides = c.o_strides_;
  img.o_elems = c.o_elems_, img.lse_elems = c.lse_elems_;
  return c;
}

Result<MergeCase> MergeCase::make(const MergeShape& s, std::uint64_t seed) {
  MergeImage img;
  MergeCase c = host_only(s, seed, img);
  c.din_o_.resize(s.num_states);
  c.din_lse_.resize(s.num_states);
  for (int i = 0; i < s.num_states; ++i) {
    FLASHJIT_TRY(upload(c.din_o_[i], img.o_in[i].data(), img.o_in[i].size() * 2));
    FLASHJIT_TRY(upload(c.din_lse_[i], img.lse_in[i].data(), img.lse_in[i].size() * 4));
  }
  FLASHJIT_TRY(poisoned_outputs(c.do_, c.o_elems_ * 2, c.dlse_, c.lse_elems_ * 4));
  return c;
}

MergeProblem MergeCase::problem() const {
  const MergeShape& s = shape_;
  MergeProblem p;
  p.dtype = s.dtype;
  p.batch = s.batch(), p.seqlen = s.seqlen, p.heads = s.heads, p.head_dim = s.head_dim;
  p.num_states = s.num_states;
  for (int i = 0; i < s.num_states; ++i) {
    p.o_in[i] = din_o_[i].get();
    p.lse_in[i] = static_cast<const float*>(din_lse_[i].get());
  }
  if (s.strided) p.in_strides = in_strides_, p.o_strides = o_strides_;
  p.o = do_.get();
  p.lse = s.with_lse ? static_cast<float*>(dlse_.get()) : nullptr;
  return p;
}

Status MergeCase::poison_outputs() {
  FLASHJIT_TRY(do_.fill_bytes(0xff));
  return dlse_.fill_bytes(0xff);
}

Status MergeCase::read_outputs(std::vector<float>& o, std::vector<float>& lse, std::int64_t& stray_writes) const {
  const MergeShape& s = shape_;
  FLASHJIT_TRY(sync());
  return read_bshd_outputs(s.dtype, s.batch(), s.seqlen, s.heads, s.head_dim, s.with_lse, do_, o_elems_, o_strides_,
                           dlse_, lse_elems_, o, lse, stray_writes);
}

}  // namespace flashjit::test
