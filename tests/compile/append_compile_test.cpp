// NVRTC compiles of the append kernels (no GPU needed): bf16 / fp16, head dims 8 to 256, contiguous and every
// page-size regime, each vector count the planner picks, sm_90a and sm_80: no spills, no local memory, no
// ld.global.nc (they are launched with programmatic dependent launch and read what the kernel before them wrote).
#include <algorithm>
#include <string>
#include <vector>

#include "dispatch/append_plan.hpp"
#include "support/catch.hpp"
#include "support/compile_all.hpp"

using flashjit::AppendKernelConfig;
using flashjit::Arch;
using flashjit::DType;
using flashjit::KvLayout;

namespace {

const Arch kSm90a{90, true};
const Arch kSm80{80, false};

}  // namespace

TEST_CASE("nvrtc append: the planned kernels compile without spills or ld.global.nc", "[compile][append]") {
  std::vector<AppendKernelConfig> configs;
  for (DType t : {DType::bf16, DType::fp16})
    for (int d : {64, 128, 256})
      for (auto [layout, page] : {std::pair{KvLayout::contiguous, 0}, {KvLayout::paged, 16}})
        for (const auto& c : flashjit::dispatch::append_prepare_kernels(t, d, layout, page, kSm90a)) configs.push_back(c);
  for (int page : {1, 2, 64, 256})
    configs.push_back(flashjit::dispatch::append_kernel_config(DType::bf16, 128, KvLayout::paged, page, kSm90a, 1 << 26, 132));
  for (int d : {8, 72, 200})
    configs.push_back(flashjit::dispatch::append_kernel_config(DType::bf16, d, KvLayout::contiguous, 0, kSm90a, 1 << 20, 132));
  configs.push_back(flashjit::dispatch::append_kernel_config(DType::fp16, 128, KvLayout::paged, 16, kSm80, 1 << 26, 108));
  AppendKernelConfig eight;  // the largest vector count validate() takes
  eight.vectors = 8, eight.warps = 8, eight.layout = KvLayout::paged, eight.page_size = 32;
  configs.push_back(eight);

  const auto outcomes = flashjit::test::compile_all(configs, /*with_ptx=*/true);
  for (std::size_t i = 0; i < configs.size(); ++i) {
    const auto& o = outcomes[i];
    flashjit::test::check_compiled(o, /*no_spills=*/true);
    if (!o.compiled.ok()) continue;
    INFO(o.name);
    INFO(o.compiled->log);
    // The bytes in flight per SM a copy needs (about 64 KB, measured): CTAs the register file holds x threads x
    // vectors x 16 bytes at least 64 KB, 32 KB for the one-vector kernels of small appends (every thread of the
    // SM, 32 registers each).
    const int allocated = (o.compiled->ptxas.registers + 7) / 8 * 8, threads = flashjit::threads_per_cta(configs[i]);
    const int ctas = std::min(64 * 1024 / (allocated * threads), 2048 / threads);
    INFO(o.compiled->ptxas.registers << " registers: " << ctas << " CTAs per SM");
    CHECK(ctas * threads * configs[i].vectors * 16 >= (configs[i].vectors == 1 ? 32 : 64) * 1024);
    CHECK(o.compiled->ptxas.stack_frame == 0);
    REQUIRE(o.ptx.ok());
    CHECK(o.ptx->find("ld.global.nc") == std::string::npos);
    CHECK(o.ptx->find("ld.global.v4") != std::string::npos);  // 16-byte loads and stores
    CHECK(o.ptx->find("st.global.v4") != std::string::npos);
    if (configs[i].arch.sm >= 90) CHECK(o.ptx->find("griddepcontrol.wait") != std::string::npos);
  }
}
