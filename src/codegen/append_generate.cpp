// The append kind's translation unit: its config's constants into templates/append/kernel.cuh.
#include <fmt/format.h>

#include "codegen/frame.hpp"
#include "codegen/generate.hpp"
#include "config/occupancy.hpp"

namespace flashjit::codegen {

Result<GeneratedSource> generate(const AppendKernelConfig& c) {
  FLASHJIT_TRY(check(c));
  const std::string kernel = fmt::format(
      "flashjit::append::AppendKernel<\n"
      "    /*element=*/{}, /*head_dim=*/{}, /*page_size=*/{}, /*warps=*/{}, /*vectors=*/{}>",
      element_type(c.dtype), c.head_dim, c.page_size, c.warps, c.vectors);
  return render(Frame{readable_name(c), to_json(c), "append/kernel.cuh", kernel,
                      "const __grid_constant__ flashjit::AppendParams params", "params", shared_memory_bytes(c),
                      threads_per_cta(c), {}, {}, min_ctas_per_sm(c)});
}

}  // namespace flashjit::codegen
