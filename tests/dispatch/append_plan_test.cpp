// The append planner: the vector count per size, the grid, every kernel the prepare calls load, and the append a
// fused decode runs (its problem, the workspace its new lengths take).
#include <cstdint>
#include <set>
#include <string>

#include "dispatch/append_plan.hpp"
#include "support/catch.hpp"

using flashjit::AppendKernelConfig;
using flashjit::AppendProblem;
using flashjit::Arch;
using flashjit::DecodeProblem;
using flashjit::DType;
using flashjit::KvLayout;
namespace dispatch = flashjit::dispatch;

namespace {

const Arch kSm90a{90, true};

DecodeProblem fused_decode() {
  DecodeProblem p;
  p.batch = 64, p.q_len = 1, p.heads_q = 32, p.heads_kv = 8, p.head_dim = 128, p.max_seqlen_k = 8192;
  p.layout = KvLayout::paged, p.page_size = 16, p.num_pages = 64 * 512, p.max_pages_per_seq = 512;
  p.q = reinterpret_cast<const void*>(0x10000), p.o = reinterpret_cast<void*>(0x20000);
  p.k_cache = reinterpret_cast<const void*>(0x30000), p.v_cache = reinterpret_cast<const void*>(0x40000);
  p.seqlens_k = reinterpret_cast<const int*>(0x50000), p.page_table = reinterpret_cast<const int*>(0x60000);
  p.k_new = reinterpret_cast<const void*>(0x70000), p.v_new = reinterpret_cast<const void*>(0x80000);
  p.new_len = 1;
  return p;
}

}  // namespace

TEST_CASE("append plan: vectors per thread follow the size, the rest follows the problem", "[dispatch][append]") {
  const std::int64_t wave = 132 * 2048;
  auto vectors = [](std::int64_t n) {
    return dispatch::append_kernel_config(DType::bf16, 128, KvLayout::contiguous, 0, kSm90a, n, 132).vectors;
  };
  CHECK(vectors(1) == 1);
  CHECK(vectors(2 * wave - 1) == 1);
  CHECK(vectors(2 * wave) == 2);
  CHECK(vectors(4 * wave) == 2);  // four per thread would halve the CTAs an SM holds (measured slower)
  CHECK(vectors(std::int64_t{1} << 40) == 2);
  const AppendKernelConfig paged =
      dispatch::append_kernel_config(DType::fp16, 64, KvLayout::paged, 32, kSm90a, 1, 132);
  CHECK((paged.dtype == DType::fp16 && paged.head_dim == 64 && paged.page_size == 32 && paged.warps == 4));
  CHECK(dispatch::append_kernel_config(DType::bf16, 64, KvLayout::contiguous, 32, kSm90a, 1, 132).page_size == 0);
  // Every planned kernel is one the prepare calls load.
  const auto prepared = dispatch::append_prepare_kernels(DType::bf16, 128, KvLayout::contiguous, 0, kSm90a);
  std::set<std::string> names;
  for (const auto& c : prepared) names.insert(readable_name(c));
  CHECK(names.size() == prepared.size());
  for (std::int64_t n : {std::int64_t{1}, 2 * wave, 4 * wave, 100 * wave}) {
    const std::string name = readable_name(
        dispatch::append_kernel_config(DType::bf16, 128, KvLayout::contiguous, 0, kSm90a, n, 132));
    CHECK(names.count(name) == 1);
  }
}

TEST_CASE("append plan: the grid covers one sequence's vectors", "[dispatch][append]") {
  AppendProblem p;
  p.batch = 2, p.heads_kv = 8, p.head_dim = 128, p.new_len = 1;
  AppendKernelConfig c;
  c.warps = 4, c.vectors = 1;
  CHECK(dispatch::append_blocks(c, p) == 1);  // 8 x 16 vectors: one CTA of 128 threads
  p.new_len = 3;
  CHECK(dispatch::append_blocks(c, p) == 3);
  c.vectors = 4;
  CHECK(dispatch::append_blocks(c, p) == 1);
  p.new_len = 4097;
  CHECK(dispatch::append_blocks(c, p) == (4097u * 128 + 511) / 512);
  CHECK(dispatch::append_vectors(p) == 2LL * 2 * 4097 * 8 * 16);
}

TEST_CASE("append plan: a fused decode's append and its lengths in the workspace", "[dispatch][append]") {
  DecodeProblem d = fused_decode();
  int* out = reinterpret_cast<int*>(0x90000);
  const AppendProblem a = dispatch::append_of(d, out);
  CHECK(check(a).ok());
  CHECK((a.batch == 64 && a.heads_kv == 8 && a.head_dim == 128 && a.new_len == 1));
  CHECK((a.k == d.k_new && a.v == d.v_new && a.cache_seqlens == d.seqlens_k && a.seqlens_out == out));
  CHECK((a.layout == KvLayout::paged && a.page_table == d.page_table && a.page_size == 16 && a.num_pages == d.num_pages));
  CHECK(a.k_cache_strides.batch == 16 * 8 * 128);
  CHECK(dispatch::fused_lengths_bytes(d) == 256);
  d.batch = 65;
  CHECK(dispatch::fused_lengths_bytes(d) == 512);
  d.seqlens_out = out;
  CHECK(dispatch::fused_lengths_bytes(d) == 0);
  d.seqlens_out = nullptr, d.new_len = 0;
  CHECK(dispatch::fused_lengths_bytes(d) == 0);

  DecodeProblem c = fused_decode();
  c.layout = KvLayout::contiguous, c.page_table = nullptr, c.page_size = 0, c.num_pages = 0, c.max_pages_per_seq = 0;
  c.cache_seqlen = 10000;
  const AppendProblem ac = dispatch::append_of(c, out);
  CHECK(check(ac).ok());
  CHECK(ac.cache_seqlen == 10000);
  CHECK(ac.k_cache_strides.batch == 10000LL * 8 * 128);
  c.cache_seqlen = 0;
  CHECK(dispatch::append_of(c, out).cache_seqlen == 8192);  // max_seqlen_k
}

TEST_CASE("append plan: a fused decode over a CSR table: its lengths before the append, or last_page_len after it",
          "[dispatch][append][csr]") {
  int* out = reinterpret_cast<int*>(0x90000);
  DecodeProblem d = fused_decode();
  d.page_indptr = reinterpret_cast<const int*>(0xa0000);
  AppendProblem a = dispatch::append_of(d, out);
  CHECK(check(a).ok());
  CHECK((a.page_indptr == d.page_indptr && a.page_table == d.page_table && a.cache_seqlens == d.seqlens_k));
  CHECK(a.last_page_len == nullptr);
  CHECK(dispatch::fused_lengths_bytes(d) == 256);  // the decode reads the lengths the append writes

  // last_page_len counts the new rows already: the decode reads it, nothing goes to the workspace.
  d.seqlens_k = nullptr, d.last_page_len = reinterpret_cast<const int*>(0xb0000);
  a = dispatch::append_of(d, nullptr);
  CHECK(check(a).ok());
  CHECK((a.cache_seqlens == nullptr && a.last_page_len == d.last_page_len && a.seqlens_out == nullptr));
  CHECK(dispatch::fused_lengths_bytes(d) == 0);
  // The caller's seqlens_out still receives them; it must not be last_page_len itself.
  CHECK(check(dispatch::append_of(d, out)).ok());
  auto st = check(dispatch::append_of(d, const_cast<int*>(d.last_page_len)));
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message.find("seqlens_out is last_page_len") != std::string::npos);
  // A dense table's append takes neither.
  const AppendProblem dense = dispatch::append_of(fused_decode(), out);
  CHECK((dense.page_indptr == nullptr && dense.last_page_len == nullptr));
}

TEST_CASE("decode problem: the fused append's fields need new_len", "[dispatch][append]") {
  DecodeProblem d = fused_decode();
  CHECK(check(d).ok());
  d.new_len = -1;
  CHECK_FALSE(check(d).ok());
  d.new_len = 0;
  auto st = check(d);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message.find("new_len is 0") != std::string::npos);
  d.k_new = d.v_new = nullptr;
  CHECK(check(d).ok());
}
