// Runtime: the flow only. problem -> config (dispatch) -> kernel loaded on the device (kernels.cpp, through the
// artifact store) -> launch; the devices, the loaded kernels and the decode workspaces have files of their own.
#include "flashjit/runtime.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <mutex>
#include <set>
#include <string>

#include "cache/artifact_store.hpp"
#include "codegen/generate.hpp"
#include "compile/key.hpp"
#include "compile/nvrtc.hpp"
#include "dispatch/append_plan.hpp"
#include "dispatch/block_mask_problem.hpp"
#include "dispatch/decode_heuristics.hpp"
#include "dispatch/heuristics.hpp"
#include "dispatch/page_check.hpp"
#include "dispatch/resolve.hpp"
#include "launch/append_launch.hpp"
#include "launch/block_mask_launch.hpp"
#include "launch/decode_launch.hpp"
#include "launch/launch.hpp"
#include "runtime/compiler.hpp"
#include "runtime/decode_checks.hpp"
#include "runtime/devices.hpp"
#include "runtime/kernels.hpp"
#include "runtime/settings.hpp"
#include "runtime/targets.hpp"
#include "runtime/workspace_pool.hpp"

namespace flashjit {
namespace {

using runtime::Device;
using runtime::Devices;
using runtime::check_forced_merge;
using runtime::check_fused_append;
using runtime::check_target;
using runtime::describe;
using runtime::fill;
using runtime::kPlaceholder;
using runtime::selection_of;

}  // namespace

struct Runtime::Impl {
  runtime::Settings settings;  // resolved once, in create()
  // Declared before the kernels and workspaces, destroyed after them: those go in their devices' contexts
  // before the contexts are released (~Impl).
  Devices devices;
  cache::ArtifactStore artifacts;
  runtime::LoadedKernels kernels;
  runtime::WorkspacePool workspaces;

  Impl(runtime::Settings s, cache::DiskCache disk, dispatch::TunedTables tables)
      : settings(std::move(s)), devices(std::move(tables), settings.logger),
        artifacts(std::move(disk), settings.jit, settings.logger, runtime::compiler_of(settings)) {}

  ~Impl() {
    devices.release([&](int ordinal) {
      kernels.unload(ordinal);
      workspaces.drop(ordinal);
    });
  }

  Result<const Device*> device_of(const AttentionProblem& p) {
    auto ordinal = Devices::common_device({p.q, "q"}, {{p.k, "k"},
                                                        {p.v, "v"},
                                                        {p.o, "o"},
                                                        {p.lse, "lse"},
                                                        {p.cu_seqlens_q, "cu_seqlens_q"},
                                                        {p.cu_seqlens_k, "cu_seqlens_k"},
                                                        {p.alibi_slopes, "alibi_slopes"},
                                                        {p.sinks, "sinks"},
                                                        {p.bias, "bias"}});
    if (!ordinal.ok()) return std::move(ordinal).error();
    return devices.get(*ordinal);
  }

  Result<CUfunction> function(const AnyKernelConfig& config, const Device& dev, CUstream stream) {
    return kernels.function(config, dev, stream, artifacts);
  }

  Status run_decode(const DecodeProblem& p, bool launch_it) {
    FLASHJIT_TRY(check(p));
    FLASHJIT_TRY(check_fused_append(p));
    auto ordinal = Devices::common_device({p.q, "q"}, {{p.o, "o"}, {p.k_cache, "k_cache"}, {p.v_cache, "v_cache"},
                                                       {p.seqlens_k, "seqlens_k"}, {p.page_table, "page_table"},
                                                       {p.page_indptr, "page_indptr"},
                                                       {p.last_page_len, "last_page_len"}, {p.lse, "lse"}, {p.workspace, "workspace"},
                                                       {p.alibi_slopes, "alibi_slopes"}, {p.sinks, "sinks"},
                                                       {p.bias, "bias"},
                                                       {p.k_new, "k_new"}, {p.v_new, "v_new"},
                                                       {p.seqlens_out, "seqlens_out"}});
    if (!ordinal.ok()) return std::move(ordinal).error();
    auto found = devices.get(*ordinal);
    if (!found.ok()) return std::move(found).error();
    const Device& dev = **found;
    const dispatch::DecodePlan plan = dispatch::plan_decode(p, dev.info.arch, dev.info.sms);
    FLASHJIT_TRY(check_forced_merge(p, plan, dev));
    const auto stream = static_cast<CUstream>(p.stream);
    // A fused append writes the new lengths to seqlens_out, else to the first `lengths` bytes of the workspace
    // (the split partials behind them); the decode reads them from there.
    const bool fused = p.new_len > 0;
    const std::size_t lengths = dispatch::fused_lengths_bytes(p);
    AppendProblem append = fused ? dispatch::append_of(p, p.seqlens_out) : AppendProblem{};
    const AppendKernelConfig append_config = dispatch::append_kernel(append, dev.info.arch, dev.info.sms);
    Status st = Devices::in_context(dev, [&]() -> Status {
      auto split = function(plan.split, dev, stream);
      if (!split.ok()) return std::move(split).error();
      CUfunction combine = nullptr, append_fn = nullptr;
      if (plan.splits.num_splits > 1 && !plan.split.cluster_merge) {
        auto fn = function(plan.combine, dev, stream);
        if (!fn.ok()) return std::move(fn).error();
        combine = *fn;
      }
      if (fused) {
        auto fn = function(append_config, dev, stream);
        if (!fn.ok()) return std::move(fn).error();
        append_fn = *fn;
      }
      // prepare: the split kernels and the workspace of any batch up to this one and any max_seqlen_k (the
      // kernel and the split count change with both), the combine kernel even when this problem needs no
      // split, and the append kernels of any size, so that any of them may then be captured.
      std::size_t reserve = plan.workspace_bytes + lengths;
      if (!launch_it) {
        for (const DecodeKernelConfig& c : dispatch::decode_prepare_kernels(p, dev.info.arch, dev.info.sms)) {
          auto fn = function(c, dev, stream);
          if (!fn.ok()) return std::move(fn).error();
        }
        reserve = dispatch::decode_workspace_reserve(p, dev.info.arch, dev.info.sms);
        if (combine == nullptr && reserve > 0) {
          auto fn = function(plan.combine, dev, stream);
          if (!fn.ok()) return std::move(fn).error();
        }
        reserve += lengths;
        if (fused) FLASHJIT_TRY(load_append_kernels(append, dev, stream));
      }
      // Before the workspace is held: the checks synchronize the stream.
      if (launch_it && (p.check_pages || settings.check_pages)) {
        FLASHJIT_TRY(dispatch::check_page_table(**cuda::api(), p));
        if (fused) FLASHJIT_TRY(dispatch::check_page_table(**cuda::api(), append, p.max_seqlen_k));
      }
      unsigned char* ws = nullptr;
      runtime::WorkspacePool::Lease lease;  // held until the kernels are launched
      if (reserve > 0) {
        if (p.workspace != nullptr) {
          if (p.workspace_bytes < plan.workspace_bytes + lengths)
            return Error(ErrorCode::invalid_argument,
                         fmt::format("workspace holds {} bytes but {} splits{} need {} (Runtime::decode_workspace_bytes)",
                                     p.workspace_bytes, plan.splits.num_splits,
                                     lengths > 0 ? " and the appended lengths" : "", plan.workspace_bytes + lengths));
          ws = static_cast<unsigned char*>(p.workspace);
        } else {
          auto w = workspaces.lease(dev, stream, reserve);
          if (!w.ok()) return std::move(w).error();
          lease = std::move(*w);
          ws = static_cast<unsigned char*>(lease.buffer);
        }
      }
      if (!launch_it) return {};
      if (!fused) return launch::launch_decode(*split, combine, p, plan, ws, settings.pdl);
      if (lengths > 0) append.seqlens_out = reinterpret_cast<int*>(ws);
      FLASHJIT_TRY(launch::launch_append(append_fn, append_config, append, settings.pdl));
      // The attention over the lengths the append wrote, or a CSR table's last_page_len, which counts the new
      // rows already.
      DecodeProblem after = p;
      if (p.last_page_len == nullptr) after.seqlens_k = append.seqlens_out;
      return launch::launch_decode(*split, combine, after, plan, ws == nullptr ? nullptr : ws + lengths, settings.pdl);
    });
    if (!st.ok())
      return std::move(st).error().with(fmt::format("while {} {} ({} split{}{})", launch_it ? "running" : "preparing",
                                                    readable_name(plan.split), plan.splits.num_splits,
                                                    plan.splits.num_splits == 1 ? "" : "s",
                                                    fused ? fmt::format(", after {}", readable_name(append_config)) : ""));
    return {};
  }

  // Every append kernel of the problem's kind (one per size class), loaded; the device's context is current.
  Status load_append_kernels(const AppendProblem& p, const Device& dev, CUstream stream) {
    for (const AppendKernelConfig& c :
         dispatch::append_prepare_kernels(p.dtype, p.head_dim, p.layout, p.page_size, dev.info.arch)) {
      auto fn = function(c, dev, stream);
      if (!fn.ok()) return std::move(fn).error();
    }
    return {};
  }

  Status run_block_mask(const BlockMaskProblem& p) {
    FLASHJIT_TRY(check(p));
    auto ordinal = Devices::common_device({p.kv_num_blocks, "kv_num_blocks"}, {{p.kv_indices, "kv_indices"},
                                          {p.full_kv_num_blocks, "full_kv_num_blocks"},
                                          {p.full_kv_indices, "full_kv_indices"}});
    if (!ordinal.ok()) return std::move(ordinal).error();
    auto found = devices.get(*ordinal);
    if (!found.ok()) return std::move(found).error();
    const Device& dev = **found;
    const BlockMaskKernelConfig config = dispatch::block_mask_kernel(p, dev.info.arch);
    Status st = Devices::in_context(dev, [&]() -> Status {
      auto fn = function(config, dev, static_cast<CUstream>(p.stream));
      if (!fn.ok()) return std::move(fn).error();
      return launch::launch_block_mask(*fn, config, p);
    });
    if (!st.ok()) return std::move(st).error().with(fmt::format("while running {}", readable_name(config)));
    return {};
  }

  Status run_append(const AppendProblem& p, bool launch_it) {
    FLASHJIT_TRY(check(p));
    auto ordinal = Devices::common_device({p.k_cache, "k_cache"}, {{p.v_cache, "v_cache"}, {p.k, "k"}, {p.v, "v"},
                                                                   {p.cache_seqlens, "cache_seqlens"},
                                                                   {p.seqlens_out, "seqlens_out"},
                                                                   {p.cu_seqlens, "cu_seqlens"},
                                                                   {p.page_table, "page_table"},
                                                                   {p.page_indptr, "page_indptr"},
                                                                   {p.last_page_len, "last_page_len"}});
    if (!ordinal.ok()) return std::move(ordinal).error();
    auto found = devices.get(*ordinal);
    if (!found.ok()) return std::move(found).error();
    const Device& dev = **found;
    const AppendKernelConfig config = dispatch::append_kernel(p, dev.info.arch, dev.info.sms);
    const auto stream = static_cast<CUstream>(p.stream);
    Status st = Devices::in_context(dev, [&]() -> Status {
      if (!launch_it) return load_append_kernels(p, dev, stream);
      auto fn = function(config, dev, stream);
      if (!fn.ok()) return std::move(fn).error();
      if (p.check_pages || settings.check_pages) FLASHJIT_TRY(dispatch::check_page_table(**cuda::api(), p));
      return launch::launch_append(*fn, config, p, settings.pdl);
    });
    if (!st.ok())
      return std::move(st).error().with(fmt::format("while {} {}", launch_it ? "running" : "preparing",
                                                    readable_name(config)));
    return {};
  }

  Status run_merge(const MergeProblem& p) {
    FLASHJIT_TRY(check(p));
    auto ordinal = Devices::common_device({p.o, "o"}, {{p.lse, "lse"}});
    if (!ordinal.ok()) return std::move(ordinal).error();
    // Every input: one on the host or another device would fault in the kernel (and poison the context).
    for (int i = 0; i < p.num_states; ++i) {
      auto same = Devices::common_device({p.o, "o"}, {{p.o_in[i], "o_in"}, {p.lse_in[i], "lse_in"}});
      if (!same.ok()) return std::move(same).error().with(fmt::format("in state {} of {}", i, p.num_states));
    }
    auto found = devices.get(*ordinal);
    if (!found.ok()) return std::move(found).error();
    const Device& dev = **found;
    const CombineKernelConfig config = dispatch::merge_kernel_config(p.dtype, p.head_dim, dev.info.arch);
    Status st = Devices::in_context(dev, [&]() -> Status {
      auto fn = function(config, dev, static_cast<CUstream>(p.stream));
      if (!fn.ok()) return std::move(fn).error();
      return launch::launch_merge(*fn, config, p, settings.pdl);
    });
    if (!st.ok()) return std::move(st).error().with(fmt::format("while merging {} states", p.num_states));
    return {};
  }

  // The reference kernel is never picked for speed without a word: one info line per kernel and runtime.
  std::mutex fallback_mutex;
  std::set<std::string> fallbacks_noted;
  void note_reference_fallback(const AttentionProblem& problem, const Arch& arch, const KernelConfig& config) {
    const std::string name = readable_name(config);
    {
      std::lock_guard<std::mutex> lock(fallback_mutex);
      if (!fallbacks_noted.insert(name).second) return;
    }
    settings.logger.info("running the reference kernel {} (fp32, far slower than fa2 / fa3): {}", name,
                         dispatch::reference_fallback_reason(problem, arch));
  }

  // Resolves the config, makes its kernel loaded on the problem's device and, when `launch_it`, launches it.
  Result<KernelConfig> run(const AttentionProblem& problem, const KernelConfig* explicit_config, bool launch_it) {
    FLASHJIT_TRY(check(problem));
    auto found = device_of(problem);
    if (!found.ok()) return std::move(found).error();
    const Device& dev = **found;
    KernelConfig config;
    if (explicit_config) {
      config = *explicit_config;
      FLASHJIT_TRY(check(config));
      FLASHJIT_TRY(dispatch::supports(config, problem, dev.info.arch));
    } else {
      auto chosen = dispatch::choose(problem, dev.info.arch, Algorithm::automatic, &dev.tuned);
      if (!chosen.ok()) return std::move(chosen).error();
      config = *chosen;
      if (config.algorithm == Algorithm::naive) note_reference_fallback(problem, dev.info.arch, config);
    }
    Status st = Devices::in_context(dev, [&]() -> Status {
      auto fn = function(config, dev, static_cast<CUstream>(problem.stream));
      if (!fn.ok()) return std::move(fn).error();
      const bool ragged = problem.varlen() || (problem.seqused_k != nullptr && !problem.paged());
      if (launch_it && ragged && (problem.check_seqlens || settings.check_seqlens))
        FLASHJIT_TRY(dispatch::check_seqlens(**cuda::api(), problem));
      if (launch_it && problem.paged() && (problem.check_pages || settings.check_pages))
        FLASHJIT_TRY(dispatch::check_page_table(**cuda::api(), problem));
      return launch_it ? launch::launch(*fn, config, problem, dev.info.sms) : Status{};
    });
    if (!st.ok())
      return std::move(st).error().with(fmt::format("while {} {}", launch_it ? "running" : "preparing", readable_name(config)));
    return config;
  }
};

Runtime::Runtime(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Runtime::~Runtime() = default;

Result<std::unique_ptr<Runtime>> Runtime::create(RuntimeOptions options) {
  runtime::Settings settings = runtime::resolve(options);
  auto disk = cache::DiskCache::open(runtime::cache_options(settings));
  if (!disk.ok()) return std::move(disk).error().with("while opening the kernel cache");
  auto tables = dispatch::TunedTables::load(dispatch::TunedTables::default_sources(settings.tuned_tables, disk->dir()),
                                        settings.logger);
  return std::unique_ptr<Runtime>(
      new Runtime(std::make_unique<Impl>(std::move(settings), std::move(*disk), std::move(tables))));
}

Status Runtime::forward(const AttentionProblem& problem) {
  auto r = impl_->run(problem, nullptr, true);
  if (!r.ok()) return std::move(r).error();
  return {};
}
Status Runtime::forward(const AttentionProblem& problem, const KernelConfig& config) {
  auto r = impl_->run(problem, &config, true);
  if (!r.ok()) return std::move(r).error();
  return {};
}

Result<KernelConfig> Runtime::prepare(const AttentionProblem& problem) { return impl_->run(problem, nullptr, false); }
Result<KernelConfig> Runtime::prepare(const AttentionProblem& problem, const KernelConfig& config) {
  return impl_->run(problem, &config, false);
}

Status Runtime::decode(const DecodeProblem& problem) { return impl_->run_decode(problem, true); }
Status Runtime::prepare_decode(const DecodeProblem& problem) { return impl_->run_decode(problem, false); }

Result<std::size_t> Runtime::decode_workspace_bytes(const DecodeProblem& problem) const {
  auto selection = select_decode(problem);
  if (!selection.ok()) return std::move(selection).error();
  return selection->workspace_bytes;
}

Status Runtime::merge(const MergeProblem& problem) { return impl_->run_merge(problem); }
Status Runtime::append_kv(const AppendProblem& problem) { return impl_->run_append(problem, true); }
Status Runtime::prepare_append_kv(const AppendProblem& problem) { return impl_->run_append(problem, false); }
Status Runtime::make_block_mask(const BlockMaskProblem& problem) { return impl_->run_block_mask(problem); }

Status Runtime::release_decode_workspace(void* stream) {
  return impl_->workspaces.release(static_cast<CUstream>(stream), impl_->devices);
}

Result<KernelConfig> Runtime::select(const AttentionProblem& problem) const {
  FLASHJIT_TRY(check(problem));
  auto dev = impl_->device_of(problem);
  if (!dev.ok()) return std::move(dev).error();
  return dispatch::choose(problem, (*dev)->info.arch, Algorithm::automatic, &(*dev)->tuned);
}

Result<KernelConfig> Runtime::select(const AttentionProblem& problem, const Target& target) const {
  FLASHJIT_TRY(check_target(target));
  AttentionProblem p = problem;
  fill(p.q), fill(p.k), fill(p.v), fill(p.o);
  FLASHJIT_TRY(check(p));
  const dispatch::TunedTables tuned =
      target.gpu.empty() ? dispatch::TunedTables() : impl_->devices.tables().for_device(target.gpu, target.arch);
  return dispatch::choose(p, target.arch, Algorithm::automatic, &tuned);
}

Result<DecodeSelection> Runtime::select_decode(const DecodeProblem& problem) const {
  FLASHJIT_TRY(check(problem));
  FLASHJIT_TRY(check_fused_append(problem));
  auto ordinal = cuda::device_of_pointer(problem.q, "q");
  if (!ordinal.ok()) return std::move(ordinal).error();
  auto dev = impl_->devices.get(*ordinal);
  if (!dev.ok()) return std::move(dev).error();
  const dispatch::DecodePlan plan = dispatch::plan_decode(problem, (*dev)->info.arch, (*dev)->info.sms);
  FLASHJIT_TRY(check_forced_merge(problem, plan, **dev));
  return selection_of(problem, plan, (*dev)->info.arch, (*dev)->info.sms);
}

Result<DecodeSelection> Runtime::select_decode(const DecodeProblem& problem, const Target& target) const {
  FLASHJIT_TRY(check_target(target));
  DecodeProblem p = problem;
  fill(p.q), fill(p.o), fill(p.k_cache), fill(p.v_cache);
  if (p.last_page_len == nullptr) fill(p.seqlens_k);  // a CSR table's counts may come from last_page_len instead
  if (p.layout == KvLayout::paged) fill(p.page_table);
  if (p.new_len > 0) {  // the fused append refuses one tensor for both caches: v_cache's stand-in of its own
    if (problem.v_cache == nullptr) p.v_cache = static_cast<const unsigned char*>(kPlaceholder) + 256;
    fill(p.k_new), fill(p.v_new);
  }
  FLASHJIT_TRY(check(p));
  FLASHJIT_TRY(check_fused_append(p));
  const dispatch::DecodePlan plan = dispatch::plan_decode(p, target.arch, target.sms);
  FLASHJIT_TRY(check_forced_merge(p, plan, describe(target)));
  return selection_of(p, plan, target.arch, target.sms);
}

AnyKernelConfig Runtime::resolve(const PartialConfig& config) { return dispatch::resolve(config); }

Result<KernelInfo> Runtime::compile(const AnyKernelConfig& config) {
  auto artifact = impl_->artifacts.get(config);
  if (!artifact.ok()) return std::move(artifact).error();
  return (*artifact)->info;
}

Result<std::string> Runtime::emit(const AnyKernelConfig& config) {
  auto src = codegen::generate(config);
  if (!src.ok()) return std::move(src).error();
  return std::move(src->text);
}

Result<std::string> Runtime::emit_ptx(const AnyKernelConfig& config) {
  auto src = codegen::generate(config);
  if (!src.ok()) return std::move(src).error();
  return compile::compile_ptx(*src, config.arch(), log::Logger{});
}

Result<std::string> Runtime::kernel_key(const AnyKernelConfig& config) {
  FLASHJIT_TRY(check(config));
  return compile::kernel_key(config, compile::options_for(config.arch()));
}

const std::filesystem::path& Runtime::cache_dir() const { return impl_->artifacts.disk().dir(); }
bool Runtime::cache_writable() const { return impl_->artifacts.disk().writable(); }

Result<CacheStats> Runtime::cache_stats() const {
  const cache::DiskCache& disk = impl_->artifacts.disk();
  auto entries = disk.list();
  if (!entries.ok()) return std::move(entries).error().with("while listing the kernel cache");
  CacheStats stats;
  stats.entries = entries->size();
  for (const auto& e : *entries) stats.bytes += e.bytes;
  stats.max_bytes = disk.max_bytes();
  return stats;
}

const char* version() { return FLASHJIT_VERSION; }

}  // namespace flashjit
