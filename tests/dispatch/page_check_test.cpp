// The host-side debug checks of device arrays (page_check.hpp) over a stand-in driver: "device" pointers are
// host memory and cuMemcpyDtoH copies from them, recording how much it was asked for at once (issue 29: the
// page table check allocated batch x max_pages_per_seq on the host; cu_seqlens were not checked at all).
#include "dispatch/page_check.hpp"

#include <cstring>
#include <string>
#include <vector>

#include "support/catch.hpp"

using flashjit::AppendProblem;
using flashjit::AttentionProblem;
using flashjit::DecodeProblem;
using flashjit::dispatch::kCheckChunk;

namespace {

std::size_t g_largest_copy = 0;
int g_copies = 0;

CUresult fake_copy(void* dst, CUdeviceptr src, size_t bytes) {
  g_largest_copy = std::max(g_largest_copy, static_cast<std::size_t>(bytes));
  ++g_copies;
  std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
  return CUDA_SUCCESS;
}
CUresult fake_sync(CUstream) { return CUDA_SUCCESS; }
CUresult fake_not_capturing(CUstream, CUstreamCaptureStatus* s) {
  *s = CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}
CUresult fake_capturing(CUstream, CUstreamCaptureStatus* s) {
  *s = CU_STREAM_CAPTURE_STATUS_ACTIVE;
  return CUDA_SUCCESS;
}

flashjit::cuda::Api fake_api() {
  flashjit::cuda::Api api;
  api.cuMemcpyDtoH = fake_copy;
  api.cuStreamSynchronize = fake_sync;
  api.cuStreamIsCapturing = fake_not_capturing;
  g_largest_copy = 0;
  g_copies = 0;
  return api;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

AttentionProblem ragged(const std::vector<int>& cu_q, const std::vector<int>& cu_k, int total_q, int total_k) {
  AttentionProblem p;
  p.batch = static_cast<int>(cu_q.size()) - 1;
  p.cu_seqlens_q = cu_q.data();
  p.cu_seqlens_k = cu_k.data();
  p.total_q = total_q, p.total_k = total_k;
  p.seqlen_q = p.seqlen_k = 1 << 20;
  return p;
}

}  // namespace

TEST_CASE("page check: a huge page table is read in bounded pieces, only the pages in use", "[dispatch]") {
  auto api = fake_api();
  // batch x max_pages_per_seq = 65535 x 2^24 entries: 4 TiB on the host if it were copied whole.
  const int batch = 65535;
  std::vector<int> lens(batch, 0);
  lens[batch - 1] = 3 * 16;  // the last sequence uses 3 pages of 16 keys
  std::vector<int> table(3, 7);  // stands for the last row's start; the check reads only what is used
  DecodeProblem p;
  p.batch = batch;
  p.layout = flashjit::KvLayout::paged;
  p.page_size = 16;
  p.num_pages = 8;
  p.max_pages_per_seq = 1 << 24;
  p.max_seqlen_k = 1 << 28;
  p.seqlens_k = lens.data();
  // page_table + (batch - 1) * max_pages_per_seq lands on table[0].
  p.page_table = table.data() - static_cast<std::ptrdiff_t>(batch - 1) * p.max_pages_per_seq;
  auto st = flashjit::dispatch::check_page_table(api, p);
  INFO((st ? std::string() : st.error().to_string()));
  CHECK(st.ok());
  CHECK(g_largest_copy <= kCheckChunk * sizeof(int));
  table[2] = 8;  // past num_pages
  auto bad = flashjit::dispatch::check_page_table(api, p);
  REQUIRE_FALSE(bad.ok());
  CHECK(contains(bad.error().message, "page_table[65534][2] = 8 is outside [0, 8)"));
}

TEST_CASE("page check: cu_seqlens must be non-decreasing from >= 0 and within the packed rows", "[dispatch]") {
  auto api = fake_api();
  std::vector<int> good_q{0, 3, 3, 10}, good_k{0, 5, 9, 9};
  CHECK(flashjit::dispatch::check_seqlens(api, ragged(good_q, good_k, 10, 9)).ok());
  // The packed tensors may hold more rows than the offsets use.
  CHECK(flashjit::dispatch::check_seqlens(api, ragged(good_q, good_k, 12, 100)).ok());

  struct Case { std::vector<int> q, k; int total_q, total_k; const char* says; };
  const Case cases[] = {
      {{-1, 3, 3, 10}, good_k, 10, 9, "cu_seqlens_q[0] = -1 is negative"},
      {{0, 3, 2, 10}, good_k, 10, 9, "cu_seqlens_q[2] = 2 is below cu_seqlens_q[1] = 3"},
      {good_q, {0, 5, 9, 9}, 10, 8, "cu_seqlens_k[2] = 9 is past the 8 packed rows (total_k)"},
      {{0, 3, 3, 11}, good_k, 10, 9, "cu_seqlens_q[3] = 11 is past the 10 packed rows (total_q)"},
      {good_q, {0, 5, 9, -2147483647}, 10, 9, "cu_seqlens_k[3] = -2147483647 is below"},
  };
  for (const auto& c : cases) {
    auto st = flashjit::dispatch::check_seqlens(api, ragged(c.q, c.k, c.total_q, c.total_k));
    INFO(c.says);
    REQUIRE_FALSE(st.ok());
    CHECK(st.error().code == flashjit::ErrorCode::invalid_argument);
    CHECK(contains(st.error().message, c.says));
  }
  AttentionProblem longer = ragged(good_q, good_k, 10, 9);
  longer.seqlen_q = 6;  // sequence 2 has 7 query rows
  auto st = flashjit::dispatch::check_seqlens(api, longer);
  REQUIRE_FALSE(st.ok());
  CHECK(contains(st.error().message, "sequence 2 has 7 rows in cu_seqlens_q, more than seqlen_q = 6"));
}

TEST_CASE("page check: cu_seqlens of a large batch are read in bounded pieces; never while capturing", "[dispatch]") {
  auto api = fake_api();
  const int batch = 3 * static_cast<int>(kCheckChunk);
  std::vector<int> cu(batch + 1);
  for (int b = 0; b <= batch; ++b) cu[b] = b;
  auto st = flashjit::dispatch::check_seqlens(api, ragged(cu, cu, batch, batch));
  CHECK(st.ok());
  CHECK(g_largest_copy <= kCheckChunk * sizeof(int));
  cu[2 * kCheckChunk + 5] = 0;  // in the third piece
  auto bad = flashjit::dispatch::check_seqlens(api, ragged(cu, cu, batch, batch));
  REQUIRE_FALSE(bad.ok());
  CHECK(contains(bad.error().message, "is below"));

  api.cuStreamIsCapturing = fake_capturing;
  g_copies = 0;
  auto captured = flashjit::dispatch::check_seqlens(api, ragged(cu, cu, batch, batch));
  REQUIRE_FALSE(captured.ok());
  CHECK(contains(captured.error().message, "captures a CUDA graph"));
  CHECK(g_copies == 0);
}

TEST_CASE("page check: a decode's CSR table: offsets, counts from seqlens_k or last_page_len, pages in use",
          "[dispatch][decode][csr]") {
  auto api = fake_api();
  // Four sequences of 1, 0, 3 and 2 pages of 16 tokens (7, 0, 40 and 17 keys) in a 10-page pool, shuffled.
  std::vector<int> indptr{0, 1, 1, 4, 6}, last{7, 5, 8, 1}, indices{9, 3, 0, 7, 2, 5};
  DecodeProblem p;
  p.batch = 4, p.layout = flashjit::KvLayout::paged;
  p.page_size = 16, p.num_pages = 10, p.max_pages_per_seq = 3, p.max_seqlen_k = 40;
  p.page_table = indices.data(), p.page_indptr = indptr.data(), p.last_page_len = last.data();
  auto message = [&] {
    auto st = flashjit::dispatch::check_page_table(api, p);
    return st.ok() ? std::string() : st.error().message;
  };
  CHECK(message().empty());
  indices[4] = 10;  // page 0 of sequence 3
  CHECK(contains(message(), "page_table[4] = 10 (page 0 of sequence 3) is outside [0, 10) = [0, num_pages)"));
  indices[4] = 2, last[2] = 9;  // 41 keys
  CHECK(contains(message(), "sequence 2 has 41 keys, more than max_seqlen_k = 40"));
  last[2] = 0;
  CHECK(contains(message(), "last_page_len[2] = 0 is outside [1, 16 = page_size]"));
  last[2] = 8, indptr[4] = 8;  // sequence 3: 4 pages
  CHECK(contains(message(), "page_indptr[4] - page_indptr[3] = 4 pages is outside [0, 3 = max_pages_per_seq]"));
  indptr[4] = 6, indptr[0] = -1;
  CHECK(contains(message(), "page_indptr[0] = -1 is negative"));
  indptr[0] = 0;
  // The counts from seqlens_k: at most the sequence's pages' tokens; only the pages in use are read.
  std::vector<int> lens{7, 0, 33, 17};
  p.last_page_len = nullptr, p.seqlens_k = lens.data();
  indices[3] = -5;  // page 2 of sequence 2, which its 33 keys use
  CHECK(contains(message(), "page_table[3] = -5 (page 2 of sequence 2)"));
  lens[2] = 32;  // two pages: the third is not read
  CHECK(message().empty());
  lens[0] = 17;
  CHECK(contains(message(), "seqlens_k[0] = 17 is outside [0, 16] (sequence 0 has 1 pages of 16 tokens)"));
}

TEST_CASE("page check: an append over a CSR table: positions within each sequence's pages, lengths before or after",
          "[dispatch][append][csr]") {
  auto api = fake_api();
  // Four sequences of 1, 1, 3 and 2 pages of 16 tokens in a 10-page pool, shuffled; 4 new rows each, after 3, 12,
  // 33 and 17 cached keys (the last two start mid-page: sequence 2 writes page 2 only, sequence 3 page 1).
  std::vector<int> indptr{0, 1, 2, 5, 7}, indices{9, 3, 0, 7, 2, 5, 8}, lens{3, 12, 33, 17};
  AppendProblem p;
  p.batch = 4, p.new_len = 4, p.layout = flashjit::KvLayout::paged;
  p.page_size = 16, p.num_pages = 10, p.max_pages_per_seq = 3;
  p.page_table = indices.data(), p.page_indptr = indptr.data(), p.cache_seqlens = lens.data();
  auto message = [&](int max_len = 0) {
    auto st = flashjit::dispatch::check_page_table(api, p, max_len);
    return st.ok() ? std::string() : st.error().message;
  };
  CHECK(message().empty());
  indices[3] = -1;  // page 1 of sequence 2, which its new rows do not use
  CHECK(message().empty());
  indices[6] = 10;
  CHECK(contains(message(), "page_table[6] = 10 (page 1 of sequence 3) is outside [0, 10) = [0, num_pages) "
                            "(sequence 3 appends positions 17 .. 20)"));
  indices[6] = 8, lens[1] = 13;  // past its one page, though max_pages_per_seq x page_size holds 48
  CHECK(contains(message(), "sequence 1 appends positions 13 .. 16, past the cache's capacity of 16 (its 1 pages of "
                            "16 tokens)"));
  lens[1] = 12;
  CHECK(contains(message(36), "sequence 2 has 37 keys after appending 4, more than max_seqlen_k = 36"));
  lens[0] = -1;
  CHECK(contains(message(), "cache_seqlens[0] = -1 is negative"));
  lens[0] = 3, indptr[3] = 6;  // sequence 2: 4 pages
  CHECK(contains(message(), "page_indptr[3] - page_indptr[2] = 4 pages is outside [0, 3 = max_pages_per_seq]"));
  indptr[3] = 1;
  CHECK(contains(message(), "page_indptr[3] - page_indptr[2] = -1 pages"));
  indptr[3] = 5, indptr[0] = -1;
  CHECK(contains(message(), "page_indptr[0] = -1 is negative"));
  indptr[0] = 0;

  // last_page_len: the lengths after the append (7, 16, 37 and 21 keys), the new rows their last positions.
  std::vector<int> last{7, 16, 5, 5};
  p.cache_seqlens = nullptr, p.last_page_len = last.data();
  CHECK(message().empty());
  indices[4] = 11;  // page 2 of sequence 2: positions 33 .. 36
  CHECK(contains(message(), "page_table[4] = 11 (page 2 of sequence 2) is outside [0, 10)"));
  indices[4] = 2, last[0] = 0;
  CHECK(contains(message(), "last_page_len[0] = 0 is outside [1, 16 = page_size]"));
  last[0] = 3;  // 3 keys after appending 4
  CHECK(contains(message(), "sequence 0 appends 4 rows but has 3 keys after the append (last_page_len[0] = 3 on its 1 "
                            "pages): last_page_len counts the new rows too"));
  last[0] = 7;
  CHECK(contains(message(36), "sequence 2 has 37 keys after appending 4, more than max_seqlen_k = 36"));
  // Ragged rows: counts 4, 0, 4, 1 (sequence 1: a full page, nothing new; sequence 3: position 20 only).
  std::vector<int> cu{0, 4, 4, 8, 9};
  p.cu_seqlens = cu.data(), p.total_new = 10;
  CHECK(message().empty());
  indptr = {0, 1, 1, 4, 6};  // sequence 1 without pages: no keys, nothing to write
  indices = {9, 0, 7, 2, 5, 8};
  p.page_indptr = indptr.data(), p.page_table = indices.data();
  CHECK(message().empty());
  cu = {0, 4, 5, 9, 10};  // sequence 1 appends a row without a page
  p.cu_seqlens = cu.data();
  CHECK(contains(message(), "sequence 1 appends 1 rows but has 0 keys after the append"));
}
