// Paged prefill on the host (issue 27): check(AttentionProblem) of page-table problems (fake pointers, never
// dereferenced), the dispatcher's paged configs (fit_pages, choose, supports), validate()'s page_size rules,
// and check_page_table over a stand-in driver whose "device" pointers are host memory.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "dispatch/heuristics.hpp"
#include "dispatch/page_check.hpp"
#include "flashjit/problem.hpp"
#include "support/catch.hpp"
#include "support/checks.hpp"

using flashjit::Algorithm;
using flashjit::Arch;
using flashjit::AttentionProblem;
using flashjit::DType;
using flashjit::KernelConfig;
using flashjit::MaskKind;
using flashjit::Scheduler;
using flashjit::test::contains;

namespace {

constexpr Arch kSm90a{90, true};
constexpr Arch kSm80{80, false};

const void* fake(std::uintptr_t address) { return reinterpret_cast<const void*>(address); }
const int* fake_ints(std::uintptr_t address) { return reinterpret_cast<const int*>(address); }

// Four sequences of up to 4096 keys in 16-token pages of a 1024-page pool, llama3 GQA 32/8 d128, causal;
// dense queries [4, 512, 32, 128].
AttentionProblem paged_problem() {
  AttentionProblem p;
  p.dtype = DType::bf16;
  p.batch = 4, p.seqlen_q = 512, p.seqlen_k = 4096;
  p.heads_q = 32, p.heads_kv = 8, p.head_dim = 128;
  p.mask = MaskKind::causal;
  p.q = fake(0x100000), p.k = fake(0x200000), p.v = fake(0x300000);
  p.o = reinterpret_cast<void*>(std::uintptr_t{0x400000});
  p.page_table = fake_ints(0x500000), p.seqused_k = fake_ints(0x600000);
  p.page_size = 16, p.num_pages = 1024, p.max_pages_per_seq = 256;
  return p;
}

AttentionProblem ragged_paged_problem() {
  AttentionProblem p = paged_problem();
  p.cu_seqlens_q = fake_ints(0x700000);
  p.total_q = 1500;
  return p;
}

std::string message(const flashjit::Status& s) { return s.ok() ? std::string() : s.error().message; }

}  // namespace

TEST_CASE("paged prefill: check() takes dense and ragged queries over pages", "[dispatch][paged]") {
  CHECK(check(paged_problem()).ok());
  CHECK(check(ragged_paged_problem()).ok());
  AttentionProblem p = paged_problem();
  SECTION("every power of two from 1 to 256, with a table row that holds seqlen_k") {
    for (int ps = 1; ps <= 256; ps *= 2) {
      p.page_size = ps, p.max_pages_per_seq = (p.seqlen_k + ps - 1) / ps;
      INFO("page_size " << ps);
      CHECK(check(p).ok());
    }
  }
  SECTION("a page stride past the page (a combined [pages, 2, page, Hkv, D] pool)") {
    const std::int64_t token = p.heads_kv * p.head_dim, page = p.page_size * token;
    p.k_strides = {2 * page, token, p.head_dim};
    p.v_strides = {2 * page, token, p.head_dim};
    CHECK(check(p).ok());
  }
  SECTION("a CSR table (FlashInfer's indptr / indices) with seqused_k or last_page_len") {
    p.page_indptr = fake_ints(0x900000);
    CHECK(check(p).ok());
    p.seqused_k = nullptr, p.last_page_len = fake_ints(0xa00000);
    CHECK(check(p).ok());
    // Its bound on a sequence's pages may be the flat table's length (Python's): batch x that need not fit int32,
    // which only the dense table's [batch, max_pages_per_seq] entries must.
    p.batch = 4096, p.max_pages_per_seq = 1 << 20;
    CHECK(check(p).ok());
    p.page_indptr = nullptr, p.seqused_k = fake_ints(0x600000), p.last_page_len = nullptr;
    CHECK(contains(message(check(p)), "batch * max_pages_per_seq must fit in int32"));
  }
}

TEST_CASE("paged prefill: check() refuses what a page-table problem cannot be", "[dispatch][paged]") {
  AttentionProblem p = paged_problem();
  SECTION("no seqused_k") {
    p.seqused_k = nullptr;
    CHECK(contains(message(check(p)), "seqused_k is a null pointer"));
  }
  SECTION("a misaligned page table") {
    p.page_table = fake_ints(0x500002);
    CHECK(contains(message(check(p)), "page_table"));
  }
  SECTION("page sizes that are not powers of two in [1, 256]") {
    for (int ps : {0, -16, 24, 512}) {
      p.page_size = ps;
      INFO("page_size " << ps);
      CHECK(contains(message(check(p)), "page_size must be a power of two in [1, 256]"));
    }
  }
  SECTION("an empty pool or table row") {
    p.num_pages = 0;
    CHECK(contains(message(check(p)), "num_pages"));
    p = paged_problem();
    p.max_pages_per_seq = 0;
    CHECK(contains(message(check(p)), "max_pages_per_seq"));
  }
  SECTION("seqlen_k above what a table row holds") {
    p.max_pages_per_seq = 255;
    CHECK(contains(message(check(p)), "seqlen_k (4096) is more keys than max_pages_per_seq * page_size = 255 * 16"));
  }
  SECTION("cu_seqlens_k or total_k beside a page table") {
    p.cu_seqlens_k = fake_ints(0x800000);
    CHECK(contains(message(check(p)), "cu_seqlens_k must be null for a paged problem"));
    p = ragged_paged_problem();
    p.total_k = 100;
    CHECK(contains(message(check(p)), "total_k must be 0 for a paged problem"));
  }
  SECTION("the page fields without a page table") {
    p.page_table = nullptr;
    CHECK(contains(message(check(p)), "are for paged problems: set page_table"));
  }
  SECTION("a CSR table needs exactly one of seqused_k and last_page_len, 4-byte aligned; last_page_len needs CSR") {
    p.page_indptr = fake_ints(0x900000), p.last_page_len = fake_ints(0xa00000);
    CHECK(contains(message(check(p)), "needs exactly one of seqused_k (key counts) and last_page_len"));
    p.seqused_k = nullptr, p.last_page_len = nullptr;
    CHECK(contains(message(check(p)), "needs exactly one of seqused_k"));
    p.last_page_len = fake_ints(0xa00001);
    CHECK(contains(message(check(p)), "last_page_len"));
    CHECK(contains(message(check(p)), "must be 4-byte aligned"));
    p = paged_problem();
    p.page_indptr = fake_ints(0x900002);
    CHECK(contains(message(check(p)), "page_indptr"));
    p = paged_problem();
    p.last_page_len = fake_ints(0xa00000);
    CHECK(contains(message(check(p)), "last_page_len is for CSR page tables: set page_indptr too"));
    p.page_table = nullptr, p.seqused_k = nullptr;
    CHECK(contains(message(check(p)), "are for paged problems"));
  }
  SECTION("ragged queries without total_q, or with a batch stride") {
    p = ragged_paged_problem();
    p.total_q = 0;
    CHECK(contains(message(check(p)), "total_q"));
    p = ragged_paged_problem();
    p.q_strides.batch = 8;
    CHECK(contains(message(check(p)), "q_strides.batch must be 0"));
  }
  SECTION("page strides that put the pool's last element out of reach") {
    p.k_strides = {std::int64_t{1} << 40, 0, 0};
    CHECK(contains(message(check(p)), "k strides"));
  }
}

TEST_CASE("paged prefill: the dispatcher compiles the problem's page size in", "[dispatch][paged]") {
  SECTION("fa3 on sm_90a: pages smaller than the key tile take the grid scheduler") {
    for (int ps : {1, 16, 64}) {
      AttentionProblem p = paged_problem();
      p.page_size = ps, p.max_pages_per_seq = 4096 / ps;
      auto c = flashjit::dispatch::choose(p, kSm90a);
      REQUIRE(c.ok());
      INFO(readable_name(*c));
      CHECK(c->algorithm == Algorithm::fa3);
      CHECK(c->page_size == ps);
      CHECK(c->scheduler == Scheduler::grid);
      CHECK(flashjit::validate(*c).empty());
      CHECK(contains(readable_name(*c), "_paged" + std::to_string(ps) + "_"));
      CHECK(flashjit::dispatch::supports(*c, p, kSm90a).ok());
    }
  }
  SECTION("pages of a whole key tile or more keep the heuristic's scheduler") {
    AttentionProblem p = paged_problem();
    p.page_size = 256, p.max_pages_per_seq = 16;
    AttentionProblem contiguous = paged_problem();
    contiguous.page_table = nullptr, contiguous.seqused_k = nullptr;
    contiguous.page_size = contiguous.num_pages = contiguous.max_pages_per_seq = 0;
    auto c = flashjit::dispatch::choose(p, kSm90a);
    auto twin = flashjit::dispatch::choose(contiguous, kSm90a);
    REQUIRE(c.ok());
    REQUIRE(twin.ok());
    CHECK(c->page_size == 256);
    CHECK(twin->page_size == 0);
    KernelConfig same = *c;
    same.page_size = 0;
    CHECK(same == *twin);
  }
  SECTION("ragged queries: varlen and paged") {
    auto c = flashjit::dispatch::choose(ragged_paged_problem(), kSm90a);
    REQUIRE(c.ok());
    CHECK(c->varlen);
    CHECK(c->page_size == 16);
  }
  SECTION("fa3 key tiles that a page size does not divide take the power of two below; gathered pages 128") {
    KernelConfig c = flashjit::dispatch::fa3_heuristic(DType::bf16, 128, MaskKind::causal, kSm90a);
    c.block_n = 112;
    AttentionProblem p = paged_problem();
    flashjit::dispatch::fit_pages(c, p);  // 16 divides 112
    CHECK(c.block_n == 112);
    CHECK(c.page_size == 16);
    p.page_size = 64, p.max_pages_per_seq = 64;
    flashjit::dispatch::fit_pages(c, p);
    CHECK(c.block_n == 64);
    c.block_n = 176, p.page_size = 256, p.max_pages_per_seq = 16;
    flashjit::dispatch::fit_pages(c, p);
    CHECK(c.block_n == 128);
    c.block_n = 176, p.page_size = 8, p.max_pages_per_seq = 512;  // 8 divides 176, but gathers take 128 at most
    flashjit::dispatch::fit_pages(c, p);
    CHECK(c.block_n == 128);
  }
  SECTION("1-token pages: fa3 gathers them at any head dim, in tiles of at most 128 keys; every algorithm") {
    for (int d : {64, 80, 128, 256}) {
      AttentionProblem p = paged_problem();
      p.head_dim = d, p.page_size = 1, p.max_pages_per_seq = 4096;
      auto c = flashjit::dispatch::choose(p, kSm90a);
      REQUIRE(c.ok());
      INFO(readable_name(*c));
      CHECK(c->algorithm == Algorithm::fa3);
      CHECK(c->page_size == 1);
      CHECK(c->block_n <= 128);
    }
    for (Algorithm a : {Algorithm::fa2, Algorithm::naive}) {
      auto r = flashjit::dispatch::choose(paged_problem(), kSm80, a);
      REQUIRE(r.ok());
      CHECK(r->page_size == 16);
    }
  }
  SECTION("supports() names a page-size mismatch") {
    AttentionProblem p = paged_problem();
    auto c = flashjit::dispatch::choose(p, kSm90a);
    REQUIRE(c.ok());
    KernelConfig other = *c;
    other.page_size = 32;
    CHECK(contains(message(flashjit::dispatch::supports(other, p, kSm90a)), "set page_size=16"));
    other.page_size = 0;
    CHECK(contains(message(flashjit::dispatch::supports(other, p, kSm90a)), "set page_size=16"));
    p.page_table = nullptr, p.seqused_k = nullptr, p.page_size = p.num_pages = p.max_pages_per_seq = 0;
    CHECK(contains(message(flashjit::dispatch::supports(*c, p, kSm90a)), "needs a paged problem"));
  }
}

TEST_CASE("paged prefill: validate() takes page sizes the kernels can read", "[config][paged]") {
  KernelConfig c = flashjit::dispatch::fa3_heuristic(DType::bf16, 128, MaskKind::causal, kSm90a);
  const auto first_field = [](const KernelConfig& k) {
    const auto issues = flashjit::validate(k);
    return issues.empty() ? std::string() : issues.front().field + ": " + issues.front().message;
  };
  for (int ps = 1; ps <= 256; ps *= 2) {
    c.page_size = ps;
    INFO("page_size " << ps);
    CHECK(first_field(c).empty());
  }
  c.page_size = 48;
  CHECK(contains(first_field(c), "page_size: page_size must be 0 (contiguous) or a power of two in [1, 256]"));
  c.page_size = 32, c.block_n = 80;
  CHECK(contains(first_field(c), "fa3 needs block_n (80) and page_size (32) to divide one another"));
  // Pages of fewer than 16 tokens are gathered with cp.async, at any head dim, into tiles of at most 128 keys.
  KernelConfig d80 = flashjit::dispatch::fa3_heuristic(DType::bf16, 80, MaskKind::none, kSm90a);
  d80.block_n = 64, d80.page_size = 1;
  CHECK(first_field(d80).empty());
  d80.block_n = 176, d80.page_size = 8;
  const auto issues = flashjit::validate(d80);
  CHECK(std::any_of(issues.begin(), issues.end(), [](const flashjit::ConfigIssue& i) {
    return i.field == "page_size" && contains(i.message, "fa3 gathers pages of fewer than 16 tokens into tiles of at most 128 keys");
  }));
  KernelConfig fa2 = flashjit::dispatch::fa2_heuristic(DType::bf16, 80, MaskKind::none, kSm80);
  fa2.page_size = 1;  // fa2 reads rows with cp.async: any power of two
  CHECK(first_field(fa2).empty());
}

namespace {

CUresult host_copy(void* dst, CUdeviceptr src, size_t bytes) {
  std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
  return CUDA_SUCCESS;
}
CUresult no_sync(CUstream) { return CUDA_SUCCESS; }
CUresult not_capturing(CUstream, CUstreamCaptureStatus* s) {
  *s = CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}

}  // namespace

TEST_CASE("paged prefill: check_page_table reads seqused_k and the pages in use", "[dispatch][paged]") {
  flashjit::cuda::Api api;
  api.cuMemcpyDtoH = host_copy, api.cuStreamSynchronize = no_sync, api.cuStreamIsCapturing = not_capturing;
  // Three sequences of 33, 0 and 16 keys in pages of 16 (3, 0 and 1 pages), rows of 4 entries, 6 pages;
  // entries past a sequence's pages are garbage the check must not read.
  std::vector<int> lens{33, 0, 16};
  std::vector<int> table{5, 0, 2, -1, 99, -3, 7, 8, 4, 1 << 30, -5, 6};
  AttentionProblem p;
  p.batch = 3, p.seqlen_k = 40;
  p.page_table = table.data(), p.seqused_k = lens.data();
  p.page_size = 16, p.num_pages = 6, p.max_pages_per_seq = 4;
  CHECK(flashjit::dispatch::check_page_table(api, p).ok());
  table[8] = 6;
  CHECK(contains(message(flashjit::dispatch::check_page_table(api, p)),
                 "page_table[2][0] = 6 is outside [0, 6) = [0, num_pages) (sequence 2 has 16 keys)"));
  table[8] = 4, lens[0] = 41;
  CHECK(contains(message(flashjit::dispatch::check_page_table(api, p)), "seqused_k[0] = 41 is outside [0, seqlen_k = 40]"));
  lens[0] = -1;
  CHECK(contains(message(flashjit::dispatch::check_page_table(api, p)), "seqused_k[0] = -1"));
}

TEST_CASE("paged prefill: check_page_table reads a CSR table's offsets, counts and pages", "[dispatch][paged]") {
  flashjit::cuda::Api api;
  api.cuMemcpyDtoH = host_copy, api.cuStreamSynchronize = no_sync, api.cuStreamIsCapturing = not_capturing;
  // Three sequences of 3, 0 and 1 pages of 16 tokens (33, 0 and 16 keys) in a 6-page pool.
  std::vector<int> indptr{0, 3, 3, 4}, last{1, 7, 16}, indices{5, 0, 2, 4};
  AttentionProblem p;
  p.batch = 3, p.seqlen_k = 40;
  p.page_table = indices.data(), p.page_indptr = indptr.data(), p.last_page_len = last.data();
  p.page_size = 16, p.num_pages = 6, p.max_pages_per_seq = 3;
  CHECK(flashjit::dispatch::check_page_table(api, p).ok());
  indices[3] = 6;
  CHECK(contains(message(flashjit::dispatch::check_page_table(api, p)),
                 "page_table[3] = 6 (page 0 of sequence 2) is outside [0, 6) = [0, num_pages)"));
  indices[3] = 4, last[2] = 17;
  CHECK(contains(message(flashjit::dispatch::check_page_table(api, p)), "last_page_len[2] = 17 is outside [1, 16 = page_size]"));
  last[2] = 16, last[0] = 9;  // 41 keys
  CHECK(contains(message(flashjit::dispatch::check_page_table(api, p)), "sequence 0 has 41 keys, more than seqlen_k = 40"));
  last[0] = 1, indptr[2] = 2;
  CHECK(contains(message(flashjit::dispatch::check_page_table(api, p)), "page_indptr[2] - page_indptr[1] = -1 pages"));
  indptr[2] = 3;
  std::vector<int> used{33, 0, 17};  // seqused_k instead of last_page_len: 17 keys do not fit one page
  p.last_page_len = nullptr, p.seqused_k = used.data();
  CHECK(contains(message(flashjit::dispatch::check_page_table(api, p)), "seqused_k[2] = 17 is outside [0, 16]"));
  used[2] = 16;
  CHECK(flashjit::dispatch::check_page_table(api, p).ok());
}
