// The FA3 work tile's rows (templates/fa3/rows.cuh) on the host: a packed-GQA tile's rows must be every
// (position, query head) of its KV head's group exactly once, in the order the Q box lands in shared memory
// (columns, head in group, position: row = position * group + head), and the spans of each warpgroup's 64 rows
// must cover the positions those rows hold.
#include <set>
#include <utility>

#define __device__
#include "fa3/rows.cuh"
#undef __device__

#include "support/catch.hpp"

using flashjit::AttentionParams;
using flashjit::fa3::Rows;

namespace {

template <int kBM>
void check_packed(int heads_q, int heads_kv) {
  AttentionParams p{};
  p.heads_q = heads_q, p.heads_kv = heads_kv, p.group = heads_q / heads_kv;
  const Rows<true, kBM> rows(p);
  INFO("block_m " << kBM << ", heads " << heads_q << "/" << heads_kv);
  REQUIRE(rows.positions() * p.group == kBM);
  CHECK(rows.tile_heads(p) == heads_kv);
  for (int kv = 0; kv < heads_kv; ++kv) {
    CHECK(rows.kv_head(p, kv) == kv);
    const int first = rows.first_query_head(kv);
    std::set<std::pair<int, int>> seen;  // (position, query head)
    for (int r = 0; r < kBM; ++r) {
      const int pos = rows.position(r), head = first + rows.head_in_group(r);
      CHECK(r == pos * p.group + rows.head_in_group(r));  // the TMA box order
      CHECK(head / p.group == kv);                        // a query head of this KV head
      seen.insert({pos, head});
    }
    CHECK(seen.size() == static_cast<size_t>(kBM));
  }
  for (int wg = 0; wg < kBM / 64; ++wg) {
    int lo, hi;
    rows.span(64 * wg, 64 * wg + 64, lo, hi);
    for (int r = 64 * wg; r < 64 * wg + 64; ++r) {
      CHECK(rows.position(r) >= lo);
      CHECK(rows.position(r) < hi);
    }
    CHECK(rows.position(64 * wg) == lo);
    CHECK(rows.position(64 * wg + 63) == hi - 1);
  }
}

}  // namespace

TEST_CASE("fa3 rows: packed GQA tiles hold each (position, head) of their group once, in the Q box's order",
          "[templates][fa3]") {
  check_packed<128>(32, 8);   // llama3: 4 per group, 32 positions
  check_packed<192>(64, 8);   // gpt-oss: 8 per group, 24 positions
  check_packed<192>(12, 4);   // 3 per group: a warpgroup's rows split a position
  check_packed<64>(64, 1);    // one KV head: 64 per group, one position
  check_packed<128>(16, 16);  // MHA: group 1, the plain order
}

TEST_CASE("fa3 rows: plain tiles are consecutive positions of one query head", "[templates][fa3]") {
  AttentionParams p{};
  p.heads_q = 32, p.heads_kv = 8, p.group = 4;
  const Rows<false, 128> rows(p);
  CHECK(rows.positions() == 128);
  CHECK(rows.tile_heads(p) == 32);
  CHECK(rows.first_query_head(13) == 13);
  CHECK(rows.kv_head(p, 13) == 3);
  for (int r = 0; r < 128; ++r) {
    CHECK(rows.position(r) == r);
    CHECK(rows.head_in_group(r) == 0);
  }
}
