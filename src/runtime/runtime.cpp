// Runtime: problem -> config (dispatch) -> artifact (cache / NVRTC) -> loaded function per device -> launch.
#include "flashjit/runtime.hpp"

#include <fmt/format.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>
#include <shared_mutex>
#include <thread>

#include "cache/disk_cache.hpp"
#include "codegen/generate.hpp"
#include "common/log.hpp"
#include "cuda/driver.hpp"
#include "dispatch/decode_heuristics.hpp"
#include "dispatch/heuristics.hpp"
#include "launch/decode_launch.hpp"
#include "launch/launch.hpp"
#include "runtime/artifacts.hpp"
#include "runtime/config_hash.hpp"
#include "runtime/settings.hpp"
#include "tune/tuned_table.hpp"

namespace flashjit {
namespace {

// Whether work on `stream` would be captured. A failing query counts as capturing (e.g. the legacy stream
// while another thread captures in global mode): then nothing is compiled, loaded or allocated.
bool capturing(const cuda::Api& api, CUstream stream) {
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  return api.cuStreamIsCapturing(stream, &capture) != CUDA_SUCCESS || capture != CU_STREAM_CAPTURE_STATUS_NONE;
}

// The key of a stream's runtime workspace. CU_STREAM_PER_THREAD is one handle but a different stream in
// each thread, so its key carries the thread.
struct StreamKey {
  int device;
  CUstream stream;
  std::thread::id thread;
  auto operator<=>(const StreamKey&) const = default;
};

// CU_STREAM_LEGACY and nullptr both name the legacy default stream.
CUstream canonical_stream(CUstream stream) { return stream == CU_STREAM_LEGACY ? nullptr : stream; }

StreamKey stream_key(int device, CUstream stream) {
  stream = canonical_stream(stream);
  return {device, stream, stream == CU_STREAM_PER_THREAD ? std::this_thread::get_id() : std::thread::id()};
}

// A kernel loaded on one device.
struct LoadedKernel {
  cuda::Module module;
  CUfunction function = nullptr;
};

// The runtime's decode workspace of one (device, stream). Buffers it outgrew stay allocated until the
// Runtime is destroyed: a CUDA graph captured earlier may still point at them. `use` is held from taking the
// buffer to the end of the decode's launches: threads sharing a stream would otherwise interleave their split
// and combine kernels in it, and one decode's split kernel overwrite the partials another's combine reads.
struct Workspace {
  std::mutex use;
  bool released = false;  // by release_decode_workspace, under `use`: the stream's next decode makes a new one
  cuda::DeviceBuffer current;
  std::vector<cuda::DeviceBuffer> retired;
};

// A workspace buffer held for one decode (see Workspace::use).
struct WorkspaceLease {
  std::shared_ptr<Workspace> workspace;
  std::unique_lock<std::mutex> lock;  // declared after `workspace`: unlocked before the workspace may go
  void* buffer = nullptr;
};

template <class Config>
using LoadedTable = std::unordered_map<runtime::DeviceKernel<Config>, std::unique_ptr<LoadedKernel>,
                                       runtime::DeviceKernelHash>;

// Per-device state: its properties, primary context (retained for the Runtime's life) and the tuned tables
// stamped for it.
struct Device {
  cuda::DeviceInfo info;
  CUcontext context = nullptr;
  tune::TunedTables tuned;
};

// A forced cluster merge the plan could not honour (the planner falls back to the combine kernel there).
Status check_forced_merge(const DecodeProblem& p, const dispatch::DecodePlan& plan, const Device& dev) {
  if (p.split_merge != SplitMerge::cluster || plan.splits.num_splits < 2 || plan.split.cluster_merge) return {};
  return Error(ErrorCode::invalid_argument,
               fmt::format("split_merge cluster cannot run {} in {} splits on device {} ({}): thread-block "
                           "clusters need sm_90 or newer, and the kernel's cluster buffer must fit its shared memory",
                           readable_name(plan.split), plan.splits.num_splits, dev.info.ordinal,
                           dev.info.arch.to_string()));
}

}  // namespace

struct Runtime::Impl {
  runtime::Settings settings;  // resolved once, in create()
  runtime::ArtifactStore artifacts;
  tune::TunedTables tuned;  // loaded once; each device keeps those stamped for it
  std::shared_mutex mutex;  // guards devices and the loaded tables
  std::map<int, Device> devices;
  std::tuple<LoadedTable<KernelConfig>, LoadedTable<DecodeKernelConfig>, LoadedTable<CombineKernelConfig>> loaded;
  std::mutex workspace_mutex;
  std::map<StreamKey, std::shared_ptr<Workspace>> workspaces;  // entries under workspace_mutex

  Impl(runtime::Settings s, cache::DiskCache disk, tune::TunedTables tables)
      : settings(std::move(s)), artifacts(std::move(disk), settings.jit, settings.logger), tuned(std::move(tables)) {}

  template <class Config>
  LoadedTable<Config>& table() { return std::get<LoadedTable<Config>>(loaded); }

  template <class Table>
  static void unload(Table& t, int ordinal) {
    for (auto it = t.begin(); it != t.end();) it = it->first.device == ordinal ? t.erase(it) : std::next(it);
  }

  ~Impl() {
    if (devices.empty()) return;
    auto api = cuda::api();
    for (auto& [ordinal, dev] : devices) {
      CUdevice d;
      if ((*api)->cuDeviceGet(&d, ordinal) == CUDA_SUCCESS) {
        // Modules must be unloaded in their context before it is released.
        if ((*api)->cuCtxPushCurrent(dev.context) == CUDA_SUCCESS) {
          std::apply([&](auto&... t) { (unload(t, ordinal), ...); }, loaded);
          for (auto it = workspaces.begin(); it != workspaces.end();)
            it = it->first.device == ordinal ? workspaces.erase(it) : std::next(it);
          CUcontext popped;
          (*api)->cuCtxPopCurrent(&popped);
        }
        (*api)->cuDevicePrimaryCtxRelease(d);
      }
    }
  }

  Result<const Device*> device(int ordinal) {
    {
      std::shared_lock lock(mutex);
      if (auto it = devices.find(ordinal); it != devices.end()) return &it->second;
    }
    std::unique_lock lock(mutex);
    if (auto it = devices.find(ordinal); it != devices.end()) return &it->second;
    auto info = cuda::device_info(ordinal);
    if (!info.ok()) return std::move(info).error();
    auto api = cuda::api();
    CUdevice d;
    FLASHJIT_TRY(cuda::check((*api)->cuDeviceGet(&d, ordinal), "cuDeviceGet"));
    Device dev{*info, nullptr, tuned.for_device(info->name, info->arch)};
    FLASHJIT_TRY(cuda::check((*api)->cuDevicePrimaryCtxRetain(&dev.context, d), "cuDevicePrimaryCtxRetain"));
    settings.logger.debug("device {} ({}): {} tuned table(s), {} entries", ordinal, info->name, dev.tuned.size(),
                          dev.tuned.entry_count());
    return &devices.emplace(ordinal, std::move(dev)).first->second;
  }

  // The device of a problem's tensors (all must live on one device): `first` and the non-null `others`.
  using NamedPointer = std::pair<const void*, const char*>;
  Result<int> common_device(NamedPointer first, std::initializer_list<NamedPointer> others) {
    auto q = cuda::device_of_pointer(first.first, first.second);
    if (!q.ok()) return std::move(q).error();
    for (auto [ptr, name] : others) {
      if (!ptr) continue;
      auto d = cuda::device_of_pointer(ptr, name);
      if (!d.ok()) return std::move(d).error();
      if (*d != *q)
        return Error(ErrorCode::invalid_argument,
                     fmt::format("{} is on device {} but {} is on device {}", name, *d, first.second, *q));
    }
    return *q;
  }

  Result<int> problem_device(const AttentionProblem& p) {
    return common_device({p.q, "q"}, {{p.k, "k"},
                                      {p.v, "v"},
                                      {p.o, "o"},
                                      {p.lse, "lse"},
                                      {p.cu_seqlens_q, "cu_seqlens_q"},
                                      {p.cu_seqlens_k, "cu_seqlens_k"}});
  }

  // The kernel of a config on a device: loaded before, or compiled / read from the cache and loaded now,
  // which cannot be captured into a CUDA graph: on a capturing stream that is an error saying so.
  template <class Config>
  Result<CUfunction> function(const Config& config, const Device& dev, CUstream stream) {
    runtime::DeviceKernel<Config> key{dev.info.ordinal, config};
    auto& loaded = table<Config>();
    {
      std::shared_lock lock(mutex);
      if (auto it = loaded.find(key); it != loaded.end()) return it->second->function;
    }
    if (capturing(**cuda::api(), stream))
      return Error(ErrorCode::invalid_argument,
                   fmt::format("kernel {} is not loaded on device {} yet and the stream is capturing a CUDA graph, "
                               "during which it cannot be compiled or loaded: run the same problem once before "
                               "capturing (Runtime::prepare / prepare_decode, flashjit_prepare, flashjit.warmup)",
                               readable_name(config), dev.info.ordinal));
    auto artifact = artifacts.get(config);
    if (!artifact.ok()) return std::move(artifact).error();
    std::unique_lock lock(mutex);
    if (auto it = loaded.find(key); it != loaded.end()) return it->second->function;
    auto k = std::make_unique<LoadedKernel>();
    auto module = cuda::Module::load((*artifact)->cubin);
    if (!module.ok()) return std::move(module).error().with(fmt::format("while loading {}", (*artifact)->info.name));
    k->module = std::move(*module);
    auto fn = k->module.function((*artifact)->entry.c_str());
    if (!fn.ok()) return std::move(fn).error();
    k->function = *fn;
    const int smem = shared_memory_bytes(config);
    if (smem > 48 * 1024)
      FLASHJIT_TRY(cuda::check((*cuda::api())->cuFuncSetAttribute(k->function,
                                                                CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem),
                               "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)"));
    if constexpr (requires { config.cluster_merge; }) {
      // Clusters of up to 16 CTAs (a cluster-merge decode kernel's splits): 16 is beyond the portable 8.
      if (config.cluster_merge)
        FLASHJIT_TRY(cuda::check((*cuda::api())->cuFuncSetAttribute(
                                     k->function, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1),
                                 "cuFuncSetAttribute(NON_PORTABLE_CLUSTER_SIZE_ALLOWED)"));
    }
    CUfunction f = k->function;
    loaded.emplace(key, std::move(k));
    return f;
  }

  // Runs `f` with the device's primary context current (pushed unless it already is).
  template <class F>
  Status in_context(const Device& dev, F&& f) {
    const cuda::Api& api = **cuda::api();
    CUcontext current = nullptr;
    api.cuCtxGetCurrent(&current);
    const bool push = current != dev.context;
    if (push) FLASHJIT_TRY(cuda::check(api.cuCtxPushCurrent(dev.context), "cuCtxPushCurrent"));
    Status st = f();
    if (push) {
      CUcontext popped;
      api.cuCtxPopCurrent(&popped);
    }
    return st;
  }

  // The runtime's workspace of (device, stream), at least `bytes` large, held until the lease ends: allocated
  // or grown now, which cannot happen while the stream captures a CUDA graph. The device's context is current.
  Result<WorkspaceLease> workspace(const Device& dev, CUstream stream, std::size_t bytes) {
    WorkspaceLease lease;
    const StreamKey key = stream_key(dev.info.ordinal, stream);
    for (;;) {
      std::shared_ptr<Workspace> entry;
      {
        std::lock_guard lock(workspace_mutex);
        auto it = workspaces.find(key);
        if (it == workspaces.end()) it = workspaces.emplace(key, std::make_shared<Workspace>()).first;
        entry = it->second;
      }
      // Waits for another thread's decode on this stream to finish launching (or for a release).
      std::unique_lock use(entry->use);
      if (entry->released) continue;  // unlocks, then lets the released entry go
      lease.workspace = std::move(entry);
      lease.lock = std::move(use);
      break;
    }
    Workspace& w = *lease.workspace;
    lease.buffer = w.current.get();
    if (w.current.size() >= bytes) return lease;
    if (capturing(**cuda::api(), stream))
      return Error(ErrorCode::invalid_argument,
                   fmt::format("decode needs {} bytes of workspace on this stream but the runtime holds {} and the "
                               "stream is capturing a CUDA graph, during which nothing can be allocated: run "
                               "Runtime::prepare_decode (flashjit_prepare_decode) on this stream before capturing, "
                               "with the largest batch and the head counts, q_len and head dim the graph will use (it "
                               "reserves for every batch up to the given one and any max_seqlen_k), or pass a "
                               "workspace",
                               bytes, w.current.size()));
    // Grow geometrically so that slowly growing caches do not allocate on every step.
    auto buffer = cuda::DeviceBuffer::allocate(std::max(bytes, w.current.size() * 2));
    if (!buffer.ok()) return std::move(buffer).error().with(fmt::format("while allocating {} bytes of decode workspace", bytes));
    if (w.current.size() > 0) w.retired.push_back(std::move(w.current));
    w.current = std::move(*buffer);
    lease.buffer = w.current.get();
    return lease;
  }

  Status release_workspace(CUstream stream) {
    stream = canonical_stream(stream);
    std::lock_guard lock(workspace_mutex);
    for (auto it = workspaces.begin(); it != workspaces.end();) {
      if (it->first.stream != stream ||
          (stream == CU_STREAM_PER_THREAD && it->first.thread != std::this_thread::get_id())) {
        ++it;
        continue;
      }
      const Device* dev = nullptr;
      {
        std::shared_lock devices_lock(mutex);
        if (auto d = devices.find(it->first.device); d != devices.end()) dev = &d->second;
      }
      if (dev == nullptr) {  // cannot happen: a workspace belongs to a known device
        ++it;
        continue;
      }
      FLASHJIT_TRY(in_context(*dev, [&]() -> Status {
        Workspace& w = *it->second;
        std::lock_guard use(w.use);  // a decode launching on the stream now finishes first
        FLASHJIT_TRY(cuda::check((*cuda::api())->cuStreamSynchronize(stream), "cuStreamSynchronize"));
        w.current = {};  // frees the current and retired buffers in the device's context
        w.retired.clear();
        w.released = true;  // a decode already waiting for `use` looks the stream up again
        return {};
      }));
      it = workspaces.erase(it);
    }
    return {};
  }

  // Debug check of a paged problem: seqlens_k and the page table are copied to the host (synchronizing
  // the stream) and every page a sequence uses must be in [0, num_pages).
  Status check_page_table(const DecodeProblem& p) {
    const cuda::Api& api = **cuda::api();
    const auto stream = static_cast<CUstream>(p.stream);
    if (capturing(api, stream))
      return Error(ErrorCode::invalid_argument,
                   "check_pages (FLASHJIT_CHECK_PAGES=1) reads the page table on the host and cannot run while the "
                   "stream captures a CUDA graph");
    FLASHJIT_TRY(cuda::check(api.cuStreamSynchronize(stream), "cuStreamSynchronize (check_pages)"));
    std::vector<int> lens(p.batch);
    FLASHJIT_TRY(cuda::check(api.cuMemcpyDtoH(lens.data(), reinterpret_cast<CUdeviceptr>(p.seqlens_k),
                                              lens.size() * sizeof(int)),
                             "cuMemcpyDtoH(seqlens_k)"));
    if (p.layout != KvLayout::paged) {
      for (int b = 0; b < p.batch; ++b)
        if (lens[b] < 0 || lens[b] > p.max_seqlen_k)
          return Error(ErrorCode::invalid_argument, fmt::format("seqlens_k[{}] = {} is outside [0, max_seqlen_k = {}]",
                                                                b, lens[b], p.max_seqlen_k));
      return {};
    }
    std::vector<int> pages(static_cast<std::size_t>(p.batch) * p.max_pages_per_seq);
    FLASHJIT_TRY(cuda::check(api.cuMemcpyDtoH(pages.data(), reinterpret_cast<CUdeviceptr>(p.page_table),
                                              pages.size() * sizeof(int)),
                             "cuMemcpyDtoH(page_table)"));
    for (int b = 0; b < p.batch; ++b) {
      if (lens[b] < 0 || lens[b] > p.max_seqlen_k)
        return Error(ErrorCode::invalid_argument,
                     fmt::format("seqlens_k[{}] = {} is outside [0, max_seqlen_k = {}]", b, lens[b], p.max_seqlen_k));
      const int used = (lens[b] + p.page_size - 1) / p.page_size;
      for (int j = 0; j < used; ++j) {
        const int page = pages[static_cast<std::size_t>(b) * p.max_pages_per_seq + j];
        if (page < 0 || page >= p.num_pages)
          return Error(ErrorCode::invalid_argument,
                       fmt::format("page_table[{}][{}] = {} is outside [0, {}) = [0, num_pages) (sequence {} has {} keys)", b,
                                   j, page, p.num_pages, b, lens[b]));
      }
    }
    return {};
  }

  Status run_decode(const DecodeProblem& p, bool launch_it) {
    FLASHJIT_TRY(check(p));
    auto ordinal = common_device({p.q, "q"}, {{p.o, "o"}, {p.k_cache, "k_cache"}, {p.v_cache, "v_cache"},
                                              {p.seqlens_k, "seqlens_k"}, {p.page_table, "page_table"},
                                              {p.lse, "lse"}, {p.workspace, "workspace"}});
    if (!ordinal.ok()) return std::move(ordinal).error();
    auto dev = device(*ordinal);
    if (!dev.ok()) return std::move(dev).error();
    const dispatch::DecodePlan plan = dispatch::plan_decode(p, (*dev)->info.arch, (*dev)->info.sms);
    FLASHJIT_TRY(check_forced_merge(p, plan, **dev));
    const auto stream = static_cast<CUstream>(p.stream);
    Status st = in_context(**dev, [&]() -> Status {
      auto split = function(plan.split, **dev, stream);
      if (!split.ok()) return std::move(split).error();
      CUfunction combine = nullptr;
      if (plan.splits.num_splits > 1 && !plan.split.cluster_merge) {
        auto fn = function(plan.combine, **dev, stream);
        if (!fn.ok()) return std::move(fn).error();
        combine = *fn;
      }
      // prepare: the split kernels and the workspace of any batch up to this one and any max_seqlen_k (the
      // kernel and the split count change with both), and the combine kernel even when this problem needs no
      // split, so that any of them may then be captured.
      std::size_t reserve = plan.workspace_bytes;
      if (!launch_it) {
        for (const DecodeKernelConfig& c : dispatch::decode_prepare_kernels(p, (*dev)->info.arch, (*dev)->info.sms)) {
          auto fn = function(c, **dev, stream);
          if (!fn.ok()) return std::move(fn).error();
        }
        reserve = dispatch::decode_workspace_reserve(p, (*dev)->info.arch, (*dev)->info.sms);
        if (combine == nullptr && reserve > 0) {
          auto fn = function(plan.combine, **dev, stream);
          if (!fn.ok()) return std::move(fn).error();
        }
      }
      // Before the workspace is held: the check synchronizes the stream.
      if (launch_it && (p.check_pages || settings.check_pages)) FLASHJIT_TRY(check_page_table(p));
      void* ws = nullptr;
      WorkspaceLease lease;  // held until the kernels are launched
      if (reserve > 0) {
        if (p.workspace != nullptr) {
          if (p.workspace_bytes < plan.workspace_bytes)
            return Error(ErrorCode::invalid_argument,
                         fmt::format("workspace holds {} bytes but {} splits need {} (Runtime::decode_workspace_bytes)",
                                     p.workspace_bytes, plan.splits.num_splits, plan.workspace_bytes));
          ws = p.workspace;
        } else {
          auto w = workspace(**dev, stream, reserve);
          if (!w.ok()) return std::move(w).error();
          lease = std::move(*w);
          ws = lease.buffer;
        }
      }
      if (!launch_it) return {};
      return launch::launch_decode(*split, combine, p, plan, ws, settings.pdl);
    });
    if (!st.ok())
      return std::move(st).error().with(fmt::format("while {} {} ({} split{})", launch_it ? "running" : "preparing",
                                                    readable_name(plan.split), plan.splits.num_splits,
                                                    plan.splits.num_splits == 1 ? "" : "s"));
    return {};
  }

  Status run_merge(const MergeProblem& p) {
    FLASHJIT_TRY(check(p));
    auto ordinal = common_device({p.o, "o"}, {{p.lse, "lse"}});
    if (!ordinal.ok()) return std::move(ordinal).error();
    // Every input: one on the host or another device would fault in the kernel (and poison the context).
    for (int i = 0; i < p.num_states; ++i) {
      auto same = common_device({p.o, "o"}, {{p.o_in[i], "o_in"}, {p.lse_in[i], "lse_in"}});
      if (!same.ok()) return std::move(same).error().with(fmt::format("in state {} of {}", i, p.num_states));
    }
    auto dev = device(*ordinal);
    if (!dev.ok()) return std::move(dev).error();
    const CombineKernelConfig config = dispatch::merge_kernel_config(p.dtype, p.head_dim, (*dev)->info.arch);
    Status st = in_context(**dev, [&]() -> Status {
      auto fn = function(config, **dev, static_cast<CUstream>(p.stream));
      if (!fn.ok()) return std::move(fn).error();
      return launch::launch_merge(*fn, config, p, settings.pdl);
    });
    if (!st.ok()) return std::move(st).error().with(fmt::format("while merging {} states", p.num_states));
    return {};
  }

  // Resolves the config, makes its kernel loaded on the problem's device and, when `launch_it`, launches it.
  Result<KernelConfig> run(const AttentionProblem& problem, const KernelConfig* explicit_config, bool launch_it) {
    FLASHJIT_TRY(check(problem));
    auto ordinal = problem_device(problem);
    if (!ordinal.ok()) return std::move(ordinal).error();
    auto dev = device(*ordinal);
    if (!dev.ok()) return std::move(dev).error();
    KernelConfig config;
    if (explicit_config) {
      config = *explicit_config;
      FLASHJIT_TRY(check(config));
      FLASHJIT_TRY(dispatch::supports(config, problem, (*dev)->info.arch));
    } else {
      auto chosen = dispatch::choose(problem, (*dev)->info.arch, Algorithm::automatic, &(*dev)->tuned);
      if (!chosen.ok()) return std::move(chosen).error();
      config = *chosen;
    }
    Status st = in_context(**dev, [&]() -> Status {
      auto fn = function(config, **dev, static_cast<CUstream>(problem.stream));
      if (!fn.ok()) return std::move(fn).error();
      return launch_it ? launch::launch(*fn, config, problem) : Status{};
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
  auto tables = tune::TunedTables::load(tune::TunedTables::default_sources(settings.tuned_tables, disk->dir()),
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
  FLASHJIT_TRY(check(problem));
  auto ordinal = cuda::device_of_pointer(problem.q, "q");
  if (!ordinal.ok()) return std::move(ordinal).error();
  auto dev = impl_->device(*ordinal);
  if (!dev.ok()) return std::move(dev).error();
  const dispatch::DecodePlan plan = dispatch::plan_decode(problem, (*dev)->info.arch, (*dev)->info.sms);
  FLASHJIT_TRY(check_forced_merge(problem, plan, **dev));
  return plan.workspace_bytes;
}

Status Runtime::merge(const MergeProblem& problem) { return impl_->run_merge(problem); }

Status Runtime::release_decode_workspace(void* stream) { return impl_->release_workspace(static_cast<CUstream>(stream)); }

Result<KernelConfig> Runtime::select(const AttentionProblem& problem) const {
  FLASHJIT_TRY(check(problem));
  auto ordinal = impl_->problem_device(problem);
  if (!ordinal.ok()) return std::move(ordinal).error();
  auto dev = impl_->device(*ordinal);
  if (!dev.ok()) return std::move(dev).error();
  return dispatch::choose(problem, (*dev)->info.arch, Algorithm::automatic, &(*dev)->tuned);
}

Result<KernelInfo> Runtime::compile(const KernelConfig& config) {
  auto artifact = impl_->artifacts.get(config);
  if (!artifact.ok()) return std::move(artifact).error();
  return (*artifact)->info;
}

Result<std::string> Runtime::emit(const KernelConfig& config) const {
  auto src = codegen::generate(config);
  if (!src.ok()) return std::move(src).error();
  return std::move(src->text);
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
