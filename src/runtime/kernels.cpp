#include "runtime/kernels.hpp"

#include <fmt/format.h>

#include <mutex>

namespace flashjit::runtime {

Result<CUfunction> LoadedKernels::function(const AnyKernelConfig& config, const Device& dev, CUstream stream,
                                           cache::ArtifactStore& artifacts) {
  Key key{dev.info.ordinal, config};
  {
    std::shared_lock lock(mutex_);
    if (auto it = loaded_.find(key); it != loaded_.end()) return it->second->function;
  }
  const cuda::Api& api = **cuda::api();
  if (cuda::capturing(api, stream))
    return Error(ErrorCode::invalid_argument,
                 fmt::format("kernel {} is not loaded on device {} yet and the stream is capturing a CUDA graph, "
                             "during which it cannot be compiled or loaded: run the same problem once before "
                             "capturing (Runtime::prepare / prepare_decode, flashjit_prepare, flashjit.warmup)",
                             readable_name(config), dev.info.ordinal));
  auto artifact = artifacts.get(config);
  if (!artifact.ok()) return std::move(artifact).error();
  std::unique_lock lock(mutex_);
  if (auto it = loaded_.find(key); it != loaded_.end()) return it->second->function;
  auto k = std::make_unique<Loaded>();
  auto module = cuda::Module::load((*artifact)->cubin);
  if (!module.ok()) return std::move(module).error().with(fmt::format("while loading {}", (*artifact)->info.name));
  k->module = std::move(*module);
  auto fn = k->module.function((*artifact)->entry.c_str());
  if (!fn.ok()) return std::move(fn).error();
  k->function = *fn;
  const int smem = shared_memory_bytes(config);
  if (smem > 48 * 1024)
    FLASHJIT_TRY(cuda::check(api.cuFuncSetAttribute(k->function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem),
                             "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)"));
  // Clusters of up to 16 CTAs (a cluster-merge decode kernel's splits): 16 is beyond the portable 8.
  if (const auto* decode = config.get_if<DecodeKernelConfig>(); decode && decode->cluster_merge)
    FLASHJIT_TRY(cuda::check(api.cuFuncSetAttribute(k->function, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1),
                             "cuFuncSetAttribute(NON_PORTABLE_CLUSTER_SIZE_ALLOWED)"));
  CUfunction f = k->function;
  loaded_.emplace(std::move(key), std::move(k));
  return f;
}

void LoadedKernels::unload(int device) {
  std::unique_lock lock(mutex_);
  for (auto it = loaded_.begin(); it != loaded_.end();) it = it->first.device == device ? loaded_.erase(it) : std::next(it);
}

}  // namespace flashjit::runtime
