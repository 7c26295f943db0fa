#include "compile/nvrtc_library.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <vector>

namespace flashjit::compile {
namespace {

// The file names of NVRTC, newest major first; libnvrtc.so is the toolkit's development link.
constexpr const char* kNames[] = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"};

// One place to look: a path (or a bare soname for the loader's search) and where it came from.
struct Candidate {
  std::string file;
  std::string origin;
};

std::vector<Candidate> candidates(std::vector<std::string>& notes) {
  std::vector<Candidate> out;
  if (const char* explicit_path = std::getenv("FLASHJIT_NVRTC"); explicit_path && *explicit_path)
    return {{explicit_path, "$FLASHJIT_NVRTC"}};
  auto toolkit = [&](const std::filesystem::path& root, const std::string& origin) {
    for (const char* lib : {"lib64", "lib"})
      for (const char* name : kNames) {
        auto file = root / lib / name;
        std::error_code ec;
        if (std::filesystem::exists(file, ec)) {
          out.push_back({file.string(), origin});
          return;
        }
      }
    notes.push_back(fmt::format("{} ({}): no libnvrtc.so* in lib64/ or lib/", root.string(), origin));
  };
  if (const char* home = std::getenv("CUDA_HOME"); home && *home) toolkit(home, "$CUDA_HOME");
  else notes.push_back("$CUDA_HOME: unset");
  toolkit("/usr/local/cuda", "the default toolkit");
  for (const char* name : kNames) out.push_back({name, "the dynamic loader's search path"});
  return out;
}

// NVRTC opens its builtins library (libnvrtc-builtins.so.MAJOR.MINOR) by soname when it first compiles, through
// the loader's search path, which does not hold the directory NVRTC itself came from when that was a path (the
// nvidia-cuda-nvrtc wheel's, $CUDA_HOME's without ld.so.cache): there a compile fails with
// NVRTC_ERROR_BUILTIN_OPERATION_FAILURE. Loading the builtins beside NVRTC first makes that lookup find them
// (the loader matches a soname against the objects already loaded), so both come from one directory. Returns
// the file loaded, or "" where none is beside NVRTC (the loader's search is then NVRTC's own).
std::string preload_builtins(const std::string& nvrtc_path, int major, int minor) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(nvrtc_path).parent_path();
  if (dir.empty()) return {};
  std::vector<fs::path> names = {dir / fmt::format("libnvrtc-builtins.so.{}.{}", major, minor)};
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.starts_with(fmt::format("libnvrtc-builtins.so.{}.", major))) names.push_back(it->path());
  }
  for (const auto& file : names) {
    if (!fs::exists(file, ec)) continue;
    if (dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL)) return file.string();  // kept open for the process
    dlerror();
  }
  return {};
}

Result<NvrtcApi> load() {
  std::vector<std::string> tried;
  for (const auto& c : candidates(tried)) {
    dlerror();
    void* lib = dlopen(c.file.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* why = dlerror();
      tried.push_back(fmt::format("{} ({}): {}", c.file, c.origin, why ? why : "dlopen failed"));
      continue;
    }
    NvrtcApi api;
    std::string missing;
#define FLASHJIT_NVRTC_RESOLVE(name)                                        \
  api.name = reinterpret_cast<decltype(api.name)>(dlsym(lib, #name));       \
  if (!api.name) missing += std::string(missing.empty() ? "" : ", ") + #name;
    FLASHJIT_NVRTC_FUNCTIONS(FLASHJIT_NVRTC_RESOLVE)
#undef FLASHJIT_NVRTC_RESOLVE
    if (!missing.empty() || api.nvrtcVersion(&api.major, &api.minor) != NVRTC_SUCCESS) {
      tried.push_back(fmt::format("{} ({}): not a usable NVRTC (missing {})", c.file, c.origin,
                                  missing.empty() ? "a working nvrtcVersion" : missing));
      dlclose(lib);
      continue;
    }
    Dl_info info{};
    api.path = dladdr(reinterpret_cast<void*>(api.nvrtcVersion), &info) && info.dli_fname ? info.dli_fname : c.file;
    api.builtins = preload_builtins(api.path, api.major, api.minor);
    return api;
  }
  return Error(ErrorCode::compile,
               "NVRTC not found: install the CUDA toolkit (or set CUDA_HOME), `pip install nvidia-cuda-nvrtc`, "
               "or set FLASHJIT_NVRTC to a libnvrtc.so",
               "tried:\n  " + fmt::format("{}", fmt::join(tried, "\n  ")));
}

}  // namespace

Result<const NvrtcApi*> nvrtc() {
  static std::once_flag once;
  static Result<NvrtcApi> loaded = Error(ErrorCode::internal, "NVRTC not loaded");
  std::call_once(once, [] { loaded = load(); });
  if (!loaded.ok()) return loaded.error();
  return &loaded.value();
}

}  // namespace flashjit::compile
