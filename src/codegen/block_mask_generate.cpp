// The block_mask kind's translation unit: its mask, mask_mod and warps into templates/block_mask/kernel.cuh.
#include <fmt/format.h>

#include "codegen/frame.hpp"
#include "codegen/generate.hpp"

namespace flashjit::codegen {

Result<GeneratedSource> generate(const BlockMaskKernelConfig& c) {
  FLASHJIT_TRY(check(c));
  const std::string kernel = fmt::format(
      "flashjit::block_mask::BlockMaskKernel<\n"
      "    /*mask=*/flashjit::MaskKind::{}, /*mask_mod=*/{}, /*warps=*/{}>",
      to_string(c.mask), c.mask_mod.empty() ? "flashjit::NoMod" : "flashjit_mask_mod", c.warps);
  return render(Frame{readable_name(c), to_json(c), "block_mask/kernel.cuh", kernel,
                      "const __grid_constant__ flashjit::BlockMaskParams params", "params", shared_memory_bytes(c),
                      threads_per_cta(c), {}, c.mask_mod});
}

}  // namespace flashjit::codegen
