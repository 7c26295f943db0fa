#include "common/log.hpp"

#include <cstdio>

namespace flashjit::log {

Logger::Logger(Level level, LogCallback sink)
    : level_(level), sink_(sink ? std::make_shared<const LogCallback>(std::move(sink)) : nullptr) {}

void Logger::write(Level l, std::string_view message) const {
  if (sink_) {
    try {
      (*sink_)(l, message);
    } catch (...) {  // the callback must not throw; what it throws must not unwind through the runtime
    }
    return;
  }
  static const char* names[] = {"error", "warning", "info", "debug"};
  // One fprintf per message keeps lines from different threads whole.
  std::fprintf(stderr, "flashjit %s: %.*s\n", names[static_cast<int>(l)], static_cast<int>(message.size()),
               message.data());
}

}  // namespace flashjit::log
