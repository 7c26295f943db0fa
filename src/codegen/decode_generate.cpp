#include "codegen/generate.hpp"

#include <fmt/format.h>

#include "codegen/frame.hpp"

namespace flashjit::codegen {
namespace {

Result<GeneratedSource> framed(std::string name, std::string json, const char* header, std::string kernel,
                               const char* params, int smem, int threads, std::string score_mod = {},
                               std::string mask_mod = {}) {
  return render(Frame{std::move(name), std::move(json), header, std::move(kernel),
                      fmt::format("const __grid_constant__ flashjit::{} params", params), "params", smem, threads,
                      std::move(score_mod), std::move(mask_mod)});
}

}  // namespace

Result<GeneratedSource> generate(const DecodeKernelConfig& c) {
  FLASHJIT_TRY(check(c));
  const std::string kernel = fmt::format(
      "flashjit::decode::SplitKernel<\n"
      "    /*element=*/{}, /*head_dim=*/{}, /*rows=*/{}, /*block_n=*/{}, /*stages=*/{}, /*warps=*/{},\n"
      "    /*column_groups=*/{}, /*page_size=*/{}, /*mask=*/flashjit::MaskKind::{}, /*cluster_merge=*/{}{}>",
      element_type(c.dtype), c.head_dim, c.rows, c.block_n, c.stages, c.warps, c.column_groups, c.page_size,
      to_string(c.mask), c.cluster_merge,
      variant_arg(c.softcap, c.alibi, c.sinks, !c.score_mod.empty(), !c.mask_mod.empty(), c.bias));
  return framed(readable_name(c), to_json(c), "decode/split_kv.cuh", kernel, "DecodeParams", shared_memory_bytes(c),
                threads_per_cta(c), c.score_mod, c.mask_mod);
}

Result<GeneratedSource> generate(const CombineKernelConfig& c) {
  FLASHJIT_TRY(check(c));
  const std::string kernel = fmt::format(
      "flashjit::decode::CombineKernel<\n"
      "    /*input=*/{}, /*output=*/{}, /*head_dim=*/{}, /*warps=*/{}{}>",
      c.fp32_inputs ? "float" : element_type(c.dtype), element_type(c.dtype), c.head_dim, c.warps,
      c.sinks ? ",\n    /*sinks=*/true" : "");
  return framed(readable_name(c), to_json(c), "decode/combine.cuh", kernel, "CombineParams", 0, threads_per_cta(c));
}

}  // namespace flashjit::codegen
