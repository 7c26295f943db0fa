// Append (the new tokens' keys and values into a KV cache), on its own and fused into decode: after each call the
// whole cache is read back and compared bit for bit with the host's own copy of what it must hold (every slot
// starts as random bits, so an untouched slot that changed, or a row written to the wrong place, shows). Contiguous
// and paged caches with shuffled page tables for every page size 1..256, NHD and HND strides, padded strides of
// the new rows, dense and ragged new rows, chunks that start mid-page, lengths {1, 7, 300, 4097} mixed, positions
// past the capacity and pages outside the pool skipped (and refused by check_pages), inputs written by a kernel
// that lets the append start early; FlashInfer's CSR page tables with the lengths before the append
// (cache_seqlens) or after it (last_page_len); the fused append + decode against the float64 reference (dense and
// CSR tables), also replayed from a CUDA graph.
//
// Only these: flashjit_gpu_tests "[append]"; the CSR tables: "[append][csr]"
#include <cuda.h>
#include <dlfcn.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "config/half.hpp"
#include "decode_harness.hpp"
#include "harness.hpp"
#include "late_writer.hpp"
#include "support/catch.hpp"

using namespace flashjit;
using namespace flashjit::test;

namespace {

SeedSequence fresh_seed{0xa99e7d};

struct AppendShape {
  DType dtype = DType::bf16;
  int heads_kv = 2, head_dim = 128;
  KvLayout layout = KvLayout::contiguous;
  int page_size = 16;
  bool hnd = false;     // cache [B | pages, Hkv, tokens, D] (FlashInfer's HND) instead of [.., tokens, Hkv, D]
  bool ragged = false;  // new rows packed [total_new, Hkv, D] with cu_seqlens
  bool padded = false;  // new rows with padded token and head strides (the padding must never be copied)
  std::vector<int> cached;  // cache_seqlens
  std::vector<int> counts;  // new tokens per sequence (dense: all equal)
  int slack = 5;            // positions the cache holds past the longest sequence after the append
  // Paged: the dense table [B, max_pages], or FlashInfer's CSR one (each sequence owning the pages its length after
  // the append needs, shuffled) with the lengths before the append (cache_seqlens) or after it (last_page_len).
  enum class Table { dense, csr_seqlens, csr_last_page } table = Table::dense;
  // CSR with cache_seqlens: this sequence owns one page fewer than it needs (its last rows are past its pages:
  // never written, and the next sequence's first page, behind its own in the flat table, keeps its contents);
  // -1: none.
  int short_sequence = -1;
  bool csr() const { return layout == KvLayout::paged && table != Table::dense; }
  int batch() const { return static_cast<int>(cached.size()); }
  int new_len() const { return *std::max_element(counts.begin(), counts.end()); }
  std::string to_string() const {
    const std::string csr_text = !csr() ? ""
                                 : table == Table::csr_seqlens ? " CSR+cache_seqlens"
                                                               : " CSR+last_page_len";
    return fmt::format("{} Hkv{} d{} {}{}{}{}{}{}{} cached [{}] new [{}]", flashjit::to_string(dtype), heads_kv,
                       head_dim, layout == KvLayout::paged ? fmt::format("paged{}", page_size) : "contiguous", csr_text,
                       short_sequence >= 0 ? fmt::format(" short {}", short_sequence) : "", hnd ? " HND" : " NHD",
                       ragged ? " ragged" : "", padded ? " padded" : "",
                       slack != 5 ? fmt::format(" slack {}", slack) : "", fmt::join(cached, ","), fmt::join(counts, ","));
  }
};

std::vector<std::uint16_t> random_bits(FastRng& rng, std::size_t n) {
  std::vector<std::uint16_t> out(n);
  for (auto& x : out) x = static_cast<std::uint16_t>(rng.next());
  return out;
}

template <class T>
cuda::DeviceBuffer upload(const std::vector<T>& host) {
  auto buf = cuda::DeviceBuffer::allocate(std::max<std::size_t>(host.size() * sizeof(T), 16));
  REQUIRE(buf.ok());
  if (!host.empty()) REQUIRE(buf->upload(host.data(), host.size() * sizeof(T)).ok());
  return std::move(*buf);
}

// Device buffers of one append and the host's copy of what the cache must hold afterwards.
class AppendFixture {
 public:
  AppendFixture(const AppendShape& s, std::uint64_t seed) : s_(s) {
    FastRng rng(seed);
    const int B = s.batch(), H = s.heads_kv, D = s.head_dim;
    int longest = 0;
    for (int b = 0; b < B; ++b) longest = std::max(longest, s.cached[b] + s.counts[b]);
    const bool paged = s.layout == KvLayout::paged;
    rows_ = paged ? s.page_size : longest + s.slack;
    if (s.csr()) {
      // Each sequence's pages for its length after the append (one fewer for the short one), back to back; the
      // host bound one page past the most any sequence needs, so that only a sequence's own pages bound it.
      indptr_.assign(1, 0);
      for (int b = 0; b < B; ++b) {
        const int after = s.cached[b] + s.counts[b], needed = (after + s.page_size - 1) / s.page_size;
        const int pages = std::max(needed - (b == s.short_sequence ? 1 : 0), 0);
        indptr_.push_back(indptr_.back() + pages);
        last_page_len_.push_back(pages == 0 ? 0 : after - (pages - 1) * s.page_size);
        max_pages_ = std::max(max_pages_, needed + 1);
      }
      num_pages_ = indptr_.back() + 3;
    } else if (paged) {
      max_pages_ = (longest + s.slack + s.page_size - 1) / s.page_size;
      num_pages_ = B * max_pages_ + 3;
    }
    if (paged) {  // a shuffled pool with three pages no sequence owns: they must stay as they are
      std::vector<int> perm(num_pages_);
      std::iota(perm.begin(), perm.end(), 0);
      for (int i = num_pages_ - 1; i > 0; --i) std::swap(perm[i], perm[rng.below(i + 1)]);
      table_.assign(perm.begin(), perm.begin() + (num_pages_ - 3));
    }
    slots_ = paged ? num_pages_ : B;
    // NHD [slots, rows, H, D] or HND [slots, H, rows, D], element strides (slot, token, head).
    cache_strides_ = s.hnd ? Strides{std::int64_t(H) * rows_ * D, D, std::int64_t(rows_) * D}
                           : Strides{std::int64_t(rows_) * H * D, std::int64_t(H) * D, D};
    const std::size_t cache_elems = std::size_t(slots_) * rows_ * H * D;
    k_cache_ = random_bits(rng, cache_elems), v_cache_ = random_bits(rng, cache_elems);
    // New rows: [B, new_len, H, D] or packed [total, H, D], padded by 8 elements per head and per token.
    const int head_stride = D + (s.padded ? 8 : 0);
    new_strides_.head = head_stride, new_strides_.seq = std::int64_t(H) * head_stride + (s.padded ? 8 : 0);
    offsets_.assign(B + 1, 0);
    for (int b = 0; b < B; ++b) offsets_[b + 1] = offsets_[b] + (s.ragged ? s.counts[b] : s.new_len());
    new_strides_.batch = s.ragged ? 0 : std::int64_t(s.new_len()) * new_strides_.seq;
    const std::size_t new_elems = std::size_t(offsets_[B]) * new_strides_.seq;
    k_new_ = random_bits(rng, new_elems), v_new_ = random_bits(rng, new_elems);
  }

  // A page-table entry pointing outside the pool (the rows for it must not be written).
  void set_page(int b, int index, int page) { table_.at(row_of(b) + index) = page; }
  int num_pages() const { return num_pages_; }
  int max_pages() const { return max_pages_; }

  void upload_all() {
    dk_cache_ = upload(k_cache_), dv_cache_ = upload(v_cache_), dk_ = upload(k_new_), dv_ = upload(v_new_);
    dcached_ = upload(s_.cached), dcu_ = upload(offsets_), dtable_ = upload(table_);
    dindptr_ = upload(indptr_), dlast_ = upload(last_page_len_);
    dout_ = upload(std::vector<int>(s_.batch(), -7));
  }

  AppendProblem problem() const {
    AppendProblem p;
    p.dtype = s_.dtype, p.batch = s_.batch(), p.heads_kv = s_.heads_kv, p.head_dim = s_.head_dim;
    p.k = dk_.get(), p.v = dv_.get(), p.k_strides = p.v_strides = new_strides_;
    p.new_len = s_.new_len();
    if (s_.ragged) p.cu_seqlens = static_cast<const int*>(dcu_.get()), p.total_new = offsets_.back();
    p.cache_seqlens = static_cast<const int*>(dcached_.get());
    p.seqlens_out = static_cast<int*>(dout_.get());
    p.layout = s_.layout;
    p.k_cache = dk_cache_.get(), p.v_cache = dv_cache_.get();
    p.k_cache_strides = p.v_cache_strides = cache_strides_;
    if (s_.layout == KvLayout::paged) {
      p.page_table = static_cast<const int*>(dtable_.get());
      p.num_pages = num_pages_, p.page_size = s_.page_size, p.max_pages_per_seq = max_pages_;
      if (s_.csr()) p.page_indptr = static_cast<const int*>(dindptr_.get());
      if (s_.table == AppendShape::Table::csr_last_page)
        p.cache_seqlens = nullptr, p.last_page_len = static_cast<const int*>(dlast_.get());
    } else {
      p.cache_seqlen = rows_;
    }
    return p;
  }

  // What the append must have done to the host copies: each new row at its position, unless that is past the
  // capacity (a CSR sequence's: its pages') or on a page outside the pool.
  void apply() {
    const int H = s_.heads_kv, D = s_.head_dim;
    const bool paged = s_.layout == KvLayout::paged;
    for (int b = 0; b < s_.batch(); ++b) {
      const int capacity = s_.csr() ? (indptr_[b + 1] - indptr_[b]) * s_.page_size
                           : paged  ? max_pages_ * s_.page_size
                                    : rows_;
      for (int t = 0; t < s_.counts[b]; ++t) {
        const long pos = long(s_.cached[b]) + t;
        if (pos < 0 || pos >= capacity) continue;
        long slot = b, token = pos;
        if (paged) {
          slot = table_[row_of(b) + pos / s_.page_size], token = pos % s_.page_size;
          if (slot < 0 || slot >= num_pages_) continue;
        }
        for (int h = 0; h < H; ++h) {
          const std::size_t dst = slot * cache_strides_.batch + token * cache_strides_.seq + h * cache_strides_.head;
          const std::size_t src = std::size_t(s_.ragged ? 0 : b) * new_strides_.batch +
                                  std::size_t(offsets_[b] - (s_.ragged ? 0 : b * s_.new_len()) + t) * new_strides_.seq +
                                  std::size_t(h) * new_strides_.head;
          std::memcpy(&k_cache_[dst], &k_new_[src], std::size_t(D) * 2);
          std::memcpy(&v_cache_[dst], &v_new_[src], std::size_t(D) * 2);
        }
      }
    }
  }

  // The device caches bit for bit against the host copies; the new lengths against cached + count.
  void expect_cache(bool lengths_written = true) const {
    std::vector<std::uint16_t> k(k_cache_.size()), v(v_cache_.size());
    REQUIRE(dk_cache_.download(k.data(), k.size() * 2).ok());
    REQUIRE(dv_cache_.download(v.data(), v.size() * 2).ok());
    std::size_t k_diff = 0, v_diff = 0, first = k.size();
    for (std::size_t i = 0; i < k.size(); ++i) {
      if (k[i] != k_cache_[i]) ++k_diff, first = std::min(first, i);
      if (v[i] != v_cache_[i]) ++v_diff, first = std::min(first, i);
    }
    INFO("first differing element " << first << " of " << k.size());
    CHECK(k_diff == 0);
    CHECK(v_diff == 0);
    std::vector<int> out(s_.batch());
    REQUIRE(dout_.download(out.data(), out.size() * 4).ok());
    for (int b = 0; b < s_.batch(); ++b) {
      INFO("sequence " << b);
      CHECK(out[b] == (lengths_written ? s_.cached[b] + s_.counts[b] : -7));
    }
  }

  // CSR tables: the flat page indices' length.
  std::size_t csr_entries() const { return table_.size(); }

 private:
  // Where sequence b's row of the page table starts (dense: b * max_pages; CSR: page_indptr[b]).
  std::size_t row_of(int b) const { return s_.csr() ? std::size_t(indptr_[b]) : std::size_t(b) * max_pages_; }

  AppendShape s_;
  int rows_ = 0, slots_ = 0, max_pages_ = 0, num_pages_ = 0;
  Strides cache_strides_{}, new_strides_{};
  std::vector<int> table_, offsets_, indptr_, last_page_len_;  // CSR: table_ holds the flat page indices
  std::vector<std::uint16_t> k_cache_, v_cache_, k_new_, v_new_;
  cuda::DeviceBuffer dk_cache_, dv_cache_, dk_, dv_, dcached_, dcu_, dtable_, dindptr_, dlast_, dout_;
};

void check_append(const AppendShape& s) {
  ensure_context();
  const std::uint64_t seed = fresh_seed();
  INFO(s.to_string() << ", seed " << seed);
  AppendFixture f(s, seed);
  f.upload_all();
  auto st = runtime().append_kv(f.problem());
  if (!st.ok()) FAIL(st.error().to_string());
  f.apply();
  f.expect_cache();
}

}  // namespace

TEST_CASE("append: contiguous and paged caches, every page size, NHD and HND, read back bit-exactly",
          "[append][gpu]") {
  const int page = GENERATE(0, 1, 2, 4, 8, 16, 32, 64, 128, 256);
  const bool hnd = GENERATE(false, true);
  AppendShape s;
  s.layout = page == 0 ? KvLayout::contiguous : KvLayout::paged, s.page_size = std::max(page, 1), s.hnd = hnd;
  // Chunks that start mid-page (cached lengths not multiples of the page), one that starts at 0.
  s.cached = {1, 7, 300, 4097, 0}, s.counts = {7, 7, 7, 7, 7};
  check_append(s);
}

TEST_CASE("append: new token counts 1, 7, 300, 4097 over mixed cached lengths, dense and ragged, padded strides",
          "[append][gpu]") {
  const int count = GENERATE(1, 7, 300, 4097);
  const bool ragged = GENERATE(false, true);
  const int page = GENERATE(0, 1, 16, 256);
  AppendShape s;
  s.layout = page == 0 ? KvLayout::contiguous : KvLayout::paged, s.page_size = std::max(page, 1);
  s.ragged = ragged, s.padded = true;
  s.cached = {4097, 1, 300, 7};
  s.counts = ragged ? std::vector<int>{count, 1, 7, 0} : std::vector<int>(4, count);
  check_append(s);
}

TEST_CASE("append: bf16 and fp16, head dims 8 to 256, GQA heads", "[append][gpu]") {
  const DType dtype = GENERATE(DType::bf16, DType::fp16);
  const int d = GENERATE(8, 64, 72, 128, 256);
  AppendShape s;
  s.dtype = dtype, s.head_dim = d, s.heads_kv = d == 8 ? 1 : 8, s.layout = KvLayout::paged, s.page_size = 16;
  s.cached = {3, 33}, s.counts = {5, 5};
  check_append(s);
}

TEST_CASE("append: positions past the capacity and pages outside the pool are skipped; check_pages refuses them",
          "[append][gpu]") {
  ensure_context();
  const bool paged = GENERATE(false, true);
  AppendShape s;
  s.layout = paged ? KvLayout::paged : KvLayout::contiguous, s.page_size = 8;
  s.cached = {0, 36, 20, 40}, s.counts = {4, 4, 4, 4};
  // A capacity below the longest sequence's 44 positions: 42 (contiguous: sequence 3 writes 40 and 41 only) or
  // five 8-token pages (paged: sequence 3 writes nothing).
  s.slack = paged ? -4 : -2;
  AppendFixture f(s, fresh_seed());
  if (paged) {
    f.set_page(0, 0, -1);                    // sequence 0's only page: outside the pool
    f.set_page(2, 2, f.num_pages() + 100);   // sequence 2 writes positions 20..23: page 2
  }
  f.upload_all();
  AppendProblem p = f.problem();
  // check_pages reads the lengths and the table first and refuses a bad page without writing anything.
  if (paged) {
    p.check_pages = true;
    auto refused = runtime().append_kv(p);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().message.find("page_table[0][0] = -1") != std::string::npos);
    f.expect_cache(false);
    p.check_pages = false;
  }
  auto st = runtime().append_kv(p);
  if (!st.ok()) FAIL(st.error().to_string());
  f.apply();
  f.expect_cache();
}

TEST_CASE("append: check_pages refuses a position past the capacity before launching", "[append][gpu]") {
  ensure_context();
  AppendShape s;
  s.cached = {10, 20}, s.counts = {3, 3}, s.slack = 0;
  AppendFixture f(s, fresh_seed());
  f.upload_all();
  AppendProblem p = f.problem();
  p.cache_seqlen = 22;  // sequence 1 would write 20..22
  p.check_pages = true;
  auto refused = runtime().append_kv(p);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message.find("past the cache's capacity of 22") != std::string::npos);
}

TEST_CASE("append: behind a kernel that lets it start early, lengths, offsets, page table and rows are read after "
          "that kernel's writes",
          "[append][gpu]") {
  ensure_context();
  const bool paged = GENERATE(false, true);
  const bool ragged = GENERATE(false, true);
  AppendShape s;
  s.layout = paged ? KvLayout::paged : KvLayout::contiguous, s.page_size = 16, s.ragged = ragged;
  s.cached = {300, 7, 1, 4097}, s.counts = {64, 64, 64, 64};
  AppendFixture f(s, fresh_seed());
  f.upload_all();
  const AppendProblem p = f.problem();
  REQUIRE(runtime().prepare_append_kv(p).ok());
  auto writer = LateWriter::make();
  if (!writer.ok()) FAIL(writer.error().to_string());
  const std::vector<int> stale(s.batch(), 1 << 20);  // positions past the capacity: nothing would be written
  REQUIRE(writer->stage(p.cache_seqlens, std::size_t(s.batch()) * 4, stale.data()).ok());
  if (ragged) REQUIRE(writer->stage(p.cu_seqlens, std::size_t(s.batch() + 1) * 4).ok());
  if (paged) REQUIRE(writer->stage(p.page_table, std::size_t(s.batch()) * f.max_pages() * 4).ok());
  REQUIRE(writer->stage(p.k, std::size_t(s.batch()) * 64 * s.heads_kv * s.head_dim * 2).ok());
  REQUIRE(writer->launch(static_cast<CUstream>(p.stream), 200).ok());
  auto st = runtime().append_kv(p);
  if (!st.ok()) FAIL(st.error().to_string());
  f.apply();
  f.expect_cache();
}

TEST_CASE("append: FlashInfer's CSR page tables, lengths before (cache_seqlens) or after (last_page_len) the append, "
          "read back bit-exactly",
          "[append][gpu][csr]") {
  // Shuffled flat page indices, each sequence's pages for its length after the append; mixed lengths, chunks that
  // start mid-page and on a page boundary, a sequence without keys (no pages), dense and ragged new rows.
  const int page = GENERATE(1, 16, 64);
  const bool hnd = GENERATE(false, true);
  const auto table = GENERATE(AppendShape::Table::csr_seqlens, AppendShape::Table::csr_last_page);
  const bool ragged = GENERATE(false, true);
  AppendShape s;
  s.layout = KvLayout::paged, s.page_size = page, s.hnd = hnd, s.table = table, s.ragged = ragged;
  s.cached = {1, 7, 300, 4097, 0, 64, 0};
  s.counts = ragged ? std::vector<int>{7, 1, 300, 0, 5, 64, 0} : std::vector<int>(7, 7);
  if (!ragged) s.cached.back() = 57;  // dense rows: every sequence brings some
  check_append(s);
}

TEST_CASE("append: over a CSR table, positions past a sequence's pages and pages outside the pool are skipped; "
          "check_pages refuses them",
          "[append][gpu][csr]") {
  ensure_context();
  const auto table = GENERATE(AppendShape::Table::csr_seqlens, AppendShape::Table::csr_last_page);
  AppendShape s;
  s.layout = KvLayout::paged, s.page_size = 8, s.table = table;
  s.cached = {0, 36, 20, 40}, s.counts = {4, 4, 4, 4};
  // With cache_seqlens, sequence 1 (38 cached) owns five pages where its 42 positions after the append need six:
  // it writes 38 and 39, not 40 and 41 (which the host bound of max_pages_per_seq would hold).
  if (table == AppendShape::Table::csr_seqlens) s.short_sequence = 1, s.cached[1] = 38;
  AppendFixture f(s, fresh_seed());
  f.set_page(2, 2, f.num_pages() + 100);  // sequence 2 writes positions 20..23: its page 2
  f.upload_all();
  AppendProblem p = f.problem();
  p.check_pages = true;  // the offsets, the lengths and the pages written, read on the host before launching
  auto refused = runtime().append_kv(p);
  REQUIRE_FALSE(refused.ok());
  INFO(refused.error().message);
  if (table == AppendShape::Table::csr_seqlens)
    CHECK(refused.error().message.find("sequence 1 appends positions 38 .. 41, past the cache's capacity of 40 (its 5 "
                                       "pages of 8 tokens)") != std::string::npos);
  else
    CHECK(refused.error().message.find("(page 2 of sequence 2) is outside") != std::string::npos);
  f.expect_cache(false);
  p.check_pages = false;
  auto st = runtime().append_kv(p);
  if (!st.ok()) FAIL(st.error().to_string());
  f.apply();
  f.expect_cache();
}

TEST_CASE("append: behind a kernel that lets it start early, a CSR table's offsets, lengths and pages are read after "
          "that kernel's writes",
          "[append][gpu][csr]") {
  // Stale zeros until the writer restores them: no pages (nothing written), lengths 0, page 0.
  ensure_context();
  const auto table = GENERATE(AppendShape::Table::csr_seqlens, AppendShape::Table::csr_last_page);
  AppendShape s;
  s.layout = KvLayout::paged, s.page_size = 16, s.table = table;
  s.cached = {300, 7, 1, 4097}, s.counts = {64, 64, 64, 64};
  AppendFixture f(s, fresh_seed());
  f.upload_all();
  const AppendProblem p = f.problem();
  REQUIRE(runtime().prepare_append_kv(p).ok());
  auto writer = LateWriter::make();
  if (!writer.ok()) FAIL(writer.error().to_string());
  const std::size_t batch = std::size_t(s.batch());
  REQUIRE(writer->stage(p.page_indptr, (batch + 1) * 4).ok());
  REQUIRE(writer->stage(p.page_table, f.csr_entries() * 4).ok());
  if (p.last_page_len != nullptr) REQUIRE(writer->stage(p.last_page_len, batch * 4).ok());
  else REQUIRE(writer->stage(p.cache_seqlens, batch * 4).ok());
  REQUIRE(writer->launch(static_cast<CUstream>(p.stream), 200).ok());
  auto st = runtime().append_kv(p);
  if (!st.ok()) FAIL(st.error().to_string());
  f.apply();
  f.expect_cache();
}

namespace {

// A fused decode case: the cache holds `cached` keys per sequence (seqlens_k), `new_len` new rows are appended by
// the call; the reference is the decode over the cache with those rows in place.
struct FusedCase {
  DecodeCase c;
  std::vector<std::uint16_t> k_bits, v_bits;
  cuda::DeviceBuffer dk, dv;
  HostKv reference_kv;
  int new_len = 0;
};

FusedCase make_fused(DecodeShape s, const std::vector<int>& cached, int new_len, std::uint64_t seed) {
  for (std::size_t b = 0; b < cached.size(); ++b) s.seqlens[b] = cached[b] + new_len;
  auto c = DecodeCase::make(s, seed);
  if (!c.ok()) FAIL(c.error().to_string());
  REQUIRE(c->upload_seqlens(cached).ok());
  FastRng rng(seed ^ 0x5eed);
  const int row = s.heads_kv * s.head_dim;
  FusedCase f{std::move(*c), {}, {}, {}, {}, {}, new_len};
  f.reference_kv = f.c.kv();
  for (std::vector<std::uint16_t>* bits : {&f.k_bits, &f.v_bits}) {
    bits->resize(std::size_t(s.batch()) * new_len * row);
    for (auto& x : *bits) x = to_half_bits(s.dtype, rng.uniform(-1.f, 1.f));
  }
  // The reference cache: the new rows at positions cached[b] .. cached[b] + new_len - 1 (the device cache holds
  // other values there until the append writes them).
  for (int b = 0; b < s.batch(); ++b)
    for (int t = 0; t < new_len; ++t)
      for (int e = 0; e < row; ++e) {
        const std::size_t src = (std::size_t(b) * new_len + t) * row + e;
        const std::size_t dst = f.reference_kv.offset[b] + std::size_t(cached[b] + t) * row + e;
        f.reference_kv.k[dst] = from_half_bits(s.dtype, f.k_bits[src]);
        f.reference_kv.v[dst] = from_half_bits(s.dtype, f.v_bits[src]);
      }
  f.dk = upload(f.k_bits), f.dv = upload(f.v_bits);
  return f;
}

DecodeProblem fused_problem(const FusedCase& f) {
  DecodeProblem p = f.c.problem();
  p.k_new = f.dk.get(), p.v_new = f.dv.get(), p.new_len = f.new_len;
  return p;
}

void expect_fused_matches(const FusedCase& f) {
  std::vector<float> o, lse;
  std::int64_t stray = 0;
  REQUIRE(f.c.read_outputs(o, lse, stray).ok());
  std::vector<double> ref_o, ref_lse;
  reference_decode(f.c.shape(), f.c.q(), f.reference_kv, ref_o, ref_lse);
  const Comparison r = compare(f.c.shape().output_shape(), o, lse, ref_o, ref_lse);
  INFO(r.to_string());
  CHECK(r.nan_count == 0);
  CHECK(r.rel_l2 <= tolerance(f.c.shape().dtype));
  CHECK(r.lse_max_abs <= kLseTolerance);
  CHECK(stray == 0);
}

DecodeShape fused_shape(KvLayout layout, int page_size, int q_len) {
  DecodeShape s;
  s.heads_q = 32, s.heads_kv = 8, s.head_dim = 128, s.q_len = q_len;
  s.seqlens = {0, 0, 0, 0};
  s.layout = layout, s.page_size = page_size;
  return s;
}

}  // namespace

TEST_CASE("append: fused into decode, the attention over the appended cache matches float64", "[append][gpu]") {
  ensure_context();
  const int page = GENERATE(0, 1, 16, 64);
  const int new_len = GENERATE(1, 4);
  const bool own_lengths = GENERATE(false, true);  // seqlens_out given, or the runtime's workspace
  DecodeShape s = fused_shape(page == 0 ? KvLayout::contiguous : KvLayout::paged, std::max(page, 1), new_len);
  const std::uint64_t seed = fresh_seed();
  INFO(s.to_string() << ", new_len " << new_len << (own_lengths ? ", seqlens_out" : "") << ", seed " << seed);
  FusedCase f = make_fused(s, {300, 4097, 7, 1}, new_len, seed);
  DecodeProblem p = fused_problem(f);
  cuda::DeviceBuffer lengths = upload(std::vector<int>(4, -1));
  if (own_lengths) p.seqlens_out = static_cast<int*>(lengths.get());
  auto st = runtime().decode(p);
  if (!st.ok()) FAIL(st.error().to_string());
  expect_fused_matches(f);
  if (own_lengths) {
    std::vector<int> out(4);
    REQUIRE(lengths.download(out.data(), 16).ok());
    CHECK(out == std::vector<int>{300 + new_len, 4097 + new_len, 7 + new_len, 1 + new_len});
  }
}

TEST_CASE("append: fused into decode over a CSR table (seqlens_k before the new rows, or last_page_len after them), "
          "the attention matches float64",
          "[append][gpu][csr]") {
  // The decode harness's CSR table from the lengths after the append (the new rows' pages allocated, FlashInfer's
  // convention); with seqlens_k each sequence also owns a garbage page past those. The host checks read it all
  // first in half of the cases.
  ensure_context();
  const int page = GENERATE(1, 16, 64);
  const auto table = GENERATE(DecodeShape::Table::csr_seqlens, DecodeShape::Table::csr_last_page);
  const int new_len = GENERATE(1, 4);
  const bool own_lengths = GENERATE(false, true);  // seqlens_out given, or (seqlens_k) the runtime's workspace
  DecodeShape s = fused_shape(KvLayout::paged, page, new_len);
  s.table = table;
  s.seqlens.push_back(0);  // a sequence of only the new rows
  const std::uint64_t seed = fresh_seed();
  INFO(s.to_string() << ", new_len " << new_len << (own_lengths ? ", seqlens_out" : "") << ", seed " << seed);
  const std::vector<int> cached{300, 4097, 7, 1, 0};
  FusedCase f = make_fused(s, cached, new_len, seed);
  DecodeProblem p = fused_problem(f);
  REQUIRE(p.page_indptr != nullptr);
  cuda::DeviceBuffer lengths = upload(std::vector<int>(cached.size(), -1));
  if (own_lengths) p.seqlens_out = static_cast<int*>(lengths.get());
  p.check_pages = own_lengths;
  auto st = runtime().decode(p);
  if (!st.ok()) FAIL(st.error().to_string());
  expect_fused_matches(f);
  if (own_lengths) {
    std::vector<int> out(cached.size());
    REQUIRE(lengths.download(out.data(), out.size() * 4).ok());
    for (std::size_t b = 0; b < cached.size(); ++b) CHECK(out[b] == cached[b] + new_len);
  }
}

TEST_CASE("append: the fused decode with a caller workspace sized by decode_workspace_bytes", "[append][gpu]") {
  ensure_context();
  DecodeShape s = fused_shape(KvLayout::paged, 16, 1);
  s.num_splits = 3;  // partials behind the lengths in the workspace
  FusedCase f = make_fused(s, {4097, 300, 1, 7}, 1, fresh_seed());
  DecodeProblem p = fused_problem(f);
  auto bytes = runtime().decode_workspace_bytes(p);
  REQUIRE(bytes.ok());
  auto selection = runtime().select_decode(p);
  REQUIRE(selection.ok());
  REQUIRE(selection->append.has_value());
  CHECK(*bytes == selection->workspace_bytes);
  auto ws = cuda::DeviceBuffer::allocate(*bytes);
  REQUIRE(ws.ok());
  REQUIRE(ws->fill_bytes(0xff).ok());
  p.workspace = ws->get(), p.workspace_bytes = *bytes;
  auto st = runtime().decode(p);
  if (!st.ok()) FAIL(st.error().to_string());
  expect_fused_matches(f);
  p.workspace_bytes = *bytes - 1;
  CHECK_FALSE(runtime().decode(p).ok());
}

namespace {

// The graph entry points, resolved here: the library never captures.
struct GraphApi {
  CUresult (*begin)(CUstream, CUstreamCaptureMode) = nullptr;
  CUresult (*end)(CUstream, CUgraph*) = nullptr;
  CUresult (*instantiate)(CUgraphExec*, CUgraph, unsigned long long) = nullptr;
  CUresult (*launch)(CUgraphExec, CUstream) = nullptr;
  CUresult (*destroy_exec)(CUgraphExec) = nullptr;
  CUresult (*destroy)(CUgraph) = nullptr;
  static GraphApi load() {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (lib == nullptr) lib = dlopen("libcuda.so.1", RTLD_NOW);
    REQUIRE(lib != nullptr);
    GraphApi g;
    g.begin = reinterpret_cast<decltype(g.begin)>(dlsym(lib, "cuStreamBeginCapture_v2"));
    g.end = reinterpret_cast<decltype(g.end)>(dlsym(lib, "cuStreamEndCapture"));
    g.instantiate = reinterpret_cast<decltype(g.instantiate)>(dlsym(lib, "cuGraphInstantiateWithFlags"));
    g.launch = reinterpret_cast<decltype(g.launch)>(dlsym(lib, "cuGraphLaunch"));
    g.destroy_exec = reinterpret_cast<decltype(g.destroy_exec)>(dlsym(lib, "cuGraphExecDestroy"));
    g.destroy = reinterpret_cast<decltype(g.destroy)>(dlsym(lib, "cuGraphDestroy"));
    REQUIRE((g.begin && g.end && g.instantiate && g.launch && g.destroy_exec && g.destroy));
    return g;
  }
};

}  // namespace

TEST_CASE("append: the fused append + decode captured in a CUDA graph and replayed matches float64",
          "[append][gpu]") {
  ensure_context();
  const int page = GENERATE(0, 16);
  const GraphApi g = GraphApi::load();
  auto api = cuda::api();
  REQUIRE(api.ok());
  CUstream stream = nullptr;
  REQUIRE((*api)->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
  DecodeShape s = fused_shape(page == 0 ? KvLayout::contiguous : KvLayout::paged, std::max(page, 1), 1);
  FusedCase f = make_fused(s, {300, 4097, 7, 1}, 1, fresh_seed());
  DecodeProblem p = fused_problem(f);
  p.stream = stream;
  REQUIRE(runtime().prepare_decode(p).ok());  // kernels loaded, the stream's workspace reserved
  REQUIRE(g.begin(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) == CUDA_SUCCESS);
  const Status captured = runtime().decode(p);
  CUgraph graph = nullptr;
  REQUIRE(g.end(stream, &graph) == CUDA_SUCCESS);
  if (!captured.ok()) FAIL(captured.error().to_string());
  CUgraphExec exec = nullptr;
  REQUIRE(g.instantiate(&exec, graph, 0) == CUDA_SUCCESS);
  for (int replay = 0; replay < 2; ++replay) {  // the second replay writes the same rows again: the same result
    REQUIRE(f.c.poison_outputs().ok());
    REQUIRE(g.launch(exec, stream) == CUDA_SUCCESS);
    REQUIRE((*api)->cuStreamSynchronize(stream) == CUDA_SUCCESS);
    INFO("replay " << replay);
    expect_fused_matches(f);
  }
  g.destroy_exec(exec), g.destroy(graph);
  REQUIRE(runtime().release_decode_workspace(stream).ok());
  (*api)->cuStreamDestroy(stream);
}

TEST_CASE("append: a plain append captured in a CUDA graph after prepare_append_kv", "[append][gpu]") {
  ensure_context();
  const GraphApi g = GraphApi::load();
  auto api = cuda::api();
  REQUIRE(api.ok());
  CUstream stream = nullptr;
  REQUIRE((*api)->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
  AppendShape s;
  s.layout = KvLayout::paged, s.page_size = 32, s.cached = {7, 300, 1}, s.counts = {300, 300, 300};
  AppendFixture f(s, fresh_seed());
  f.upload_all();
  AppendProblem p = f.problem();
  p.stream = stream;
  REQUIRE(runtime().prepare_append_kv(p).ok());
  REQUIRE(g.begin(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) == CUDA_SUCCESS);
  const Status captured = runtime().append_kv(p);
  CUgraph graph = nullptr;
  REQUIRE(g.end(stream, &graph) == CUDA_SUCCESS);
  if (!captured.ok()) FAIL(captured.error().to_string());
  CUgraphExec exec = nullptr;
  REQUIRE(g.instantiate(&exec, graph, 0) == CUDA_SUCCESS);
  REQUIRE(g.launch(exec, stream) == CUDA_SUCCESS);
  REQUIRE((*api)->cuStreamSynchronize(stream) == CUDA_SUCCESS);
  f.apply();
  f.expect_cache();
  g.destroy_exec(exec), g.destroy(graph);
  (*api)->cuStreamDestroy(stream);
}
