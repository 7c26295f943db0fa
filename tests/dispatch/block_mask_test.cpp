// Block masks on the host (no device: fake pointer values, never dereferenced): check() of an AttentionProblem's
// BlockMask and of a BlockMaskProblem, the BlockMask a BlockMaskProblem's outputs make, and the dispatcher's tiles
// for block masks (they must lie within one block), its fallbacks and its words for them.
#include <cstdint>
#include <string>

#include "dispatch/heuristics.hpp"
#include "flashjit/block_mask.hpp"
#include "support/catch.hpp"
#include "support/checks.hpp"

using namespace flashjit;
using flashjit::test::contains;

namespace {

const int* ints(std::uintptr_t address) { return reinterpret_cast<const int*>(address); }
int* mut_ints(std::uintptr_t address) { return reinterpret_cast<int*>(address); }

AttentionProblem sparse_problem() {
  AttentionProblem p;
  p.batch = 2, p.seqlen_q = 1000, p.seqlen_k = 777, p.heads_q = 8, p.heads_kv = 2, p.head_dim = 128;
  p.mask = MaskKind::causal;
  p.q = p.k = p.v = reinterpret_cast<const void*>(0x10000);
  p.o = reinterpret_cast<void*>(0x20000);
  BlockMask& m = p.block_mask;
  m.kv_num_blocks = ints(0x30000), m.kv_indices = ints(0x40000);
  m.full_kv_num_blocks = ints(0x50000), m.full_kv_indices = ints(0x60000);
  m.q_block = 128, m.kv_block = 128, m.num_q_blocks = 8, m.num_kv_blocks = 7;
  m.head_stride = 8, m.batch_stride = 64;
  return p;
}

void require_invalid(const AttentionProblem& p, const std::string& part) {
  auto st = check(p);
  REQUIRE_FALSE(st.ok());
  INFO(st.error().message);
  CHECK(st.error().code == ErrorCode::invalid_argument);
  CHECK(contains(st.error().message, part));
}

BlockMaskProblem mask_problem() {
  BlockMaskProblem p;
  p.batch = 2, p.heads = 3, p.seqlen_q = 1000, p.seqlen_k = 777, p.q_block = 64, p.kv_block = 128;
  p.mask = MaskKind::causal;
  p.kv_num_blocks = mut_ints(0x1000), p.kv_indices = mut_ints(0x2000);
  return p;
}

void require_invalid(const BlockMaskProblem& p, const std::string& part) {
  auto st = check(p);
  REQUIRE_FALSE(st.ok());
  INFO(st.error().message);
  CHECK(contains(st.error().message, part));
}

}  // namespace

TEST_CASE("check: a prefill problem's block mask", "[dispatch][block_sparse]") {
  REQUIRE(check(sparse_problem()).ok());
  AttentionProblem p = sparse_problem();
  p.block_mask.full_kv_num_blocks = p.block_mask.full_kv_indices = nullptr;
  CHECK(check(p).ok());
  p = sparse_problem(), p.block_mask.kv_indices = nullptr;
  require_invalid(p, "block_mask.kv_indices is a null pointer");
  p = sparse_problem(), p.block_mask.full_kv_indices = nullptr;
  require_invalid(p, "go together");
  p = sparse_problem(), p.block_mask.kv_indices = ints(0x40002);
  require_invalid(p, "block_mask.kv_indices");
  p = sparse_problem(), p.block_mask.q_block = 8;
  require_invalid(p, "block_mask.q_block must be a multiple of 16");
  p = sparse_problem(), p.block_mask.kv_block = 100;
  require_invalid(p, "block_mask.kv_block must be a multiple of 16");
  p = sparse_problem(), p.block_mask.num_q_blocks = 7;
  require_invalid(p, "num_q_blocks (7) must cover seqlen_q");
  p = sparse_problem(), p.block_mask.num_kv_blocks = 6;
  require_invalid(p, "num_kv_blocks (6) must cover seqlen_k");
  p = sparse_problem(), p.block_mask.head_stride = -1;
  require_invalid(p, "strides must be >= 0");
  p = sparse_problem(), p.block_mask.batch_stride = std::int64_t{1} << 40;
  require_invalid(p, "past 2^40");
  p = sparse_problem(), p.block_mask.kv_num_blocks = nullptr;
  require_invalid(p, "kv_num_blocks is null");
  p = sparse_problem();
  p.cu_seqlens_q = p.cu_seqlens_k = ints(0x70000), p.total_q = 1000, p.total_k = 777;
  p.q_strides.batch = p.k_strides.batch = p.v_strides.batch = p.o_strides.batch = 0;
  require_invalid(p, "block_mask is for dense batches");
}

TEST_CASE("check: a block-mask problem, its shape and the BlockMask it makes", "[dispatch][block_mask]") {
  REQUIRE(check(mask_problem()).ok());
  const BlockMaskShape s = block_mask_shape(mask_problem());
  CHECK(s.num_q_blocks == 16);
  CHECK(s.num_kv_blocks == 7);
  const BlockMask m = block_mask_of(mask_problem());
  CHECK(m.head_stride == 16);
  CHECK(m.batch_stride == 48);
  CHECK(m.num_kv_blocks == 7);
  BlockMaskProblem one = mask_problem();
  one.batch = one.heads = 1;
  CHECK(block_mask_of(one).head_stride == 0);
  CHECK(block_mask_of(one).batch_stride == 0);
  BlockMaskProblem p = mask_problem();
  p.kv_indices = nullptr;
  require_invalid(p, "kv_indices is a null pointer");
  p = mask_problem(), p.full_kv_num_blocks = mut_ints(0x3000);
  require_invalid(p, "go together");
  p = mask_problem(), p.q_block = 24;
  require_invalid(p, "q_block must be a multiple of 16");
  p = mask_problem(), p.mask = MaskKind::none;
  require_invalid(p, "needs a mask_mod or a mask");
  p.mask_mod = "__device__ bool mask_mod(int, int, int, int, const flashjit::ModContext&) { return true; }";
  CHECK(check(p).ok());
  p = mask_problem(), p.mask = MaskKind::chunked, p.chunk_size = 0;
  require_invalid(p, "chunk_size must be >= 1");
  p = mask_problem(), p.seqlen_k = 16 * 49153, p.kv_block = 16;
  require_invalid(p, "key blocks; at most");
  p = mask_problem(), p.heads = 0;
  require_invalid(p, "heads must be in [1, 65535]");
}

TEST_CASE("dispatch: block-sparse tiles lie within one block; fa2, then the reference kernel, where none does",
          "[dispatch][block_sparse]") {
  const Arch sm90a{90, true}, sm80{80, false};
  AttentionProblem p = sparse_problem();
  auto c = dispatch::choose(p, sm90a);
  REQUIRE(c.ok());
  CHECK(c->algorithm == Algorithm::fa3);
  CHECK(c->block_sparse);
  CHECK(128 % c->block_m == 0);
  CHECK(128 % c->block_n == 0);
  CHECK(dispatch::supports(*c, p, sm90a).ok());
  CHECK(dispatch::reference_fallback_reason(p, sm90a).empty());

  p.block_mask.q_block = 64, p.block_mask.num_q_blocks = 16;
  c = dispatch::choose(p, sm90a);
  REQUIRE(c.ok());
  CHECK(c->block_m == 64);
  CHECK(c->consumer_warpgroups == 1);

  p = sparse_problem(), p.head_dim = 64, p.block_mask.kv_block = 80, p.block_mask.num_kv_blocks = 10;
  c = dispatch::choose(p, sm90a);
  REQUIRE(c.ok());
  CHECK(c->algorithm == Algorithm::fa3);
  CHECK(c->block_n == 80);
  CHECK(c->block_m == 128);  // not d64's three warpgroups: 192 rows do not divide 128

  p = sparse_problem(), p.block_mask.kv_block = 32, p.block_mask.num_kv_blocks = 25;
  c = dispatch::choose(p, sm90a);
  REQUIRE(c.ok());
  CHECK(c->algorithm == Algorithm::fa2);  // fa3's key tiles are 64 or more
  CHECK(c->block_n == 32);

  p = sparse_problem();
  c = dispatch::choose(p, sm80);
  REQUIRE(c.ok());
  CHECK(c->algorithm == Algorithm::fa2);
  CHECK(c->block_m == 16 * c->warps);  // 32 rows per warp spill beside the list at d128

  p = sparse_problem(), p.block_mask.q_block = 16, p.block_mask.num_q_blocks = 63;
  c = dispatch::choose(p, sm90a);
  REQUIRE(c.ok());
  CHECK(c->algorithm == Algorithm::naive);
  CHECK(c->block_sparse);
  CHECK(contains(dispatch::reference_fallback_reason(p, sm90a), "divide the block mask's 16 x 128 blocks"));

  // supports(): the flag and the tiles.
  p = sparse_problem();
  KernelConfig dense = *dispatch::choose(p, sm90a);
  dense.block_sparse = false;
  auto st = dispatch::supports(dense, p, sm90a);
  REQUIRE_FALSE(st.ok());
  CHECK(contains(st.error().message, "the problem has a block mask but the kernel is not block_sparse"));
  KernelConfig wide = *dispatch::choose(p, sm90a);
  p.block_mask.kv_block = 64, p.block_mask.num_kv_blocks = 13;
  if (wide.block_n > 64) {
    st = dispatch::supports(wide, p, sm90a);
    REQUIRE_FALSE(st.ok());
    CHECK(contains(st.error().message, "must divide the block mask's blocks"));
  }
  AttentionProblem none = sparse_problem();
  none.block_mask = BlockMask{};
  KernelConfig sparse = *dispatch::choose(sparse_problem(), sm90a);
  st = dispatch::supports(sparse, none, sm90a);
  REQUIRE_FALSE(st.ok());
  CHECK(contains(st.error().message, "needs a problem with a block mask"));
}

TEST_CASE("dispatch: no packed GQA tiles with a block mask", "[dispatch][block_sparse]") {
  AttentionProblem p = sparse_problem();
  p.mask = MaskKind::sliding_window, p.window_left = 128, p.window_right = 0, p.head_dim = 64;
  auto c = dispatch::choose(p, Arch{90, true});
  REQUIRE(c.ok());
  CHECK_FALSE(c->pack_gqa);
  CHECK(c->block_sparse);
  p.block_mask = BlockMask{};
  auto packed = dispatch::choose(p, Arch{90, true});
  REQUIRE(packed.ok());
  CHECK(packed->pack_gqa);  // the same problem without a block mask packs
}
