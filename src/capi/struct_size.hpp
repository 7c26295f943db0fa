// What the readers of the C ABI's versioned structs share (args.cpp, append_args.cpp): the struct_size rules, the
// test of whether a field lies within the caller's struct, and the conversions of its shared field types.
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <type_traits>

#include "flashjit/flashjit.h"
#include "flashjit/problem.hpp"

namespace flashjit::capi {

// Beyond this many bytes past the struct this library knows, a struct_size is taken for garbage (an unset
// field) rather than a newer header's struct.
inline constexpr std::size_t kMaxUnknownTail = 4096;

// Copies `n` bytes at `src` (just past the caller's struct) into `dst` without touching memory that is not
// mapped readable; false when some byte is not readable.
bool read_tail(const unsigned char* src, std::size_t n, unsigned char* dst);

// The struct_size rules: at least `min_size`; past sizeof(T) (a newer header) only zero bytes, read without
// reading past readable memory (a struct_size larger than the caller's memory is an error, not a crash).
template <class T>
Status check_struct_size(const T& s, std::size_t min_size, const char* type) {
  const std::size_t n = s.struct_size;
  if (n < min_size)
    return Error(ErrorCode::invalid_argument,
                 fmt::format("{}.struct_size is {}, below the minimum of {} bytes: set it to sizeof({})", type, n,
                             min_size, type));
  if (n > sizeof(T) + kMaxUnknownTail)
    return Error(ErrorCode::invalid_argument,
                 fmt::format("{}.struct_size is {}, not a size of this struct (sizeof({}) is {} in this library): "
                             "set it to sizeof({})",
                             type, n, type, sizeof(T), type));
  if (n <= sizeof(T)) return {};
  unsigned char tail[kMaxUnknownTail];
  if (!read_tail(reinterpret_cast<const unsigned char*>(&s) + sizeof(T), n - sizeof(T), tail))
    return Error(ErrorCode::invalid_argument,
                 fmt::format("{}.struct_size is {}, but the memory past this library's {} bytes is not readable: set "
                             "it to sizeof({})",
                             type, n, sizeof(T), type));
  for (std::size_t i = 0; i < n - sizeof(T); ++i)
    if (tail[i] != 0)
      return Error(ErrorCode::invalid_argument,
                   fmt::format("{}.struct_size is {} and fields past this library's {} bytes are set: the caller "
                               "was built against a newer flashjit.h than this libflashjit ({})",
                               type, n, sizeof(T), FLASHJIT_VERSION));
  return {};
}

// Whether a field lies entirely within the caller's struct (else it takes its default).
#define FLASHJIT_PRESENT(s, field) \
  (offsetof(std::remove_cvref_t<decltype(s)>, field) + sizeof((s).field) <= (s).struct_size)


inline Strides strides_of(const flashjit_strides& s) { return Strides{s.batch, s.seq, s.head}; }

// A flashjit_dtype, flashjit_mask or flashjit_alignment value.
Result<DType> dtype_of(int v);
Result<MaskKind> mask_of(int v);
Result<Alignment> alignment_of(int v);

}  // namespace flashjit::capi
