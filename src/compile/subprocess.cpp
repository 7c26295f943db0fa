#include "tune/subprocess.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace flashjit::tune {
namespace {

constexpr std::size_t kMaxCapture = 16u << 20;

Error sys_error(const char* call, int err) {
  return Error(ErrorCode::io, fmt::format("{} failed: {}", call, std::strerror(err)));
}

std::string variable_name(const std::string& assignment) { return assignment.substr(0, assignment.find('=')); }

// The parent's environment with `extra` applied.
std::vector<std::string> merged_environment(const std::vector<std::string>& extra) {
  std::vector<std::string> out;
  for (char** e = environ; e && *e; ++e) {
    std::string var(*e);
    bool replaced = false;
    for (const auto& x : extra) replaced |= variable_name(x) == variable_name(var);
    if (!replaced) out.push_back(std::move(var));
  }
  out.insert(out.end(), extra.begin(), extra.end());
  return out;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> p;
  for (auto& s : strings) p.push_back(s.data());
  p.push_back(nullptr);
  return p;
}

// posix_spawn attributes and file actions, destroyed on every path.
struct SpawnSetup {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  bool actions_ok = false, attr_ok = false;
  ~SpawnSetup() {
    if (actions_ok) posix_spawn_file_actions_destroy(&actions);
    if (attr_ok) posix_spawnattr_destroy(&attr);
  }
};

const char* signal_name(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    default: return nullptr;
  }
}

}  // namespace

Result<std::unique_ptr<Child>> Child::spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  if (argv.empty()) return Error(ErrorCode::invalid_argument, "no program to start");
  std::unique_ptr<Child> child(new Child());
  int pipes[2][2] = {{-1, -1}, {-1, -1}};
  auto close_all = [&] {
    for (auto& p : pipes)
      for (int& fd : p)
        if (fd >= 0) ::close(fd), fd = -1;
  };
  for (auto& p : pipes)
    if (::pipe2(p, O_CLOEXEC) != 0) {
      const int e = errno;
      close_all();
      return sys_error("pipe2", e);
    }
  SpawnSetup setup;
  int rc = posix_spawn_file_actions_init(&setup.actions);
  setup.actions_ok = rc == 0;
  if (rc == 0) rc = posix_spawnattr_init(&setup.attr);
  setup.attr_ok = setup.actions_ok && rc == 0;
  // dup2 onto 1 and 2 clears close-on-exec there; every other descriptor of ours is close-on-exec.
  if (rc == 0) rc = posix_spawn_file_actions_addopen(&setup.actions, 0, "/dev/null", O_RDONLY, 0);
  if (rc == 0) rc = posix_spawn_file_actions_adddup2(&setup.actions, pipes[out][1], 1);
  if (rc == 0) rc = posix_spawn_file_actions_adddup2(&setup.actions, pipes[err][1], 2);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
  // Descriptors other libraries opened without close-on-exec stay out of the child too.
  if (rc == 0) rc = posix_spawn_file_actions_addclosefrom_np(&setup.actions, 3);
#endif
  // Default signal handling in the child, whatever the parent ignores or blocks.
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  if (rc == 0) rc = posix_spawnattr_setsigmask(&setup.attr, &none);
  if (rc == 0) rc = posix_spawnattr_setsigdefault(&setup.attr, &all);
  if (rc == 0) rc = posix_spawnattr_setflags(&setup.attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  if (rc != 0) {
    close_all();
    return sys_error("posix_spawn setup", rc);
  }
  std::vector<std::string> args = argv, environment = merged_environment(env);
  auto arg_ptrs = pointers(args), env_ptrs = pointers(environment);
  rc = posix_spawn(&child->pid_, args[0].c_str(), &setup.actions, &setup.attr, arg_ptrs.data(), env_ptrs.data());
  ::close(pipes[out][1]), pipes[out][1] = -1;
  ::close(pipes[err][1]), pipes[err][1] = -1;
  if (rc != 0) {
    close_all();
    return Error(ErrorCode::io, fmt::format("cannot start {}: {}", args[0], std::strerror(rc)));
  }
  child->reaped_ = false;
  for (int s : {out, err}) {
    child->fds_[s] = pipes[s][0];
    ::fcntl(child->fds_[s], F_SETFL, ::fcntl(child->fds_[s], F_GETFL) | O_NONBLOCK);
  }
  return child;
}

Child::~Child() {
  if (!reaped_) kill_and_reap();
  for (int& fd : fds_)
    if (fd >= 0) ::close(fd), fd = -1;
}

void Child::drain(Stream s) {
  char buf[65536];
  while (fds_[s] >= 0) {
    const ssize_t n = ::read(fds_[s], buf, sizeof buf);
    if (n > 0) {
      const std::size_t room = kMaxCapture - std::min(kMaxCapture, text_[s].size());
      text_[s].append(buf, std::min(room, static_cast<std::size_t>(n)));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;  // nothing more for now
    ::close(fds_[s]), fds_[s] = -1;  // end of file (or an error: nothing more will come)
  }
}

bool Child::try_reap() {
  if (reaped_ || pid_ <= 0) return true;
  pid_t r;
  do r = ::waitpid(pid_, &status_, WNOHANG);
  while (r < 0 && errno == EINTR);
  if (r == pid_ || (r < 0 && errno == ECHILD)) reaped_ = true;
  return reaped_;
}

void Child::kill_and_reap() {
  if (reaped_ || pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  pid_t r;
  do r = ::waitpid(pid_, &status_, 0);
  while (r < 0 && errno == EINTR);
  reaped_ = true;
}

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = signal_name(sig);
    return fmt::format("was killed by signal {} ({})", sig, name ? name : ::strsignal(sig));
  }
  return fmt::format("ended with wait status {:#x}", status);
}

}  // namespace flashjit::tune
