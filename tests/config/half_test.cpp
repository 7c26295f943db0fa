// Host-side float <-> bf16/fp16 conversions (round to nearest even), used to fill `flashjit run`'s
// inputs and read its outputs.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>

#include "config/half.hpp"
#include "support/catch.hpp"

using namespace flashjit;

TEST_CASE("bf16 conversion rounds to nearest even", "[common]") {
  CHECK(float_to_bf16(1.0f) == 0x3f80);
  CHECK(float_to_bf16(-2.0f) == 0xc000);
  CHECK(float_to_bf16(0.0f) == 0x0000);
  CHECK(float_to_bf16(-0.0f) == 0x8000);
  CHECK(float_to_bf16(1.0f + 1.0f / 256) == 0x3f80);      // halfway, down to even
  CHECK(float_to_bf16(1.0f + 3.0f / 256) == 0x3f82);      // halfway, up to even
  CHECK(float_to_bf16(1.0f + 1.0f / 256 + 1.0f / 65536) == 0x3f81);  // above halfway
  CHECK(float_to_bf16(std::numeric_limits<float>::infinity()) == 0x7f80);
  CHECK(float_to_bf16(std::numeric_limits<float>::max()) == 0x7f80);  // rounds up to inf
  CHECK(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const float f = bf16_to_float(static_cast<std::uint16_t>(h));
    if (!std::isnan(f)) REQUIRE(float_to_bf16(f) == h);
  }
}

TEST_CASE("fp16 conversion rounds to nearest even, with subnormals and overflow", "[common]") {
  CHECK(float_to_fp16(1.0f) == 0x3c00);
  CHECK(float_to_fp16(-2.0f) == 0xc000);
  CHECK(float_to_fp16(65504.0f) == 0x7bff);
  CHECK(float_to_fp16(65519.0f) == 0x7bff);
  CHECK(float_to_fp16(65520.0f) == 0x7c00);  // halfway to the next binade: inf
  CHECK(float_to_fp16(std::ldexp(1.0f, -24)) == 0x0001);
  CHECK(float_to_fp16(std::ldexp(1.0f, -25)) == 0x0000);  // halfway to the smallest subnormal: even (0)
  CHECK(float_to_fp16(std::ldexp(3.0f, -26)) == 0x0001);  // 0.75 units: up
  CHECK(float_to_fp16(std::ldexp(1.0f, -14)) == 0x0400);  // smallest normal
  CHECK(float_to_fp16(1.0f + 1.0f / 2048) == 0x3c00);     // halfway, down to even
  CHECK(float_to_fp16(1.0f + 3.0f / 2048) == 0x3c02);     // halfway, up to even
  CHECK(std::isnan(fp16_to_float(float_to_fp16(std::numeric_limits<float>::quiet_NaN()))));
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const float f = fp16_to_float(static_cast<std::uint16_t>(h));
    if (!std::isnan(f)) REQUIRE(float_to_fp16(f) == h);
  }
#ifdef __FLT16_MAX__
  // Against the compiler's own conversion: random bit patterns, half of them in and around fp16's range.
  std::mt19937 rng(7);
  std::uniform_int_distribution<std::uint32_t> near_range(0x32000000u, 0x47ffffffu);  // 2^-27 .. 2^17
  for (int i = 0; i < 2000000; ++i) {
    std::uint32_t bits = i % 2 ? rng() : near_range(rng) | (rng() & 0x80000000u);
    float f;
    std::memcpy(&f, &bits, sizeof f);
    if (std::isnan(f)) continue;
    const _Float16 h = static_cast<_Float16>(f);
    std::uint16_t expected;
    std::memcpy(&expected, &h, sizeof expected);
    REQUIRE(float_to_fp16(f) == expected);
  }
#endif
}
