// Tests of the Logger: the level filters, a callback sink receives the level and the bare message, copies share
// their sink, a throwing sink is contained, and without a sink the lines go to stderr.
#include "common/log.hpp"

#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "support/capture_stderr.hpp"
#include "support/catch.hpp"

using flashjit::LogLevel;
using flashjit::log::Logger;
using flashjit::test::capture_stderr;

TEST_CASE("log: the default logger writes warnings on stderr", "[log]") {
  const Logger logger;
  CHECK(logger.level() == LogLevel::warn);
  const std::string err = capture_stderr([&] {
    logger.debug("not {}", "shown");
    logger.info("not shown either");
    logger.warn("cache {} is read-only", "/x");
  });
  CHECK(err == "flashjit warning: cache /x is read-only\n");
}

TEST_CASE("log: a callback receives what its level lets through", "[log]") {
  std::vector<std::pair<LogLevel, std::string>> seen;
  auto sink = [&](LogLevel l, std::string_view m) { seen.emplace_back(l, std::string(m)); };
  const std::string err = capture_stderr([&] {
    const Logger info(LogLevel::info, sink);
    info.debug("hidden");
    info.info("compiling {} ...", "k");
    info.warn("careful");
    const Logger error(LogLevel::error, sink);
    error.warn("hidden too");
    error.write(LogLevel::error, "written whatever the level");
  });
  CHECK(err.empty());
  CHECK(seen == std::vector<std::pair<LogLevel, std::string>>{{LogLevel::info, "compiling k ..."},
                                                              {LogLevel::warn, "careful"},
                                                              {LogLevel::error, "written whatever the level"}});
}

TEST_CASE("log: copies share one sink; a throwing sink is contained", "[log]") {
  std::vector<int> calls;
  const Logger a(LogLevel::debug, [n = 0, &calls](LogLevel, std::string_view) mutable { calls.push_back(++n); });
  const Logger b = a;
  a.debug("one");
  b.debug("two");
  CHECK(calls == std::vector<int>{1, 2});  // one callable: its count runs across the copies

  const Logger throwing(LogLevel::debug, [](LogLevel, std::string_view) { throw std::runtime_error("sink"); });
  CHECK_NOTHROW(throwing.warn("dropped"));
}
