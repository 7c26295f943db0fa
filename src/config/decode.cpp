// The decode and combine kinds' contracts beside their field declarations (kinds.hpp): validate(),
// resources (shared memory, threads, CTAs per SM) and readable names.
#include "config/occupancy.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "config/fields.hpp"
#include "config/limits.hpp"
#include "config/variants.hpp"
#include "flashjit/decode.hpp"

namespace flashjit {
namespace {

std::string arch_tag(const Arch& a) {
  std::string s = a.to_string();
  s.erase(s.find('_'), 1);
  return s;
}

}  // namespace

int threads_per_cta(const DecodeKernelConfig& c) { return 32 * c.warps; }
int threads_per_cta(const CombineKernelConfig& c) { return 32 * c.warps; }
int shared_memory_bytes(const CombineKernelConfig&) { return 0; }  // registers and shuffles only

int ctas_per_sm(const DecodeKernelConfig& c) {
  // Registers are not known before compiling. ptxas (NVRTC 13.0, sm_90a) gives the kernels without column
  // groups of head dims of 128 and more 174-234 per thread (the four-warp 64-key d128 ones 174-187: two CTAs
  // per SM, not the three their 68 KB would allow; d256 and the one-warp d128 kernels are bound by shared
  // memory first), the planner's others at most 168 (column groups 99-160, key slices of d64-d112 106-163).
  // Counting more CTAs than fit costs: a short-cache kernel that went from 168 to 176 registers (five CTAs per
  // SM instead of six) ran B256 Sk 32 in 19.4 µs instead of 16.9 on the H200. A compile test checks the bound
  // for a dozen of the planner's kernels of more CTAs than SMs.
  constexpr int kRegisterFile = 64 * 1024;
  const int registers_per_thread = c.column_groups <= 1 && c.head_dim >= 128 ? 192 : 168;
  const int by_smem = config::shared_memory_per_sm(c.arch) /
                      (shared_memory_bytes(c) + config::kSharedMemoryReservedPerBlock);
  const int by_registers = kRegisterFile / (threads_per_cta(c) * registers_per_thread);
  return std::clamp(std::min(by_smem, by_registers), 1, 32);
}

int shared_memory_bytes(const DecodeKernelConfig& c) {
  const int dp = config::padded_head_dim(c.head_dim);
  const int q = c.rows * dp * 2, kv = 2 * c.stages * c.block_n * dp * 2;
  const int m_tiles = std::max(c.rows / 16, 1), column_groups = std::max(c.column_groups, 1);
  const int key_groups = std::max(c.warps / (m_tiles * column_groups), 1);
  // The key groups' fp32 O, max and sum reuse the K/V stages for the merge (split_kv.cuh); one key group
  // writes its rows from registers.
  const int merge = key_groups > 1 ? key_groups * c.rows * (c.head_dim + 2) * 4 : 0;
  // A cluster-merge kernel's final state (fp32 O and LSE) for the cluster to read, behind that buffer.
  const int cluster = c.cluster_merge ? c.rows * (c.head_dim + 1) * 4 : 0;
  return q + std::max(kv, merge + cluster);
}

std::vector<ConfigIssue> validate(const DecodeKernelConfig& c) {
  std::vector<ConfigIssue> out;
  auto add = [&](const char* f, std::string m) { out.push_back({f, std::move(m)}); };
  config::validate_snippets(c.score_mod, c.mask_mod, out);
  if (c.arch.sm < 80) add("arch", fmt::format("decode needs sm_80 or newer (mma.sync, cp.async), got {}", c.arch.to_string()));
  if (c.arch.accelerated && c.arch.sm < 90)
    add("arch", fmt::format("the 'a' targets start at sm_90a, got {}", c.arch.to_string()));
  if (c.cluster_merge && c.arch.sm < 90)
    add("cluster_merge", fmt::format("thread-block clusters start at sm_90, got {}", c.arch.to_string()));
  if (c.head_dim < 16 || c.head_dim > 256 || c.head_dim % 16 != 0)
    add("head_dim", fmt::format("decode needs a multiple of 16 in [16, 256], got {}", c.head_dim));
  if (c.mask != MaskKind::causal && c.mask != MaskKind::sliding_window && c.mask != MaskKind::chunked_causal)
    add("mask", fmt::format("decode is causal among its new tokens: causal, sliding_window or chunked_causal, got {}",
                            to_string(c.mask)));
  if (c.rows < 16 || c.rows > kMaxDecodeRows || c.rows % 16 != 0)
    add("rows", fmt::format("decode needs a multiple of 16 in [16, {}], got {}", kMaxDecodeRows, c.rows));
  if (c.stages < 2 || c.stages > 5) add("stages", fmt::format("decode needs 2 to 5 stages, got {}", c.stages));
  int key_groups = 1;  // warps that share an m-tile on key slices of each tile
  const bool whole_m_tiles = c.rows >= 16 && c.rows % 16 == 0;
  if (c.warps < 1 || c.warps > 16) {
    add("warps", fmt::format("decode needs 1 to 16 warps, got {}", c.warps));
  } else if (c.column_groups < 1 || c.column_groups > 8 || (c.column_groups & (c.column_groups - 1)) != 0) {
    add("column_groups", fmt::format("decode needs 1, 2, 4 or 8 column groups, got {}", c.column_groups));
  } else if (whole_m_tiles && c.column_groups > 1) {
    const int m_tiles = c.rows / 16;
    if (c.warps != m_tiles * c.column_groups)
      add("warps", fmt::format("{} column groups of {} m-tiles take {} warps (one per m-tile and column slice), got {}",
                               c.column_groups, m_tiles, m_tiles * c.column_groups, c.warps));
    if (c.head_dim % (16 * c.column_groups) != 0)
      add("column_groups", fmt::format("head_dim {} does not split into {} slices of whole 16-column groups",
                                       c.head_dim, c.column_groups));
  } else if (whole_m_tiles) {
    const int m_tiles = c.rows / 16;
    if (c.warps % m_tiles != 0)
      add("warps", fmt::format("decode needs a multiple of rows / 16 = {} warps (one per m-tile and key slice), got {}",
                               m_tiles, c.warps));
    else
      key_groups = c.warps / m_tiles;
  }
  if (c.block_n < 16 || c.block_n % (16 * key_groups) != 0 || c.block_n > 256)
    add("block_n", key_groups == 1
                       ? fmt::format("decode needs a multiple of 16 in [16, 256], got {}", c.block_n)
                       : fmt::format("decode splits each {}-key tile over {} warps: block_n must be a multiple of {} "
                                     "in [16, 256]", c.block_n, key_groups, 16 * key_groups));
  if (c.layout == KvLayout::paged) {
    if (c.page_size < 1 || c.page_size > kMaxDecodePageSize || (c.page_size & (c.page_size - 1)) != 0)
      add("page_size", fmt::format("a paged decode kernel needs a power of two in [1, {}], got {}", kMaxDecodePageSize,
                                   c.page_size));
  } else if (c.page_size != 0) {
    add("page_size", fmt::format("only the paged layout has pages: must be 0 for {}, got {}", to_string(c.layout),
                                 c.page_size));
  }
  if (out.empty() && shared_memory_bytes(c) > config::max_shared_memory_per_block(c.arch))
    add("stages", fmt::format("shared memory {} bytes exceeds the {} limit of {} bytes", shared_memory_bytes(c),
                              c.arch.to_string(), config::max_shared_memory_per_block(c.arch)));
  return out;
}

std::vector<ConfigIssue> validate(const CombineKernelConfig& c) {
  std::vector<ConfigIssue> out;
  if (c.arch.sm < 80) out.push_back({"arch", fmt::format("combine needs sm_80 or newer, got {}", c.arch.to_string())});
  if (c.head_dim < 8 || c.head_dim > 256 || c.head_dim % 8 != 0)
    out.push_back({"head_dim", fmt::format("combine needs a multiple of 8 in [8, 256], got {}", c.head_dim)});
  if (c.warps < 1 || c.warps > 32) out.push_back({"warps", fmt::format("combine needs 1 to 32 warps, got {}", c.warps)});
  return out;
}

Status check(const DecodeKernelConfig& c) { return config::as_status(validate(c), readable_name(c)); }
Status check(const CombineKernelConfig& c) { return config::as_status(validate(c), readable_name(c)); }

namespace {

const char* mask_tag(MaskKind m) {
  return m == MaskKind::sliding_window ? "_window" : m == MaskKind::chunked_causal ? "_chunked" : "";
}

}  // namespace

std::string readable_name(const DecodeKernelConfig& c) {
  const std::string layout =
      c.layout == KvLayout::paged ? fmt::format("paged{}", c.page_size) : std::string(to_string(c.layout));
  const std::string columns = c.column_groups > 1 ? fmt::format("c{}", c.column_groups) : std::string();
  return fmt::format("decode_{}_d{}_r{}_bn{}_s{}_w{}{}_{}{}{}{}_{}", to_string(c.dtype), c.head_dim, c.rows, c.block_n,
                     c.stages, c.warps, columns, layout, mask_tag(c.mask),
                     c.cluster_merge ? "_cluster" : "",
                     config::variant_tag(c.softcap, c.alibi, c.sinks, c.score_mod, c.mask_mod, c.bias), arch_tag(c.arch));
}

std::string readable_name(const CombineKernelConfig& c) {
  return fmt::format("combine_{}_{}_d{}_w{}{}_{}", c.fp32_inputs ? "f32" : to_string(c.dtype), to_string(c.dtype),
                     c.head_dim, c.warps, c.sinks ? "_sinks" : "", arch_tag(c.arch));
}

}  // namespace flashjit
