// The runtime's decode workspaces: one buffer per (device, stream) for the split partials, grown
// geometrically outside CUDA graph capture. A decode holds its stream's buffer from taking it to the end of
// its launches (a lease): threads sharing a stream would otherwise interleave their split and combine
// kernels in it, and one decode's split kernel overwrite the partials another's combine reads. Buffers a
// workspace outgrew stay allocated until the pool goes: a graph captured earlier may still point at them.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "cuda/driver.hpp"
#include "runtime/devices.hpp"

namespace flashjit::runtime {

class WorkspacePool {
  struct Workspace;

 public:
  // A workspace buffer held for one decode.
  struct Lease {
    std::shared_ptr<Workspace> workspace;
    std::unique_lock<std::mutex> lock;  // declared after `workspace`: unlocked before the workspace may go
    void* buffer = nullptr;
  };

  // The workspace of (device, stream), at least `bytes` large, held until the lease ends. The device's
  // context is current.
  Result<Lease> lease(const Device& dev, CUstream stream, std::size_t bytes);
  // Frees the workspaces of a stream on every device (after synchronizing the stream in the device's context).
  Status release(CUstream stream, const Devices& devices);
  // Frees a device's workspaces (its context current).
  void drop(int device);

 private:
  // CU_STREAM_PER_THREAD is one handle but a different stream in each thread, so its key carries the thread.
  struct StreamKey {
    int device;
    CUstream stream;
    std::thread::id thread;
    auto operator<=>(const StreamKey&) const = default;
  };
  static StreamKey key_of(int device, CUstream stream);

  struct Workspace {
    std::mutex use;
    bool released = false;  // under `use`: the stream's next decode makes a new one
    cuda::DeviceBuffer current;
    std::vector<cuda::DeviceBuffer> retired;
  };

  std::mutex mutex_;
  std::map<StreamKey, std::shared_ptr<Workspace>> workspaces_;  // entries under mutex_
};

}  // namespace flashjit::runtime
