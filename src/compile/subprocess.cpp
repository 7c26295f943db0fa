#include "compile/subprocess.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <poll.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

extern char** environ;

namespace flashjit::compile {
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

Result<std::unique_ptr<Child>> Child::spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                                            const std::string* input) {
  if (argv.empty()) return Error(ErrorCode::invalid_argument, "no program to start");
  // stdin: an in-memory file holding `input`, rewound (dup2 onto 0 clears its close-on-exec there).
  struct InputFile {
    int fd = -1;
    ~InputFile() { if (fd >= 0) ::close(fd); }
  } in;
  if (input) {
    in.fd = ::memfd_create("flashjit-worker-input", MFD_CLOEXEC);
    if (in.fd < 0) return sys_error("memfd_create", errno);
    for (std::size_t done = 0; done < input->size();) {
      const ssize_t n = ::write(in.fd, input->data() + done, input->size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return sys_error("write (worker input)", errno);
      done += static_cast<std::size_t>(n);
    }
    if (::lseek(in.fd, 0, SEEK_SET) != 0) return sys_error("lseek (worker input)", errno);
  }
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
  if (rc == 0)
    rc = in.fd >= 0 ? posix_spawn_file_actions_adddup2(&setup.actions, in.fd, 0)
                    : posix_spawn_file_actions_addopen(&setup.actions, 0, "/dev/null", O_RDONLY, 0);
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

bool wait_for_end(Child& child, std::chrono::steady_clock::time_point deadline) {
  using Clock = std::chrono::steady_clock;
  for (;;) {
    if (child.pipes_closed() && child.try_reap()) return false;
    const auto now = Clock::now();
    if (now >= deadline) {
      child.kill_and_reap();
      for (auto s : {Child::out, Child::err}) child.drain(s);
      return true;
    }
    pollfd fds[2];
    nfds_t n = 0;
    for (auto s : {Child::out, Child::err})
      if (child.fd(s) >= 0) fds[n++] = {child.fd(s), POLLIN, 0};
    // Pipes closed but not yet reaped: look again soon.
    auto wait = n == 0 ? std::chrono::milliseconds(2)
                       : std::min(std::chrono::ceil<std::chrono::milliseconds>(deadline - now), std::chrono::milliseconds(1000));
    if (n == 0) {
      ::poll(nullptr, 0, static_cast<int>(wait.count()));
      continue;
    }
    if (::poll(fds, n, static_cast<int>(wait.count())) > 0)
      for (auto s : {Child::out, Child::err}) child.drain(s);
  }
}

std::chrono::milliseconds timeout_of(double seconds) {
  if (!(seconds < kMaxTimeoutSeconds)) seconds = kMaxTimeoutSeconds;  // NaN too
  return std::chrono::milliseconds(std::max<long long>(1, static_cast<long long>(seconds * 1000)));
}

std::chrono::steady_clock::time_point deadline_of(std::chrono::steady_clock::time_point start,
                                                  std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  const auto room = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::time_point::max() - start);
  return timeout >= room ? Clock::time_point::max() : start + timeout;
}

bool die_with_parent(pid_t parent) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  return parent <= 0 || ::getppid() == parent;  // a parent that died before prctl: we were reparented
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

}  // namespace flashjit::compile
