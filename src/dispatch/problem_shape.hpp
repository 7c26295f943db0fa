// A problem's shape as tuned tables (and sweeps) name it: everything of an AttentionProblem but the tensors,
// strides, scale and stream, with the variants as flags (whether the problem has them, not their values); the
// bucket of a tuned table's entry.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "flashjit/config.hpp"
#include "flashjit/error.hpp"
#include "flashjit/problem.hpp"

namespace flashjit::dispatch {

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
  // Variants (AttentionProblem::softcap, alibi_slopes, sinks): in the JSON only when on.
  bool softcap = false;
  bool alibi = false;
  bool sinks = false;
  // User snippets (AttentionProblem::score_mod, mask_mod): their CUDA C++ text, empty for none; in the JSON only
  // when given. to_problem's problem points at these strings (keep the shape alive while it is used).
  std::string score_mod;
  std::string mask_mod;
  // Paged keys and values (AttentionProblem::page_table): tokens per page, 0 contiguous; in the JSON only when
  // paged. to_problem's problem has stand-in tables (the dispatcher and precompile need only the page size).
  int page_size = 0;
  // An additive bias (AttentionProblem::bias): its entries' type, none without; in the JSON only when set.
  BiasType bias = BiasType::none;
  // Block sparsity (AttentionProblem::block_mask): the blocks' size (q_block = kv_block), 0 without; in the JSON
  // only when set. to_problem's problem has stand-in lists (the dispatcher needs only the blocks' size).
  int block_size = 0;
  // A relative-logits table (AttentionProblem::rel_bias) and seqused_k over contiguous keys: whether the problem has
  // them; in the JSON only when on. to_problem's problem has stand-in arrays (a table of one entry).
  bool rel_bias = false;
  bool seqused_k = false;

  bool operator==(const ProblemShape&) const = default;
};

// The cap a shape's problem gets with softcap on (Gemma 2's attention softcap): only whether it is on matters
// to the dispatcher; the autotuner times kernels with it.
inline constexpr float kShapeSoftcap = 50.f;

// The problem with this shape and no tensors (null pointers): enough for the dispatcher and FLOP counts. With a
// variant on, its device array (alibi_slopes [Hq], sinks) is a stand-in host address that tells the dispatcher the
// variant is there: a caller that runs the problem sets its own arrays (the runtime refuses a host pointer).
AttentionProblem to_problem(const ProblemShape& shape);

// Resets the mask constants the shape's mask does not use (so equal problems compare equal).
ProblemShape normalized(ProblemShape shape);
// Every problem with the shape, each naming its field (batch >= 1, heads_q % heads_kv == 0, ...).
std::vector<ConfigIssue> check_shape(const ProblemShape& shape);

// JSON object; the mask constants appear only for the masks that use them.
nlohmann::ordered_json to_json(const ProblemShape& shape);
// Parses to_json()'s form (missing optional fields keep their defaults); errors name the field.
Result<ProblemShape> shape_from_json(const nlohmann::json& j);

// "bf16 B1 Sq4096 Sk4096 H32/8 D128 causal", then " softcap alibi sinks" for the variants on,
// " smod1a2b3c4d mmod..." for the snippets (the first 8 hex digits of their text's SHA-256), " biasbf16",
// " relbias", " sequsedk" and " blocks128"
std::string describe(const ProblemShape& shape);

}  // namespace flashjit::dispatch
