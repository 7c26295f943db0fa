// A problem's shape as sweeps and tuned tables name it: everything of an AttentionProblem but the tensors,
// strides, scale and stream.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "flashjit/config.hpp"
#include "flashjit/decode.hpp"
#include "flashjit/error.hpp"
#include "flashjit/problem.hpp"

namespace flashjit::tune {

struct ProblemShape {
  DType dtype = DType::bf16;
  int batch = 1;
  int seqlen_q = 1;
  int seqlen_k = 1;
  int heads_q = 1;
  int heads_kv = 1;
  int head_dim = 128;
  MaskKind mask = MaskKind::none;
  int window_left = -1;  // sliding_window only
  int window_right = -1; // sliding_window only
  int chunk_size = 0;    // chunked masks only

  bool operator==(const ProblemShape&) const = default;
};

// The problem with this shape and no tensors (null pointers): enough for the dispatcher and FLOP counts.
AttentionProblem to_problem(const ProblemShape& shape);

// Resets the mask constants the shape's mask does not use (so equal problems compare equal).
ProblemShape normalized(ProblemShape shape);
// Every problem with the shape, each naming its field (batch >= 1, heads_q % heads_kv == 0, ...).
std::vector<ConfigIssue> check_shape(const ProblemShape& shape);

// JSON object; the mask constants appear only for the masks that use them.
nlohmann::ordered_json to_json(const ProblemShape& shape);
// Parses to_json()'s form (missing optional fields keep their defaults); errors name the field.
Result<ProblemShape> shape_from_json(const nlohmann::json& j);

// "bf16 B1 Sq4096 Sk4096 H32/8 D128 causal"
std::string describe(const ProblemShape& shape);

// A decode problem's shape as sweeps name it (kind "decode"): everything of a DecodeProblem the split planner
// and the kernel configs depend on. seqlen_k is the host bound on the sequences' lengths (max_seqlen_k).
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

  bool operator==(const DecodeShape&) const = default;
};

// The problem with this shape and no tensors (null pointers): enough for dispatch::plan_decode. A paged
// shape gets the page table of its longest sequence (max_pages_per_seq = ceil(seqlen_k / page_size)).
DecodeProblem to_problem(const DecodeShape& shape);
// Resets page_size for a contiguous layout (so equal problems compare equal).
DecodeShape normalized(DecodeShape shape);
// Every problem with the shape, each naming its field as sweeps spell it (q_len, page_size, ...).
std::vector<ConfigIssue> check_shape(const DecodeShape& shape);
// "decode bf16 B16 q1 Sk8192 H32/8 D128 paged16 window256"
std::string describe(const DecodeShape& shape);

}  // namespace flashjit::tune
