// Paged prefill on the GPU: K and V in page pools addressed through a vLLM-style page table (block_table),
// each sequence's key count from seqused_k, queries ragged (cu_seqlens_q: chunked prefill, len_q <= len_k,
// chunks that start mid-page, an empty sequence) or dense [B, Sq, Hq, D] with per-sequence key counts.
// Every pool is built from a shuffled permutation of its pages, with spare pages and the tail of each
// sequence's last page holding large finite junk (around +-30: a masked key that leaked into a row would wreck
// it), and table entries past a sequence's pages set to garbage (-7, 1 << 30, INT_MAX, INT_MIN, num_pages) that
// no kernel may dereference. Every mask, FA3 (page sizes 1 to 256 against its key tiles: gathered, boxed per
// page, boxed per tile; narrow head dims) / FA2 / the reference kernel (short batches only), bf16 and fp16,
// top-left alignment, padded, interleaved (vLLM [num_pages, 2, page_size, Hkv, D]) and HND (FlashInfer
// [num_pages, Hkv, page_size, D]) pools, the dispatcher's choice, check_pages
// (refusing a bad page index before launching) and unchecked bad page indices (their keys read as zeros).
// Fresh random data, outputs poisoned (NaN) including guard rows that no kernel may write, float64 CPU
// reference per sequence.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <thread>

#include "checks.hpp"
#include "config/half.hpp"
#include "dispatch/heuristics.hpp"
#include "harness.hpp"
#include "support/catch.hpp"

using namespace flashjit;
using namespace flashjit::test;

namespace {

constexpr Arch kSm90a{90, true};
constexpr int kGuardRows = 67;  // poisoned rows after the last query row in O (and Hq * 67 floats after LSE)

// Page-table entries past a sequence's pages (never to be dereferenced), cycled through.
int garbage_entry(int num_pages, int n) {
  const int values[] = {-7, 1 << 30, INT_MAX, num_pages, INT_MIN, -1, num_pages + 12345};
  return values[n % std::size(values)];
}

struct PagedShape {
  std::vector<int> len_q, len_k;  // per sequence; dense: every len_q is the batch's seqlen_q
  bool dense = false;             // dense Q / O [B, Sq, Hq, D] (no cu_seqlens_q), LSE [B, Hq, Sq]
  int heads_q = 8, heads_kv = 2, head_dim = 128;
  DType dtype = DType::bf16;
  MaskKind mask = MaskKind::none;
  int window_left = -1, window_right = -1, chunk_size = 0;
  bool top_left = false;
  int page_size = 16;
  int spare_pages = 5;   // pool pages no sequence uses (junk)
  int table_slack = 3;   // entries per table row past the longest sequence's pages (garbage)
  int row_pad = 0;       // K/V token stride: Hkv * D (HND: D) + row_pad elements
  int page_pad = 0;      // K/V page stride: page_size * token stride + page_pad elements
  bool interleaved = false;  // K and V pages alternate in one buffer (vLLM: [num_pages, 2, page_size, Hkv, D])
  bool hnd = false;          // FlashInfer's HND pages [num_pages, Hkv, page_size, D] (a head's tokens together)
  enum class Table { dense, csr_seqused, csr_last_page } table = Table::dense;  // CSR: FlashInfer's indptr/indices

  int batch() const { return static_cast<int>(len_q.size()); }
  int total_q() const { return std::accumulate(len_q.begin(), len_q.end(), 0); }
  int max_q() const { return *std::max_element(len_q.begin(), len_q.end()); }
  int max_k() const { return *std::max_element(len_k.begin(), len_k.end()); }
  int rows_q() const { return dense ? batch() * len_q[0] : total_q(); }  // rows of Q and O
  int pages_of(int b) const { return (len_k[b] + page_size - 1) / page_size; }
  int used_pages() const {
    int n = 0;
    for (int b = 0; b < batch(); ++b) n += pages_of(b);
    return n;
  }
  int max_pages_per_seq() const {
    int n = 0;
    for (int b = 0; b < batch(); ++b) n = std::max(n, pages_of(b));
    return std::max(1, n + table_slack);
  }
  std::int64_t token_stride() const { return (hnd ? std::int64_t(1) : heads_kv) * head_dim + row_pad; }
  std::int64_t head_stride() const { return hnd ? page_size * token_stride() : head_dim; }
  std::int64_t page_elems() const { return (hnd ? heads_kv * head_stride() : page_size * token_stride()) + page_pad; }
  std::int64_t page_stride() const { return interleaved ? 2 * page_elems() : page_elems(); }
  std::string to_string() const {
    return fmt::format("{} len_q {} len_k {} Hq{} Hkv{} D{} {} {} (w {} {}, chunk {}) page_size {}{}{}{}{}{}",
                       dense ? "dense" : "ragged", fmt::join(len_q, ","), fmt::join(len_k, ","), heads_q, heads_kv,
                       head_dim, flashjit::to_string(dtype), flashjit::to_string(mask), window_left, window_right,
                       chunk_size, page_size, top_left ? " top-left" : "",
                       row_pad || page_pad ? fmt::format(" pads {} {}", row_pad, page_pad) : "",
                       interleaved ? " interleaved K/V pages" : "", hnd ? " HND" : "",
                       table == Table::dense ? "" : table == Table::csr_seqused ? " CSR+seqused_k" : " CSR+last_page_len");
  }
};

std::vector<int> offsets(const std::vector<int>& lens) {
  std::vector<int> cu(lens.size() + 1, 0);
  for (std::size_t b = 0; b < lens.size(); ++b) cu[b + 1] = cu[b] + lens[b];
  return cu;
}

Status allocate(cuda::DeviceBuffer& dev, std::size_t bytes) {
  auto buf = cuda::DeviceBuffer::allocate(std::max<std::size_t>(bytes, 16));
  if (!buf.ok()) return std::move(buf).error();
  dev = std::move(*buf);
  return {};
}

// One paged problem: host copies of the queries and of each sequence's keys and values (as rounded floats, in
// key order), the page pools, table and key counts on the device, poisoned outputs with guard rows.
class PagedCase {
 public:
  static Result<PagedCase> make(const PagedShape& s, std::uint64_t seed) {
    PagedCase c;
    c.shape_ = s;
    const int B = s.batch(), D = s.head_dim, Hq = s.heads_q, Hkv = s.heads_kv, ps = s.page_size;
    if (s.dense)
      for (int b = 0; b < B; ++b)
        if (s.len_q[b] != s.len_q[0]) return Error(ErrorCode::internal, "dense queries need one len_q");
    c.cu_q_ = s.dense ? std::vector<int>() : offsets(s.len_q);
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> uq(-2.f, 2.f), ukv(-1.f, 1.f), junk(20.f, 32.f);
    std::bernoulli_distribution sign(0.5);
    auto half = [&](float x, float& rounded) {
      const std::uint16_t bits = to_half_bits(s.dtype, x);
      rounded = from_half_bits(s.dtype, bits);
      return bits;
    };

    // Q [rows_q][Hq][D].
    const std::size_t nq = std::size_t(s.rows_q()) * Hq * D;
    c.q_.resize(nq);
    std::vector<std::uint16_t> qbits(nq);
    for (std::size_t i = 0; i < nq; ++i) qbits[i] = half(uq(rng), c.q_[i]);

    // The pools: every element junk first (pads, spare pages, the tails of last pages), then each sequence's
    // keys and values at the pages of a shuffled permutation.
    c.num_pages_ = s.used_pages() + s.spare_pages;
    const std::size_t pool = std::size_t(c.num_pages_) * s.page_stride();
    std::vector<std::uint16_t> kbits(pool), vbits(s.interleaved ? 0 : pool);
    std::uint16_t* vpool = s.interleaved ? kbits.data() + s.page_elems() : vbits.data();
    float unused;
    for (auto& x : kbits) x = half(sign(rng) ? junk(rng) : -junk(rng), unused);
    for (auto& x : vbits) x = half(sign(rng) ? junk(rng) : -junk(rng), unused);
    std::vector<int> perm(c.num_pages_);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    const int row = s.max_pages_per_seq();
    c.table_.assign(std::size_t(B) * row, 0);
    c.k_.resize(B), c.v_.resize(B);
    int next = 0, garbage = 0;
    for (int b = 0; b < B; ++b) {
      const int lk = s.len_k[b];
      c.k_[b].resize(std::size_t(lk) * Hkv * D), c.v_[b].resize(std::size_t(lk) * Hkv * D);
      for (int slot = 0; slot < row; ++slot) {
        if (slot >= s.pages_of(b)) {
          c.table_[std::size_t(b) * row + slot] = garbage_entry(c.num_pages_, garbage++);
          continue;
        }
        const int page = perm[next++];
        c.table_[std::size_t(b) * row + slot] = page;
        for (int t = 0; t < ps && slot * ps + t < lk; ++t) {
          const int j = slot * ps + t;
          for (int h = 0; h < Hkv; ++h)
            for (int d = 0; d < D; ++d) {
              const std::size_t at = std::size_t(page) * s.page_stride() + t * s.token_stride() + h * s.head_stride() + d;
              const std::size_t key = (std::size_t(j) * Hkv + h) * D + d;
              kbits[at] = half(ukv(rng), c.k_[b][key]);
              vpool[at] = half(ukv(rng), c.v_[b][key]);
            }
        }
      }
    }

    FLASHJIT_TRY(allocate(c.dq_, nq * 2));
    FLASHJIT_TRY(c.dq_.upload(qbits.data(), nq * 2));
    FLASHJIT_TRY(allocate(c.dk_, pool * 2));
    FLASHJIT_TRY(c.dk_.upload(kbits.data(), pool * 2));
    if (!s.interleaved) {
      FLASHJIT_TRY(allocate(c.dv_, pool * 2));
      FLASHJIT_TRY(c.dv_.upload(vbits.data(), pool * 2));
    }
    FLASHJIT_TRY(allocate(c.do_, c.o_row() * (s.rows_q() + kGuardRows) * 2));
    FLASHJIT_TRY(allocate(c.dlse_, c.lse_floats() * 4));
    if (!s.dense) {
      FLASHJIT_TRY(allocate(c.dcu_q_, c.cu_q_.size() * 4));
      FLASHJIT_TRY(c.dcu_q_.upload(c.cu_q_.data(), c.cu_q_.size() * 4));
    }
    FLASHJIT_TRY(allocate(c.dseqused_, std::size_t(B) * 4));
    FLASHJIT_TRY(c.dseqused_.upload(s.len_k.data(), std::size_t(B) * 4));
    FLASHJIT_TRY(allocate(c.dtable_, c.table_.size() * 4));
    FLASHJIT_TRY(c.upload_table());
    if (s.table != PagedShape::Table::dense) {
      // CSR: each sequence's used pages back to back (its row's first pages_of(b) entries), the offsets, and
      // the last page's token count (a sequence without keys has no pages).
      std::vector<int> indptr{0}, indices, last;
      for (int b = 0; b < B; ++b) {
        for (int slot = 0; slot < s.pages_of(b); ++slot) indices.push_back(c.table_[std::size_t(b) * row + slot]);
        indptr.push_back(static_cast<int>(indices.size()));
        last.push_back(s.len_k[b] == 0 ? 0 : s.len_k[b] - (s.pages_of(b) - 1) * ps);
      }
      indices.push_back(-1);  // past the last sequence's pages: never read
      FLASHJIT_TRY(allocate(c.dindptr_, indptr.size() * 4));
      FLASHJIT_TRY(c.dindptr_.upload(indptr.data(), indptr.size() * 4));
      FLASHJIT_TRY(allocate(c.dindices_, indices.size() * 4));
      FLASHJIT_TRY(c.dindices_.upload(indices.data(), indices.size() * 4));
      FLASHJIT_TRY(allocate(c.dlast_, last.size() * 4));
      FLASHJIT_TRY(c.dlast_.upload(last.data(), last.size() * 4));
    }
    FLASHJIT_TRY(c.poison());
    return c;
  }

  AttentionProblem problem() const {
    const PagedShape& s = shape_;
    AttentionProblem p;
    p.dtype = s.dtype;
    p.batch = s.batch();
    p.seqlen_q = s.dense ? s.len_q[0] : std::max(1, s.max_q());
    p.seqlen_k = std::max(1, s.max_k());
    p.heads_q = s.heads_q, p.heads_kv = s.heads_kv, p.head_dim = s.head_dim;
    p.q = dq_.get(), p.o = do_.get();
    p.k = dk_.get();
    p.v = s.interleaved ? static_cast<const void*>(static_cast<const std::uint16_t*>(dk_.get()) + s.page_elems())
                        : dv_.get();
    p.lse = static_cast<float*>(dlse_.get());
    if (!s.dense) {
      p.cu_seqlens_q = static_cast<const int*>(dcu_q_.get());
      p.total_q = s.total_q();
    }
    if (s.row_pad || s.page_pad || s.interleaved || s.hnd)
      p.k_strides = p.v_strides = {s.page_stride(), s.token_stride(), s.head_stride()};
    p.page_table = static_cast<const int*>(dtable_.get());
    p.page_size = s.page_size;
    p.num_pages = num_pages_;
    p.max_pages_per_seq = s.max_pages_per_seq();
    p.seqused_k = static_cast<const int*>(dseqused_.get());
    if (s.table != PagedShape::Table::dense) {
      p.page_table = static_cast<const int*>(dindices_.get());
      p.page_indptr = static_cast<const int*>(dindptr_.get());
      if (s.table == PagedShape::Table::csr_last_page)
        p.seqused_k = nullptr, p.last_page_len = static_cast<const int*>(dlast_.get());
    }
    p.mask = s.mask;
    p.window_left = s.window_left, p.window_right = s.window_right, p.chunk_size = s.chunk_size;
    p.alignment = s.top_left ? Alignment::top_left : Alignment::bottom_right;
    return p;
  }

  Status poison() {
    FLASHJIT_TRY(do_.fill_bytes(0xff));
    return dlse_.fill_bytes(0xff);
  }

  // O as floats [rows_q + guard rows][Hq * D], LSE (lse_index) followed by its guard.
  Status read(std::vector<float>& o, std::vector<float>& lse) const {
    FLASHJIT_TRY(cuda::check((*cuda::api())->cuCtxSynchronize(), "cuCtxSynchronize"));
    std::vector<std::uint16_t> bits(o_elems());
    FLASHJIT_TRY(do_.download(bits.data(), bits.size() * 2));
    o.resize(bits.size());
    for (std::size_t i = 0; i < bits.size(); ++i) o[i] = from_half_bits(shape_.dtype, bits[i]);
    lse.resize(lse_floats());
    return dlse_.download(lse.data(), lse.size() * 4);
  }

  // Entry `slot` of sequence b's table row becomes `page`, outside the pool: the kernels read that page's keys
  // as zeros, so the host keys and values of that page become zeros too (what the reference then computes).
  Status set_unreadable_page(int b, int slot, int page) {
    REQUIRE(slot < shape_.pages_of(b));
    REQUIRE((page < 0 || page >= num_pages_));
    table_[std::size_t(b) * shape_.max_pages_per_seq() + slot] = page;
    const int D = shape_.head_dim, Hkv = shape_.heads_kv, ps = shape_.page_size;
    for (int j = slot * ps; j < std::min(shape_.len_k[b], (slot + 1) * ps); ++j)
      for (std::size_t e = 0; e < std::size_t(Hkv) * D; ++e) k_[b][j * std::size_t(Hkv) * D + e] = v_[b][j * std::size_t(Hkv) * D + e] = 0.f;
    return upload_table();
  }

  // float64 attention per sequence: o [rows_q][Hq][D], lse as lse_index.
  void reference(std::vector<double>& o, std::vector<double>& lse) const {
    const PagedShape& s = shape_;
    const int D = s.head_dim, Hq = s.heads_q, group = s.heads_q / s.heads_kv;
    const double scale = 1.0 / std::sqrt(double(D));
    o.assign(std::size_t(s.rows_q()) * Hq * D, 0.0);
    lse.assign(std::size_t(s.rows_q()) * Hq, -INFINITY);
    const int jobs = s.batch() * Hq;
    const int workers = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
    auto work = [&](int w) {
      std::vector<double> scores;
      for (int job = w; job < jobs; job += workers) {
        const int b = job / Hq, h = job % Hq, hk = h / group;
        const int lq = s.len_q[b], lk = s.len_k[b];
        const std::vector<float>&kb = k_[b], &vb = v_[b];
        scores.assign(std::max(1, lk), 0.0);
        for (int i = 0; i < lq; ++i) {
          const std::size_t qi = q_start(b) + i;
          const float* qr = &q_[(qi * Hq + h) * D];
          const long aligned = static_cast<long>(i) + (s.top_left ? 0 : lk - lq);
          double mx = -INFINITY;
          for (int j = 0; j < lk; ++j) {
            if (!mask_visible(s.mask, s.window_left, s.window_right, s.chunk_size, aligned, j)) {
              scores[j] = -INFINITY;
              continue;
            }
            const float* kr = &kb[(std::size_t(j) * s.heads_kv + hk) * D];
            double acc = 0;
            for (int d = 0; d < D; ++d) acc += double(qr[d]) * kr[d];
            scores[j] = acc * scale;
            mx = std::max(mx, scores[j]);
          }
          if (mx == -INFINITY) continue;  // no visible key: O = 0, LSE = -inf
          double sum = 0;
          double* orow = &o[(qi * Hq + h) * D];
          for (int j = 0; j < lk; ++j) {
            if (scores[j] == -INFINITY) continue;
            const double p = std::exp(scores[j] - mx);
            sum += p;
            const float* vr = &vb[(std::size_t(j) * s.heads_kv + hk) * D];
            for (int d = 0; d < D; ++d) orow[d] += p * vr[d];
          }
          for (int d = 0; d < D; ++d) orow[d] /= sum;
          lse[lse_index(b, h, i)] = mx + std::log(sum);
        }
      }
    };
    std::vector<std::thread> threads;
    for (int w = 0; w < workers; ++w) threads.emplace_back(work, w);
    for (auto& t : threads) t.join();
  }

  const PagedShape& shape() const { return shape_; }
  int num_pages() const { return num_pages_; }
  std::size_t o_row() const { return std::size_t(shape_.heads_q) * shape_.head_dim; }
  std::size_t q_start(int b) const { return shape_.dense ? std::size_t(b) * shape_.len_q[0] : cu_q_[b]; }
  // Dense: LSE [B, Hq, Sq]; ragged: [Hq, total_q].
  std::size_t lse_index(int b, int h, int i) const {
    const PagedShape& s = shape_;
    if (s.dense) return (std::size_t(b) * s.heads_q + h) * s.len_q[0] + i;
    return std::size_t(h) * s.total_q() + cu_q_[b] + i;
  }
  std::size_t lse_size() const { return std::size_t(shape_.rows_q()) * shape_.heads_q; }

 private:
  std::size_t o_elems() const { return o_row() * (shape_.rows_q() + kGuardRows); }
  std::size_t lse_floats() const { return std::size_t(shape_.rows_q() + kGuardRows) * shape_.heads_q; }
  Status upload_table() { return dtable_.upload(table_.data(), table_.size() * 4); }

  PagedShape shape_;
  int num_pages_ = 0;
  std::vector<int> cu_q_, table_;
  std::vector<float> q_;
  std::vector<std::vector<float>> k_, v_;  // per sequence [len_k][Hkv][D]
  cuda::DeviceBuffer dq_, dk_, dv_, do_, dlse_, dcu_q_, dseqused_, dtable_, dindptr_, dindices_, dlast_;
};

// out / out_lse from read(); ref_o [rows_q][Hq][D] and ref_lse (lse_index) from reference().
GuardedComparison compare_paged(const PagedCase& c, const std::vector<float>& out, const std::vector<float>& out_lse,
                                const std::vector<double>& ref_o, const std::vector<double>& ref_lse) {
  const PagedShape& s = c.shape();
  const int D = s.head_dim, Hq = s.heads_q, rows = s.rows_q();
  const std::size_t row = c.o_row();
  GuardedComparison r;
  ComparisonSum sum;
  for (int qi = 0; qi < rows + kGuardRows; ++qi)
    for (std::size_t e = 0; e < row; ++e) {
      const float x = out[qi * row + e];
      if (qi >= rows) {  // guard rows: never written
        if (!std::isnan(x)) ++r.guard_written;
        continue;
      }
      sum.add_output(x, ref_o[qi * row + e]);
    }
  for (int b = 0; b < s.batch(); ++b)
    for (int h = 0; h < Hq; ++h)
      for (int i = 0; i < s.len_q[b]; ++i) {
        const std::size_t li = c.lse_index(b, h, i);
        sum.add_lse(out_lse[li], ref_lse[li], out.data() + (c.q_start(b) + i) * row + std::size_t(h) * D, D);
      }
  r.cmp = sum.result();
  for (std::size_t i = c.lse_size(); i < out_lse.size(); ++i)
    if (!std::isnan(out_lse[i])) ++r.guard_written;
  return r;
}

SeedSequence fresh_seed{0x9a9ed};

bool algorithm_enabled(Algorithm a) {
  // FLASHJIT_TEST_ALGORITHMS=fa3,naive limits the sweeps (as in attention_test.cpp).
  const char* only = std::getenv("FLASHJIT_TEST_ALGORITHMS");
  return only == nullptr || std::string(only).find(to_string(a)) != std::string::npos;
}

// fa3 kernels run on sm_90a only: elsewhere the fa3 jobs are skipped (with a warning).
bool device_is_sm90a() {
  static const bool yes = [] {
    auto d = cuda::device_info(0);
    return d.ok() && d->arch == kSm90a;
  }();
  return yes;
}

// The config a test forces: the algorithm's heuristic tiles (fa3: fa3_heuristic, not the small-grid tiles of
// fa3_config, so that the key tiles are 128 keys at d128), varlen as the queries are, the page size fitted as
// choose() fits it (fa3 tiles of 96 keys become 64).
KernelConfig paged_config(Algorithm a, const PagedShape& s) {
  KernelConfig c = a == Algorithm::fa3   ? dispatch::fa3_heuristic(s.dtype, s.head_dim, s.mask, kSm90a)
                   : a == Algorithm::fa2 ? dispatch::fa2_heuristic(s.dtype, s.head_dim, s.mask, kSm90a)
                                         : dispatch::naive_config(s.dtype, s.head_dim, s.mask, kSm90a);
  c.varlen = !s.dense;
  static const int dummy_table[4] = {};
  AttentionProblem p;
  p.page_table = dummy_table, p.page_size = s.page_size;
  dispatch::fit_pages(c, p);
  return c;
}

struct Job {
  PagedShape shape;
  Algorithm algorithm;
};

struct Tally {
  int ran = 0, skipped = 0;        // skipped: not this device
  int ran_pages_below_block_n = 0;  // fa3 jobs whose pages are smaller than the key tile
};

// Each job's config on a fresh case against float64. The kernels are prepared (compiled or loaded) on
// several threads first; then each runs in turn. A config that validate() refuses fails the test.
Tally run_jobs(const std::vector<Job>& jobs) {
  ensure_context();
  Tally tally;
  struct Ready {
    PagedShape shape;
    KernelConfig config;
    std::optional<PagedCase> c;
  };
  std::vector<Ready> ready;
  for (const Job& job : jobs) {
    if (!algorithm_enabled(job.algorithm)) continue;
    if (job.algorithm == Algorithm::fa3 && !device_is_sm90a()) {
      ++tally.skipped;
      continue;
    }
    KernelConfig config = paged_config(job.algorithm, job.shape);
    if (const auto issues = validate(config); !issues.empty()) {
      INFO(job.shape.to_string() << " with " << readable_name(config) << ": " << issues.front().message);
      FAIL_CHECK("validate() refuses the config");
      continue;
    }
    auto c = PagedCase::make(job.shape, fresh_seed());
    REQUIRE(c.ok());
    ready.push_back({job.shape, config, std::move(*c)});
  }
  if (tally.skipped > 0) WARN(tally.skipped << " fa3 job(s) skipped: the device is not sm_90a");
  // Compile in parallel (errors show again in the forward below, with their message).
  {
    const std::size_t workers = std::max(1u, std::min(8u, std::thread::hardware_concurrency() / 2));
    std::vector<std::thread> threads;
    for (std::size_t w = 0; w < std::min(workers, ready.size()); ++w)
      threads.emplace_back([&, w] {
        auto scope = cuda::ContextScope::enter(0);
        for (std::size_t i = w; i < ready.size(); i += workers) (void)runtime().prepare(ready[i].c->problem(), ready[i].config);
      });
    for (auto& t : threads) t.join();
  }
  for (Ready& r : ready) {
    INFO(r.shape.to_string() << " with " << readable_name(r.config));
    auto st = runtime().forward(r.c->problem(), r.config);
    if (!st.ok()) {
      FAIL_CHECK(st.error().to_string());
      continue;
    }
    std::vector<float> o, lse;
    REQUIRE(r.c->read(o, lse).ok());
    std::vector<double> ref_o, ref_lse;
    r.c->reference(ref_o, ref_lse);
    check_ok(compare_paged(*r.c, o, lse, ref_o, ref_lse), r.shape.dtype);
    ++tally.ran;
    if (r.config.algorithm == Algorithm::fa3 && r.shape.page_size < r.config.block_n) ++tally.ran_pages_below_block_n;
  }
  return tally;
}

struct Lengths {
  std::vector<int> len_q, len_k;
};
// Chunked prefill over pages: len_q <= len_k, keys from {1, 7, 300, 4097} and more, chunks starting mid-page
// (len_k - len_q: 293, 3797, 127, 895, 700, 4090, 299), fresh prefills (len_q == len_k), a sequence with no
// queries and one with neither queries nor keys (no pages: its table row is all garbage).
const Lengths kChunked[] = {
    {{1, 7, 129, 0, 300}, {4097, 300, 129, 7, 300}},
    {{300, 1, 7, 129}, {4097, 1, 7, 256}},
    {{129, 0, 300, 7, 1}, {1024, 0, 1000, 4097, 300}},
};
// Short batches for the reference kernel (slow on purpose).
const Lengths kShortChunked[] = {
    {{1, 7, 129, 0}, {300, 7, 200, 33}},
    {{33, 1, 64}, {33, 256, 100}},
};
constexpr int kPageSizes[] = {1, 16, 64, 256};

PagedShape make_shape(const Lengths& l, const MaskCase& m, int page_size, int head_dim, DType dtype = DType::bf16) {
  PagedShape s;
  s.len_q = l.len_q, s.len_k = l.len_k;
  s.heads_q = 8, s.heads_kv = 2, s.head_dim = head_dim, s.dtype = dtype;
  s.mask = m.kind, s.window_left = m.left, s.window_right = m.right, s.chunk_size = m.chunk;
  s.page_size = page_size;
  return s;
}

PagedShape dense_shape(int seqlen_q, std::vector<int> len_k, const MaskCase& m, int page_size, int head_dim) {
  PagedShape s = make_shape({std::vector<int>(len_k.size(), seqlen_q), std::move(len_k)}, m, page_size, head_dim);
  s.dense = true;
  return s;
}

// Every mask with every page size of kPageSizes (`every_page_size`), or with two of them (rotating: each page
// size meets two masks), on the ragged chunked-prefill batches (the reference kernel: the short ones).
void check_masks_and_pages(Algorithm algorithm, int head_dim, bool every_page_size) {
  std::vector<Job> jobs;
  int index = 0;
  for (std::size_t mi = 0; mi < std::size(kMasks); ++mi)
    for (std::size_t pi = 0; pi < std::size(kPageSizes); ++pi) {
      if (!every_page_size && pi != mi % 4 && pi != (mi + 2) % 4) continue;
      const Lengths& l = algorithm == Algorithm::naive ? kShortChunked[index % std::size(kShortChunked)]
                                                       : kChunked[index % std::size(kChunked)];
      ++index;
      jobs.push_back({make_shape(l, kMasks[mi], kPageSizes[pi], head_dim), algorithm});
    }
  run_jobs(jobs);
}

}  // namespace

TEST_CASE("paged fa3: ragged chunked prefill matches float64 on every mask and page size at d128",
          "[paged][fa3][gpu]") {
  check_masks_and_pages(Algorithm::fa3, 128, true);
}

TEST_CASE("paged fa3: ragged chunked prefill matches float64 on every mask at d64", "[paged][fa3][gpu]") {
  check_masks_and_pages(Algorithm::fa3, 64, false);
}

TEST_CASE("paged fa2: ragged chunked prefill matches float64 on every mask and page size at d128",
          "[paged][fa2][gpu]") {
  check_masks_and_pages(Algorithm::fa2, 128, true);
}

TEST_CASE("paged fa2: ragged chunked prefill matches float64 on every mask at d64", "[paged][fa2][gpu]") {
  check_masks_and_pages(Algorithm::fa2, 64, false);
}

TEST_CASE("paged reference kernel: short ragged batches match float64 on every mask", "[paged][reference][gpu]") {
  const int head_dim = GENERATE(64, 128);
  check_masks_and_pages(Algorithm::naive, head_dim, false);
}

// fa3's two paths (templates/fa3/producer.cuh): pages smaller than the key tile (one TMA box per page, issued
// by the producer warp's lanes) and pages of a tile or more (one box per column block at the tile's page).
// d128: 128-key tiles; d64: 96-key tiles fitted to 64. Every page size must be valid at these head dims.
TEST_CASE("paged fa3: every page size from 1 to 256 around block_n at d128 and d64", "[paged][fa3][gpu]") {
  const int head_dim = GENERATE(128, 64);
  const MaskCase mask = head_dim == 128 ? kMasks[1] : kMasks[2];  // causal; the sliding window
  std::vector<Job> jobs;
  int index = 0;
  for (int ps = 1; ps <= 256; ps *= 2)
    jobs.push_back({make_shape(kChunked[index++ % std::size(kChunked)], mask, ps, head_dim), Algorithm::fa3});
  const Tally t = run_jobs(jobs);
  if (t.skipped == 0 && algorithm_enabled(Algorithm::fa3)) {
    CHECK(t.ran == 9);
    CHECK(t.ran_pages_below_block_n >= 6);  // 1..64 (d128), 1..32 (d64)
  }
}

// Head dims whose narrowest column block is 16 columns (d80, d112) or 32 (d96): pages of 16 tokens or more are
// TMA boxes of each block, smaller ones gathered with cp.async into the swizzled blocks.
TEST_CASE("paged fa3: pages at narrow head dims 80 96 112, boxed and gathered", "[paged][fa3][gpu]") {
  const int head_dim = GENERATE(80, 96, 112);
  std::vector<Job> jobs;
  int index = 0;
  for (int ps : {1, 2, 4, 8, 16, 32, 128})
    jobs.push_back({make_shape(kChunked[index++ % std::size(kChunked)], kMasks[1], ps, head_dim), Algorithm::fa3});
  const Tally t = run_jobs(jobs);
  if (t.skipped == 0 && algorithm_enabled(Algorithm::fa3)) {
    CHECK(t.ran == 7);
    CHECK(t.ran_pages_below_block_n >= 6);
  }
}

// Dense queries [B, Sq, Hq, D] (no cu_seqlens_q): every sequence has Sq queries, its last ones, and its own key
// count (bottom-right per sequence), LSE [B, Hq, Sq].
TEST_CASE("paged: dense queries with per-sequence seqused_k match float64", "[paged][fa3][fa2][reference][gpu]") {
  const Algorithm algorithm = GENERATE(Algorithm::fa3, Algorithm::fa2, Algorithm::naive);
  const bool naive = algorithm == Algorithm::naive;
  std::vector<Job> jobs;
  jobs.push_back({dense_shape(64, {64, 1000, naive ? 333 : 4097}, kMasks[1], 16, 128), algorithm});
  jobs.push_back({dense_shape(200, {300, 200, naive ? 555 : 2049}, kMasks[0], 256, 128), algorithm});
  jobs.push_back({dense_shape(130, {131, naive ? 257 : 4097, 130}, kMasks[1], 1, 64), algorithm});
  jobs.push_back({dense_shape(77, {77, 500, 1000}, kMasks[0], 64, 64), algorithm});
  run_jobs(jobs);
}

// problem.hpp: "its queries are its last ones", but the masks are defined for any lengths: a sequence with
// fewer keys than queries (or none) has rows that see no key (O = 0, LSE = -inf), as in varlen.
TEST_CASE("paged: sequences with fewer keys than queries (rows with no visible key)",
          "[paged][fa3][fa2][reference][gpu]") {
  const Algorithm algorithm = GENERATE(Algorithm::fa3, Algorithm::fa2, Algorithm::naive);
  std::vector<Job> jobs;
  jobs.push_back({dense_shape(100, {50, 0, 300}, kMasks[1], 16, 128), algorithm});
  jobs.push_back({make_shape({{300, 7, 129}, {100, 0, 129}}, kMasks[1], 64, 64), algorithm});
  jobs.push_back({make_shape({{300, 7, 129}, {100, 0, 129}}, kMasks[2], 1, 128), algorithm});
  run_jobs(jobs);
}

TEST_CASE("paged: fp16, top-left alignment, padded, interleaved or HND pools and CSR tables match float64",
          "[paged][fa3][fa2][reference][gpu]") {
  const Algorithm algorithm = GENERATE(Algorithm::fa3, Algorithm::fa2, Algorithm::naive);
  const bool naive = algorithm == Algorithm::naive;
  auto lengths = [&](int i) -> const Lengths& { return naive ? kShortChunked[i % 2] : kChunked[i % 3]; };
  std::vector<Job> jobs;
  jobs.push_back({make_shape(lengths(0), kMasks[1], 16, 128, DType::fp16), algorithm});
  jobs.push_back({make_shape(lengths(1), kMasks[3], 256, 64, DType::fp16), algorithm});
  PagedShape top_left = make_shape(lengths(1), kMasks[1], 64, 128);
  top_left.top_left = true;
  jobs.push_back({top_left, algorithm});
  PagedShape dense_top_left = dense_shape(100, {100, 300, 777}, kMasks[2], 256, 64);
  dense_top_left.top_left = true;
  jobs.push_back({dense_top_left, algorithm});
  PagedShape padded = make_shape(lengths(2), kMasks[2], 16, 128);
  padded.row_pad = 16, padded.page_pad = 64;
  jobs.push_back({padded, algorithm});
  PagedShape padded_large = padded;
  padded_large.page_size = 256, padded_large.mask = MaskKind::none;
  jobs.push_back({padded_large, algorithm});
  PagedShape interleaved = make_shape(lengths(0), kMasks[4], 8, 64);
  interleaved.interleaved = true;
  jobs.push_back({interleaved, algorithm});
  PagedShape interleaved_large = interleaved;
  interleaved_large.page_size = 128, interleaved_large.mask = MaskKind::causal;
  jobs.push_back({interleaved_large, algorithm});
  // FlashInfer's CSR tables (indptr / indices) with seqused_k or last_page_len, dense and ragged queries.
  for (int ps : {1, 16, 256}) {
    PagedShape csr = make_shape(lengths(ps % 3), ps == 256 ? kMasks[0] : kMasks[1], ps, ps == 1 ? 64 : 128);
    csr.table = ps == 16 ? PagedShape::Table::csr_seqused : PagedShape::Table::csr_last_page;
    jobs.push_back({csr, algorithm});
  }
  PagedShape csr_dense = dense_shape(100, {100, 300, 777}, kMasks[1], 16, 64);
  csr_dense.table = PagedShape::Table::csr_last_page;
  jobs.push_back({csr_dense, algorithm});
  // FlashInfer's HND layout is strides: token stride D, head stride page_size * D.
  for (int ps : {1, 16, 256}) {
    PagedShape hnd = make_shape(lengths(ps % 3), ps == 16 ? kMasks[0] : kMasks[1], ps, ps == 1 ? 64 : 128);
    hnd.hnd = true;
    hnd.row_pad = ps == 256 ? 8 : 0;
    jobs.push_back({hnd, algorithm});
  }
  run_jobs(jobs);
}

namespace {

// The dispatcher's config for a paged problem: the problem's page size, varlen as its queries, fa3 on sm_90a
// where fa3 takes that page size at that head dim (validate(), not a hard-coded rule); then its run against
// float64.
void check_dispatch(const PagedShape& s) {
  ensure_context();
  INFO(s.to_string());
  auto c = PagedCase::make(s, fresh_seed());
  REQUIRE(c.ok());
  auto chosen = runtime().select(c->problem());
  REQUIRE(chosen.ok());
  INFO("chosen: " << readable_name(*chosen));
  CHECK(chosen->page_size == s.page_size);
  CHECK(chosen->varlen == !s.dense);
  if (device_is_sm90a()) {
    const KernelConfig fa3 = paged_config(Algorithm::fa3, s);
    if (validate(fa3).empty())
      CHECK(chosen->algorithm == Algorithm::fa3);
    else
      CHECK(chosen->algorithm == Algorithm::fa2);
  }
  auto st = runtime().forward(c->problem());
  if (!st.ok()) FAIL(st.error().to_string());
  std::vector<float> o, lse;
  REQUIRE(c->read(o, lse).ok());
  std::vector<double> ref_o, ref_lse;
  c->reference(ref_o, ref_lse);
  check_ok(compare_paged(*c, o, lse, ref_o, ref_lse), s.dtype);
}

}  // namespace

TEST_CASE("paged: the dispatcher picks a paged kernel (fa3 on sm_90a where the page size allows it)",
          "[paged][gpu]") {
  SECTION("ragged d128 pages of 1") { check_dispatch(make_shape(kChunked[0], kMasks[1], 1, 128)); }
  SECTION("ragged d128 pages of 16") { check_dispatch(make_shape(kChunked[1], kMasks[0], 16, 128)); }
  SECTION("ragged d128 pages of 256") { check_dispatch(make_shape(kChunked[2], kMasks[1], 256, 128)); }
  SECTION("dense d64 pages of 32") { check_dispatch(dense_shape(150, {150, 4097, 1000}, kMasks[1], 32, 64)); }
  SECTION("ragged d80 pages of 1 (gathered)") { check_dispatch(make_shape(kChunked[0], kMasks[1], 1, 80)); }
  SECTION("ragged d80 pages of 4") { check_dispatch(make_shape(kChunked[1], kMasks[1], 4, 80)); }
}

namespace {

// A Runtime whose RuntimeOptions::check_pages is set explicitly (so FLASHJIT_CHECK_PAGES does not decide).
Runtime& runtime_checking_pages(bool on) {
  static std::unique_ptr<Runtime> runtimes[2];
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  auto& rt = runtimes[on ? 1 : 0];
  if (!rt) {
    RuntimeOptions options;
    options.check_pages = on;
    auto r = Runtime::create(options);
    REQUIRE(r.ok());
    rt = std::move(*r);
  }
  return *rt;
}

void expect_untouched(const PagedCase& c) {
  std::vector<float> o, lse;
  REQUIRE(c.read(o, lse).ok());
  std::int64_t written = 0;
  for (float x : o) written += !std::isnan(x);
  for (float x : lse) written += !std::isnan(x);
  CHECK(written == 0);  // still poisoned: nothing ran
}

}  // namespace

TEST_CASE("paged: check_pages refuses a bad page index or key count before launching", "[paged][runtime][gpu]") {
  ensure_context();
  const Algorithm algorithm = GENERATE(Algorithm::fa3, Algorithm::fa2);
  if (!algorithm_enabled(algorithm)) return;
  if (algorithm == Algorithm::fa3 && !device_is_sm90a()) return;
  const PagedShape s = make_shape(kChunked[0], kMasks[1], 16, 128);
  auto c = PagedCase::make(s, fresh_seed());
  REQUIRE(c.ok());
  const KernelConfig config = paged_config(algorithm, s);
  INFO(s.to_string() << " with " << readable_name(config));

  SECTION("a valid table (garbage past each sequence's pages) passes the check and runs") {
    AttentionProblem p = c->problem();
    p.check_pages = true;
    auto st = runtime().forward(p, config);
    if (!st.ok()) FAIL(st.error().to_string());
    std::vector<float> o, lse;
    REQUIRE(c->read(o, lse).ok());
    std::vector<double> ref_o, ref_lse;
    c->reference(ref_o, ref_lse);
    check_ok(compare_paged(*c, o, lse, ref_o, ref_lse), s.dtype);
  }
  // Sequence 0 has 4097 keys (257 pages of 16), sequence 1 300 (19 pages): a bad index in each, each refused.
  SECTION("problem.check_pages: page -1") {
    REQUIRE(c->set_unreadable_page(1, 1, -1).ok());
    AttentionProblem p = c->problem();
    p.check_pages = true;
    auto st = runtime_checking_pages(false).forward(p, config);
    REQUIRE_FALSE(st.ok());
    INFO(st.error().to_string());
    CHECK(st.error().code == ErrorCode::invalid_argument);
    CHECK(st.error().message.find("page_table") != std::string::npos);
    expect_untouched(*c);
  }
  SECTION("problem.check_pages: page 1 << 30 in the last page of a sequence") {
    REQUIRE(c->set_unreadable_page(0, s.pages_of(0) - 1, 1 << 30).ok());
    AttentionProblem p = c->problem();
    p.check_pages = true;
    auto st = runtime().forward(p, config);
    REQUIRE_FALSE(st.ok());
    INFO(st.error().to_string());
    CHECK(st.error().code == ErrorCode::invalid_argument);
    CHECK(st.error().message.find("page_table") != std::string::npos);
    expect_untouched(*c);
  }
  SECTION("RuntimeOptions::check_pages: page num_pages") {
    REQUIRE(c->set_unreadable_page(1, 0, c->num_pages()).ok());
    auto st = runtime_checking_pages(true).forward(c->problem(), config);
    REQUIRE_FALSE(st.ok());
    INFO(st.error().to_string());
    CHECK(st.error().message.find("page_table") != std::string::npos);
    expect_untouched(*c);
  }
  SECTION("a key count above seqlen_k") {
    AttentionProblem p = c->problem();
    p.seqlen_k = s.max_k() - 1;  // sequence 0 has max_k keys
    p.check_pages = true;
    auto st = runtime().forward(p, config);
    REQUIRE_FALSE(st.ok());
    INFO(st.error().to_string());
    CHECK(st.error().message.find("seqused_k") != std::string::npos);
    expect_untouched(*c);
  }
}

// Without the check, a page index outside the pool is never dereferenced: its keys read as zeros (scores 0 where
// visible, values 0). The reference zeroes those keys; it is also checked to differ from the reference on the
// pages' original keys by more than the tolerance, so that reading anything else would fail.
TEST_CASE("paged: unchecked bad page indices read as zero keys", "[paged][fa3][fa2][reference][gpu]") {
  ensure_context();
  const Algorithm algorithm = GENERATE(Algorithm::fa3, Algorithm::fa2, Algorithm::naive);
  const int page_size = GENERATE(16, 256);
  if (!algorithm_enabled(algorithm)) return;
  if (algorithm == Algorithm::fa3 && !device_is_sm90a()) return;
  // Short sequences, where a page of zeros is a large share of the keys.
  PagedShape s = make_shape({{7, 40, 129}, {300, 40, 600}}, kMasks[0], page_size, 128);
  auto c = PagedCase::make(s, fresh_seed());
  REQUIRE(c.ok());
  const KernelConfig config = paged_config(algorithm, s);
  INFO(s.to_string() << " with " << readable_name(config));
  std::vector<double> original_o, original_lse;
  c->reference(original_o, original_lse);
  REQUIRE(c->set_unreadable_page(0, s.pages_of(0) - 1, -1).ok());
  REQUIRE(c->set_unreadable_page(1, 0, 1 << 30).ok());
  REQUIRE(c->set_unreadable_page(2, 1, c->num_pages()).ok());
  AttentionProblem p = c->problem();
  p.check_pages = false;
  auto st = runtime_checking_pages(false).forward(p, config);
  if (!st.ok()) FAIL(st.error().to_string());
  std::vector<float> o, lse;
  REQUIRE(c->read(o, lse).ok());
  std::vector<double> ref_o, ref_lse;
  c->reference(ref_o, ref_lse);
  check_ok(compare_paged(*c, o, lse, ref_o, ref_lse), s.dtype);
  // The zeroed keys matter: the result on the original keys is far from this one.
  double num = 0, den = 0;
  for (std::size_t i = 0; i < ref_o.size(); ++i) {
    num += (ref_o[i] - original_o[i]) * (ref_o[i] - original_o[i]);
    den += original_o[i] * original_o[i];
  }
  CHECK(std::sqrt(num / den) > 10 * tolerance(s.dtype));
}

TEST_CASE("paged: bad arguments are rejected before any launch", "[paged][runtime][gpu]") {
  ensure_context();
  const PagedShape s = make_shape(kChunked[1], kMasks[1], 16, 64);
  auto c = PagedCase::make(s, fresh_seed());
  REQUIRE(c.ok());
  const KernelConfig config = paged_config(Algorithm::fa2, s);
  auto refused = [&](const AttentionProblem& p, const KernelConfig* k, const char* word) {
    auto st = k ? runtime().forward(p, *k) : runtime().forward(p);
    REQUIRE_FALSE(st.ok());
    INFO(st.error().to_string());
    CHECK(st.error().message.find(word) != std::string::npos);
    expect_untouched(*c);
  };
  SECTION("a kernel of another page size, or a contiguous one") {
    KernelConfig other = config;
    other.page_size = 32;
    refused(c->problem(), &other, "page_size");
    other.page_size = 0;
    refused(c->problem(), &other, "page_size");
  }
  SECTION("seqused_k and the page fields without a page table") {
    AttentionProblem p = c->problem();
    p.page_table = nullptr;
    refused(p, nullptr, "seqused_k");
  }
  SECTION("page sizes that are not powers of two in [1, 256]") {
    for (int ps : {0, 3, 512}) {
      AttentionProblem p = c->problem();
      p.page_size = ps;
      refused(p, nullptr, "page_size");
    }
  }
  SECTION("no seqused_k") {
    AttentionProblem p = c->problem();
    p.seqused_k = nullptr;
    refused(p, nullptr, "seqused_k");
  }
  SECTION("cu_seqlens_k or total_k set") {
    AttentionProblem p = c->problem();
    p.cu_seqlens_k = p.cu_seqlens_q;
    refused(p, nullptr, "cu_seqlens_k");
    p = c->problem();
    p.total_k = 100;
    refused(p, nullptr, "total_k");
  }
  SECTION("seqlen_k above what a table row holds") {
    AttentionProblem p = c->problem();
    p.seqlen_k = p.max_pages_per_seq * p.page_size + 1;
    refused(p, nullptr, "max_pages_per_seq");
  }
}
