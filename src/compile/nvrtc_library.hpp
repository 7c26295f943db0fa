// NVRTC loaded at run time by path (dlopen), never linked: the library then runs where the toolkit is absent
// (NVRTC from the nvidia-cuda-nvrtc wheel) and the version in every cache key is that of the NVRTC that
// compiled. Looked for, once per process, in this order:
//   1. $FLASHJIT_NVRTC (a path to libnvrtc.so*): when set, the only place tried;
//   2. $CUDA_HOME/lib64, $CUDA_HOME/lib (libnvrtc.so, .so.13, .so.12);
//   3. /usr/local/cuda/lib64;
//   4. the dynamic loader's search path by soname (LD_LIBRARY_PATH, ld.so.cache, or one already loaded).
// The builtins library NVRTC opens by soname is loaded first from the directory NVRTC came from, where it is
// there (the wheel's directory is on no search path).
// This is process-wide state read from the environment on first use, like the driver's dlopen (cuda/): a
// compile, a cache key and `flashjit info` see the same NVRTC.
#pragma once

#include <nvrtc.h>  // types and constants only

#include <string>

#include "flashjit/error.hpp"

namespace flashjit::compile {

// The entry points flashjit calls, under the names and types nvrtc.h declares.
#define FLASHJIT_NVRTC_FUNCTIONS(X)                                                                            \
  X(nvrtcGetErrorString) X(nvrtcVersion) X(nvrtcCreateProgram) X(nvrtcDestroyProgram) X(nvrtcCompileProgram) \
  X(nvrtcGetProgramLogSize) X(nvrtcGetProgramLog) X(nvrtcGetCUBINSize) X(nvrtcGetCUBIN) X(nvrtcGetPTXSize)    \
  X(nvrtcGetPTX)

struct NvrtcApi {
#define FLASHJIT_NVRTC_MEMBER(name) decltype(&::name) name = nullptr;
  FLASHJIT_NVRTC_FUNCTIONS(FLASHJIT_NVRTC_MEMBER)
#undef FLASHJIT_NVRTC_MEMBER
  std::string path;      // the file loaded, as the dynamic loader resolved it
  std::string builtins;  // libnvrtc-builtins.so.* loaded from path's directory, or "" (NVRTC's own search)
  int major = 0, minor = 0;
};

// The loaded NVRTC, or an error (ErrorCode::compile) naming every place tried and how to provide one.
Result<const NvrtcApi*> nvrtc();

}  // namespace flashjit::compile
