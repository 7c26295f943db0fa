// A kernel for testing programmatic dependent launch: one CTA that lets the kernel behind it on the stream start
// at once (griddepcontrol.launch_dependents, sm_90+; before, it only sleeps and writes), sleeps, then writes.
// Device ranges staged with it hold stale contents (zeros, or given) until the kernel restores them: a kernel
// launched behind it with programmatic dependent launch sees their real contents only if it reads them after its
// griddepcontrol.wait.
#pragma once

#include <cstddef>
#include <vector>

#include "cuda/driver.hpp"

namespace flashjit::test {

class LateWriter {
 public:
  static constexpr int kMaxRanges = 8;

  // Compiles the kernel with NVRTC for device 0 and loads it (in the current context).
  static Result<LateWriter> make();

  // Saves the `bytes` (a multiple of 4) at device address `dst` and overwrites them with `stale` (host bytes;
  // null: zeros), synchronously.
  Status stage(const void* dst, std::size_t bytes, const void* stale = nullptr);

  // Launches the kernel on `stream` (plain launch): it triggers its dependents, sleeps `delay_us`, then copies
  // every staged range back into place.
  Status launch(CUstream stream, unsigned delay_us) const;

 private:
  struct Range {
    const void* dst;
    cuda::DeviceBuffer saved;
    std::size_t words;
  };
  cuda::Module module_;
  CUfunction function_ = nullptr;
  std::vector<Range> ranges_;
};

}  // namespace flashjit::test
