// The auxiliary arguments of the user snippets (attention/mod.cuh) in a kernel's params: plain C, so the host
// (gcc) and NVRTC see the same layout; the public API's ModAux (flashjit/problem.hpp) fills it.
#pragma once

namespace flashjit {

struct ModAuxParams {
  static constexpr int kPointers = 8, kScalars = 8, kIntegers = 8;
  const void* pointers[kPointers];
  float scalars[kScalars];
  long long integers[kIntegers];
};

}  // namespace flashjit
