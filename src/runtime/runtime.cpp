// Runtime: problem -> config (dispatch) -> artifact (cache / NVRTC) -> loaded function per device -> launch.
#include "flashjit/runtime.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <map>
#include <shared_mutex>

#include "cache/disk_cache.hpp"
#include "codegen/generate.hpp"
#include "common/log.hpp"
#include "cuda/driver.hpp"
#include "dispatch/heuristics.hpp"
#include "launch/launch.hpp"
#include "runtime/artifacts.hpp"
#include "runtime/config_hash.hpp"
#include "tune/tuned_table.hpp"

namespace flashjit {
namespace {

bool jit_from_env() {
  const char* v = std::getenv("FLASHJIT_JIT");
  return !(v && std::string(v) == "0");
}

// A kernel loaded on one device.
struct LoadedKernel {
  cuda::Module module;
  CUfunction function = nullptr;
};

// Per-device state: its properties, primary context (retained for the Runtime's life) and the tuned tables
// stamped for it.
struct Device {
  cuda::DeviceInfo info;
  CUcontext context = nullptr;
  tune::TunedTables tuned;
};

}  // namespace

struct Runtime::Impl {
  runtime::ArtifactStore artifacts;
  tune::TunedTables tuned;  // loaded once; each device keeps those stamped for it
  std::shared_mutex mutex;  // guards devices and loaded
  std::map<int, Device> devices;
  std::unordered_map<runtime::DeviceConfig, std::unique_ptr<LoadedKernel>, runtime::DeviceConfigHash> loaded;

  Impl(cache::DiskCache disk, bool jit, tune::TunedTables tables)
      : artifacts(std::move(disk), jit), tuned(std::move(tables)) {}

  ~Impl() {
    if (devices.empty()) return;
    auto api = cuda::api();
    for (auto& [ordinal, dev] : devices) {
      CUdevice d;
      if ((*api)->cuDeviceGet(&d, ordinal) == CUDA_SUCCESS) {
        // Modules must be unloaded in their context before it is released.
        if ((*api)->cuCtxPushCurrent(dev.context) == CUDA_SUCCESS) {
          for (auto it = loaded.begin(); it != loaded.end();)
            it = it->first.device == ordinal ? loaded.erase(it) : std::next(it);
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
    log::debug("device {} ({}): {} tuned table(s), {} entries", ordinal, info->name, dev.tuned.size(),
               dev.tuned.entry_count());
    return &devices.emplace(ordinal, std::move(dev)).first->second;
  }

  // The device of the problem's tensors (all must live on one device).
  Result<int> problem_device(const AttentionProblem& p) {
    auto q = cuda::device_of_pointer(p.q, "q");
    if (!q.ok()) return std::move(q).error();
    const std::pair<const void*, const char*> others[] = {{p.k, "k"}, {p.v, "v"}, {p.o, "o"}, {p.lse, "lse"}};
    for (auto [ptr, name] : others) {
      if (!ptr) continue;
      auto d = cuda::device_of_pointer(ptr, name);
      if (!d.ok()) return std::move(d).error();
      if (*d != *q)
        return Error(ErrorCode::invalid_argument, fmt::format("{} is on device {} but q is on device {}", name, *d, *q));
    }
    return *q;
  }

  // The kernel of a config on a device: loaded before, or compiled / read from the cache and loaded now,
  // which cannot be captured into a CUDA graph: on a capturing stream that is an error saying so.
  Result<CUfunction> function(const KernelConfig& config, const Device& dev, CUstream stream) {
    runtime::DeviceConfig key{dev.info.ordinal, config};
    {
      std::shared_lock lock(mutex);
      if (auto it = loaded.find(key); it != loaded.end()) return it->second->function;
    }
    CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
    if ((*cuda::api())->cuStreamIsCapturing(stream, &capture) == CUDA_SUCCESS && capture != CU_STREAM_CAPTURE_STATUS_NONE)
      return Error(ErrorCode::invalid_argument,
                   fmt::format("kernel {} is not loaded on device {} yet and the stream is capturing a CUDA graph, "
                               "during which it cannot be compiled or loaded: run the same problem once before "
                               "capturing (Runtime::prepare, flashjit_prepare, flashjit.warmup)",
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
    CUfunction f = k->function;
    loaded.emplace(key, std::move(k));
    return f;
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
    const cuda::Api& api = **cuda::api();
    // Make the device's primary context current for the load and the launch, unless it already is.
    CUcontext current = nullptr;
    api.cuCtxGetCurrent(&current);
    const bool push = current != (*dev)->context;
    if (push) FLASHJIT_TRY(cuda::check(api.cuCtxPushCurrent((*dev)->context), "cuCtxPushCurrent"));
    Status st = [&]() -> Status {
      auto fn = function(config, **dev, static_cast<CUstream>(problem.stream));
      if (!fn.ok()) return std::move(fn).error();
      return launch_it ? launch::launch(*fn, config, problem) : Status{};
    }();
    if (push) {
      CUcontext popped;
      api.cuCtxPopCurrent(&popped);
    }
    if (!st.ok())
      return std::move(st).error().with(fmt::format("while {} {}", launch_it ? "running" : "preparing", readable_name(config)));
    return config;
  }

};

Runtime::Runtime(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Runtime::~Runtime() = default;

Result<std::unique_ptr<Runtime>> Runtime::create(RuntimeOptions options) {
  cache::CacheOptions co;
  co.dir = options.cache_dir.value_or(cache::DiskCache::default_dir());
  co.max_bytes = options.cache_max_mb ? *options.cache_max_mb * 1024 * 1024 : cache::DiskCache::default_max_bytes();
  auto disk = cache::DiskCache::open(co);
  if (!disk.ok()) return std::move(disk).error().with("while opening the kernel cache");
  bool jit = options.jit.value_or(jit_from_env());
  auto tables = tune::TunedTables::load(tune::TunedTables::default_sources(disk->dir()));
  return std::unique_ptr<Runtime>(new Runtime(std::make_unique<Impl>(std::move(*disk), jit, std::move(tables))));
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
