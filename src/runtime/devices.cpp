#include "runtime/devices.hpp"

#include <fmt/format.h>

#include <mutex>


namespace flashjit::runtime {

void Devices::release(const std::function<void(int)>& before_release) {
  std::unique_lock lock(mutex_);
  if (devices_.empty()) return;
  auto api = cuda::api();
  for (auto& [ordinal, dev] : devices_) {
    CUdevice d;
    if ((*api)->cuDeviceGet(&d, ordinal) != CUDA_SUCCESS) continue;
    // What lives in a context (modules, buffers) must go in that context, before it is released.
    if (before_release && (*api)->cuCtxPushCurrent(dev.context) == CUDA_SUCCESS) {
      before_release(ordinal);
      CUcontext popped;
      (*api)->cuCtxPopCurrent(&popped);
    }
    (*api)->cuDevicePrimaryCtxRelease(d);
  }
  devices_.clear();
}

const Device* Devices::find(int ordinal) const {
  std::shared_lock lock(mutex_);
  auto it = devices_.find(ordinal);
  return it == devices_.end() ? nullptr : &it->second;
}

Result<const Device*> Devices::get(int ordinal) {
  if (const Device* d = find(ordinal)) return d;
  std::unique_lock lock(mutex_);
  if (auto it = devices_.find(ordinal); it != devices_.end()) return &it->second;
  auto info = cuda::device_info(ordinal);
  if (!info.ok()) return std::move(info).error();
  auto api = cuda::api();
  CUdevice d;
  FLASHJIT_TRY(cuda::check((*api)->cuDeviceGet(&d, ordinal), "cuDeviceGet"));
  Device dev{*info, nullptr, tuned_.for_device(info->name, info->arch)};
  FLASHJIT_TRY(cuda::check((*api)->cuDevicePrimaryCtxRetain(&dev.context, d), "cuDevicePrimaryCtxRetain"));
  logger_.debug("device {} ({}): {} tuned table(s), {} entries", ordinal, info->name, dev.tuned.size(),
                dev.tuned.entry_count());
  return &devices_.emplace(ordinal, std::move(dev)).first->second;
}

Result<int> Devices::common_device(NamedPointer first, std::initializer_list<NamedPointer> others) {
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

}  // namespace flashjit::runtime
