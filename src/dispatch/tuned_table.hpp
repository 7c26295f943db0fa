// Tuned tables: what `flashjit autotune` measured on one GPU (the best config per problem bucket), and how the
// runtime uses them. Tables are loaded once per Runtime, kept only when their stamp matches the running
// system (flashjit and NVRTC versions at load, GPU name and arch per device), and looked up by the closest
// bucket; without a match the dispatcher's heuristics decide.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/log.hpp"
#include "dispatch/problem_shape.hpp"
#include "flashjit/config.hpp"
#include "flashjit/error.hpp"
#include "flashjit/problem.hpp"

namespace flashjit::dispatch {

// The system a table was measured on.
struct Stamp {
  std::string gpu;       // device name, "NVIDIA H200"
  Arch arch;             // sm_90a
  int driver = 0;        // CUDA driver version (13000); recorded, not matched
  std::string nvrtc;     // major.minor, "13.0"
  std::string flashjit;  // "0.1.0"
};

struct CandidateCounts {
  int enumerated = 0;  // from the candidate space (and the dispatcher's pick)
  int invalid = 0;     // pruned by validate() before compiling
  int spilling = 0;    // pruned by ptxas's report (spills, stack frame)
  int failed = 0;      // failed to compile, to run, or the check against the reference
  int timed = 0;
};

struct TunedEntry {
  ProblemShape problem;  // the bucket
  KernelConfig best;
  double tflops = 0;
  double median_ms = 0;
  std::optional<KernelConfig> runner_up;
  double runner_up_tflops = 0;
  std::optional<KernelConfig> heuristic;  // the dispatcher's pick without tables, when it was timed
  double heuristic_tflops = 0;
  std::optional<double> rel_l2;           // the best config against the reference; none when skipped (huge)
  CandidateCounts candidates;
};

struct TunedTable {
  Stamp stamp;
  std::string sweep;  // the sweep's name
  std::vector<TunedEntry> entries;
};

// The table as JSON (format "flashjit-tuned-table", version 1; see configs/README.md).
std::string to_json(const TunedTable& table);
// Errors (ErrorCode::invalid_argument) read "tuned table ORIGIN: entries[3].best: ...".
Result<TunedTable> parse_table(std::string_view text, const std::string& origin);
Result<TunedTable> load_table(const std::filesystem::path& path);
// Writes atomically (temporary file in the same folder, then rename), creating the folder.
Status save_table(const TunedTable& table, const std::filesystem::path& path);

// This build's flashjit version and NVRTC version with a device's name, arch and driver version.
Stamp system_stamp(const std::string& gpu, const Arch& arch, int driver);
// Why a table's stamp does not fit a system ("flashjit 0.0.9, running 0.1.0"); empty when it fits. The GPU
// name and the arch are compared only with `compare_device`.
std::string stamp_mismatch(const Stamp& table, const Stamp& system, bool compare_device);

// The tables one Runtime (or one of its devices) uses. They log (why a table or entry is skipped) through the
// logger they were made with.
class TunedTables {
 public:
  TunedTables() = default;  // logs warnings on stderr
  explicit TunedTables(log::Logger logger) : logger_(std::move(logger)) {}

  // `tuned` (runtime::Settings::tuned_tables: RuntimeOptions::tuned_tables or FLASHJIT_TUNED) first, then
  // <cache_dir>/tuned when it exists.
  static std::vector<std::filesystem::path> default_sources(const std::vector<std::filesystem::path>& tuned,
                                                            const std::filesystem::path& cache_dir);
  // Reads the tables of files and folders (their *.json, by name), keeping those stamped with this flashjit
  // and NVRTC version. Unreadable or malformed tables are skipped with a warning; version mismatches and
  // entries whose config fails validate() at debug level.
  static TunedTables load(const std::vector<std::filesystem::path>& sources, log::Logger logger);

  // Adds a table as load() does (stamp versions checked, invalid entries dropped); false when it is skipped.
  bool add(TunedTable table, const std::string& origin);
  // The tables stamped for this GPU name and arch; the others are dropped, saying why at debug level.
  TunedTables for_device(const std::string& gpu, const Arch& arch) const;
  // The distinct GPU names of the tables stamped for an arch.
  std::vector<std::string> gpus(const Arch& arch) const;

  // The best config of the closest bucket: same dtype, head dim, mask kind and heads_q / heads_kv; nearest
  // in log space over seqlen_q, seqlen_k and batch * heads_q (the sum of the absolute log ratios). Entries
  // whose config does not support the problem on `arch` are passed over. nullopt when nothing matches.
  std::optional<KernelConfig> lookup(const AttentionProblem& problem, const Arch& arch) const;

  bool empty() const { return tables_.empty(); }
  std::size_t size() const { return tables_.size(); }
  std::size_t entry_count() const { return index_.size(); }

 private:
  struct Loaded {
    TunedTable table;
    std::string origin;
  };
  // An entry as lookup() scans it.
  struct Indexed {
    DType dtype;
    int head_dim;
    MaskKind mask;
    int group;  // heads_q / heads_kv
    double log_q, log_k, log_width;
    KernelConfig config;
  };
  void index(const TunedTable& table);

  log::Logger logger_;
  std::vector<Loaded> tables_;
  std::vector<Indexed> index_;
};

}  // namespace flashjit::dispatch
