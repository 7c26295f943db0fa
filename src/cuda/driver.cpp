#include "cuda/driver.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <mutex>
#include <utility>

namespace flashjit::cuda {
namespace {

#define FLASHJIT_STRINGIZE(x) #x
#define FLASHJIT_SYMBOL(x) FLASHJIT_STRINGIZE(x)

Result<Api> load_driver() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = dlerror();
    return Error(ErrorCode::no_device,
                 fmt::format("no CUDA driver: dlopen(libcuda.so.1) failed ({})", why ? why : "unknown"));
  }
  // Each entry point is looked up under the exact versioned symbol cuda.h binds its name to
  // (cuMemAlloc -> cuMemAlloc_v2, cuCtxSynchronize -> cuCtxSynchronize), so the pointer's type matches
  // the function; a newer default version (cuCtxSynchronize_v2 takes a context) is never picked by mistake.
  Api api;
  std::string missing;
  auto resolve = [&](const char* symbol, void** slot) {
    *slot = dlsym(lib, symbol);
    if (!*slot) missing += std::string(missing.empty() ? "" : ", ") + symbol;
  };
#define FLASHJIT_DRIVER_FN(name) resolve(FLASHJIT_SYMBOL(name), reinterpret_cast<void**>(&api.name));
#include "cuda/driver_functions.inc"
#undef FLASHJIT_DRIVER_FN
  if (!missing.empty())
    return Error(ErrorCode::no_device, "the CUDA driver lacks entry points flashjit needs: " + missing);
  CUresult r = api.cuInit(0);
  if (r != CUDA_SUCCESS) {
    const char* name = nullptr;
    api.cuGetErrorName(r, &name);
    return Error(ErrorCode::no_device, fmt::format("cuInit failed: {} (no usable GPU on this machine?)",
                                                   name ? name : "unknown error"));
  }
  return api;
}

}  // namespace

Result<const Api*> api() {
  static std::once_flag once;
  static Result<Api> loaded = Error(ErrorCode::internal, "driver not loaded");
  std::call_once(once, [] { loaded = load_driver(); });
  if (!loaded.ok()) return loaded.error();
  return &loaded.value();
}

Status check(CUresult result, const char* call) {
  if (result == CUDA_SUCCESS) return {};
  const char* name = nullptr;
  const char* text = nullptr;
  if (auto a = api(); a.ok()) {
    (*a)->cuGetErrorName(result, &name);
    (*a)->cuGetErrorString(result, &text);
  }
  return Error(ErrorCode::driver, fmt::format("{} failed: {} ({})", call, name ? name : std::to_string(result),
                                              text ? text : "no description"));
}

#define FLASHJIT_API_OR_RETURN(var)              \
  auto var##_r = api();                          \
  if (!var##_r.ok()) return var##_r.error();     \
  const Api& var = **var##_r

Result<int> device_count() {
  FLASHJIT_API_OR_RETURN(d);
  int n = 0;
  FLASHJIT_TRY(check(d.cuDeviceGetCount(&n), "cuDeviceGetCount"));
  return n;
}

Result<DeviceInfo> device_info(int ordinal) {
  FLASHJIT_API_OR_RETURN(d);
  CUdevice dev;
  FLASHJIT_TRY(check(d.cuDeviceGet(&dev, ordinal), "cuDeviceGet"));
  DeviceInfo info;
  info.ordinal = ordinal;
  char name[256] = {};
  FLASHJIT_TRY(check(d.cuDeviceGetName(name, sizeof(name), dev), "cuDeviceGetName"));
  info.name = name;
  int major = 0, minor = 0;
  FLASHJIT_TRY(check(d.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev),
                     "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MAJOR)"));
  FLASHJIT_TRY(check(d.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev),
                     "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MINOR)"));
  info.arch = Arch{major * 10 + minor, major >= 9};
  FLASHJIT_TRY(check(d.cuDeviceGetAttribute(&info.sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev),
                     "cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)"));
  FLASHJIT_TRY(check(d.cuDeviceGetAttribute(&info.max_smem_optin,
                                            CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev),
                     "cuDeviceGetAttribute(MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)"));
  FLASHJIT_TRY(check(d.cuDriverGetVersion(&info.driver_version), "cuDriverGetVersion"));
  FLASHJIT_TRY(check(d.cuDeviceTotalMem(&info.total_memory, dev), "cuDeviceTotalMem"));
  return info;
}

Result<int> device_of_pointer(const void* ptr, const char* what) {
  FLASHJIT_API_OR_RETURN(d);
  int ordinal = -1;
  CUresult r = d.cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                       reinterpret_cast<CUdeviceptr>(ptr));
  if (r != CUDA_SUCCESS || ordinal < 0)
    return Error(ErrorCode::invalid_argument,
                 fmt::format("{} ({}) is not a CUDA device pointer", what, fmt::ptr(ptr)));
  return ordinal;
}

bool capturing(const Api& api, CUstream stream) {
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  return api.cuStreamIsCapturing(stream, &capture) != CUDA_SUCCESS || capture != CU_STREAM_CAPTURE_STATUS_NONE;
}

// ContextScope ------------------------------------------------------------------------------------------
Result<ContextScope> ContextScope::enter(int ordinal) {
  FLASHJIT_API_OR_RETURN(d);
  ContextScope s;
  FLASHJIT_TRY(check(d.cuDeviceGet(&s.dev_, ordinal), "cuDeviceGet"));
  FLASHJIT_TRY(check(d.cuDevicePrimaryCtxRetain(&s.ctx_, s.dev_), "cuDevicePrimaryCtxRetain"));
  if (auto st = check(d.cuCtxPushCurrent(s.ctx_), "cuCtxPushCurrent"); !st.ok()) {
    d.cuDevicePrimaryCtxRelease(s.dev_);
    return std::move(st).error();
  }
  s.active_ = true;
  return s;
}

ContextScope::ContextScope(ContextScope&& o) noexcept
    : dev_(o.dev_), ctx_(o.ctx_), active_(std::exchange(o.active_, false)) {}

ContextScope::~ContextScope() {
  if (!active_) return;
  const Api& d = **api();
  CUcontext popped = nullptr;
  d.cuCtxPopCurrent(&popped);
  d.cuDevicePrimaryCtxRelease(dev_);
}

// DeviceBuffer ------------------------------------------------------------------------------------------
Result<DeviceBuffer> DeviceBuffer::allocate(std::size_t bytes) {
  FLASHJIT_API_OR_RETURN(d);
  DeviceBuffer b;
  FLASHJIT_TRY(check(d.cuMemAlloc(&b.ptr_, bytes ? bytes : 1), "cuMemAlloc"));
  b.size_ = bytes;
  return b;
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : ptr_(std::exchange(o.ptr_, 0)), size_(std::exchange(o.size_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    this->~DeviceBuffer();
    ptr_ = std::exchange(o.ptr_, 0);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) (*api())->cuMemFree(ptr_);
}

Status DeviceBuffer::upload(const void* host, std::size_t bytes) {
  return check((*api())->cuMemcpyHtoD(ptr_, host, bytes), "cuMemcpyHtoD");
}
Status DeviceBuffer::download(void* host, std::size_t bytes) const {
  return check((*api())->cuMemcpyDtoH(host, ptr_, bytes), "cuMemcpyDtoH");
}
Status DeviceBuffer::fill_bytes(unsigned char value) {
  return check((*api())->cuMemsetD8(ptr_, value, size_), "cuMemsetD8");
}

// Module ------------------------------------------------------------------------------------------------
Result<Module> Module::load(const std::string& image) {
  FLASHJIT_API_OR_RETURN(d);
  Module m;
  FLASHJIT_TRY(check(d.cuModuleLoadData(&m.mod_, image.data()), "cuModuleLoadData"));
  return m;
}

Module::Module(Module&& o) noexcept : mod_(std::exchange(o.mod_, nullptr)) {}
Module& Module::operator=(Module&& o) noexcept {
  if (this != &o) {
    this->~Module();
    mod_ = std::exchange(o.mod_, nullptr);
  }
  return *this;
}
Module::~Module() {
  if (mod_) (*api())->cuModuleUnload(mod_);
}

Result<CUfunction> Module::function(const char* name) const {
  CUfunction f = nullptr;
  FLASHJIT_TRY(check((*api())->cuModuleGetFunction(&f, mod_, name), "cuModuleGetFunction"));
  return f;
}

// EventTimer --------------------------------------------------------------------------------------------
Result<EventTimer> EventTimer::create() {
  FLASHJIT_API_OR_RETURN(d);
  EventTimer t;
  FLASHJIT_TRY(check(d.cuEventCreate(&t.a_, CU_EVENT_DEFAULT), "cuEventCreate"));
  FLASHJIT_TRY(check(d.cuEventCreate(&t.b_, CU_EVENT_DEFAULT), "cuEventCreate"));
  return t;
}
EventTimer::EventTimer(EventTimer&& o) noexcept
    : a_(std::exchange(o.a_, nullptr)), b_(std::exchange(o.b_, nullptr)) {}
EventTimer::~EventTimer() {
  if (a_) (*api())->cuEventDestroy(a_);
  if (b_) (*api())->cuEventDestroy(b_);
}
Status EventTimer::start(CUstream s) { return check((*api())->cuEventRecord(a_, s), "cuEventRecord"); }
Status EventTimer::stop(CUstream s) { return check((*api())->cuEventRecord(b_, s), "cuEventRecord"); }
Result<float> EventTimer::elapsed_ms() {
  FLASHJIT_TRY(check((*api())->cuEventSynchronize(b_), "cuEventSynchronize"));
  float ms = 0;
  FLASHJIT_TRY(check((*api())->cuEventElapsedTime(&ms, a_, b_), "cuEventElapsedTime"));
  return ms;
}

}  // namespace flashjit::cuda
