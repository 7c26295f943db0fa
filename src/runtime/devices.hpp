// The devices a Runtime has used: each one's properties, its primary context (retained for the Runtime's
// life) and the tuned tables stamped for it; and running code with a device's context current.
#pragma once

#include <functional>
#include <initializer_list>
#include <map>
#include <shared_mutex>
#include <utility>

#include "common/log.hpp"
#include "cuda/driver.hpp"
#include "dispatch/tuned_table.hpp"

namespace flashjit::runtime {

struct Device {
  cuda::DeviceInfo info;
  CUcontext context = nullptr;
  dispatch::TunedTables tuned;
};

class Devices {
 public:
  Devices(dispatch::TunedTables tuned, log::Logger logger) : tuned_(std::move(tuned)), logger_(std::move(logger)) {}
  Devices(const Devices&) = delete;
  Devices& operator=(const Devices&) = delete;
  // Runs `before_release(ordinal)` in each device's context (to free what lives in it), then releases the
  // primary contexts.
  void release(const std::function<void(int ordinal)>& before_release);
  ~Devices() { release({}); }

  // A device by ordinal, registered (context retained, tables stamped) on first use. Thread-safe.
  Result<const Device*> get(int ordinal);
  // Every tuned table the runtime loaded (a device keeps those stamped for it).
  const dispatch::TunedTables& tables() const { return tuned_; }
  // A registered device, or null.
  const Device* find(int ordinal) const;

  // The device of a problem's tensors, all of which must live on one: `first` and the non-null `others`.
  using NamedPointer = std::pair<const void*, const char*>;
  static Result<int> common_device(NamedPointer first, std::initializer_list<NamedPointer> others);

  // Runs `f` with the device's primary context current (pushed unless it already is).
  template <class F>
  static Status in_context(const Device& dev, F&& f) {
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

 private:
  dispatch::TunedTables tuned_;  // loaded once; each device keeps those stamped for it
  log::Logger logger_;
  mutable std::shared_mutex mutex_;
  std::map<int, Device> devices_;
};

}  // namespace flashjit::runtime
