// An append problem's shape as sweeps name it (kind "append"): what selects the kernels Runtime::append_kv and
// prepare_append_kv load (dispatch::append_prepare_kernels: dtype, head dim, layout, page size; the size class is
// picked per call), and the KV heads the model has, checked as AppendProblem checks them.
#pragma once

#include <string>
#include <vector>

#include "flashjit/config.hpp"

namespace flashjit::tune {

struct AppendShape {
  DType dtype = DType::bf16;
  int heads_kv = 1;
  int head_dim = 128;
  KvLayout layout = KvLayout::contiguous;
  int page_size = 0;  // paged only: a power of two in [1, 256]

  bool operator==(const AppendShape&) const = default;
};

// Resets page_size for a contiguous layout (so equal problems compare equal).
AppendShape normalized(AppendShape shape);
// Every problem with the shape, each naming its field as sweeps spell it (heads_kv, page_size, ...).
std::vector<ConfigIssue> check_shape(const AppendShape& shape);
// "append bf16 H8 D128 paged16"
std::string describe(const AppendShape& shape);

}  // namespace flashjit::tune
