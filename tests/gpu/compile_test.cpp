// NVRTC on a machine with a driver: NVRTC 12.9+ would serve a repeat compile from the driver's compute cache
// without running ptxas, and so without the report (registers, spills) that compile reports, the disk cache's
// entries and the autotuner's spill filter rely on. Every compile must report, the repeats too.
#include "compile/nvrtc.hpp"
#include "cuda/driver.hpp"
#include "dispatch/decode_heuristics.hpp"
#include "dispatch/heuristics.hpp"
#include "harness.hpp"
#include "support/catch.hpp"
#include "support/temp_dir.hpp"

using namespace flashjit;
using namespace flashjit::test;

TEST_CASE("nvrtc with a driver: a kernel compiled again still reports its registers and spills", "[compile][gpu]") {
  ensure_context();
  auto device = cuda::device_info(0);
  REQUIRE(device.ok());
  const CombineKernelConfig config = dispatch::merge_kernel_config(DType::bf16, 128, device->arch);
  auto source = codegen::generate(config);
  REQUIRE(source.ok());
  for (int i = 0; i < 3; ++i) {
    INFO("compile " << i + 1 << " of " << readable_name(config));
    auto compiled = compile::compile(*source, compile::options_for(device->arch), log::Logger{});
    if (!compiled.ok()) FAIL(compiled.error().to_string());
    INFO("NVRTC log:\n" << compiled->log);
    CHECK(compiled->ptxas.registers > 0);
    CHECK(compiled->log.find("spill stores") != std::string::npos);
  }
}

TEST_CASE("runtime with a driver: kernels compiled into two new caches report their registers both times",
          "[compile][runtime][gpu]") {
  ensure_context();
  auto device = cuda::device_info(0);
  REQUIRE(device.ok());
  const KernelConfig config = dispatch::naive_config(DType::bf16, 64, MaskKind::causal, device->arch);
  for (int i = 0; i < 2; ++i) {
    TempDir dir("flashjit-compile-test");
    RuntimeOptions options;
    options.cache_dir = dir.path;
    auto rt = Runtime::create(options);
    if (!rt.ok()) FAIL(rt.error().to_string());
    auto info = (*rt)->compile(config);
    if (!info.ok()) FAIL(info.error().to_string());
    INFO("cache " << i + 1 << ": " << info->name << ", NVRTC log:\n" << info->log);
    CHECK_FALSE(info->cache_hit);
    CHECK(info->ptxas.registers > 0);
  }
}
