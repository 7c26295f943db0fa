#include "progress.hpp"

#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>

namespace flashjit::cli {

ProgressLine::ProgressLine(std::FILE* out, bool tty)
    : out_(out), tty_(tty), start_(std::chrono::steady_clock::now()) {
  winsize w{};
  if (tty_ && ::ioctl(::fileno(out_), TIOCGWINSZ, &w) == 0 && w.ws_col > 0) columns_ = w.ws_col;
}

std::string clock_text(double seconds) {
  const long long s = std::llround(std::max(0.0, seconds));
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

std::string ProgressLine::status(const tune::PoolProgress& p) const {
  std::string eta = "?";
  if (p.done > 0) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    eta = clock_text(elapsed / p.done * (p.total - p.done));
  }
  return fmt::format("{} failed, ETA {}", p.failed, eta);
}

void ProgressLine::operator()(const tune::PoolEvent& e) {
  const tune::PoolProgress& p = e.progress;
  const int width = static_cast<int>(fmt::formatted_size("{}", p.total));
  const std::string count = fmt::format("[{:>{}}/{}]", p.done, width, p.total);
  const tune::CompileOutcome& o = e.outcome;
  std::string line;
  if (e.kind == tune::PoolEvent::finished) {
    if (!o.info.ok())
      line = fmt::format("{} FAILED {}: {}", count, o.name, o.info.error().message);
    else if (!tty_)
      line = fmt::format("{} {} {} in {:.2f} s", count, o.info->cache_hit ? "found" : "compiled", o.name, o.wall_ms / 1000);
  }
  if (tty_) {
    // A failure stays on screen above the redrawn line.
    if (!line.empty()) fmt::print(out_, "\r\x1b[K{}\n", line);
    std::string now = p.running.empty() ? std::string() : "  compiling " + p.running.front();
    if (p.running.size() > 1) now += fmt::format(" (+{} more)", p.running.size() - 1);
    std::string redrawn = fmt::format("{} {}{}", count, status(p), now);
    if (redrawn.size() >= columns_) redrawn.resize(columns_ - 1);  // a wrapped line could not be redrawn
    fmt::print(out_, "\r\x1b[K{}", redrawn);
    drawn_ = true;
  } else if (!line.empty()) {
    fmt::print(out_, "{}; {}\n", line, status(p));
  }
  std::fflush(out_);
}

void ProgressLine::finish() {
  if (tty_ && drawn_) fmt::print(out_, "\r\x1b[K");
  drawn_ = false;
  std::fflush(out_);
}

}  // namespace flashjit::cli
