// The prefill kind's contract beside its field declaration (kinds.hpp): validate(), every problem with a
// KernelConfig, each naming its field; resources (shared memory, threads, the register estimates), so the
// dispatcher, CLI and autotuner agree; the readable name.
#include <algorithm>

#include <fmt/format.h>

#include "config/fields.hpp"
#include "config/limits.hpp"
#include "config/variants.hpp"
#include "flashjit/config.hpp"

namespace flashjit {
namespace {

constexpr int kMaxRegisters = 255;

// Rough per-thread register need of the FA2 kernel: O and S accumulators, Q fragments when kept in
// registers, plus addressing and softmax state. ptxas has the last word (CI checks for spills).
int fa2_register_estimate(const KernelConfig& c) {
  int rows_per_warp = c.block_m / c.warps;
  int o_acc = rows_per_warp * ((value_head_dim(c) + 15) / 16 * 16) / 32;
  int s_acc = rows_per_warp * c.block_n / 32;
  int q_regs = (rows_per_warp == 16 && c.head_dim <= 128) ? c.head_dim / 4 : 0;
  return o_acc + s_acc + q_regs + 32;
}

void validate_fa2(const KernelConfig& c, std::vector<ConfigIssue>& out) {
  auto add = [&](const char* f, std::string m) { out.push_back({f, std::move(m)}); };
  if (c.arch.sm < 80) add("arch", fmt::format("fa2 needs sm_80 or newer (mma.sync bf16), got {}", c.arch.to_string()));
  if (c.head_dim % 8 != 0 || c.head_dim < 8 || c.head_dim > 256)
    add("head_dim", fmt::format("fa2 needs a multiple of 8 in [8, 256], got {}", c.head_dim));
  if (c.warps != 1 && c.warps != 2 && c.warps != 4 && c.warps != 8)
    add("warps", fmt::format("fa2 needs 1, 2, 4 or 8 warps, got {}", c.warps));
  else if (c.block_m % c.warps != 0 || (c.block_m / c.warps != 16 && c.block_m / c.warps != 32))
    add("block_m", fmt::format("fa2 needs 16 or 32 rows per warp: block_m = {} or {} for {} warps, got {}",
                               16 * c.warps, 32 * c.warps, c.warps, c.block_m));
  if (c.block_n % 16 != 0 || c.block_n < 16 || c.block_n > 256)
    add("block_n", fmt::format("fa2 needs a multiple of 16 in [16, 256], got {}", c.block_n));
  if (c.stages < 2 || c.stages > 5) add("stages", fmt::format("fa2 needs 2 to 5 stages, got {}", c.stages));
  if (!out.empty()) return;
  int regs = fa2_register_estimate(c);
  if (regs > kMaxRegisters)
    add("block_m", fmt::format("register budget exceeded: about {} registers per thread for block_m {} / "
                               "block_n {} / head_dim {} / {} warps (limit {}); use fewer rows per warp or "
                               "a smaller block_n",
                               regs, c.block_m, c.block_n, c.head_dim, c.warps, kMaxRegisters));
}

// FA3 tile rows hold head dims padded to 16 (one wgmma k-step), in column blocks of 64, 32 and 16
// (templates/fa3/columns.cuh).
int fa3_padded(int dim) { return (dim + 15) / 16 * 16; }

void validate_fa3(const KernelConfig& c, std::vector<ConfigIssue>& out) {
  auto add = [&](const char* f, std::string m) { out.push_back({f, std::move(m)}); };
  if (!(c.arch.sm == 90 && c.arch.accelerated))
    add("arch", fmt::format("fa3 needs sm_90a (wgmma, setmaxnreg, TMA), got {}", c.arch.to_string()));
  if (c.head_dim % 8 != 0 || c.head_dim < 8 || c.head_dim > 256)
    add("head_dim", fmt::format("fa3 needs a multiple of 8 in [8, 256], got {}", c.head_dim));
  const int wg = c.consumer_warpgroups;
  if (wg < 1 || wg > 3)
    add("consumer_warpgroups", fmt::format("fa3 runs 1, 2 or 3 consumer warpgroups, got {}", wg));
  else if (c.block_m != 64 * wg)
    add("block_m", fmt::format("fa3 gives each consumer warpgroup 64 rows: block_m must be {} for {} warpgroups, got {}",
                               64 * wg, wg, c.block_m));
  if (c.block_n % 16 != 0 || c.block_n < 64 || c.block_n > 256)
    add("block_n", fmt::format("fa3 needs a multiple of 16 in [64, 256] (wgmma N), got {}", c.block_n));
  if (c.stages < 2 || c.stages > 4) add("stages", fmt::format("fa3 needs 2 to 4 stages, got {}", c.stages));
  // Packed rows span several query heads: the variants that take the head per tile (ALiBi's slope, the
  // snippets' head argument, the bias's head plane) are not packed yet.
  if (c.pack_gqa && (c.alibi || !c.score_mod.empty() || !c.mask_mod.empty() || c.bias != BiasType::none || c.rel_bias))
    add("pack_gqa", "pack_gqa does not take alibi, score_mod, mask_mod, bias or rel_bias (they read the query head per "
                    "tile)");
  if (c.bias_tma) {
    const int row_bytes = c.block_n * config::bias_element_bytes(c.bias);
    if (c.bias == BiasType::none) add("bias_tma", "bias_tma stages a bias tensor's tiles: set bias too");
    else if (row_bytes % 128 != 0)
      add("bias_tma", fmt::format("bias_tma needs a tile row of whole 128-byte blocks: block_n {} of {} entries is {} bytes",
                                  c.block_n, to_string(c.bias), row_bytes));
    if (c.page_size > 0 && c.page_size < config::kFa3GatherBelow)
      add("bias_tma", fmt::format("bias_tma is not taken with gathered pages (page_size below {})", config::kFa3GatherBelow));
  }
  if (!out.empty()) return;
  int regs = config::fa3_consumer_registers(c), budget = config::fa3_consumer_budget(wg);
  if (regs > budget)
    add("block_n", fmt::format("register budget exceeded: about {} registers per consumer thread for head_dim_v {} / "
                               "block_n {} (budget {} with {} consumer warpgroups)",
                               regs, value_head_dim(c), c.block_n, budget, wg));
}

void validate_naive(const KernelConfig& c, std::vector<ConfigIssue>& out) {
  auto add = [&](const char* f, std::string m) { out.push_back({f, std::move(m)}); };
  if (c.head_dim % 8 != 0 || c.head_dim < 8 || c.head_dim > 256)
    add("head_dim", fmt::format("naive needs a multiple of 8 in [8, 256], got {}", c.head_dim));
  if (c.warps < 1 || c.warps > 8) add("warps", fmt::format("naive needs 1 to 8 warps, got {}", c.warps));
  if (c.block_m != 1) add("block_m", fmt::format("naive computes one query row per CTA: block_m must be 1, got {}", c.block_m));
  if (c.block_n != 32 * c.warps)
    add("block_n", fmt::format("naive scores one key per thread: block_n must be 32 * warps = {}, got {}",
                               32 * c.warps, c.block_n));
  if (c.stages != 1) add("stages", fmt::format("naive has no pipeline: stages must be 1, got {}", c.stages));
}

}  // namespace

int threads_per_cta(const KernelConfig& c) {
  return c.algorithm == Algorithm::fa3 ? 128 * (c.consumer_warpgroups + 1) : 32 * c.warps;
}

int shared_memory_bytes(const KernelConfig& c) {
  int elem = 2;
  switch (c.algorithm) {
    case Algorithm::fa2: {
      // Q (whose space also stages O), then K and V stages (templates/fa2/kernel.cuh).
      const int dq = config::padded_head_dim(c.head_dim), dv = config::padded_head_dim(value_head_dim(c));
      return c.block_m * std::max(dq, dv) * elem + c.stages * c.block_n * (dq + dv) * elem;
    }
    case Algorithm::fa3: {
      // Q buffers (each also holds the O tile), K and V stages (each on a 1024-byte boundary; with bias_tma a bias
      // tile per stage too), 2 per Q buffer +
      // 4 per stage barriers, and 1024 bytes to align the base for the swizzle patterns. Persistent CTAs take
      // a second Q buffer when it fits (templates/fa3/shared_storage.cuh, kernel.cuh).
      const int dq = fa3_padded(c.head_dim), dv = fa3_padded(value_head_dim(c));
      auto round_kb = [](int b) { return (b + 1023) / 1024 * 1024; };
      const int q_buffer = c.block_m * std::max(dq, dv) * elem;
      const int bias = c.bias_tma ? round_kb(c.block_m * c.block_n * config::bias_element_bytes(c.bias)) : 0;
      const int stage = round_kb(c.block_n * dq * elem) + round_kb(c.block_n * dv * elem) + bias;
      auto bytes = [&](int q_buffers) {
        return q_buffers * q_buffer + c.stages * stage + (2 * q_buffers + 4 * c.stages) * 8 + 1024;
      };
      if (c.scheduler == Scheduler::persistent && bytes(2) <= 227 * 1024) return bytes(2);
      return bytes(1);
    }
    case Algorithm::naive:
      // Probabilities of one key chunk, reduction scratch, the query row (floats).
      return (c.block_n + 2 * 32 + c.head_dim) * 4;
    default:
      return 0;
  }
}

// page_size: 0 (contiguous keys) or a power of two in [1, 256]. fa3 (templates/fa3/producer.cuh): pages of 16
// tokens or more are TMA boxes, so a key tile is one page's part or a whole number of pages; smaller pages are
// gathered with cp.async by a lane per row of a quarter of the tile, so tiles of at most 128 keys.
static void validate_page_size(const KernelConfig& c, std::vector<ConfigIssue>& out) {
  const int ps = c.page_size;
  if (ps == 0) return;
  if (ps < 1 || ps > 256 || (ps & (ps - 1)) != 0) {
    out.push_back({"page_size", fmt::format("page_size must be 0 (contiguous) or a power of two in [1, 256], got {}", ps)});
    return;
  }
  if (c.algorithm != Algorithm::fa3) return;
  if (c.block_n % ps != 0 && ps % c.block_n != 0)
    out.push_back({"page_size", fmt::format("fa3 needs block_n ({}) and page_size ({}) to divide one another", c.block_n, ps)});
  if (ps < config::kFa3GatherBelow && c.block_n > 128)
    out.push_back({"page_size", fmt::format("fa3 gathers pages of fewer than {} tokens into tiles of at most 128 keys, "
                                            "got block_n {} for pages of {}",
                                            config::kFa3GatherBelow, c.block_n, ps)});
}

// head_dim_v: 0 (the same as head_dim) or a multiple of 8 in [8, 256] for the kernels that take it.
static void validate_head_dim_v(const KernelConfig& c, std::vector<ConfigIssue>& out) {
  if (c.head_dim_v == 0 || c.head_dim_v == c.head_dim) return;
  if (c.head_dim_v % 8 != 0 || c.head_dim_v < 8 || c.head_dim_v > 256)
    out.push_back({"head_dim_v", fmt::format("head_dim_v must be 0 (the same as head_dim) or a multiple of 8 in "
                                             "[8, 256], got {}", c.head_dim_v)});
}

std::vector<ConfigIssue> validate(const KernelConfig& c) {
  std::vector<ConfigIssue> out;
  validate_head_dim_v(c, out);
  config::validate_snippets(c.score_mod, c.mask_mod, out);
  switch (c.algorithm) {
    case Algorithm::automatic:
      out.push_back({"algorithm", "'auto' is resolved by the dispatcher; a compiled config names naive, fa2 or fa3"});
      return out;
    case Algorithm::fa3: validate_fa3(c, out); break;
    case Algorithm::fa2: validate_fa2(c, out); break;
    case Algorithm::naive: validate_naive(c, out); break;
  }
  validate_page_size(c, out);
  if (c.block_sparse && (c.varlen || c.page_size > 0 || c.pack_gqa))
    out.push_back({"block_sparse", "block_sparse kernels take dense batches: not with varlen, page_size or pack_gqa"});
  if (c.bias_tma && c.algorithm != Algorithm::fa3)
    out.push_back({"bias_tma", fmt::format("bias_tma is an fa3 kernel's (TMA), not {}'s", to_string(c.algorithm))});
  if (c.seqused_k && (c.page_size > 0 || c.block_sparse))
    out.push_back({"seqused_k", "seqused_k kernels take contiguous keys: not with page_size (paged kernels read "
                                "seqused_k anyway) or block_sparse"});
  if (c.scheduler == Scheduler::persistent && c.algorithm != Algorithm::fa3)
    out.push_back({"scheduler", fmt::format("the persistent scheduler is implemented by fa3 only, not {}",
                                            to_string(c.algorithm))});
  if (c.arch.accelerated && c.arch.sm < 90)
    out.push_back({"arch", fmt::format("the 'a' targets start at sm_90a, got {}", c.arch.to_string())});
  if (out.empty()) {
    int smem = shared_memory_bytes(c);
    if (smem > config::max_shared_memory_per_block(c.arch))
      out.push_back({"stages", fmt::format("shared memory {} bytes exceeds the {} limit of {} bytes (block_m {}, "
                                           "block_n {}, head_dim {}, stages {})",
                                           smem, c.arch.to_string(), config::max_shared_memory_per_block(c.arch),
                                           c.block_m, c.block_n, c.head_dim, c.stages)});
  }
  return out;
}

std::string readable_name(const KernelConfig& c) {
  std::string arch = c.arch.to_string();
  arch.erase(arch.find('_'), 1);  // sm_90a -> sm90a
  const std::string varlen = std::string(c.varlen ? "_varlen" : "") +
                             (c.page_size > 0 ? fmt::format("_paged{}", c.page_size) : std::string()) +
                             config::variant_tag(c.softcap, c.alibi, c.sinks, c.score_mod, c.mask_mod, c.bias, c.rel_bias) +
                             (c.bias_tma ? "_tma" : "") + (c.block_sparse ? "_bsparse" : "") + (c.seqused_k ? "_sequsedk" : "");
  const std::string dims = value_head_dim(c) == c.head_dim ? fmt::format("d{}", c.head_dim)
                                                           : fmt::format("d{}_dv{}", c.head_dim, c.head_dim_v);
  if (c.algorithm == Algorithm::naive)
    return fmt::format("naive_{}_{}_w{}_{}{}_{}", to_string(c.dtype), dims, c.warps, to_string(c.mask), varlen, arch);
  // fa3 counts consumer warpgroups ("wg"), fa2 warps ("w").
  const bool fa3 = c.algorithm == Algorithm::fa3;
  return fmt::format("{}_{}_{}_bm{}_bn{}_s{}_{}{}_{}{}{}{}_{}", to_string(c.algorithm), to_string(c.dtype), dims,
                     c.block_m, c.block_n, c.stages, fa3 ? "wg" : "w", fa3 ? c.consumer_warpgroups : c.warps,
                     to_string(c.mask), c.scheduler == Scheduler::persistent ? "_persistent" : "",
                     fa3 && c.pack_gqa ? "_packgqa" : "", varlen, arch);
}

Status check(const KernelConfig& c) { return config::as_status(validate(c), readable_name(c)); }

}  // namespace flashjit
