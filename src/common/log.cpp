#include "common/log.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace flashjit::log {
namespace {

Level from_env() {
  const char* v = std::getenv("FLASHJIT_LOG");
  if (!v) return Level::warn;
  std::string s(v);
  if (s == "debug") return Level::debug;
  if (s == "info") return Level::info;
  if (s == "error") return Level::error;
  return Level::warn;
}

std::atomic<int>& current() {
  static std::atomic<int> l{static_cast<int>(from_env())};
  return l;
}

}  // namespace

Level level() { return static_cast<Level>(current().load(std::memory_order_relaxed)); }
void set_level(Level l) { current().store(static_cast<int>(l)); }

void write(Level l, std::string_view message) {
  static const char* names[] = {"error", "warning", "info", "debug"};
  // One fprintf per message keeps lines from different threads whole.
  std::fprintf(stderr, "flashjit %s: %.*s\n", names[static_cast<int>(l)], static_cast<int>(message.size()),
               message.data());
}

}  // namespace flashjit::log
