// What the selections for a target (Runtime::select_target, select_decode_target) share: the target's check, its
// words in messages, and the placeholders that stand in for the pointers a selection does not read.
#pragma once

#include <cstdint>
#include <string>

#include "flashjit/runtime.hpp"

namespace flashjit::runtime {

// Stands in for the pointers a selection for a target does not read (check() wants them set and aligned).
inline void* const kPlaceholder = reinterpret_cast<void*>(std::uintptr_t{256});

template <class T>
void fill(T*& pointer) {
  if (pointer == nullptr) pointer = static_cast<T*>(kPlaceholder);
}

Status check_target(const Target& target);

// "a sm_90a target with 132 SMs (H200)".
std::string describe(const Target& target);

}  // namespace flashjit::runtime
