// Child processes of the compile workers (the runtime's out-of-process compiles, the compile pool): started with
// posix_spawn (never a bare fork() of a parent that may run threads), stdin from /dev/null or from a given
// text, stdout and stderr captured through pipes, killed and reaped by pid.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "flashjit/error.hpp"

namespace flashjit::compile {

class Child {
 public:
  enum Stream { out = 0, err = 1 };

  // Starts the program at argv[0] (a path) with the parent's environment plus `env` ("VAR=value", replacing
  // a variable of the same name). ErrorCode::io when it cannot be started.
  // `input`, when given, is what the child reads on stdin (from an in-memory file, so no write can block).
  static Result<std::unique_ptr<Child>> spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                                              const std::string* input = nullptr);
  ~Child();  // a child still running is killed (SIGKILL) and reaped
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }
  // The pipe of a stream while it is open, else -1 (for poll()).
  int fd(Stream s) const { return fds_[s]; }
  // Reads what a readable pipe holds; closes it at end of file. Output past 16 MiB is dropped.
  void drain(Stream s);
  bool pipes_closed() const { return fds_[out] < 0 && fds_[err] < 0; }
  // Reaps the child if it has exited; true once reaped.
  bool try_reap();
  // SIGKILL, then reap.
  void kill_and_reap();

  const std::string& output(Stream s) const { return text_[s]; }
  int wait_status() const { return status_; }  // as waitpid() reports it; meaningful once reaped

 private:
  Child() = default;
  pid_t pid_ = -1;
  int fds_[2] = {-1, -1};
  std::string text_[2];
  bool reaped_ = true;  // until a process is started
  int status_ = 0;
};

// "exited with status 1", "was killed by signal 11 (SIGSEGV)".
std::string describe_wait_status(int status);

// Collects the child's output until it ends, or kills it at `deadline`; true when it ran past the deadline.
bool wait_for_end(Child& child, std::chrono::steady_clock::time_point deadline);

// The longest timeout (a week): longer ones are taken as this, never overflowing a deadline.
inline constexpr double kMaxTimeoutSeconds = 7 * 24 * 3600.0;
// Seconds as a timeout, clamped to [1 ms, kMaxTimeoutSeconds] (NaN: the longest).
std::chrono::milliseconds timeout_of(double seconds);

// start + timeout, saturating at the clock's end instead of wrapping past it.
std::chrono::steady_clock::time_point deadline_of(std::chrono::steady_clock::time_point start,
                                                  std::chrono::milliseconds timeout);

// Worker side of the parent-death rule: the worker dies (SIGKILL) with the process that started it, so that
// killing a parent never leaves compilers running. `parent` is the pid the parent gave it; false when that
// parent is already gone (the caller exits).
bool die_with_parent(pid_t parent);

}  // namespace flashjit::compile
