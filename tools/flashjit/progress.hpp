// The compile pool's progress on stderr: done/total, failures, ETA and the kernel compiling now, redrawn in
// place on a terminal; on anything else one plain line per finished kernel.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

#include "tune/compile_pool.hpp"

namespace flashjit::cli {

class ProgressLine {
 public:
  // `tty`: redraw one line with \r (pass isatty(fileno(out))).
  ProgressLine(std::FILE* out, bool tty);
  void operator()(const tune::PoolEvent& event);
  // Clears the redrawn line (a terminal), so what follows starts on a clean line.
  void finish();

 private:
  std::string status(const tune::PoolProgress& p) const;  // "3 failed, ETA 0:14"
  std::FILE* out_;
  bool tty_;
  bool drawn_ = false;
  std::size_t columns_ = 80;  // of the terminal
  std::chrono::steady_clock::time_point start_;
};

// "0:14", "1:02:03"
std::string clock_text(double seconds);

}  // namespace flashjit::cli
