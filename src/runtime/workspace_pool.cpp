#include "runtime/workspace_pool.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace flashjit::runtime {

WorkspacePool::StreamKey WorkspacePool::key_of(int device, CUstream stream) {
  stream = cuda::canonical_stream(stream);
  return {device, stream, stream == CU_STREAM_PER_THREAD ? std::this_thread::get_id() : std::thread::id()};
}

Result<WorkspacePool::Lease> WorkspacePool::lease(const Device& dev, CUstream stream, std::size_t bytes) {
  Lease lease;
  const StreamKey key = key_of(dev.info.ordinal, stream);
  for (;;) {
    std::shared_ptr<Workspace> entry;
    {
      std::lock_guard lock(mutex_);
      auto it = workspaces_.find(key);
      if (it == workspaces_.end()) it = workspaces_.emplace(key, std::make_shared<Workspace>()).first;
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
  if (cuda::capturing(**cuda::api(), stream))
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

Status WorkspacePool::release(CUstream stream, const Devices& devices) {
  stream = cuda::canonical_stream(stream);
  std::lock_guard lock(mutex_);
  for (auto it = workspaces_.begin(); it != workspaces_.end();) {
    if (it->first.stream != stream ||
        (stream == CU_STREAM_PER_THREAD && it->first.thread != std::this_thread::get_id())) {
      ++it;
      continue;
    }
    const Device* dev = devices.find(it->first.device);
    if (dev == nullptr) {  // cannot happen: a workspace belongs to a known device
      ++it;
      continue;
    }
    FLASHJIT_TRY(Devices::in_context(*dev, [&]() -> Status {
      Workspace& w = *it->second;
      std::lock_guard use(w.use);  // a decode launching on the stream now finishes first
      FLASHJIT_TRY(cuda::check((*cuda::api())->cuStreamSynchronize(stream), "cuStreamSynchronize"));
      w.current = {};  // frees the current and retired buffers in the device's context
      w.retired.clear();
      w.released = true;  // a decode already waiting for `use` looks the stream up again
      return {};
    }));
    it = workspaces_.erase(it);
  }
  return {};
}

void WorkspacePool::drop(int device) {
  std::lock_guard lock(mutex_);
  for (auto it = workspaces_.begin(); it != workspaces_.end();)
    it = it->first.device == device ? workspaces_.erase(it) : std::next(it);
}

}  // namespace flashjit::runtime
