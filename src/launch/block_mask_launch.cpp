#include "launch/block_mask_launch.hpp"

#include <fmt/format.h>

#include "cuda/driver.hpp"
#include "launch/launch.hpp"
#include "launch/launch_kernel.hpp"

namespace flashjit::launch {

BlockMaskParams make_block_mask_params(const BlockMaskProblem& p) {
  const BlockMaskShape s = block_mask_shape(p);
  BlockMaskParams a{};
  a.kv_num = p.kv_num_blocks, a.kv_indices = p.kv_indices;
  a.full_num = p.full_kv_num_blocks, a.full_indices = p.full_kv_indices;
  a.seqlen_q = p.seqlen_q, a.seqlen_k = p.seqlen_k;
  a.q_block = p.q_block, a.kv_block = p.kv_block;
  a.num_q_blocks = s.num_q_blocks, a.num_kv_blocks = s.num_kv_blocks;
  // The built-in mask's constants as an AttentionProblem's (launch.cpp's make_params).
  a.causal_offset = p.alignment == Alignment::top_left ? 0 : p.seqlen_k - p.seqlen_q;
  a.window_left = p.window_left, a.window_right = p.window_right;
  if (p.mask == MaskKind::causal) a.window_left = -1, a.window_right = 0;
  a.chunk_size = p.chunk_size;
  a.aux = aux_params(p.aux);
  return a;
}

Status launch_block_mask(CUfunction kernel, const BlockMaskKernelConfig& config, const BlockMaskProblem& p) {
  if (config.mask != p.mask)
    return Error(ErrorCode::invalid_argument, fmt::format("block_mask kernel {} is for mask {}, the problem's is {}",
                                                          readable_name(config), to_string(config.mask),
                                                          to_string(p.mask)));
  auto api = cuda::api();
  if (!api.ok()) return api.error();
  BlockMaskParams params = make_block_mask_params(p);
  void* args[] = {&params};
  Geometry g;
  g.grid = {static_cast<unsigned>(params.num_q_blocks), static_cast<unsigned>(p.heads), static_cast<unsigned>(p.batch)};
  g.threads = threads_per_cta(config);
  g.smem = params.num_kv_blocks;
  return launch_kernel(**api, kernel, g, static_cast<CUstream>(p.stream), args, "cuLaunchKernelEx(block_mask)");
}

}  // namespace flashjit::launch
