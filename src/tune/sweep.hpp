// Sweep files (configs/*.json; the schema is in configs/README.md): attention problems (prefill, and decode
// over a KV cache) and appends of new keys and values to a KV cache, written as cross products of values, lists
// and ranges, and for autotuning an optional space of candidate tiles.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "dispatch/problem_shape.hpp"
#include "flashjit/config.hpp"
#include "flashjit/error.hpp"
#include "tune/append_shape.hpp"
#include "tune/decode_shape.hpp"

namespace flashjit::tune {

// Candidate tiles for the autotuner. An empty list means the algorithm's default (see candidates.hpp).
// At most this many configs of a candidate space are enumerated for one problem; a sweep whose space is larger
// is refused when it is read.
inline constexpr std::size_t kMaxCandidates = 100000;

struct CandidateSpace {
  std::vector<Algorithm> algorithms;  // empty: the dispatcher's algorithm for each problem
  std::vector<int> block_m;           // empty: derived from warps (fa3: 64 rows per warpgroup; fa2: 16 or 32 per warp)
  std::vector<int> block_n;
  std::vector<int> stages;
  std::vector<int> warps;             // warps (fa2, naive) or consumer warpgroups (fa3)
  std::vector<Scheduler> schedulers;  // empty: the default scheduler

  bool operator==(const CandidateSpace&) const = default;
};

struct Sweep {
  std::string name;                    // the "name" field, else the file's stem
  std::string description;
  // Prefill entries: expanded, normalized, duplicates dropped, in file order.
  std::vector<dispatch::ProblemShape> problems;
  std::vector<DecodeShape> decode;     // "kind": "decode" entries, likewise (precompile only; not autotuned)
  std::vector<AppendShape> append;     // "kind": "append" entries, likewise (precompile only; nothing to tune)
  CandidateSpace candidates;           // prefill problems only
};

// Parses a sweep. Errors (ErrorCode::invalid_argument) read "sweep ORIGIN: problems[2].seqlen_q: ...".
Result<Sweep> parse_sweep(std::string_view text, const std::string& origin);
// Reads and parses a sweep file (ErrorCode::io when it cannot be read).
Result<Sweep> load_sweep(const std::filesystem::path& path);

}  // namespace flashjit::tune
