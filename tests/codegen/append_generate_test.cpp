// The append kind's generated translation unit: one include, the instantiation of the config's constants, the
// resource asserts and the entry named after the config.
#include <string>

#include "codegen/generate.hpp"
#include "support/catch.hpp"
#include "support/checks.hpp"

using flashjit::AppendKernelConfig;
using flashjit::test::contains;

TEST_CASE("generate: the source of an append config", "[codegen][append]") {
  AppendKernelConfig c;
  c.dtype = flashjit::DType::fp16, c.head_dim = 64, c.layout = flashjit::KvLayout::paged, c.page_size = 32;
  c.warps = 2, c.vectors = 8;
  auto g = flashjit::codegen::generate(c);
  REQUIRE(g.ok());
  CHECK(g->name == "append_fp16_d64_paged32_w2_v8_sm90a");
  CHECK(g->entry == "flashjit_append_fp16_d64_paged32_w2_v8_sm90a");
  CHECK(contains(g->text, "#include \"append/kernel.cuh\""));
  CHECK(contains(g->text, "flashjit::append::AppendKernel<\n    /*element=*/flashjit::fp16, /*head_dim=*/64, "
                          "/*page_size=*/32, /*warps=*/2, /*vectors=*/8>"));
  CHECK(contains(g->text, "static_assert(Kernel::kThreads == 64"));
  CHECK(contains(g->text, "__launch_bounds__(64, 8)"));  // 2048 threads / (64 x 8 / 2 vectors)
  CHECK(contains(g->text, "static_assert(Kernel::kSmemBytes == 0"));
  CHECK(contains(g->text, "const __grid_constant__ flashjit::AppendParams params"));
  CHECK(contains(g->text, "// config: " + to_json(c)));
  CHECK(flashjit::codegen::generate(flashjit::AnyKernelConfig(c))->text == g->text);
}

TEST_CASE("generate: an invalid append config is invalid_config naming the field", "[codegen][append]") {
  AppendKernelConfig c;
  c.head_dim = 60;
  auto g = flashjit::codegen::generate(c);
  REQUIRE_FALSE(g.ok());
  CHECK(g.error().code == flashjit::ErrorCode::invalid_config);
  CHECK(contains(g.error().message, "head_dim"));
}
