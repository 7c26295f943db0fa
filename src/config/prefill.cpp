// The prefill kind's contract beside its field declaration (kinds.hpp): validate(), every problem with a
// KernelConfig, each naming its field; resources (shared memory, threads, the register estimates), so the
// dispatcher, CLI and autotuner agree; the readable name.
#include <fmt/format.h>

#include "config/fields.hpp"
#include "config/limits.hpp"
#include "flashjit/config.hpp"

namespace flashjit {
namespace {

constexpr int kMaxRegisters = 255;

// Rough per-thread register need of the FA2 kernel: O and S accumulators, Q fragments when kept in
// registers, plus addressing and softmax state. ptxas has the last word (CI checks for spills).
int fa2_register_estimate(const KernelConfig& c) {
  int rows_per_warp = c.block_m / c.warps;
  int o_acc = rows_per_warp * c.head_dim / 32;
  int s_acc = rows_per_warp * c.block_n / 32;
  int q_regs = (rows_per_warp == 16 && c.head_dim <= 128) ? c.head_dim / 4 : 0;
  return o_acc + s_acc + q_regs + 32;
}

void validate_fa2(const KernelConfig& c, std::vector<ConfigIssue>& out) {
  auto add = [&](const char* f, std::string m) { out.push_back({f, std::move(m)}); };
  if (c.arch.sm < 80) add("arch", fmt::format("fa2 needs sm_80 or newer (mma.sync bf16), got {}", c.arch.to_string()));
  if (c.head_dim % 16 != 0 || c.head_dim < 16 || c.head_dim > 256)
    add("head_dim", fmt::format("fa2 needs a multiple of 16 in [16, 256], got {}", c.head_dim));
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

// Per-thread registers of an FA3 consumer: O (head_dim / 2), S (block_n / 2), P (block_n / 4), softmax
// state, descriptors and addressing.
int fa3_consumer_registers(const KernelConfig& c) { return c.head_dim / 2 + c.block_n / 2 + c.block_n / 4 + 40; }
int fa3_consumer_budget(int consumers) { return consumers == 1 ? 256 : consumers == 2 ? 240 : 160; }

void validate_fa3(const KernelConfig& c, std::vector<ConfigIssue>& out) {
  auto add = [&](const char* f, std::string m) { out.push_back({f, std::move(m)}); };
  if (!(c.arch.sm == 90 && c.arch.accelerated))
    add("arch", fmt::format("fa3 needs sm_90a (wgmma, setmaxnreg, TMA), got {}", c.arch.to_string()));
  if (c.head_dim != 64 && c.head_dim != 128 && c.head_dim != 256)
    add("head_dim", fmt::format("fa3 supports head_dim 64, 128 or 256, got {}", c.head_dim));
  const int wg = c.consumer_warpgroups;
  if (wg < 1 || wg > 3)
    add("consumer_warpgroups", fmt::format("fa3 runs 1, 2 or 3 consumer warpgroups, got {}", wg));
  else if (c.block_m != 64 * wg)
    add("block_m", fmt::format("fa3 gives each consumer warpgroup 64 rows: block_m must be {} for {} warpgroups, got {}",
                               64 * wg, wg, c.block_m));
  if (c.block_n % 16 != 0 || c.block_n < 64 || c.block_n > 256)
    add("block_n", fmt::format("fa3 needs a multiple of 16 in [64, 256] (wgmma N), got {}", c.block_n));
  if (c.stages < 2 || c.stages > 4) add("stages", fmt::format("fa3 needs 2 to 4 stages, got {}", c.stages));
  if (!out.empty()) return;
  int regs = fa3_consumer_registers(c), budget = fa3_consumer_budget(wg);
  if (regs > budget)
    add("block_n", fmt::format("register budget exceeded: about {} registers per consumer thread for head_dim {} / "
                               "block_n {} (budget {} with {} consumer warpgroups)",
                               regs, c.head_dim, c.block_n, budget, wg));
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
      int dp = config::padded_head_dim(c.head_dim);
      return c.block_m * dp * elem + 2 * c.stages * c.block_n * dp * elem;
    }
    case Algorithm::fa3: {
      // Q buffers, K and V stages, 2 per Q buffer + 4 per stage barriers, and 1024 bytes to align the base for
      // 128B swizzling. Persistent CTAs take a second Q buffer when it fits (templates/fa3/kernel.cuh).
      auto bytes = [&](int q_buffers) {
        return q_buffers * c.block_m * c.head_dim * elem + 2 * c.stages * c.block_n * c.head_dim * elem +
               (2 * q_buffers + 4 * c.stages) * 8 + 1024;
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

std::vector<ConfigIssue> validate(const KernelConfig& c) {
  std::vector<ConfigIssue> out;
  switch (c.algorithm) {
    case Algorithm::automatic:
      out.push_back({"algorithm", "'auto' is resolved by the dispatcher; a compiled config names naive, fa2 or fa3"});
      return out;
    case Algorithm::fa3: validate_fa3(c, out); break;
    case Algorithm::fa2: validate_fa2(c, out); break;
    case Algorithm::naive: validate_naive(c, out); break;
  }
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
  const char* varlen = c.varlen ? "_varlen" : "";
  if (c.algorithm == Algorithm::naive)
    return fmt::format("naive_{}_d{}_w{}_{}{}_{}", to_string(c.dtype), c.head_dim, c.warps, to_string(c.mask), varlen,
                       arch);
  // fa3 counts consumer warpgroups ("wg"), fa2 warps ("w").
  const bool fa3 = c.algorithm == Algorithm::fa3;
  return fmt::format("{}_{}_d{}_bm{}_bn{}_s{}_{}{}_{}{}{}_{}", to_string(c.algorithm), to_string(c.dtype), c.head_dim,
                     c.block_m, c.block_n, c.stages, fa3 ? "wg" : "w", fa3 ? c.consumer_warpgroups : c.warps,
                     to_string(c.mask), c.scheduler == Scheduler::persistent ? "_persistent" : "", varlen, arch);
}

Status check(const KernelConfig& c) { return config::as_status(validate(c), readable_name(c)); }

}  // namespace flashjit
