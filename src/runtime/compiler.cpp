#include "runtime/compiler.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "compile/worker.hpp"

namespace flashjit::runtime {
namespace fs = std::filesystem;

std::filesystem::path find_compile_worker() {
  Dl_info info{};
  fs::path self;
  if (::dladdr(reinterpret_cast<void*>(&find_compile_worker), &info) != 0 && info.dli_fname &&
      std::string(info.dli_fname).find('/') != std::string::npos)
    self = info.dli_fname;
  std::error_code ec;
  if (self.empty()) self = fs::read_symlink("/proc/self/exe", ec);
  if (self.empty()) return {};
  self = fs::weakly_canonical(fs::absolute(self, ec), ec);
  const fs::path dir = self.parent_path();
  for (const fs::path& candidate : {dir / "flashjit", dir / "bin" / "flashjit", dir.parent_path() / "flashjit",
                                    dir.parent_path() / "bin" / "flashjit"}) {
    if (candidate == self) continue;
    if (fs::is_regular_file(candidate, ec) && ::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return self.filename() == "flashjit" ? self : fs::path();  // the CLI is its own worker
}

cache::ArtifactStore::Compiler compiler_of(const Settings& settings) {
  if (settings.compile_in_process) return {};
  struct State {
    compile::WorkerOptions worker;
    log::Logger logger;
    std::once_flag warned;
    std::atomic<bool> in_process{false};
  };
  auto state = std::make_shared<State>();
  state->logger = settings.logger;
  state->worker.timeout = settings.compile_timeout;
  const fs::path path = settings.compile_worker.empty() ? find_compile_worker() : settings.compile_worker;
  if (!path.empty()) state->worker.command = {path.string()};
  return [state](const codegen::GeneratedSource& source,
                 const std::vector<std::string>& options) -> Result<compile::CompiledKernel> {
    if (!state->in_process.load()) {
      auto compiled = compile::compile_in_worker(state->worker, source, options, state->logger);
      if (compiled.ok() || !compile::worker_unusable(compiled.error())) return compiled;
      state->in_process = true;
      std::call_once(state->warned, [&] {
        state->logger.warn("compiling in this process ({}; set FLASHJIT_COMPILE_WORKER to a flashjit executable of "
                           "this build, or FLASHJIT_COMPILE_IN_PROCESS=1 to choose this)",
                           compiled.error().message);
      });
    }
    return compile::compile(source, options, state->logger);
  };
}

}  // namespace flashjit::runtime
