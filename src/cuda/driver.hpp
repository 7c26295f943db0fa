// The CUDA driver, loaded at run time with dlopen("libcuda.so.1") and dlsym, never linked:
// every binary starts on a machine without a GPU and says so. Every CUresult becomes an Error naming the
// call. Small RAII wrappers for what the runtime, tools and tests need.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <string>

#include "flashjit/config.hpp"
#include "flashjit/error.hpp"

namespace flashjit::cuda {

// Driver entry points, resolved once.
struct Api {
#define FLASHJIT_DRIVER_FN(name) decltype(&::name) name = nullptr;
#include "cuda/driver_functions.inc"
#undef FLASHJIT_DRIVER_FN
};

// The resolved driver (after cuInit), or ErrorCode::no_device saying why (no libcuda, no GPU, ...).
Result<const Api*> api();

// Status for a CUresult: ok, or ErrorCode::driver "CALL failed: CUDA_ERROR_NAME (description)".
Status check(CUresult result, const char* call);
#define FLASHJIT_CU(call) ::flashjit::cuda::check((call), #call)

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  Arch arch;               // sm_90 devices report the accelerated target sm_90a
  int sms = 0;
  int max_smem_optin = 0;  // bytes per block after opting in
  int driver_version = 0;  // e.g. 13000
  std::size_t total_memory = 0;
};

Result<int> device_count();
Result<DeviceInfo> device_info(int ordinal);
// The device that owns a device pointer (ErrorCode::invalid_argument for host or unknown pointers).
Result<int> device_of_pointer(const void* ptr, const char* what);

// Whether work on `stream` would be captured into a CUDA graph. A failing query counts as capturing (e.g. the
// legacy stream while another thread captures in global mode): then nothing is compiled, loaded or allocated.
bool capturing(const Api& api, CUstream stream);
// CU_STREAM_LEGACY and nullptr both name the legacy default stream: nullptr for both.
inline CUstream canonical_stream(CUstream stream) { return stream == CU_STREAM_LEGACY ? nullptr : stream; }

// Makes the primary context of a device current on this thread for its lifetime, restoring the previous.
class ContextScope {
 public:
  static Result<ContextScope> enter(int ordinal);
  ContextScope(ContextScope&& o) noexcept;
  ContextScope& operator=(ContextScope&&) = delete;
  ~ContextScope();
  CUcontext context() const { return ctx_; }

 private:
  ContextScope() = default;
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
  bool active_ = false;
};

// Device memory owned by the current context (tools and tests).
class DeviceBuffer {
 public:
  static Result<DeviceBuffer> allocate(std::size_t bytes);
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  ~DeviceBuffer();
  void* get() const { return reinterpret_cast<void*>(ptr_); }
  std::size_t size() const { return size_; }
  Status upload(const void* host, std::size_t bytes);
  Status download(void* host, std::size_t bytes) const;
  Status fill_bytes(unsigned char value);

 private:
  CUdeviceptr ptr_ = 0;
  std::size_t size_ = 0;
};

// A loaded module (cubin image) in the current context.
class Module {
 public:
  static Result<Module> load(const std::string& image);
  Module() = default;
  Module(Module&& o) noexcept;
  Module& operator=(Module&& o) noexcept;
  ~Module();
  Result<CUfunction> function(const char* name) const;

 private:
  CUmodule mod_ = nullptr;
};

// Milliseconds between two points on a stream (CUDA events).
class EventTimer {
 public:
  static Result<EventTimer> create();
  EventTimer(EventTimer&& o) noexcept;
  EventTimer& operator=(EventTimer&&) = delete;
  ~EventTimer();
  Status start(CUstream stream);
  Status stop(CUstream stream);
  Result<float> elapsed_ms();  // waits for the stop event

 private:
  EventTimer() = default;
  CUevent a_ = nullptr, b_ = nullptr;
};

}  // namespace flashjit::cuda
