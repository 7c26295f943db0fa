// A bound on the nesting of JSON text read from outside (configs, sweeps, tuned tables, worker replies),
// checked before it is parsed: nlohmann's parser is iterative, but dump(), copies and comparisons recurse,
// so deeply nested input (tens of thousands of levels) would overflow the stack of whoever prints it.
#pragma once

#include <cstddef>
#include <string_view>

#include "flashjit/error.hpp"

namespace flashjit {

inline constexpr std::size_t kMaxJsonDepth = 64;

// ErrorCode::invalid_argument "JSON nested deeper than N levels" when an array or object opens more than
// `max_depth` levels deep (brackets inside strings do not count). Says nothing about validity otherwise.
Status check_json_depth(std::string_view text, std::size_t max_depth = kMaxJsonDepth);

}  // namespace flashjit
