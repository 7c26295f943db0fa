// The FA3 tile schedulers (templates/fa3/scheduler.cuh) run on the host here: the header is plain C++ once
// the CUDA qualifiers and built-ins it uses are defined. Every work tile must be visited exactly once, and
// for causal masks the persistent schedule must keep the CTAs' work balanced (a CTA's work tile costs about
// its m-block + 1 key tiles).
#include <algorithm>
#include <map>
#include <tuple>
#include <vector>

namespace {
struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};
Dim3 blockIdx, gridDim;  // what the scheduler reads, set per simulated CTA
using std::min;
}  // namespace

#define __device__
#include "fa3/scheduler.cuh"
#undef __device__

#include "support/catch.hpp"

using flashjit::AttentionParams;
using flashjit::fa3::TileScheduler;
using flashjit::fa3::WorkTile;

namespace {

struct Visit {
  std::map<std::tuple<int, int, int>, int> count;  // (m-block, head, batch) -> visits
  std::vector<long long> work;                       // per CTA: Σ (m-block + 1)
};

template <bool kPersistent, bool kHeavyFirst>
Visit simulate(int m_blocks, int heads, int batch, int ctas) {
  AttentionParams p{};
  p.seqlen_q = m_blocks * 128, p.heads_q = heads, p.batch = batch;
  Visit v;
  if constexpr (kPersistent) {
    gridDim = {static_cast<unsigned>(ctas), 1, 1};
    for (int c = 0; c < ctas; ++c) {
      blockIdx = {static_cast<unsigned>(c), 0, 0};
      long long w = 0;
      for (TileScheduler<true, kHeavyFirst> s(p, 128, heads); s.valid(); s.advance()) {
        const WorkTile t = s.tile();
        ++v.count[{t.m_block, t.head, t.batch}];
        w += t.m_block + 1;
      }
      v.work.push_back(w);
    }
  } else {
    gridDim = {static_cast<unsigned>(m_blocks), static_cast<unsigned>(heads), static_cast<unsigned>(batch)};
    for (int b = 0; b < batch; ++b)
      for (int h = 0; h < heads; ++h)
        for (int m = 0; m < m_blocks; ++m) {
          blockIdx = {static_cast<unsigned>(m), static_cast<unsigned>(h), static_cast<unsigned>(b)};
          TileScheduler<false, kHeavyFirst> s(p, 128, heads);
          const WorkTile t = s.tile();
          ++v.count[{t.m_block, t.head, t.batch}];
          s.advance();
          CHECK_FALSE(s.valid());  // one tile per CTA
        }
  }
  return v;
}

bool each_tile_once(const Visit& v, int m_blocks, int heads, int batch) {
  if (static_cast<long long>(v.count.size()) != 1LL * m_blocks * heads * batch) return false;
  for (const auto& [tile, n] : v.count) {
    const auto [m, h, b] = tile;
    if (n != 1 || m < 0 || m >= m_blocks || h < 0 || h >= heads || b < 0 || b >= batch) return false;
  }
  return true;
}

double imbalance(const Visit& v) {  // busiest CTA / mean
  long long total = 0, most = 0;
  for (long long w : v.work) total += w, most = std::max(most, w);
  return static_cast<double>(most) * v.work.size() / static_cast<double>(total);
}

}  // namespace

TEST_CASE("fa3 scheduler: every work tile exactly once", "[templates][fa3]") {
  for (int m : {1, 3, 8, 12, 16, 33})
    for (int h : {1, 5, 32})
      for (int b : {1, 2}) {
        const int tiles = m * h * b;
        INFO("m-blocks " << m << ", heads " << h << ", batch " << b);
        CHECK(each_tile_once(simulate<false, false>(m, h, b, 0), m, h, b));
        CHECK(each_tile_once(simulate<false, true>(m, h, b, 0), m, h, b));
        // The launcher gives a persistent kernel min(tiles, SMs) CTAs; odd counts exercise partial rounds.
        for (int ctas : {1, 7, 132}) {
          const int grid = std::min(tiles, ctas);
          INFO("CTAs " << grid);
          CHECK(each_tile_once(simulate<true, false>(m, h, b, grid), m, h, b));
          CHECK(each_tile_once(simulate<true, true>(m, h, b, grid), m, h, b));
        }
      }
}

TEST_CASE("fa3 scheduler: persistent causal CTAs get about equal work", "[templates][fa3]") {
  // llama3 on 132 SMs (H32, B1) at S 1024 / 1536 / 2048 / 8192 / 16384, and 16 heads at S 16384: the old
  // stride gave 1.38 / 1.90 / 1.21 / 1.08 / 1.06 / 1.57 here.
  const std::pair<int, int> shapes[] = {{8, 32}, {12, 32}, {16, 32}, {64, 32}, {128, 32}, {128, 16}};
  for (auto [m, h] : shapes) {
    INFO("m-blocks " << m << ", heads " << h);
    CHECK(imbalance(simulate<true, true>(m, h, 1, 132)) < 1.12);
  }
}
