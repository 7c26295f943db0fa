// The NVRTC compile tests' harness (tests/compile: decode, append): each config generated and compiled on two
// threads (the CI machine has two cores), optionally to PTX too, and the checks every compiled kernel must pass.
#pragma once

#include <cstddef>
#include <string>
#include <thread>
#include <vector>

#include "codegen/generate.hpp"
#include "compile/nvrtc.hpp"
#include "support/catch.hpp"

namespace flashjit::test {

struct CompileOutcome {
  std::string name;
  Result<codegen::GeneratedSource> source = Error();
  Result<compile::CompiledKernel> compiled = Error();
  Result<std::string> ptx = Error();  // compile_all(..., with_ptx = true) only
};

// Runs f(i) for i in [0, n) on two threads.
template <class F>
void on_two_threads(std::size_t n, F f) {
  auto work = [&](std::size_t first) {
    for (std::size_t i = first; i < n; i += 2) f(i);
  };
  std::thread second(work, 1);
  work(0);
  second.join();
}

// Generates and compiles every config (and, with_ptx, compiles it to PTX for its arch as well).
template <class Config>
std::vector<CompileOutcome> compile_all(const std::vector<Config>& configs, bool with_ptx = false) {
  std::vector<CompileOutcome> out(configs.size());
  on_two_threads(configs.size(), [&](std::size_t i) {
    out[i].name = readable_name(configs[i]);
    out[i].source = codegen::generate(configs[i]);
    if (!out[i].source.ok()) return;
    out[i].compiled = compile::compile(*out[i].source, compile::options_for(configs[i].arch), log::Logger{});
    if (with_ptx) out[i].ptx = compile::compile_ptx(*out[i].source, configs[i].arch, log::Logger{});
  });
  return out;
}

// Generated, compiled to an ELF cubin whose ptxas report is about its entry; with no_spills, no spill stores or
// loads. CHECK, not REQUIRE: one bad kernel must not hide the others.
inline void check_compiled(const CompileOutcome& o, bool no_spills) {
  INFO(o.name);
  if (!o.source.ok()) FAIL_CHECK(o.source.error().to_string());
  if (!o.source.ok()) return;
  if (!o.compiled.ok()) FAIL_CHECK(o.compiled.error().to_string());
  if (!o.compiled.ok()) return;
  INFO(o.compiled->log);
  CHECK(o.compiled->cubin.compare(0, 4, "\x7f" "ELF") == 0);
  CHECK(o.compiled->ptxas.registers > 0);
  CHECK(o.compiled->log.find(o.source->entry) != std::string::npos);
  if (no_spills) {
    CHECK(o.compiled->ptxas.spill_stores == 0);
    CHECK(o.compiled->ptxas.spill_loads == 0);
  }
}

}  // namespace flashjit::test
