// Diagnostics of a Runtime: their levels and the callback that receives them (RuntimeOptions::log_callback).
#pragma once

#include <functional>
#include <string_view>

namespace flashjit {

// Most severe first: a Runtime at level L reports the messages of L and of every level above it.
enum class LogLevel { error = 0, warn = 1, info = 2, debug = 3 };

// Receives one message (one line, without the "flashjit LEVEL: " prefix and without a newline). Called from any
// thread the Runtime works in, possibly from several at once; it must not throw (an exception is dropped).
using LogCallback = std::function<void(LogLevel level, std::string_view message)>;

}  // namespace flashjit
