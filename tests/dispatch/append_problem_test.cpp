// Tests of check(AppendProblem) (no device: fake pointer values, never dereferenced): valid dense, ragged,
// contiguous and paged problems (NHD and HND strides), then one error per field, each message naming it.
#include <cstdint>
#include <string>

#include "flashjit/append.hpp"
#include "support/catch.hpp"
#include "support/checks.hpp"

using flashjit::AppendProblem;
using flashjit::ErrorCode;
using flashjit::KvLayout;
using flashjit::Strides;
using flashjit::test::contains;

namespace {

template <class T = void>
T* fake(std::uintptr_t address) { return reinterpret_cast<T*>(address); }

// B3, 5 new tokens, KV8, D128, contiguous cache of 4096 tokens.
AppendProblem contiguous() {
  AppendProblem p;
  p.batch = 3, p.heads_kv = 8, p.head_dim = 128, p.new_len = 5;
  p.k = fake(0x10000), p.v = fake(0x20000), p.k_cache = fake(0x30000), p.v_cache = fake(0x40000);
  p.cache_seqlens = fake<const int>(0x50000);
  p.cache_seqlen = 4096;
  return p;
}

// The same over 16-token pages: 300 pages, 257 per sequence.
AppendProblem paged() {
  AppendProblem p = contiguous();
  p.layout = KvLayout::paged, p.cache_seqlen = 0;
  p.page_size = 16, p.num_pages = 300, p.max_pages_per_seq = 257, p.page_table = fake<const int>(0x60000);
  return p;
}

void require_invalid(const AppendProblem& p, const std::string& part) {
  auto st = check(p);
  REQUIRE_FALSE(st.ok());
  INFO(st.error().message);
  CHECK(st.error().code == ErrorCode::invalid_argument);
  CHECK(contains(st.error().message, part));
}

}  // namespace

TEST_CASE("append problem: valid problems pass, default strides are contiguous", "[dispatch][append]") {
  CHECK(check(contiguous()).ok());
  CHECK(check(paged()).ok());
  AppendProblem r = paged();
  r.cu_seqlens = fake<const int>(0x70000), r.total_new = 40;
  CHECK(check(r).ok());
  // FlashInfer's HND pool [pages, Hkv, page_size, D] is strides.
  AppendProblem hnd = paged();
  hnd.k_cache_strides = hnd.v_cache_strides = Strides{8 * 16 * 128, 128, 16 * 128};
  CHECK(check(hnd).ok());

  const AppendProblem c = contiguous();
  const Strides n = resolved_new_strides(c, {}), cs = resolved_cache_strides(c, {});
  CHECK((n.batch == 5 * 8 * 128 && n.seq == 8 * 128 && n.head == 128));
  CHECK((cs.batch == 4096LL * 8 * 128 && cs.seq == 8 * 128 && cs.head == 128));
  const Strides ps = resolved_cache_strides(paged(), {});
  CHECK((ps.batch == 16 * 8 * 128 && ps.seq == 8 * 128));
  const Strides rs = resolved_new_strides(r, {});
  CHECK((rs.batch == 0 && rs.seq == 8 * 128 && rs.head == 128));
  CHECK(append_capacity(c) == 4096);
  CHECK(append_capacity(paged()) == 257 * 16);
  AppendProblem huge = paged();
  huge.max_pages_per_seq = 1 << 30, huge.page_size = 256;
  CHECK(append_capacity(huge) == 2147483647);  // saturated
}

TEST_CASE("append problem: each error names its field", "[dispatch][append]") {
  AppendProblem p = contiguous();
  p.batch = 0;
  require_invalid(p, "batch");
  p = contiguous(), p.batch = 65536;
  require_invalid(p, "batch");
  p = contiguous(), p.heads_kv = 0;
  require_invalid(p, "heads_kv");
  p = contiguous(), p.head_dim = 12;
  require_invalid(p, "head_dim");
  p = contiguous(), p.head_dim = 264;
  require_invalid(p, "head_dim");
  p = contiguous(), p.new_len = 0;
  require_invalid(p, "new_len");
  p = contiguous(), p.new_len = 1 << 30, p.heads_kv = 64;
  require_invalid(p, "2^30");
  p = contiguous(), p.cache_seqlens = nullptr;
  require_invalid(p, "cache_seqlens is a null pointer");
  p = contiguous(), p.cache_seqlens = fake<const int>(0x50002);
  require_invalid(p, "cache_seqlens must be 4-byte aligned");
  p = contiguous(), p.seqlens_out = fake<int>(0x50000);
  require_invalid(p, "seqlens_out is cache_seqlens");
  p = contiguous(), p.seqlens_out = fake<int>(0x80001);
  require_invalid(p, "seqlens_out must be 4-byte aligned");
  p = contiguous(), p.cache_seqlen = 0;
  require_invalid(p, "cache_seqlen");
  p = contiguous(), p.page_table = fake<const int>(0x60000);
  require_invalid(p, "page_table is set but layout is contiguous");
  p = contiguous(), p.total_new = 7;
  require_invalid(p, "total_new");
  p = contiguous(), p.k = nullptr;
  require_invalid(p, "k is a null pointer");
  p = contiguous(), p.v_cache = fake(0x40008);
  require_invalid(p, "v_cache (0x40008) must be 16-byte aligned");
  p = contiguous(), p.v_cache = p.k_cache;
  require_invalid(p, "k_cache and v_cache are one tensor");
  p = contiguous(), p.k_strides.seq = 1028;
  require_invalid(p, "k token stride must be a positive multiple of 8");
  p = contiguous(), p.v_cache_strides.head = -128;
  require_invalid(p, "v_cache head stride");
  p = contiguous(), p.layout = static_cast<KvLayout>(5);
  require_invalid(p, "layout must be contiguous (0) or paged (1)");
}

TEST_CASE("append problem: paged and ragged errors", "[dispatch][append]") {
  AppendProblem p = paged();
  p.page_size = 24;
  require_invalid(p, "page_size");
  p = paged(), p.page_size = 512;
  require_invalid(p, "page_size");
  p = paged(), p.num_pages = 0;
  require_invalid(p, "num_pages");
  p = paged(), p.max_pages_per_seq = 0;
  require_invalid(p, "max_pages_per_seq");
  p = paged(), p.page_table = nullptr;
  require_invalid(p, "page_table is a null pointer");
  p = paged(), p.page_table = fake<const int>(0x60002);
  require_invalid(p, "page_table must be 4-byte aligned");
  p = paged(), p.k_cache_strides.batch = 4;
  require_invalid(p, "k_cache page stride");

  AppendProblem r = contiguous();
  r.cu_seqlens = fake<const int>(0x70000);
  require_invalid(r, "total_new must be >= 1");
  r.total_new = 20, r.k_strides.batch = 8192;
  require_invalid(r, "batch strides must be 0");
  r.k_strides.batch = 0, r.cu_seqlens = fake<const int>(0x70002);
  require_invalid(r, "cu_seqlens must be 4-byte aligned");
}

TEST_CASE("append problem: a CSR page table takes cache_seqlens or last_page_len", "[dispatch][append][csr]") {
  // FlashInfer's table: page_indptr [B + 1], page_table the flat indices; max_pages_per_seq stays the host bound.
  AppendProblem p = paged();
  p.page_indptr = fake<const int>(0x80000);
  CHECK(check(p).ok());
  CHECK(append_capacity(p) == 257 * 16);
  p.cache_seqlens = nullptr, p.last_page_len = fake<const int>(0x90000);
  CHECK(check(p).ok());
  p.seqlens_out = fake<int>(0xa0000);
  CHECK(check(p).ok());
  p.seqlens_out = fake<int>(0x90000);
  require_invalid(p, "seqlens_out is last_page_len");
  p.seqlens_out = nullptr, p.cache_seqlens = fake<const int>(0x50000);
  require_invalid(p, "a CSR page table (page_indptr) needs exactly one of cache_seqlens (the lengths before the "
                     "append) and last_page_len (the tokens of each sequence's last page after it)");
  p.cache_seqlens = nullptr, p.last_page_len = nullptr;
  require_invalid(p, "needs exactly one of cache_seqlens");
  p.last_page_len = fake<const int>(0x90002);
  require_invalid(p, "last_page_len must be 4-byte aligned");
  p = paged(), p.page_indptr = fake<const int>(0x80001);
  require_invalid(p, "page_indptr must be 4-byte aligned");
  p = paged(), p.page_indptr = fake<const int>(0x80000), p.page_table = nullptr;
  require_invalid(p, "page_table is a null pointer (the CSR table's page indices");
  p = paged(), p.page_indptr = fake<const int>(0x80000), p.max_pages_per_seq = 0;
  require_invalid(p, "max_pages_per_seq must be >= 1");
  // last_page_len without page_indptr; either on a contiguous cache.
  p = paged(), p.last_page_len = fake<const int>(0x90000);
  require_invalid(p, "last_page_len is for CSR page tables: set page_indptr too, or give cache_seqlens");
  p = paged(), p.cache_seqlens = nullptr, p.last_page_len = fake<const int>(0x90000);
  require_invalid(p, "cache_seqlens is a null pointer");
  p = contiguous(), p.page_indptr = fake<const int>(0x80000);
  require_invalid(p, "page_indptr and last_page_len are for a paged cache's CSR page table, but layout is contiguous");
  p = contiguous(), p.last_page_len = fake<const int>(0x90000);
  require_invalid(p, "page_indptr and last_page_len are for a paged cache's CSR page table");
  // Ragged new rows over a CSR table.
  AppendProblem r = paged();
  r.page_indptr = fake<const int>(0x80000), r.cache_seqlens = nullptr, r.last_page_len = fake<const int>(0x90000);
  r.cu_seqlens = fake<const int>(0x70000), r.total_new = 40;
  CHECK(check(r).ok());
  r.page_table = nullptr;
  auto st = check(r);
  REQUIRE_FALSE(st.ok());
  CHECK(contains(st.error().message, "invalid append problem (paged cache, CSR page table, ragged)"));
}

TEST_CASE("append problem: every issue is reported at once", "[dispatch][append]") {
  AppendProblem p = paged();
  p.head_dim = 12, p.page_size = 3, p.k = nullptr;
  auto st = check(p);
  REQUIRE_FALSE(st.ok());
  CHECK(contains(st.error().message, "invalid append problem (paged cache)"));
  CHECK(contains(st.error().message, "head_dim"));
  CHECK(contains(st.error().message, "page_size"));
  CHECK(contains(st.error().message, "k is a null pointer"));
}
