// GPU test executable: exits 77 (CTest "skipped") when no CUDA device is usable.
#include <cstdio>

#include "cuda/driver.hpp"
#include "support/catch_session.hpp"

int main(int argc, char** argv) {
  auto count = flashjit::cuda::device_count();
  if (!count.ok() || *count == 0) {
    std::printf("GPU tests skipped: %s\n",
                count.ok() ? "no CUDA device found" : count.error().to_string().c_str());
    return 77;
  }
  return flashjit::test::run_catch_session(argc, argv);
}
