// Runtime: owns the disk cache and the loaded kernels; picks, compiles or loads, and launches.
// Thread-safe: one Runtime may serve many threads and several devices.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "flashjit/append.hpp"
#include "flashjit/block_mask.hpp"
#include "flashjit/config.hpp"
#include "flashjit/decode.hpp"
#include "flashjit/error.hpp"
#include "flashjit/kernel_info.hpp"
#include "flashjit/log.hpp"
#include "flashjit/problem.hpp"

namespace flashjit {

// What a Runtime runs with. Every field is optional: an unset one takes the environment variable named in its
// comment (read once, in Runtime::create), else the default given there. See README "Caches and environment".
struct RuntimeOptions {
  // Disk cache folder; default FLASHJIT_CACHE_DIR, else $XDG_CACHE_HOME/flashjit, else ~/.cache/flashjit.
  std::optional<std::filesystem::path> cache_dir;
  // Size cap of the disk cache in MiB (0: none); default FLASHJIT_CACHE_MAX_MB (unset: none).
  std::optional<std::uint64_t> cache_max_mb;
  // false: precompiled-only, a cache miss is an error; default FLASHJIT_JIT (unset or anything but 0: true).
  std::optional<bool> jit;
  // Tuned tables (files, or folders of *.json), read in this order before <cache dir>/tuned/*.json (which is
  // always read when it exists); default FLASHJIT_TUNED (':'-separated; unset: none).
  std::optional<std::vector<std::filesystem::path>> tuned_tables;
  // Programmatic dependent launch of the decode and merge kernels on sm_90+ (false: plain launches); default
  // FLASHJIT_PDL (unset or anything but 0: true).
  std::optional<bool> pdl;
  // DecodeProblem::check_pages for every decode (a debug check on the host that synchronizes the stream; a
  // problem's own check_pages still applies when this is false); default FLASHJIT_CHECK_PAGES (1: true, else false).
  std::optional<bool> check_pages;
  // Messages of this level and the more severe ones are reported; default FLASHJIT_LOG (debug, info, warn or
  // error; unset or another value: warn).
  std::optional<LogLevel> log_level;
  // Receives this Runtime's messages (see LogCallback); null (default): "flashjit LEVEL: message" lines on stderr.
  LogCallback log_callback;
  // AttentionProblem::check_seqlens for every ragged forward and every one with seqused_k over contiguous keys (a
  // debug check on the host that synchronizes the stream); default FLASHJIT_CHECK_SEQLENS (1: true, else false).
  std::optional<bool> check_seqlens;
  // Compile cache misses with NVRTC in this process (true) or in a worker process (false: a compiler that
  // crashes or hangs fails that kernel, the process lives); default FLASHJIT_COMPILE_IN_PROCESS (1: true, else
  // false). Where no worker is found or none can start, compiles run in process (with one warning).
  std::optional<bool> compile_in_process;
  // The worker: a flashjit executable (its hidden `nvrtc-worker` command); default FLASHJIT_COMPILE_WORKER, else
  // the `flashjit` found beside the library or program holding this runtime (the build tree, bin/ beside lib/).
  std::optional<std::filesystem::path> compile_worker;
  // Seconds one out-of-process compile may take before its worker is killed and the kernel fails; default
  // FLASHJIT_COMPILE_TIMEOUT (unset: 600).
  std::optional<double> compile_timeout_s;
};

// A GPU that select() answers for without one being present: its arch, its multiprocessors (the decode split
// plan depends on them) and, optionally, its name as the driver reports it (`flashjit info`): the tuned tables
// stamped for that name and arch are then consulted, as on that GPU; empty: the heuristics alone.
struct Target {
  Arch arch{};
  int sms = 132;  // H100 SXM, H200
  std::string gpu;
};

// What a decode launches (Runtime::select_decode): the split kernel, how the keys are split, the combine kernel
// when the splits merge through it (none when the keys are not split or the splits merge in a thread-block
// cluster), the append kernel before them when the problem brings new keys and values (new_len > 0), and the
// workspace the partial states (and a fused append's new lengths) take.
struct DecodeSelection {
  DecodeKernelConfig split;
  int num_splits = 1;
  int keys_per_split = 1;
  std::optional<CombineKernelConfig> combine;
  std::optional<AppendKernelConfig> append;
  std::size_t workspace_bytes = 0;
};

class Runtime {
 public:
  static Result<std::unique_ptr<Runtime>> create(RuntimeOptions options = {});
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Picks a config for the problem (algorithm auto), compiles or loads it, launches on problem.stream.
  Status forward(const AttentionProblem& problem);
  // Launches with an explicit config (tools, tests, autotuner); it must be valid and support the problem.
  Status forward(const AttentionProblem& problem, const KernelConfig& config);

  // Everything forward() does but the launch: picks (or checks) the config, compiles or loads it and loads
  // it on the problem's device; the tensors are not read. A later forward() of the same kind of problem then
  // neither compiles nor loads, so it may be captured into a CUDA graph. Returns the config.
  Result<KernelConfig> prepare(const AttentionProblem& problem);
  Result<KernelConfig> prepare(const AttentionProblem& problem, const KernelConfig& config);

  // Token generation against a KV cache (see decode.hpp): the append of the new keys and values when the problem
  // brings them (new_len > 0), split-KV attention, then the combine pass when the keys were split. Asynchronous on problem.stream; after prepare_decode() (or a first decode()) of
  // the same kind of problem on that stream, nothing is compiled, loaded or allocated: graph-capturable.
  // prepare_decode loads the kernels and reserves the workspace of every batch up to problem.batch and any
  // max_seqlen_k (the split kernel's shape and the split count change with both).
  //
  // Without a caller workspace, the split partials go to the runtime's workspace of (device, stream): the
  // decodes of one stream share it, ordered by the stream (CU_STREAM_PER_THREAD counts per thread). Threads
  // may share a stream (the legacy default stream too): each decode's kernels enter it together. A graph
  // captured on a stream keeps pointing at that stream's workspace: do not replay two such graphs, or one
  // and a decode on that stream, concurrently on other streams (give each a caller workspace instead), and
  // do not replay it after release_decode_workspace or after the Runtime is destroyed.
  Status decode(const DecodeProblem& problem);
  Status prepare_decode(const DecodeProblem& problem);
  // Frees the runtime's decode workspace of a stream on every device (after synchronizing the stream), e.g.
  // before the caller destroys the stream; a later decode on it allocates again.
  Status release_decode_workspace(void* stream);
  // Bytes of workspace the problem needs on its device (0 when its keys are not split or merge in a thread-block
  // cluster). They depend on the batch and on max_seqlen_k, not monotonically (a shorter cache may split into
  // more pieces): size a caller workspace for the problems it will serve, not only the longest.
  Result<std::size_t> decode_workspace_bytes(const DecodeProblem& problem) const;
  // The merge of attention states (see MergeProblem). Asynchronous; graph-capturable after a first call.
  Status merge(const MergeProblem& problem);
  // The new tokens' keys and values into a KV cache (see AppendProblem), on problem.stream: nothing synchronized
  // (unless check_pages), nothing allocated. prepare_append_kv loads every append kernel of that kind of problem
  // (dtype, head dim, layout, page size: one per size class) without launching, after which append_kv of any size
  // may be captured into a CUDA graph. A decode with new rows (DecodeProblem::new_len) runs the same kernel.
  Status append_kv(const AppendProblem& problem);
  Status prepare_append_kv(const AppendProblem& problem);
  // A block mask made on the device from a mask and a mask_mod (see BlockMaskProblem), on problem.stream:
  // nothing synchronized, nothing allocated (the caller's arrays). Its BlockMask (block_mask_of) then goes into
  // AttentionProblem::block_mask.
  Status make_block_mask(const BlockMaskProblem& problem);

  // The config forward() would use for this problem on its device.
  Result<KernelConfig> select(const AttentionProblem& problem) const;
  // ... on a GPU of `target`, which need not be present: no device is touched, and the problem's tensor pointers
  // are not read and may be null (cu_seqlens_q / cu_seqlens_k, which make a problem varlen, may be any 4-byte
  // aligned value).
  Result<KernelConfig> select(const AttentionProblem& problem, const Target& target) const;
  // The kernels and split plan decode() would use for this problem on its device, or on a GPU of `target` (the
  // tensor pointers then not read and may be null).
  Result<DecodeSelection> select_decode(const DecodeProblem& problem) const;
  Result<DecodeSelection> select_decode(const DecodeProblem& problem, const Target& target) const;

  // Kernels of any kind (prefill, decode split, combine, append), without a device.
  // A config as a text gave it (parse_config_json / parse_config_pairs) completed by the dispatcher: fields
  // not given take its choice for the config's arch (the heuristic tiles of the algorithm and head dim;
  // algorithm auto: fa3 where the arch and head dim allow it, else fa2, else naive). Not validated.
  static AnyKernelConfig resolve(const PartialConfig& config);
  // Compiles (or finds in the cache): the CLI's compile and precompile.
  Result<KernelInfo> compile(const AnyKernelConfig& config);
  // The generated CUDA source of a valid config.
  static Result<std::string> emit(const AnyKernelConfig& config);
  // The PTX NVRTC makes of it for the config's arch (what ptxas then turns into the cubin).
  static Result<std::string> emit_ptx(const AnyKernelConfig& config);
  // The cache key (hex) of a valid config: what compile() stores it under.
  static Result<std::string> kernel_key(const AnyKernelConfig& config);

  const std::filesystem::path& cache_dir() const;
  bool cache_writable() const;
  // Entries and bytes in the disk cache (scans its folder).
  Result<CacheStats> cache_stats() const;

 private:
  struct Impl;
  explicit Runtime(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The flashjit version string ("0.1.0").
const char* version();

}  // namespace flashjit
