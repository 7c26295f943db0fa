// Tests of the child processes of the compile workers (compile/subprocess.hpp): output, exit status, signals,
// environment, stdin from a text, the deadline, and the parent-death rule.
#include "compile/subprocess.hpp"

#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "support/catch.hpp"

using flashjit::ErrorCode;
using flashjit::compile::Child;

namespace {

// Runs a child to its end (as the pool does, without the pool).
std::unique_ptr<Child> run_to_end(const std::vector<std::string>& argv, const std::vector<std::string>& env = {}) {
  auto child = Child::spawn(argv, env);
  REQUIRE(child.ok());
  std::unique_ptr<Child> c = std::move(*child);
  while (!(c->pipes_closed() && c->try_reap())) {
    c->drain(Child::out);
    c->drain(Child::err);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return c;
}

}  // namespace

TEST_CASE("subprocess: output, exit status, signals, environment", "[compile]") {
  auto c = run_to_end({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"});
  CHECK(c->output(Child::out) == "out\n");
  CHECK(c->output(Child::err) == "err\n");
  CHECK(flashjit::compile::describe_wait_status(c->wait_status()) == "exited with status 3");

  auto killed = run_to_end({"/bin/sh", "-c", "kill -SEGV $$"});
  CHECK(flashjit::compile::describe_wait_status(killed->wait_status()) == "was killed by signal 11 (SIGSEGV)");

  ::setenv("FLASHJIT_POOL_TEST_A", "parent", 1);
  auto env = run_to_end({"/bin/sh", "-c", "echo $FLASHJIT_POOL_TEST_A $FLASHJIT_POOL_TEST_B"}, {"FLASHJIT_POOL_TEST_B=extra"});
  CHECK(env->output(Child::out) == "parent extra\n");
  auto replaced = run_to_end({"/bin/sh", "-c", "echo $FLASHJIT_POOL_TEST_A"}, {"FLASHJIT_POOL_TEST_A=child"});
  CHECK(replaced->output(Child::out) == "child\n");
  ::unsetenv("FLASHJIT_POOL_TEST_A");

  // stdin is /dev/null: a reader sees end of file at once.
  auto reader = run_to_end({"/bin/cat"});
  CHECK(reader->output(Child::out).empty());

  auto missing = Child::spawn({"/no/such/program"}, {});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == ErrorCode::io);

  // A running child is killed and reaped by its destructor.
  auto sleeper = Child::spawn({"/bin/sleep", "30"}, {});
  REQUIRE(sleeper.ok());
  const pid_t pid = (*sleeper)->pid();
  sleeper->reset();
  CHECK(::kill(pid, 0) != 0);
}

TEST_CASE("subprocess: stdin from a text, and the deadline", "[compile]") {
  const std::string input = std::string(1 << 20, 'x') + "\nend\n";  // larger than a pipe holds
  auto child = Child::spawn({"/bin/sh", "-c", "wc -c"}, {}, &input);
  REQUIRE(child.ok());
  CHECK_FALSE(flashjit::compile::wait_for_end(**child, std::chrono::steady_clock::now() + std::chrono::seconds(30)));
  CHECK((*child)->output(Child::out).find(std::to_string(input.size())) != std::string::npos);

  auto sleeper = Child::spawn({"/bin/sleep", "30"}, {});
  REQUIRE(sleeper.ok());
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(flashjit::compile::wait_for_end(**sleeper, t0 + std::chrono::milliseconds(200)));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
  CHECK(flashjit::compile::describe_wait_status((*sleeper)->wait_status()) == "was killed by signal 9 (SIGKILL)");

  const auto now = std::chrono::steady_clock::now();
  CHECK(flashjit::compile::deadline_of(now, std::chrono::milliseconds::max()) == std::chrono::steady_clock::time_point::max());
  CHECK(flashjit::compile::deadline_of(now, std::chrono::milliseconds(5)) == now + std::chrono::milliseconds(5));
}

TEST_CASE("subprocess: die_with_parent refuses a parent that is gone", "[compile]") {
  CHECK(flashjit::compile::die_with_parent(::getppid()));
  CHECK_FALSE(flashjit::compile::die_with_parent(::getppid() + 100000));
  CHECK(flashjit::compile::die_with_parent(0));  // none given: nothing to compare
  ::prctl(PR_SET_PDEATHSIG, 0);                   // this test process must not die with its parent
}
