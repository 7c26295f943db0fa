// Host side of `flashjit run`: random bf16/fp16 inputs and the comparison of an output with the reference.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include <initializer_list>

#include "flashjit/config.hpp"
#include "flashjit/error.hpp"

namespace flashjit::cli {

// Fills `out` with values uniform in [-1, 1], rounded to `dtype` (nearest even).
void fill_uniform(std::vector<std::uint16_t>& out, DType dtype, std::mt19937& rng);

struct Comparison {
  double rel_l2 = 0;            // ||out - ref|| / ||ref|| (absolute when ref is all zeros)
  std::size_t non_finite = 0;   // NaN or inf elements in out or ref
  std::size_t first_non_finite = 0;
};

// Element-wise comparison in double.
Comparison compare(const std::vector<std::uint16_t>& out, const std::vector<std::uint16_t>& ref, DType dtype);

// Largest |a - b| over log-sum-exp rows where both are finite; inf when one is finite and the other not.
double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b);

// Elements of a tensor with these dimensions, refusing products that overflow 64 bits (`what` names it).
Result<std::size_t> elements(std::initializer_list<int> dims, const char* what);

}  // namespace flashjit::cli
