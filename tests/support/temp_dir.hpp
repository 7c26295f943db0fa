// A fresh folder under /tmp for one test, removed at scope exit (write permission restored first, so tests
// may make parts of it read-only).
#pragma once

#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "support/catch.hpp"

namespace flashjit::test {

struct TempDir {
  std::filesystem::path path;

  explicit TempDir(const std::string& prefix = "flashjit-test") {
    std::string tmpl = "/tmp/" + prefix + "-XXXXXX";
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    namespace fs = std::filesystem;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(path, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec))
      if (it->is_directory(ec)) ::chmod(it->path().c_str(), 0700);
    ::chmod(path.c_str(), 0700);
    fs::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::filesystem::path operator/(const char* name) const { return path / name; }
};

}  // namespace flashjit::test
