// Tests of the decode and merge kernel arguments (no device: fake pointers, never dereferenced).
#include "launch/decode_launch.hpp"

#include "dispatch/decode_heuristics.hpp"

#include <cstdint>

#include "support/catch.hpp"

using namespace flashjit;

namespace {

void* fake(std::uintptr_t address) { return reinterpret_cast<void*>(address); }

DecodeProblem paged_problem() {
  DecodeProblem p;
  p.batch = 3, p.q_len = 2, p.heads_q = 16, p.heads_kv = 4, p.head_dim = 64;
  p.q = fake(0x1000), p.o = fake(0x2000), p.k_cache = fake(0x3000), p.v_cache = fake(0x4000);
  p.seqlens_k = static_cast<const int*>(fake(0x5000));
  p.layout = KvLayout::paged, p.page_size = 64, p.num_pages = 40, p.max_pages_per_seq = 10;
  p.page_table = static_cast<const int*>(fake(0x6000));
  p.max_seqlen_k = 640, p.window_left = 100, p.num_splits = 3;
  return p;
}

}  // namespace

TEST_CASE("decode params: strides, pages, splits and workspace pointers", "[launch][decode]") {
  DecodeProblem p = paged_problem();
  p.split_merge = SplitMerge::combine_kernel;
  const auto plan = dispatch::plan_decode(p, Arch{90, true}, 132);
  REQUIRE(plan.splits.num_splits == 3);
  REQUIRE_FALSE(plan.split.cluster_merge);
  void* ws = fake(0x100000);
  const DecodeParams d = launch::make_decode_params(p, plan, ws);
  CHECK(d.group == 4);
  CHECK(plan.split.page_size == 64);  // compiled into the kernel
  CHECK(d.num_pages == 40);
  CHECK(d.max_pages_per_seq == 10);
  // Paged cache [pages, 64 tokens, 4 heads, 64]: page, token and head strides.
  CHECK(d.k_batch == 64 * 4 * 64);
  CHECK(d.k_seq == 4 * 64);
  CHECK(d.k_head == 64);
  CHECK(d.q_batch == 2 * 16 * 64);
  CHECK(d.num_splits == 3);
  CHECK(d.keys_per_split == plan.splits.keys_per_split);
  CHECK(d.window_left == 100);
  CHECK(d.softmax_scale == Approx(0.125f));
  CHECK(d.ws_o == static_cast<float*>(ws));
  CHECK(reinterpret_cast<std::uintptr_t>(d.ws_lse) == 0x100000 + plan.lse_offset);

  const CombineParams c = launch::make_split_combine_params(p, plan, ws);
  CHECK(c.num_states == 3);
  const std::uintptr_t per_split = 3 * 2 * 16 * 64 * 4;  // B x q_len x Hq x D floats
  // State i at o_in[0] + i * o_state and lse_in[0] + i * lse_state (elements): where the split kernel
  // writes split i's partials (d.ws_o, d.ws_lse).
  CHECK(c.o_in[0] == ws);
  CHECK(c.o_state * 4 == per_split);
  CHECK(c.lse_in[0] == d.ws_lse);
  CHECK(c.lse_state == 3 * 2 * 16);  // B x q_len x Hq rows
  CHECK(c.in_head == 64);
  CHECK(c.in_seq == 16 * 64);
  CHECK(c.in_batch == 2 * 16 * 64);
  CHECK(c.seqlen == 2);
  CHECK(c.heads == 16);
  CHECK(c.o == p.o);
}

TEST_CASE("decode params: a CSR page table's offsets and last-page counts; none for a contiguous cache",
          "[launch][decode][csr]") {
  DecodeProblem p = paged_problem();
  p.page_indptr = static_cast<const int*>(fake(0x7000));
  p.seqlens_k = nullptr, p.last_page_len = static_cast<const int*>(fake(0x8000));
  const auto plan = dispatch::plan_decode(p, Arch{90, true}, 132);
  DecodeParams d = launch::make_decode_params(p, plan, fake(0x100000));
  CHECK(d.page_table == p.page_table);
  CHECK(d.page_indptr == p.page_indptr);
  CHECK(d.last_page_len == p.last_page_len);
  CHECK(d.seqlens_k == nullptr);
  p = paged_problem();
  d = launch::make_decode_params(p, plan, fake(0x100000));
  CHECK(d.page_indptr == nullptr);
  CHECK(d.last_page_len == nullptr);
}

TEST_CASE("decode params: splits merged in a cluster get no workspace pointers", "[launch][decode]") {
  DecodeProblem p = paged_problem();
  p.split_merge = SplitMerge::cluster;
  const auto plan = dispatch::plan_decode(p, Arch{90, true}, 132);
  REQUIRE(plan.split.cluster_merge);
  CHECK(plan.workspace_bytes == 0);
  const DecodeParams d = launch::make_decode_params(p, plan, fake(0x100000));
  CHECK(d.num_splits == 3);
  CHECK(d.ws_o == nullptr);
  CHECK(d.ws_lse == nullptr);
}

TEST_CASE("decode params: one split writes the output directly", "[launch][decode]") {
  DecodeProblem p = paged_problem();
  p.num_splits = 1;
  const auto plan = dispatch::plan_decode(p, Arch{90, true}, 132);
  CHECK(plan.workspace_bytes == 0);
  const DecodeParams d = launch::make_decode_params(p, plan, nullptr);
  CHECK(d.num_splits == 1);
  CHECK(d.ws_o == nullptr);
  CHECK(d.ws_lse == nullptr);
}

TEST_CASE("decode launch: a kernel of another layout or page size is refused before any launch",
          "[launch][decode]") {
  DecodeProblem p = paged_problem();
  auto plan = dispatch::plan_decode(p, Arch{90, true}, 132);
  plan.split.page_size = 16;  // the problem's pages hold 64 tokens
  Status st = launch::launch_decode(nullptr, nullptr, p, plan, nullptr, /*pdl=*/true);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code == ErrorCode::invalid_argument);
  CHECK(st.error().message.find("64-token pages") != std::string::npos);
  plan.split.layout = KvLayout::contiguous, plan.split.page_size = 0;
  st = launch::launch_decode(nullptr, nullptr, p, plan, nullptr, /*pdl=*/true);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message.find("paged cache") != std::string::npos);
  // Splits that do not start at a tile and page boundary, or a kernel without the problem's window.
  plan = dispatch::plan_decode(p, Arch{90, true}, 132);
  plan.splits.keys_per_split += 16;
  st = launch::launch_decode(nullptr, nullptr, p, plan, nullptr, /*pdl=*/true);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message.find("keys per split") != std::string::npos);
  plan = dispatch::plan_decode(p, Arch{90, true}, 132);
  plan.split.mask = MaskKind::causal;
  CHECK_FALSE(launch::launch_decode(nullptr, nullptr, p, plan, nullptr, /*pdl=*/true).ok());
  // More splits than one cluster holds.
  p.split_merge = SplitMerge::cluster, p.num_splits = 16;
  plan = dispatch::plan_decode(p, Arch{90, true}, 132);
  REQUIRE(plan.split.cluster_merge);
  REQUIRE(launch::launch_decode(nullptr, nullptr, p, plan, nullptr, /*pdl=*/true)
              .error()
              .message.find("inconsistent") == std::string::npos);  // (a null function: fails past the checks, not in them)
  plan.splits.num_splits = 17;
  st = launch::launch_decode(nullptr, nullptr, p, plan, nullptr, /*pdl=*/true);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message.find("17 splits, at most 16 in one cluster") != std::string::npos);
}

TEST_CASE("merge params: states, strides and blocks", "[launch][merge]") {
  MergeProblem m;
  m.batch = 2, m.seqlen = 5, m.heads = 3, m.head_dim = 128, m.num_states = 2;
  m.o_in[0] = fake(0x1000), m.o_in[1] = fake(0x2000);
  m.lse_in[0] = static_cast<const float*>(fake(0x3000)), m.lse_in[1] = static_cast<const float*>(fake(0x4000));
  m.o = fake(0x5000);
  m.o_strides.head = 256;  // padded heads
  const CombineParams c = launch::make_merge_params(m);
  CHECK(c.num_states == 2);
  CHECK(c.o_in[1] == m.o_in[1]);
  CHECK(c.lse_in[1] == m.lse_in[1]);
  CHECK(c.in_seq == 3 * 128);
  CHECK(c.o_head == 256);
  CHECK(c.o_seq == 3 * 128);  // zero strides take contiguous values
  CombineKernelConfig cfg;
  cfg.warps = 4;
  CHECK(launch::combine_blocks(cfg, 2 * 5 * 3) == 8);
}
