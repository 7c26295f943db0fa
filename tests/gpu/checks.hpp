// The GPU tests' Catch checks of the harness's comparisons (harness.hpp stays free of Catch: the soak tool links
// it).
#pragma once

#include "harness.hpp"
#include "support/catch.hpp"

namespace flashjit::test {

// No NaN, no empty-row violation, O within the dtype's tolerance and LSE within kPrefillLseTolerance.
inline void check_ok(const Comparison& cmp, DType dtype) {
  INFO(cmp.to_string());
  CHECK(cmp.nan_count == 0);
  CHECK(cmp.empty_row_violations == 0);
  CHECK(cmp.rel_l2 <= tolerance(dtype));
  CHECK(cmp.lse_max_abs <= kPrefillLseTolerance);
}

// The same, and no guard row or pad element written.
inline void check_ok(const GuardedComparison& r, DType dtype) {
  check_ok(r.cmp, dtype);
  INFO(r.to_string());
  CHECK(r.guard_written == 0);
}

}  // namespace flashjit::test
