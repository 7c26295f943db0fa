// Runs a function with stderr redirected to a file; returns what was written there.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "support/catch.hpp"

namespace flashjit::test {

template <class F>
std::string capture_stderr(F&& fn) {
  std::fflush(stderr);
  char tmpl[] = "/tmp/flashjit-stderr-XXXXXX";
  int fd = ::mkstemp(tmpl);
  REQUIRE(fd >= 0);
  int saved = ::dup(STDERR_FILENO);
  ::dup2(fd, STDERR_FILENO);
  fn();
  std::fflush(stderr);
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  ::close(fd);
  std::ifstream in(tmpl);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ::unlink(tmpl);
  return text;
}

}  // namespace flashjit::test
