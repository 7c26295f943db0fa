// GPU test executable: exits 77 (CTest "skipped") when no CUDA device is usable.
#include <cstdio>

#if __has_include(<catch2/catch_session.hpp>)
#include <catch2/catch_session.hpp>
#else
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#endif

#include "cuda/driver.hpp"

int main(int argc, char** argv) {
  auto count = flashjit::cuda::device_count();
  if (!count.ok() || *count == 0) {
    std::printf("GPU tests skipped: %s\n",
                count.ok() ? "no CUDA device found" : count.error().to_string().c_str());
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
