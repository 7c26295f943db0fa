// Small predicates the problem checks share (decode_problem.cpp, append_problem.cpp).
#pragma once

#include <cstdint>

namespace flashjit::dispatch {

inline bool is_power_of_two(int x) { return x > 0 && (x & (x - 1)) == 0; }
inline bool aligned(const void* p, std::uintptr_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

}  // namespace flashjit::dispatch
