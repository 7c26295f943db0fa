#include "late_writer.hpp"

#include <fmt/format.h>

#include <cstdint>

#include "compile/nvrtc.hpp"

namespace flashjit::test {
namespace {

// The kernel's argument: the ranges by value (the same layout on both sides: pointers, then 64-bit counts;
// the source below spells kMaxRanges as 8).
static_assert(LateWriter::kMaxRanges == 8);
struct Ranges {
  std::uint64_t dst[LateWriter::kMaxRanges];
  std::uint64_t src[LateWriter::kMaxRanges];
  std::uint64_t words[LateWriter::kMaxRanges];
  std::uint64_t count;
  std::uint64_t delay_ns;
};

constexpr const char* kSource = R"(
struct Ranges {
  unsigned long long dst[8], src[8], words[8], count, delay_ns;
};
__device__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
extern "C" __global__ void late_writer(const Ranges r) {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  const unsigned long long t0 = now_ns();
  while (now_ns() - t0 < r.delay_ns) __nanosleep(2000);
  for (unsigned long long i = 0; i < r.count; ++i) {
    int* dst = reinterpret_cast<int*>(r.dst[i]);
    const int* src = reinterpret_cast<const int*>(r.src[i]);
    for (unsigned long long w = threadIdx.x; w < r.words[i]; w += blockDim.x) dst[w] = src[w];
  }
}
)";

}  // namespace

Result<LateWriter> LateWriter::make() {
  auto info = cuda::device_info(0);
  if (!info.ok()) return info.error();
  const codegen::GeneratedSource source{"late_writer", "late_writer", kSource};
  auto compiled = compile::compile(source, compile::options_for(info->arch), log::Logger{});
  if (!compiled.ok()) return compiled.error();
  auto module = cuda::Module::load(compiled->cubin);
  if (!module.ok()) return module.error();
  LateWriter w;
  w.module_ = std::move(*module);
  auto function = w.module_.function("late_writer");
  if (!function.ok()) return function.error();
  w.function_ = *function;
  return w;
}

Status LateWriter::stage(const void* dst, std::size_t bytes, const void* stale) {
  if (ranges_.size() == kMaxRanges || bytes % 4 != 0)
    return Error(ErrorCode::invalid_argument,
                 fmt::format("LateWriter::stage: {} bytes with {} ranges staged", bytes, ranges_.size()));
  auto api = cuda::api();
  if (!api.ok()) return api.error();
  auto saved = cuda::DeviceBuffer::allocate(bytes);
  if (!saved.ok()) return saved.error();
  std::vector<unsigned char> host(bytes);
  const auto address = reinterpret_cast<CUdeviceptr>(dst);
  FLASHJIT_TRY(FLASHJIT_CU((*api)->cuMemcpyDtoH(host.data(), address, bytes)));
  FLASHJIT_TRY(saved->upload(host.data(), bytes));
  if (stale != nullptr)
    FLASHJIT_TRY(FLASHJIT_CU((*api)->cuMemcpyHtoD(address, stale, bytes)));
  else
    FLASHJIT_TRY(FLASHJIT_CU((*api)->cuMemsetD8(address, 0, bytes)));
  ranges_.push_back(Range{dst, std::move(*saved), bytes / 4});
  return {};
}

Status LateWriter::launch(CUstream stream, unsigned delay_us) const {
  auto api = cuda::api();
  if (!api.ok()) return api.error();
  Ranges r{};
  for (std::size_t i = 0; i < ranges_.size(); ++i) {
    r.dst[i] = reinterpret_cast<std::uint64_t>(ranges_[i].dst);
    r.src[i] = reinterpret_cast<std::uint64_t>(ranges_[i].saved.get());
    r.words[i] = ranges_[i].words;
  }
  r.count = ranges_.size();
  r.delay_ns = std::uint64_t{delay_us} * 1000;
  CUlaunchConfig lc{};
  lc.gridDimX = lc.gridDimY = lc.gridDimZ = 1;
  lc.blockDimX = 256, lc.blockDimY = lc.blockDimZ = 1;
  lc.hStream = stream;
  void* args[] = {&r};
  return FLASHJIT_CU((*api)->cuLaunchKernelEx(&lc, function_, args, nullptr));
}

}  // namespace flashjit::test
