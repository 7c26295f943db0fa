// KernelConfig: what is compiled. Only the config (canonical JSON) plus the template texts, NVRTC version,
// compile options and flashjit version form a kernel's cache key. Mask *constants* (window sizes, chunk
// size) are run-time arguments of the problem, so one compiled kernel serves every window.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flashjit/error.hpp"

namespace flashjit {

enum class Algorithm { naive, fa2, fa3, automatic };
enum class DType { bf16, fp16 };
enum class MaskKind { none, causal, sliding_window, chunked, chunked_causal };
// grid: one tile per CTA (heavy tiles first for causal masks); persistent (fa3): one CTA per SM strides
// over all tiles.
enum class Scheduler { grid, persistent };

const char* to_string(Algorithm a);
const char* to_string(DType d);
const char* to_string(MaskKind m);
const char* to_string(Scheduler s);
std::optional<Algorithm> parse_algorithm(std::string_view s);
std::optional<DType> parse_dtype(std::string_view s);
std::optional<MaskKind> parse_mask(std::string_view s);
std::optional<Scheduler> parse_scheduler(std::string_view s);

// A CUDA target: sm_80, sm_86, sm_89, sm_90, sm_90a, ...
struct Arch {
  int sm = 90;             // compute capability major*10 + minor
  bool accelerated = true; // the "a" suffix (wgmma, setmaxnreg); only meaningful for sm_90 and newer

  std::string to_string() const;                 // "sm_90a"
  static std::optional<Arch> parse(std::string_view s);
  bool operator==(const Arch&) const = default;
};

struct KernelConfig {
  Algorithm algorithm = Algorithm::fa2;
  Arch arch{};
  DType dtype = DType::bf16;
  int head_dim = 128;
  int block_m = 128;   // query rows per CTA
  int block_n = 64;    // keys per main-loop step
  int stages = 2;      // K/V shared-memory pipeline depth (cp.async groups in flight)
  int warps = 4;       // warps per CTA (fa2, naive); consumer warpgroups for fa3
  MaskKind mask = MaskKind::none;
  Scheduler scheduler = Scheduler::grid;
  // Ragged batches (AttentionProblem::cu_seqlens_q/k): per-sequence offsets and lengths read by the kernel.
  // A compile-time variant, so fixed-length kernels keep their code; the dispatcher sets it from the problem.
  bool varlen = false;

  bool operator==(const KernelConfig&) const = default;
};

struct ConfigIssue {
  std::string field;    // "block_m"
  std::string message;  // "must be a multiple of 16 * warps (64)"
};

// Every problem with the config, each naming its field; empty when valid. Shared by the dispatcher, the
// CLI and the autotuner.
std::vector<ConfigIssue> validate(const KernelConfig& config);
// validate() as a Status (invalid_config, one line per issue).
Status check(const KernelConfig& config);

// Shared memory the kernel needs, in bytes (dynamic allocation).
int shared_memory_bytes(const KernelConfig& config);
// Threads per CTA.
int threads_per_cta(const KernelConfig& config);

// Canonical JSON: every field, by name, in a fixed order, no whitespace. Round-trips through parse.
std::string to_json(const KernelConfig& config);
// Accepts canonical JSON or any JSON object with a subset of the fields (missing ones keep defaults).
Result<KernelConfig> config_from_json(std::string_view json);
// "key=value" pairs (algorithm=fa2 head_dim=64 ...), the CLI's inline form.
Result<KernelConfig> config_from_pairs(const std::vector<std::string>& pairs);
// Readable name: fa2_bf16_d128_bm128_bn64_s2_w4_causal_sm90a (…_causal_varlen_sm90a for a varlen kernel).
std::string readable_name(const KernelConfig& config);

}  // namespace flashjit
