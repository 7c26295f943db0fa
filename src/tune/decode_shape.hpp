// A decode problem's shape as sweeps name it (kind "decode"): everything of a DecodeProblem the split planner
// and the kernel configs depend on. seqlen_k is the host bound on the sequences' lengths (max_seqlen_k).
#pragma once

#include <string>
#include <vector>

#include "flashjit/config.hpp"
#include "flashjit/decode.hpp"

namespace flashjit::tune {

struct DecodeShape {
  DType dtype = DType::bf16;
  int batch = 1;
  int q_len = 1;  // new tokens per sequence, 1..16
  int heads_q = 1;
  int heads_kv = 1;
  int head_dim = 128;
  int seqlen_k = 1;
  KvLayout layout = KvLayout::contiguous;
  int page_size = 0;     // paged only: a power of two in [1, 256]
  int window_left = -1;  // -1: no sliding window
  // Variants, as dispatch::ProblemShape's.
  bool softcap = false;
  bool alibi = false;
  bool sinks = false;
  // User snippets (DecodeProblem::score_mod, mask_mod), as dispatch::ProblemShape's: to_problem points at them.
  std::string score_mod;
  std::string mask_mod;
  // Fused with an append (DecodeProblem::new_len = q_len: the new tokens' keys and values written into the cache
  // first), so the append kernels that call loads are compiled too.
  bool append = false;

  bool operator==(const DecodeShape&) const = default;
};

// The problem with this shape and no tensors (null pointers): enough for dispatch::plan_decode. A paged
// shape gets the page table of its longest sequence (max_pages_per_seq = ceil(seqlen_k / page_size)). The
// variants as dispatch::to_problem sets them (a stand-in host address for the arrays, never read); a fused append
// brings q_len new rows per sequence (new_len, without tensors).
DecodeProblem to_problem(const DecodeShape& shape);
// Resets page_size for a contiguous layout (so equal problems compare equal).
DecodeShape normalized(DecodeShape shape);
// Every problem with the shape, each naming its field as sweeps spell it (q_len, page_size, ...).
std::vector<ConfigIssue> check_shape(const DecodeShape& shape);
// "decode bf16 B16 q1 Sk8192 H32/8 D128 paged16 window256", then " softcap alibi sinks" for the variants on and
// " append" for a fused append
std::string describe(const DecodeShape& shape);

}  // namespace flashjit::tune
