// Diagnostics: a Logger is a level and a sink (a LogCallback, or stderr), made once per Runtime (or tool) from
// its settings and passed to whoever logs. There is no process-wide level.
#pragma once

#include <fmt/format.h>

#include <memory>
#include <string_view>
#include <utility>

#include "flashjit/log.hpp"

namespace flashjit::log {

using Level = LogLevel;

class Logger {
 public:
  // Warnings and errors, on stderr.
  Logger() = default;
  // A null sink writes "flashjit LEVEL: message" lines on stderr. Copies share the sink.
  Logger(Level level, LogCallback sink);

  Level level() const { return level_; }
  // Sends the message to the sink whatever the level (the helpers below filter).
  void write(Level l, std::string_view message) const;

  template <class... Args>
  void debug(fmt::format_string<Args...> f, Args&&... args) const {
    if (level_ >= Level::debug) write(Level::debug, fmt::format(f, std::forward<Args>(args)...));
  }
  template <class... Args>
  void info(fmt::format_string<Args...> f, Args&&... args) const {
    if (level_ >= Level::info) write(Level::info, fmt::format(f, std::forward<Args>(args)...));
  }
  template <class... Args>
  void warn(fmt::format_string<Args...> f, Args&&... args) const {
    if (level_ >= Level::warn) write(Level::warn, fmt::format(f, std::forward<Args>(args)...));
  }

 private:
  Level level_ = Level::warn;
  std::shared_ptr<const LogCallback> sink_;  // null: stderr
};

}  // namespace flashjit::log
