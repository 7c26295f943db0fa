#include "host_tensors.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "config/half.hpp"

namespace flashjit::cli {

void fill_uniform(std::vector<std::uint16_t>& out, DType dtype, std::mt19937& rng) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (auto& x : out) x = dtype == DType::bf16 ? float_to_bf16(uniform(rng)) : float_to_fp16(uniform(rng));
}

Comparison compare(const std::vector<std::uint16_t>& out, const std::vector<std::uint16_t>& ref, DType dtype) {
  auto to_float = dtype == DType::bf16 ? bf16_to_float : fp16_to_float;
  Comparison c;
  double diff2 = 0, ref2 = 0;
  for (std::size_t i = 0; i < out.size() && i < ref.size(); ++i) {
    const double a = to_float(out[i]), b = to_float(ref[i]);
    if (!std::isfinite(a) || !std::isfinite(b)) {
      if (c.non_finite++ == 0) c.first_non_finite = i;
      continue;
    }
    diff2 += (a - b) * (a - b);
    ref2 += b * b;
  }
  c.rel_l2 = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  return c;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (a[i] == b[i]) continue;  // also both -inf (empty rows)
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return std::numeric_limits<double>::infinity();
    worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]));
  }
  return worst;
}

Result<std::size_t> elements(std::initializer_list<int> dims, const char* what) {
  std::size_t n = 1;
  for (int d : dims)
    if (__builtin_mul_overflow(n, static_cast<std::size_t>(d), &n))
      return Error(ErrorCode::invalid_argument, fmt::format("{} has more elements than fit in 64 bits", what));
  return n;
}

}  // namespace flashjit::cli
