// The FA2 shared-memory tile's addressing (templates/fa2/smem_tile.cuh) on the host: the kernels rely on
// two identities that let them keep one register per ldmatrix operand and one address per copy pass, and
// these are checked here against the plain swizzle formula for every row, chunk and tile shape in use.
#include <set>
#include <tuple>

namespace {
struct uint4 {
  unsigned x, y, z, w;
};
unsigned __cvta_generic_to_shared(const void*) { return 0; }
}  // namespace

#define __device__
#define __forceinline__ inline
#include "fa2/smem_tile.cuh"  // its #pragma unroll lines: -Wno-unknown-pragmas in tests/CMakeLists.txt
#undef __forceinline__
#undef __device__

#include "support/catch.hpp"

namespace {

// Chunk 2c + sub of the fragment row: Fragments::at must equal the swizzled offset of that chunk, for
// tiles at any 128-byte aligned address and every m-tile step i.
template <int kRows, int kCols>
void check_fragments() {
  using Tile = flashjit::fa2::SmemTile<kRows, kCols>;
  INFO("tile " << kRows << " x " << kCols);
  for (unsigned tile : {0u, 128u, 4096u, 3u * 16384u + 1152u})
    for (int row0 = 0; row0 < 16; ++row0)
      for (int sub = 0; sub < 2; ++sub) {
        const typename Tile::Fragments f(row0, sub);
        for (int i = 0; 16 * i + row0 < kRows; ++i)
          for (int c = 0; 2 * c + sub < kCols / 8; ++c)
            REQUIRE(f.at(tile, i, c) == tile + Tile::offset(row0 + 16 * i, 2 * c + sub));
      }
}

// load_async's per-thread plan: over all threads and passes, every (row, chunk) of the tile exactly once;
// in the uniform plan a thread's shared offsets are its first one plus j * pass_rows whole rows.
template <int kRows, int kCols, int kThreads>
void check_passes() {
  using Tile = flashjit::fa2::SmemTile<kRows, kCols>;
  using P = typename Tile::template Passes<kThreads>;
  INFO("tile " << kRows << " x " << kCols << ", " << kThreads << " threads");
  std::set<std::tuple<int, int>> seen;
  for (int tid = 0; tid < kThreads; ++tid)
    for (int j = 0; j < P::kCount; ++j) {
      int row, chunk;
      if (P::kUniform) {
        row = tid / Tile::kChunks + j * P::kPassRows, chunk = tid % Tile::kChunks;
        REQUIRE(Tile::offset(row, chunk) ==
                Tile::offset(tid / Tile::kChunks, chunk) + j * P::kPassRows * Tile::kRowElems * 2);
      } else {
        const int i = tid + j * kThreads;
        if (i >= kRows * Tile::kChunks) continue;
        row = i / Tile::kChunks, chunk = i % Tile::kChunks;
      }
      REQUIRE(row < kRows);
      REQUIRE(seen.insert({row, chunk}).second);
    }
  REQUIRE(seen.size() == static_cast<std::size_t>(kRows * Tile::kChunks));
}

}  // namespace

TEST_CASE("fa2 smem tile: ldmatrix fragment addresses equal the swizzled offsets", "[templates]") {
  check_fragments<128, 64>();
  check_fragments<64, 96>();
  check_fragments<64, 128>();
  check_fragments<128, 256>();
  check_fragments<16, 128>();
}

TEST_CASE("fa2 smem tile: the copy plan covers every chunk once, uniform plans step by whole rows",
          "[templates]") {
  STATIC_REQUIRE(flashjit::fa2::SmemTile<64, 128>::Passes<128>::kUniform);
  STATIC_REQUIRE(flashjit::fa2::SmemTile<128, 64>::Passes<128>::kUniform);
  STATIC_REQUIRE(!flashjit::fa2::SmemTile<64, 96>::Passes<128>::kUniform);  // 12 chunks per row
  check_passes<64, 128, 128>();
  check_passes<32, 128, 128>();
  check_passes<128, 64, 128>();
  check_passes<64, 256, 256>();
  check_passes<64, 96, 128>();
  check_passes<128, 96, 256>();
  check_passes<64, 256, 128>();
}
