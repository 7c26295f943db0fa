// Diagnostics on stderr, filtered by FLASHJIT_LOG (error | warn | info | debug; default warn).
#pragma once

#include <fmt/format.h>

#include <string_view>

namespace flashjit::log {

enum class Level { error = 0, warn = 1, info = 2, debug = 3 };

Level level();
void set_level(Level l);
void write(Level l, std::string_view message);

template <class... Args>
void debug(fmt::format_string<Args...> f, Args&&... args) {
  if (level() >= Level::debug) write(Level::debug, fmt::format(f, std::forward<Args>(args)...));
}
template <class... Args>
void info(fmt::format_string<Args...> f, Args&&... args) {
  if (level() >= Level::info) write(Level::info, fmt::format(f, std::forward<Args>(args)...));
}
template <class... Args>
void warn(fmt::format_string<Args...> f, Args&&... args) {
  if (level() >= Level::warn) write(Level::warn, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace flashjit::log
