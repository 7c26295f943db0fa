// Block sparsity (flashjit/problem.hpp's BlockMask; templates/attention/key_tiles.cuh) in the FA3, FA2 and reference
// kernels against the float64 reference, and the block masks Runtime::make_block_mask makes (flashjit/block_mask.hpp)
// against a host evaluation of the same mask. Random block masks put each key block of each query block in the
// partial list, the full list or neither, in shuffled order, with an empty query block and an index outside the
// pool; the reference then sees a pair when the built-in mask shows it, its block is listed, and the block is full
// or the mask_mod (when the call has one) lets it through: full blocks must skip the mask_mod.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "checks.hpp"
#include "dispatch/heuristics.hpp"
#include "flashjit/block_mask.hpp"
#include "harness.hpp"
#include "support/catch.hpp"

using namespace flashjit;
using namespace flashjit::test;

namespace {

constexpr Arch kSm90a{90, true};

SeedSequence fresh_seed{0xb10c5a4e};

// Documents: query q_idx of batch entry b is in document doc_q[b * Sq + q_idx], key kv_idx in doc_k[b * Sk + kv_idx]
// (ctx.pointer<int>(0) and (1)); a query sees the keys of its own document, and with ctx.integer(0) set odd heads
// also lose every third key.
const char* kDocumentMod = R"(
__device__ bool mask_mod(int b, int h, int q_idx, int kv_idx, const flashjit::ModContext& ctx) {
  const int dq = ctx.pointer<int>(0)[b * ctx.seqlen_q + q_idx], dk = ctx.pointer<int>(1)[b * ctx.seqlen_k + kv_idx];
  return dq == dk && (ctx.integer(0) == 0 || (h & 1) == 0 || kv_idx % 3 != 0);
}
)";

struct Documents {
  std::vector<int> q, k;  // [B, Sq], [B, Sk]
  bool head_rule = true;  // odd heads lose every third key
  cuda::DeviceBuffer dq, dk;

  // Runs of random lengths, each batch entry its own; keys follow the queries' documents at the keys' scale.
  static Documents make(int batch, int sq, int sk, std::mt19937_64& rng) {
    Documents d;
    for (int b = 0; b < batch; ++b) {
      const int docs = 1 + static_cast<int>(rng() % 5);
      std::vector<double> cuts;
      for (int i = 0; i + 1 < docs; ++i) cuts.push_back(std::uniform_real_distribution<double>(0, 1)(rng));
      std::sort(cuts.begin(), cuts.end());
      auto doc_of = [&](double x) { return static_cast<int>(std::upper_bound(cuts.begin(), cuts.end(), x) - cuts.begin()); };
      for (int i = 0; i < sq; ++i) d.q.push_back(doc_of((i + 0.5) / sq));
      for (int j = 0; j < sk; ++j) d.k.push_back(doc_of((j + 0.5) / sk));
    }
    return d;
  }
  Status upload() {
    auto a = cuda::DeviceBuffer::allocate(q.size() * 4), b = cuda::DeviceBuffer::allocate(k.size() * 4);
    if (!a.ok()) return std::move(a).error();
    if (!b.ok()) return std::move(b).error();
    dq = std::move(*a), dk = std::move(*b);
    FLASHJIT_TRY(dq.upload(q.data(), q.size() * 4));
    return dk.upload(k.data(), k.size() * 4);
  }
  bool visible(const Shape& s, int b, int h, int i, int j) const {
    return q[std::size_t(b) * s.seqlen_q + i] == k[std::size_t(b) * s.seqlen_k + j] &&
           (!head_rule || (h & 1) == 0 || j % 3 != 0);
  }
  void set_aux(ModAux& aux) const {
    aux.pointers[0] = dq.get();
    aux.pointers[1] = dk.get();
    aux.integers[0] = head_rule ? 1 : 0;
  }
};

Result<cuda::DeviceBuffer> upload_ints(const std::vector<int>& host) {
  auto buf = cuda::DeviceBuffer::allocate(std::max<std::size_t>(host.size(), 1) * 4);
  if (!buf.ok()) return buf;
  FLASHJIT_TRY(buf->upload(host.data(), host.size() * 4));
  return buf;
}

enum class BlockKind { none, partial, full };

// A block mask on the host: kinds[((b * H + h) * nq + m) * nk + j], its device lists, the BlockMask over them.
struct HostBlockMask {
  int batch = 1, heads = 1, q_block = 128, kv_block = 128, nq = 0, nk = 0;
  std::vector<BlockKind> kinds;
  std::vector<int> counts, indices, full_counts, full_indices;
  cuda::DeviceBuffer d_counts, d_indices, d_full_counts, d_full_indices;

  BlockKind kind(int b, int h, int m, int j) const {
    const int bb = batch == 1 ? 0 : b, hh = heads == 1 ? 0 : h;
    return kinds[((std::size_t(bb) * heads + hh) * nq + m) * nk + j];
  }
  // Random kinds (about 30% none, 40% partial, 30% full), the lists shuffled; query block 0 of entry 0 lists
  // nothing, and query block 1's partial list (when it has room) ends with an index past the pool.
  static HostBlockMask random(const Shape& s, int batch, int heads, int q_block, int kv_block, bool with_full,
                              std::mt19937_64& rng) {
    HostBlockMask m;
    m.batch = batch, m.heads = heads, m.q_block = q_block, m.kv_block = kv_block;
    m.nq = (s.seqlen_q + q_block - 1) / q_block, m.nk = (s.seqlen_k + kv_block - 1) / kv_block;
    const std::size_t rows = std::size_t(batch) * heads * m.nq;
    m.kinds.resize(rows * m.nk);
    m.counts.assign(rows, 0), m.full_counts.assign(rows, 0);
    m.indices.assign(rows * m.nk, -7), m.full_indices.assign(rows * m.nk, -7);
    for (std::size_t r = 0; r < rows; ++r) {
      std::vector<int> partial, full;
      for (int j = 0; j < m.nk; ++j) {
        const int x = static_cast<int>(rng() % 10);
        BlockKind k = x < 3 ? BlockKind::none : x < 7 ? BlockKind::partial : BlockKind::full;
        if (r == 0) k = BlockKind::none;
        if (k == BlockKind::full && !with_full) k = BlockKind::partial;
        m.kinds[r * m.nk + j] = k;
        if (k == BlockKind::partial) partial.push_back(j);
        if (k == BlockKind::full) full.push_back(j);
      }
      std::shuffle(partial.begin(), partial.end(), rng);
      std::shuffle(full.begin(), full.end(), rng);
      if (r == 1 && static_cast<int>(partial.size() + full.size()) < m.nk) partial.push_back(m.nk + 5);
      m.counts[r] = static_cast<int>(partial.size()), m.full_counts[r] = static_cast<int>(full.size());
      std::copy(partial.begin(), partial.end(), m.indices.begin() + r * m.nk);
      std::copy(full.begin(), full.end(), m.full_indices.begin() + r * m.nk);
    }
    return m;
  }
  Status upload(bool with_full) {
    auto a = upload_ints(counts), b = upload_ints(indices);
    if (!a.ok()) return std::move(a).error();
    if (!b.ok()) return std::move(b).error();
    d_counts = std::move(*a), d_indices = std::move(*b);
    if (!with_full) return {};
    auto c = upload_ints(full_counts), d = upload_ints(full_indices);
    if (!c.ok()) return std::move(c).error();
    if (!d.ok()) return std::move(d).error();
    d_full_counts = std::move(*c), d_full_indices = std::move(*d);
    return {};
  }
  BlockMask view(bool with_full) const {
    BlockMask v;
    v.kv_num_blocks = static_cast<const int*>(d_counts.get()), v.kv_indices = static_cast<const int*>(d_indices.get());
    if (with_full) {
      v.full_kv_num_blocks = static_cast<const int*>(d_full_counts.get());
      v.full_kv_indices = static_cast<const int*>(d_full_indices.get());
    }
    v.q_block = q_block, v.kv_block = kv_block, v.num_q_blocks = nq, v.num_kv_blocks = nk;
    v.head_stride = heads > 1 ? nq : 0;
    v.batch_stride = batch > 1 ? std::int64_t(heads) * nq : 0;
    return v;
  }
};

struct SparseCase {
  Shape shape;
  int mask_batch, mask_heads, q_block, kv_block;
};

void check_block_sparse(Algorithm algorithm, const SparseCase& sc, bool with_mod, bool with_full) {
  ensure_context();
  const Shape& s = sc.shape;
  std::mt19937_64 rng(fresh_seed());
  auto c = Case::make(s, rng());
  REQUIRE(c.ok());
  HostBlockMask bm = HostBlockMask::random(s, sc.mask_batch, sc.mask_heads, sc.q_block, sc.kv_block, with_full, rng);
  REQUIRE(bm.upload(with_full).ok());
  Documents docs = Documents::make(s.batch, s.seqlen_q, s.seqlen_k, rng);
  REQUIRE(docs.upload().ok());
  AttentionProblem problem = c->problem();
  problem.block_mask = bm.view(with_full);
  if (with_mod) {
    problem.mask_mod = kDocumentMod;
    docs.set_aux(problem.aux);
  }
  auto config = dispatch::choose(problem, kSm90a, algorithm, nullptr);
  REQUIRE(config.ok());
  INFO(s.to_string() << " blocks " << sc.q_block << "x" << sc.kv_block << " over B" << sc.mask_batch << " H"
                     << sc.mask_heads << (with_mod ? " with the mask_mod" : "") << (with_full ? " with full lists" : "")
                     << ": " << readable_name(*config));
  CHECK(config->block_sparse);
  auto st = runtime().forward(problem, *config);
  if (!st.ok()) FAIL(st.error().to_string());
  std::vector<float> o, lse;
  REQUIRE(c->read_outputs(o, lse).ok());
  std::vector<double> ref_o, ref_lse;
  reference_attention(s, c->q(), c->k(), c->v(), ref_o, ref_lse, {}, [&](int b, int h, int i, int j) {
    const BlockKind k = bm.kind(b, h, i / bm.q_block, j / bm.kv_block);
    if (k == BlockKind::none) return false;
    return k == BlockKind::full || !with_mod || docs.visible(s, b, h, i, j);
  });
  check_ok(compare(s, o, lse, ref_o, ref_lse), s.dtype);
}

Shape shape_of(int batch, int sq, int sk, int hq, int hkv, int d, DType dtype, const MaskCase& m) {
  Shape s;
  s.batch = batch, s.seqlen_q = sq, s.seqlen_k = sk, s.heads_q = hq, s.heads_kv = hkv, s.head_dim = d, s.dtype = dtype;
  s.mask = m.kind, s.window_left = m.left, s.window_right = m.right, s.chunk_size = m.chunk;
  return s;
}

}  // namespace

TEST_CASE("block-sparse kernels match float64 on random block masks", "[fa3][fa2][reference][block_sparse][gpu]") {
  const Algorithm algorithm = GENERATE(Algorithm::fa3, Algorithm::fa2, Algorithm::naive);
  const SparseCase cases[] = {
      {shape_of(2, 1000, 777, 4, 2, 128, DType::bf16, kMasks[0]), 2, 4, 128, 128},
      {shape_of(1, 300, 301, 8, 1, 64, DType::fp16, kMasks[1]), 1, 1, 64, 128},
      {shape_of(2, 257, 1500, 2, 2, 256, DType::bf16, kMasks[2]), 1, 2, 128, 256},
      {shape_of(1, 1, 1000, 4, 4, 96, DType::bf16, kMasks[3]), 1, 4, 128, 64},
      {shape_of(2, 1000, 1, 4, 1, 64, DType::fp16, kMasks[4]), 2, 1, 128, 128},
      {shape_of(1, 513, 513, 4, 2, 128, DType::bf16, kMasks[1]), 1, 1, 128, 128}};
  for (const SparseCase& sc : cases)
    for (const bool with_mod : {false, true}) check_block_sparse(algorithm, sc, with_mod, /*with_full=*/true);
  check_block_sparse(algorithm, cases[0], true, /*with_full=*/false);
}

namespace {

// The kinds of the blocks of (b, h, m) over the keys of one mask, by a host evaluation of every pair: none when no
// pair is both shown by the built-in mask and passed by the mask_mod, full when the mask_mod passes every shown one.
std::vector<BlockKind> host_kinds(const BlockMaskProblem& p, const Documents* docs, int b, int h, int m) {
  const BlockMaskShape shape = block_mask_shape(p);
  Shape s;
  s.seqlen_q = p.seqlen_q, s.seqlen_k = p.seqlen_k, s.top_left = p.alignment == Alignment::top_left;
  std::vector<BlockKind> out;
  for (int j = 0; j < shape.num_kv_blocks; ++j) {
    bool any = false, all = true;
    for (int i = m * p.q_block; i < std::min((m + 1) * p.q_block, p.seqlen_q); ++i)
      for (int k = j * p.kv_block; k < std::min((j + 1) * p.kv_block, p.seqlen_k); ++k) {
        const bool shown = mask_visible(p.mask, p.window_left, p.window_right, p.chunk_size, s.aligned(i), k);
        const bool passed = docs == nullptr || docs->visible(s, b, h, i, k);
        any |= shown && passed, all &= !shown || passed;
      }
    out.push_back(!any ? BlockKind::none : all ? BlockKind::full : BlockKind::partial);
  }
  return out;
}

void check_made_mask(BlockMaskProblem p, bool with_mod, bool with_full) {
  ensure_context();
  std::mt19937_64 rng(fresh_seed());
  Documents docs = Documents::make(p.batch, p.seqlen_q, p.seqlen_k, rng);
  REQUIRE(docs.upload().ok());
  if (with_mod) {
    p.mask_mod = kDocumentMod;
    docs.set_aux(p.aux);
  }
  const BlockMaskShape shape = block_mask_shape(p);
  const std::size_t rows = std::size_t(p.batch) * p.heads * shape.num_q_blocks, entries = rows * shape.num_kv_blocks;
  cuda::DeviceBuffer bufs[4];
  for (int i = 0; i < 4; ++i) {
    auto b = cuda::DeviceBuffer::allocate((i % 2 ? entries : rows) * 4);
    REQUIRE(b.ok());
    bufs[i] = std::move(*b);
    REQUIRE(bufs[i].fill_bytes(0xff).ok());  // poison: -1 everywhere
  }
  p.kv_num_blocks = static_cast<int*>(bufs[0].get()), p.kv_indices = static_cast<int*>(bufs[1].get());
  if (with_full) p.full_kv_num_blocks = static_cast<int*>(bufs[2].get()), p.full_kv_indices = static_cast<int*>(bufs[3].get());
  INFO(fmt::format("B{} H{} Sq{} Sk{} blocks {}x{} mask {} (w {} {}, chunk {}){}{}{}", p.batch, p.heads, p.seqlen_q,
                   p.seqlen_k, p.q_block, p.kv_block, to_string(p.mask), p.window_left, p.window_right, p.chunk_size,
                   p.alignment == Alignment::top_left ? " top-left" : "", with_mod ? " with the mask_mod" : "",
                   with_full ? " with full lists" : ""));
  auto st = runtime().make_block_mask(p);
  if (!st.ok()) FAIL(st.error().to_string());
  std::vector<int> counts(rows), indices(entries), full_counts(rows), full_indices(entries);
  REQUIRE(bufs[0].download(counts.data(), rows * 4).ok());
  REQUIRE(bufs[1].download(indices.data(), entries * 4).ok());
  REQUIRE(bufs[2].download(full_counts.data(), rows * 4).ok());
  REQUIRE(bufs[3].download(full_indices.data(), entries * 4).ok());
  int mismatches = 0;
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads; ++h)
      for (int m = 0; m < shape.num_q_blocks; ++m) {
        const std::size_t r = (std::size_t(b) * p.heads + h) * shape.num_q_blocks + m;
        std::vector<int> want_partial, want_full;
        const auto kinds = host_kinds(p, with_mod ? &docs : nullptr, b, h, m);
        for (int j = 0; j < shape.num_kv_blocks; ++j) {
          if (kinds[j] == BlockKind::partial || (kinds[j] == BlockKind::full && !with_full)) want_partial.push_back(j);
          if (kinds[j] == BlockKind::full && with_full) want_full.push_back(j);
        }
        const std::vector<int> got_partial(indices.begin() + r * shape.num_kv_blocks,
                                           indices.begin() + r * shape.num_kv_blocks + std::clamp(counts[r], 0, shape.num_kv_blocks));
        bool same = counts[r] == static_cast<int>(want_partial.size()) && got_partial == want_partial;
        if (with_full) {
          const std::vector<int> got_full(full_indices.begin() + r * shape.num_kv_blocks,
                                          full_indices.begin() + r * shape.num_kv_blocks +
                                              std::clamp(full_counts[r], 0, shape.num_kv_blocks));
          same = same && full_counts[r] == static_cast<int>(want_full.size()) && got_full == want_full;
        } else {
          same = same && full_counts[r] == -1;  // not written
        }
        if (!same && ++mismatches <= 3)
          UNSCOPED_INFO(fmt::format("b {} h {} query block {}: {} partial and {} full blocks, expected {} and {}", b,
                                    h, m, counts[r], full_counts[r], want_partial.size(), want_full.size()));
      }
  CHECK(mismatches == 0);
}

BlockMaskProblem mask_problem(int batch, int heads, int sq, int sk, int q_block, int kv_block, const MaskCase& m) {
  BlockMaskProblem p;
  p.batch = batch, p.heads = heads, p.seqlen_q = sq, p.seqlen_k = sk, p.q_block = q_block, p.kv_block = kv_block;
  p.mask = m.kind, p.window_left = m.left, p.window_right = m.right, p.chunk_size = m.chunk;
  return p;
}

}  // namespace

TEST_CASE("make_block_mask lists the blocks a host evaluation of the mask finds", "[block_mask][block_sparse][gpu]") {
  check_made_mask(mask_problem(1, 1, 4096, 4096, 128, 128, kMasks[1]), true, true);
  check_made_mask(mask_problem(2, 3, 1000, 777, 64, 256, kMasks[0]), true, true);
  check_made_mask(mask_problem(2, 3, 1000, 777, 64, 256, kMasks[0]), true, false);
  check_made_mask(mask_problem(1, 2, 300, 5000, 80, 48, kMasks[2]), false, true);
  check_made_mask(mask_problem(1, 1, 2049, 2049, 128, 128, kMasks[4]), true, true);
  BlockMaskProblem top_left = mask_problem(1, 1, 500, 1300, 128, 64, kMasks[1]);
  top_left.alignment = Alignment::top_left;
  check_made_mask(top_left, false, true);
}

TEST_CASE("document masking through a made block mask matches float64 and the dense mask_mod",
          "[fa3][block_mask][block_sparse][gpu]") {
  ensure_context();
  std::mt19937_64 rng(fresh_seed());
  Shape s = shape_of(1, 4096, 4096, 8, 2, 128, DType::bf16, kMasks[1]);
  auto c = Case::make(s, rng());
  REQUIRE(c.ok());
  Documents docs = Documents::make(1, s.seqlen_q, s.seqlen_k, rng);
  docs.head_rule = false;  // one block mask for every head
  REQUIRE(docs.upload().ok());
  BlockMaskProblem mp = mask_problem(1, 1, s.seqlen_q, s.seqlen_k, 128, 128, kMasks[1]);
  mp.mask_mod = kDocumentMod;
  docs.set_aux(mp.aux);
  const BlockMaskShape shape = block_mask_shape(mp);
  cuda::DeviceBuffer bufs[4];
  for (int i = 0; i < 4; ++i) {
    auto b = cuda::DeviceBuffer::allocate(std::size_t(shape.num_q_blocks) * (i % 2 ? shape.num_kv_blocks : 1) * 4);
    REQUIRE(b.ok());
    bufs[i] = std::move(*b);
  }
  mp.kv_num_blocks = static_cast<int*>(bufs[0].get()), mp.kv_indices = static_cast<int*>(bufs[1].get());
  mp.full_kv_num_blocks = static_cast<int*>(bufs[2].get()), mp.full_kv_indices = static_cast<int*>(bufs[3].get());
  REQUIRE(runtime().make_block_mask(mp).ok());

  AttentionProblem problem = c->problem();
  problem.mask_mod = kDocumentMod;
  docs.set_aux(problem.aux);
  problem.block_mask = block_mask_of(mp);
  auto sparse = dispatch::choose(problem, kSm90a, Algorithm::automatic, nullptr);
  REQUIRE(sparse.ok());
  INFO(readable_name(*sparse));
  REQUIRE(runtime().forward(problem, *sparse).ok());
  std::vector<float> o, lse;
  REQUIRE(c->read_outputs(o, lse).ok());
  std::vector<double> ref_o, ref_lse;
  reference_attention(s, c->q(), c->k(), c->v(), ref_o, ref_lse, {},
                      [&](int b, int h, int i, int j) { return docs.visible(s, b, h, i, j); });
  check_ok(compare(s, o, lse, ref_o, ref_lse), s.dtype);

  AttentionProblem dense = problem;  // the same mask_mod, every block computed
  dense.block_mask = BlockMask{};
  REQUIRE(c->poison_outputs().ok());
  REQUIRE(runtime().forward(dense).ok());
  std::vector<float> o_dense, lse_dense;
  REQUIRE(c->read_outputs(o_dense, lse_dense).ok());
  check_ok(compare(s, o_dense, lse_dense, ref_o, ref_lse), s.dtype);
}
