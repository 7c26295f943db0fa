// Child processes of the compile pool: started with posix_spawn (never a bare fork() of a parent that may
// run threads), stdin from /dev/null, stdout and stderr captured through pipes, killed and reaped by pid.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "flashjit/error.hpp"

namespace flashjit::tune {

class Child {
 public:
  enum Stream { out = 0, err = 1 };

  // Starts the program at argv[0] (a path) with the parent's environment plus `env` ("VAR=value", replacing
  // a variable of the same name). ErrorCode::io when it cannot be started.
  static Result<std::unique_ptr<Child>> spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env);
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

}  // namespace flashjit::tune
