#include "launch/launch_kernel.hpp"

namespace flashjit::launch {

Status launch_kernel(const cuda::Api& api, CUfunction f, const Geometry& g, CUstream stream, void** args,
                     const char* what) {
  CUlaunchConfig lc{};
  CUlaunchAttribute attrs[2]{};
  unsigned n = 0;
  if (g.cluster_x > 0) {
    attrs[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attrs[n].value.clusterDim.x = g.cluster_x, attrs[n].value.clusterDim.y = 1, attrs[n].value.clusterDim.z = 1;
    ++n;
  }
  if (g.after_previous) {
    attrs[n].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attrs[n].value.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  lc.attrs = n > 0 ? attrs : nullptr;
  lc.numAttrs = n;
  lc.gridDimX = g.grid.x, lc.gridDimY = g.grid.y, lc.gridDimZ = g.grid.z;
  lc.blockDimX = static_cast<unsigned>(g.threads), lc.blockDimY = 1, lc.blockDimZ = 1;
  lc.sharedMemBytes = static_cast<unsigned>(g.smem);
  lc.hStream = stream;
  CUresult r = api.cuLaunchKernelEx(&lc, f, args, nullptr);
  if (g.after_previous && (r == CUDA_ERROR_NOT_SUPPORTED || r == CUDA_ERROR_INVALID_VALUE)) {
    // A driver or stream that refuses programmatic dependent launch gets a plain launch (the kernel's
    // wait then passes straight through); any other failure is the plain launch's to report.
    lc.numAttrs = g.cluster_x > 0 ? 1 : 0;
    if (lc.numAttrs == 0) lc.attrs = nullptr;
    r = api.cuLaunchKernelEx(&lc, f, args, nullptr);
  }
  return cuda::check(r, what);
}

}  // namespace flashjit::launch
