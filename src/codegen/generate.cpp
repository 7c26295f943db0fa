#include "codegen/generate.hpp"

#include <fmt/format.h>

#include "codegen/frame.hpp"

namespace flashjit::codegen {
namespace {

std::string mask_enum(MaskKind m) { return fmt::format("flashjit::MaskKind::{}", to_string(m)); }

// The template and its parameters up to page_size, without the closing bracket.
std::string kernel_template(const KernelConfig& c) {
  switch (c.algorithm) {
    case Algorithm::fa2:
      return fmt::format(
          "flashjit::fa2::Kernel<\n"
          "    /*element=*/{element}, /*head_dim=*/{head_dim}, /*head_dim_v=*/{head_dim_v}, /*block_m=*/{block_m},\n"
          "    /*block_n=*/{block_n}, /*stages=*/{stages}, /*warps=*/{warps}, /*mask=*/{mask}, /*varlen=*/{varlen},\n"
          "    /*page_size=*/{page_size}",
          fmt::arg("element", element_type(c.dtype)), fmt::arg("head_dim", c.head_dim),
          fmt::arg("head_dim_v", value_head_dim(c)),
          fmt::arg("block_m", c.block_m), fmt::arg("block_n", c.block_n), fmt::arg("stages", c.stages),
          fmt::arg("warps", c.warps), fmt::arg("mask", mask_enum(c.mask)), fmt::arg("varlen", c.varlen),
          fmt::arg("page_size", c.page_size));
    case Algorithm::fa3:
      return fmt::format(
          "flashjit::fa3::Kernel<\n"
          "    /*element=*/{element}, /*head_dim=*/{head_dim}, /*head_dim_v=*/{head_dim_v}, /*block_n=*/{block_n},\n"
          "    /*stages=*/{stages}, /*consumer_warpgroups=*/{warps}, /*mask=*/{mask}, /*persistent=*/{persistent},\n"
          "    /*varlen=*/{varlen}, /*pack_gqa=*/{pack_gqa}, /*page_size=*/{page_size}",
          fmt::arg("element", element_type(c.dtype)), fmt::arg("head_dim", c.head_dim),
          fmt::arg("head_dim_v", value_head_dim(c)),
          fmt::arg("block_n", c.block_n), fmt::arg("stages", c.stages), fmt::arg("warps", c.consumer_warpgroups),
          fmt::arg("mask", mask_enum(c.mask)), fmt::arg("persistent", c.scheduler == Scheduler::persistent),
          fmt::arg("varlen", c.varlen), fmt::arg("pack_gqa", c.pack_gqa), fmt::arg("page_size", c.page_size));
    case Algorithm::naive:
      return fmt::format(
          "flashjit::reference::Kernel<\n"
          "    /*element=*/{element}, /*head_dim=*/{head_dim}, /*head_dim_v=*/{head_dim_v}, /*threads=*/{threads},\n"
          "    /*mask=*/{mask}, /*varlen=*/{varlen}, /*page_size=*/{page_size}",
          fmt::arg("element", element_type(c.dtype)), fmt::arg("head_dim", c.head_dim),
          fmt::arg("head_dim_v", value_head_dim(c)),
          fmt::arg("threads", threads_per_cta(c)), fmt::arg("mask", mask_enum(c.mask)), fmt::arg("varlen", c.varlen),
          fmt::arg("page_size", c.page_size));
    default:
      return {};
  }
}

// The template instantiation, one parameter per line with its name. Block-sparse kernels name the variant
// (flashjit::NoVariant without one) before their flag; fa3 kernels that stage the bias name both before theirs;
// seqused_k kernels name all of them (fa3: bias_tma too) before their own.
std::string kernel_type(const KernelConfig& c) {
  std::string variant =
      variant_arg(c.softcap, c.alibi, c.sinks, !c.score_mod.empty(), !c.mask_mod.empty(), c.bias, c.rel_bias);
  if (!c.block_sparse && !c.bias_tma && !c.seqused_k) return kernel_template(c) + variant + ">";
  if (variant.empty()) variant = ",\n    /*variant=*/flashjit::NoVariant";
  std::string flags = fmt::format(",\n    /*block_sparse=*/{}", c.block_sparse);
  if (c.bias_tma || (c.seqused_k && c.algorithm == Algorithm::fa3)) flags += fmt::format(", /*bias_tma=*/{}", c.bias_tma);
  if (c.seqused_k) flags += ",\n    /*seqused_k=*/true";
  return kernel_template(c) + variant + flags + ">";
}

const char* kernel_header(Algorithm a) {
  switch (a) {
    case Algorithm::fa2: return "fa2/kernel.cuh";
    case Algorithm::fa3: return "fa3/kernel.cuh";
    default: return "reference/kernel.cuh";
  }
}

// FA3 kernels take the TMA descriptors as a second parameter.
std::string parameters(Algorithm a) {
  std::string p = "const __grid_constant__ flashjit::AttentionParams params";
  if (a == Algorithm::fa3) p += ",\n    const __grid_constant__ flashjit::fa3::TensorMaps maps";
  return p;
}

}  // namespace

Result<GeneratedSource> generate(const KernelConfig& config) {
  FLASHJIT_TRY(check(config));
  return render(Frame{readable_name(config), to_json(config), kernel_header(config.algorithm), kernel_type(config),
                      parameters(config.algorithm), config.algorithm == Algorithm::fa3 ? "params, maps" : "params",
                      shared_memory_bytes(config), threads_per_cta(config), config.score_mod, config.mask_mod});
}

Result<GeneratedSource> generate(const AnyKernelConfig& config) {
  return config.visit([](const auto& c) { return generate(c); });
}

}  // namespace flashjit::codegen
