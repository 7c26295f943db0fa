// Emits a kernel's source through the installed C++ API (no GPU needed).
#include <flashjit/runtime.hpp>

#include <cstdio>
#include <cstring>

int main() {
  auto partial = flashjit::parse_config_json(R"({"algorithm": "fa2", "head_dim": 64})");
  if (!partial.ok()) return std::fprintf(stderr, "%s\n", partial.error().to_string().c_str()), 1;
  auto source = flashjit::Runtime::emit(flashjit::Runtime::resolve(*partial));
  if (!source.ok()) return std::fprintf(stderr, "%s\n", source.error().to_string().c_str()), 1;
  if (source->find("__global__") == std::string::npos) return std::fprintf(stderr, "no kernel in the source\n"), 1;
  std::printf("flashjit %s (C++): emitted %zu bytes\n", flashjit::version(), source->size());
  return std::strlen(flashjit::version()) > 0 ? 0 : 1;
}
