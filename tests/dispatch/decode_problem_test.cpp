// Tests of check(DecodeProblem) (no device: fake pointer values, never dereferenced): valid contiguous and
// paged problems, then one error per field, each message naming it.
#include <cstdint>
#include <limits>
#include <string>

#include "flashjit/decode.hpp"
#include "support/catch.hpp"
#include "support/checks.hpp"

using flashjit::DecodeProblem;
using flashjit::DType;
using flashjit::ErrorCode;
using flashjit::KvLayout;

using flashjit::test::contains;

namespace {

const void* fake(std::uintptr_t address) { return reinterpret_cast<const void*>(address); }
void* fake_mut(std::uintptr_t address) { return reinterpret_cast<void*>(address); }

// B3, q_len 4, H32 / KV8 (group 4: 16 rows per KV head), D128, contiguous cache of 4096 tokens.
DecodeProblem contiguous() {
  DecodeProblem p;
  p.dtype = DType::bf16;
  p.batch = 3, p.q_len = 4, p.heads_q = 32, p.heads_kv = 8, p.head_dim = 128;
  p.q = fake(0x10000), p.o = fake_mut(0x20000);
  p.k_cache = fake(0x30000), p.v_cache = fake(0x40000);
  p.seqlens_k = static_cast<const int*>(fake(0x50000));
  p.max_seqlen_k = 4097;
  return p;
}

// The same with 16-token pages: 300 pages, 257 pages per sequence.
DecodeProblem paged() {
  DecodeProblem p = contiguous();
  p.layout = KvLayout::paged;
  p.page_size = 16, p.num_pages = 300, p.max_pages_per_seq = 257;
  p.page_table = static_cast<const int*>(fake(0x60000));
  return p;
}


void require_invalid(const DecodeProblem& p, const std::string& part) {
  auto st = check(p);
  REQUIRE(!st.ok());
  INFO(st.error().message);
  CHECK(st.error().code == ErrorCode::invalid_argument);
  CHECK(contains(st.error().message, part));
}

}  // namespace

TEST_CASE("decode problem: valid contiguous and paged problems pass", "[dispatch][decode]") {
  CHECK(check(contiguous()).ok());
  CHECK(check(paged()).ok());
  DecodeProblem p = paged();
  for (int page : {1, 2, 64, 256}) {
    p.page_size = page;
    p.max_pages_per_seq = (p.max_seqlen_k + page - 1) / page;
    INFO("page_size " << page);
    CHECK(check(p).ok());
  }
  p = contiguous();
  p.q_len = 16, p.heads_q = 64;  // group 8 x 16 tokens = 128 rows
  CHECK(check(p).ok());
  p.window_left = 0;
  p.num_splits = 32;
  p.lse = static_cast<float*>(fake_mut(0x70004));
  CHECK(check(p).ok());
}

TEST_CASE("decode problem: default strides", "[dispatch][decode]") {
  DecodeProblem p = contiguous();
  CHECK(resolved_q_strides(p).seq == 32 * 128);
  CHECK(resolved_q_strides(p).batch == 4 * 32 * 128);
  CHECK(resolved_cache_strides(p, p.k_strides).batch == 4097LL * 8 * 128);
  p.cache_seqlen = 8192;
  CHECK(resolved_cache_strides(p, p.k_strides).batch == 8192LL * 8 * 128);
  p = paged();
  CHECK(resolved_cache_strides(p, p.v_strides).batch == 16 * 8 * 128);  // one page
  CHECK(resolved_cache_strides(p, p.v_strides).seq == 8 * 128);
}

TEST_CASE("decode problem: variants (softcap, alibi_slopes, sinks)", "[dispatch][decode][variant]") {
  DecodeProblem p = contiguous();
  p.softcap = 50.f;
  p.alibi_slopes = reinterpret_cast<const float*>(std::uintptr_t{0x90000});
  p.alibi_slopes_batch_stride = p.heads_q;
  p.sinks = reinterpret_cast<const float*>(std::uintptr_t{0x91000});
  CHECK(check(p).ok());
  p.softcap = -2.f;
  require_invalid(p, "softcap must be 0 (off) or positive and finite");
  p.softcap = 0.f;
  p.sinks = reinterpret_cast<const float*>(std::uintptr_t{0x91002});
  require_invalid(p, "sinks must be 4-byte aligned");
  p.sinks = nullptr;
  p.alibi_slopes = nullptr;
  require_invalid(p, "alibi_slopes_batch_stride (32) is set but alibi_slopes is null");
}

// The fuzz run (UBSan): q_len * heads_q * head_dim of out-of-range values overflowed int64 while the default
// strides were resolved, before the dimensions were refused.
TEST_CASE("decode problem: dimensions whose default strides pass int64 are refused, not overflowed", "[dispatch][decode]") {
  DecodeProblem p = contiguous();
  p.q_len = std::numeric_limits<int>::max(), p.heads_q = std::numeric_limits<int>::max() - 1;
  p.head_dim = 3682427;
  require_invalid(p, "q_len must be in [1, 16]");
  require_invalid(p, "head_dim must be a multiple of 16");
  p = contiguous(), p.max_seqlen_k = std::numeric_limits<int>::max(), p.heads_kv = std::numeric_limits<int>::max();
  p.head_dim = std::numeric_limits<int>::max();
  require_invalid(p, "max_seqlen_k must be in [1, 2^30]");
}

TEST_CASE("decode problem: each error names its field", "[dispatch][decode]") {
  DecodeProblem p = contiguous();
  p.batch = 0;
  require_invalid(p, "batch must be in [1, 65535]");
  p = contiguous(), p.q_len = 0;
  require_invalid(p, "q_len must be in [1, 16]");
  p = contiguous(), p.q_len = 17;
  require_invalid(p, "q_len must be in [1, 16]");
  p = contiguous(), p.heads_q = 30;
  require_invalid(p, "heads_q (30) must be a multiple of heads_kv (8)");
  p = contiguous(), p.heads_q = 64, p.heads_kv = 2, p.q_len = 5;  // group 32 x 5 tokens
  require_invalid(p, "group * q_len = 32 * 5");
  p = contiguous(), p.head_dim = 72;
  require_invalid(p, "head_dim must be a multiple of 16");
  p = contiguous(), p.max_seqlen_k = 0;
  require_invalid(p, "max_seqlen_k must be in [1, 2^30]");
  p = contiguous(), p.max_seqlen_k = (1 << 30) + 1, p.cache_seqlen = 0;
  require_invalid(p, "max_seqlen_k must be in [1, 2^30]");
  p = contiguous(), p.seqlens_k = nullptr;
  require_invalid(p, "seqlens_k is a null pointer");
  p = contiguous(), p.seqlens_k = static_cast<const int*>(fake(0x50002));
  require_invalid(p, "seqlens_k must be 4-byte aligned");
  p = contiguous(), p.cache_seqlen = 1000;
  require_invalid(p, "max_seqlen_k (4097) exceeds the contiguous cache's cache_seqlen (1000)");
  p = contiguous(), p.page_table = static_cast<const int*>(fake(0x60000));
  require_invalid(p, "page_table is set but layout is contiguous");
  p = contiguous(), p.q = nullptr;
  require_invalid(p, "q is a null pointer");
  p = contiguous(), p.v_cache = fake(0x40008);
  require_invalid(p, "v_cache (0x40008) must be 16-byte aligned");
  p = contiguous(), p.k_strides.seq = 1020;
  require_invalid(p, "k_cache sequence stride must be a positive multiple of 8");
  p = contiguous(), p.o_strides.head = -8;
  require_invalid(p, "o head stride must be a positive multiple of 8");
  p = contiguous(), p.lse = static_cast<float*>(fake_mut(0x70002));
  require_invalid(p, "lse must be 4-byte aligned");
  p = contiguous(), p.window_left = -2;
  require_invalid(p, "window_left must be >= 0 or -1");
  p = contiguous(), p.chunk_size = -1;
  require_invalid(p, "chunk_size must be > 0 or 0 (no chunks), got -1");
  p = contiguous(), p.chunk_size = 64, p.window_left = 100;
  require_invalid(p, "chunk_size 64 and window_left 100: a decode takes a sliding window or chunks, not both");
  p = contiguous(), p.chunk_size = 1, p.window_left = 0;  // a zero window is a window
  require_invalid(p, "window_left 0");
  p = contiguous(), p.chunk_size = 64, p.window_left = -1;
  CHECK(check(p).ok());
  p = paged(), p.chunk_size = 1 << 30;  // longer than every sequence: causal, through the chunked kernel
  CHECK(check(p).ok());
  p = contiguous(), p.softmax_scale = 0.f;
  require_invalid(p, "softmax_scale must be positive and finite");
  p = contiguous(), p.num_splits = 33;
  require_invalid(p, "num_splits must be 0 (planned) or in [1, 32]");
  p = contiguous(), p.split_merge = static_cast<flashjit::SplitMerge>(3);  // e.g. from the C ABI
  require_invalid(p, "split_merge must be automatic (0), combine_kernel (1) or cluster (2), got 3");
  p = contiguous(), p.split_merge = flashjit::SplitMerge::cluster, p.num_splits = 17;
  require_invalid(p, "split_merge cluster takes at most 16 splits (one thread-block cluster), but num_splits is 17");
  p = contiguous(), p.split_merge = flashjit::SplitMerge::cluster, p.num_splits = 16;
  CHECK(check(p).ok());
}

TEST_CASE("decode problem: mask_of is causal, sliding_window (window_left >= 0) or chunked_causal (chunk_size > 0)",
          "[dispatch][decode]") {
  using flashjit::MaskKind;
  DecodeProblem p = contiguous();
  CHECK(mask_of(p) == MaskKind::causal);
  p.window_left = 0;
  CHECK(mask_of(p) == MaskKind::sliding_window);
  p.window_left = 100;
  CHECK(mask_of(p) == MaskKind::sliding_window);
  p = paged(), p.chunk_size = 1;
  CHECK(mask_of(p) == MaskKind::chunked_causal);
  p.chunk_size = 1 << 30;
  CHECK(mask_of(p) == MaskKind::chunked_causal);
  p.chunk_size = 0;
  CHECK(mask_of(p) == MaskKind::causal);
}

TEST_CASE("decode problem: paged cache errors", "[dispatch][decode]") {
  DecodeProblem p = paged();
  for (int bad : {0, 3, 48, 512, -16}) {
    p.page_size = bad;
    INFO("page_size " << bad);
    require_invalid(p, "page_size must be a power of two in [1, 256]");
  }
  p = paged(), p.num_pages = 0;
  require_invalid(p, "num_pages must be >= 1");
  p = paged(), p.max_pages_per_seq = 0;
  require_invalid(p, "max_pages_per_seq must be >= 1");
  p = paged(), p.max_pages_per_seq = 256;  // 4096 tokens < 4097
  require_invalid(p, "max_seqlen_k (4097) exceeds what the page table holds (max_pages_per_seq 256 x page_size 16)");
  p = paged(), p.page_table = nullptr;
  require_invalid(p, "page_table is a null pointer");
  p = paged(), p.page_table = static_cast<const int*>(fake(0x60001));
  require_invalid(p, "page_table must be 4-byte aligned");
  p = paged(), p.k_strides.batch = 100;
  require_invalid(p, "k_cache page stride must be a positive multiple of 8");
  p = paged(), p.v_strides.seq = 4;
  require_invalid(p, "v_cache token stride must be a positive multiple of 8");
  auto st = check(p);
  REQUIRE(!st.ok());
  CHECK(contains(st.error().message, "invalid decode problem (paged cache)"));
}

TEST_CASE("decode problem: a CSR page table takes seqlens_k or last_page_len", "[dispatch][decode][csr]") {
  DecodeProblem p = paged();
  p.page_indptr = static_cast<const int*>(fake(0x80000));
  CHECK(check(p).ok());
  p.seqlens_k = nullptr, p.last_page_len = static_cast<const int*>(fake(0x90000));
  CHECK(check(p).ok());
  p.seqlens_k = static_cast<const int*>(fake(0x50000));
  require_invalid(p, "a CSR page table (page_indptr) needs exactly one of seqlens_k (key counts) and last_page_len");
  p.seqlens_k = nullptr, p.last_page_len = nullptr;
  require_invalid(p, "needs exactly one of seqlens_k");
  p.last_page_len = static_cast<const int*>(fake(0x90002));
  require_invalid(p, "last_page_len must be 4-byte aligned");
  p = paged(), p.page_indptr = static_cast<const int*>(fake(0x80001));
  require_invalid(p, "page_indptr must be 4-byte aligned");
  p = paged(), p.page_indptr = static_cast<const int*>(fake(0x80000)), p.page_table = nullptr;
  require_invalid(p, "page_table is a null pointer (the CSR table's page indices");
  // last_page_len without page_indptr, and either on a contiguous cache.
  p = paged(), p.last_page_len = static_cast<const int*>(fake(0x90000));
  require_invalid(p, "last_page_len is for CSR page tables: set page_indptr too, or give seqlens_k");
  p = contiguous(), p.page_indptr = static_cast<const int*>(fake(0x80000));
  require_invalid(p, "page_indptr and last_page_len are for a paged cache's CSR page table, but layout is contiguous");
  // The host bounds stay required: max_pages_per_seq (a sequence's most pages) holds max_seqlen_k.
  p = paged(), p.page_indptr = static_cast<const int*>(fake(0x80000)), p.max_pages_per_seq = 0;
  require_invalid(p, "max_pages_per_seq must be >= 1");
  // A fused append over a CSR table, with the counts from seqlens_k (before the new rows) or last_page_len
  // (after them).
  p = paged(), p.page_indptr = static_cast<const int*>(fake(0x80000));
  p.new_len = 1, p.k_new = fake(0xa0000), p.v_new = fake(0xb0000);
  CHECK(check(p).ok());
  p.seqlens_k = nullptr, p.last_page_len = static_cast<const int*>(fake(0x90000));
  CHECK(check(p).ok());
}

TEST_CASE("decode problem: every issue is reported at once", "[dispatch][decode]") {
  DecodeProblem p = paged();
  p.q_len = 0, p.page_size = 3, p.k_cache = nullptr;
  auto st = check(p);
  REQUIRE(!st.ok());
  const std::string& m = st.error().message;
  CHECK(contains(m, "q_len"));
  CHECK(contains(m, "page_size"));
  CHECK(contains(m, "k_cache is a null pointer"));
}

namespace {

// Two states of B2, S3, H8, D64, contiguous.
flashjit::MergeProblem merge2() {
  flashjit::MergeProblem m;
  m.batch = 2, m.seqlen = 3, m.heads = 8, m.head_dim = 64, m.num_states = 2;
  m.o_in[0] = fake(0x10000), m.o_in[1] = fake(0x20000);
  m.lse_in[0] = static_cast<const float*>(fake(0x30000)), m.lse_in[1] = static_cast<const float*>(fake(0x40000));
  m.o = fake_mut(0x50000);
  return m;
}

}  // namespace

TEST_CASE("merge problem: valid problems pass, each error names its field", "[dispatch][merge]") {
  CHECK(check(merge2()).ok());
  auto fails_with = [](flashjit::MergeProblem m, const std::string& part) {
    auto st = check(m);
    REQUIRE_FALSE(st.ok());
    CHECK(st.error().code == ErrorCode::invalid_argument);
    INFO(st.error().message);
    CHECK(contains(st.error().message, part));
  };
  auto m = merge2();
  m.num_states = 0;
  fails_with(m, "num_states");
  m = merge2();
  m.num_states = flashjit::kMaxMergeStates + 1;
  fails_with(m, "num_states");
  m = merge2();
  m.o_in[1] = nullptr;
  fails_with(m, "o_in[1]");
  m = merge2();
  m.lse_in[0] = static_cast<const float*>(fake(0x30002));
  fails_with(m, "lse_in[0] must be 4-byte aligned");
  m = merge2();
  m.o = fake_mut(0x20000);
  fails_with(m, "aliases o_in[1]");
  m = merge2();
  m.head_dim = 12;
  fails_with(m, "head_dim");
  m = merge2();
  m.in_strides.seq = -64;
  fails_with(m, "in_strides sequence");
  m = merge2();
  m.o = nullptr;
  fails_with(m, "o is a null pointer");
}

TEST_CASE("decode problem: a caller workspace is 16-byte aligned and sized only when given", "[dispatch][decode]") {
  DecodeProblem p = contiguous();
  p.workspace = fake_mut(0x70000), p.workspace_bytes = 4096;
  CHECK(check(p).ok());
  p.workspace = fake_mut(0x70008);
  auto st = check(p);
  REQUIRE_FALSE(st.ok());
  CHECK(contains(st.error().message, "workspace"));
  CHECK(contains(st.error().message, "16-byte aligned"));
  p.workspace = nullptr;
  st = check(p);
  REQUIRE_FALSE(st.ok());
  CHECK(contains(st.error().message, "workspace_bytes is 4096"));
}
