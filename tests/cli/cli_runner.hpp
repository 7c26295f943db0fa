// Runs the built flashjit binary (FLASHJIT_CLI_PATH) for the CLI tests: through the shell, with
// FLASHJIT_CACHE_DIR set to a fresh folder (and the other FLASHJIT_* variables unset), capturing stdout +
// stderr and the exit code.
#pragma once

#include <stdlib.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "support/catch.hpp"

namespace flashjit::test {

namespace fs = std::filesystem;

inline std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

struct CliResult {
  std::string command;
  int code = -1;
  std::string output;
  bool has(const std::string& text) const { return output.find(text) != std::string::npos; }
};

// For INFO(result): shown with any failing check in the scope.
inline std::ostream& operator<<(std::ostream& os, const CliResult& r) {
  return os << "$ flashjit " << r.command << "  (exit " << r.code << ")\n" << r.output;
}

// A fresh folder under /tmp (removed at the end) whose cache/ subfolder is the CLI's cache.
class Cli {
 public:
  Cli() {
    char tmpl[] = "/tmp/flashjit-cli-test-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    root_ = tmpl;
  }
  ~Cli() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  const fs::path& root() const { return root_; }
  fs::path cache() const { return root_ / "cache"; }

  // Runs `flashjit ARGS`; `env` adds VAR=value assignments; stderr is captured too unless `stdout_only`.
  CliResult operator()(const std::string& args, const std::string& env = "", bool stdout_only = false) const {
    const std::string cmd =
        "env -u FLASHJIT_JIT -u FLASHJIT_CACHE_MAX_MB -u FLASHJIT_LOG -u FLASHJIT_TUNED -u FLASHJIT_WORKER_FAULT "
        "FLASHJIT_CACHE_DIR=" + quote(cache().string()) + " " + env + " " + quote(FLASHJIT_CLI_PATH) + " " + args +
        (stdout_only ? " 2>/dev/null" : " 2>&1");
    CliResult r;
    FILE* pipe = ::popen(cmd.c_str(), "r");
    REQUIRE(pipe != nullptr);
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) r.output.append(buf, n);
    const int status = ::pclose(pipe);
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.command = args;
    return r;
  }

 private:
  fs::path root_;
};

// Writes `text` to the file `name` in the test's folder; returns its path quoted for a command line.
inline std::string write_input(const Cli& cli, const std::string& name, const std::string& text) {
  const fs::path p = cli.root() / name;
  std::ofstream(p) << text;
  return quote(p.string());
}

// stdout of a --json command as JSON (a failed parse fails the test).
inline nlohmann::json parsed(const CliResult& r) {
  INFO(r);
  nlohmann::json j = nlohmann::json::parse(r.output, nullptr, /*allow_exceptions=*/false);
  REQUIRE_FALSE(j.is_discarded());
  return j;
}

}  // namespace flashjit::test
