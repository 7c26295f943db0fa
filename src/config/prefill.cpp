// validate(): every problem with a KernelConfig, each naming its field. Resource formulas (shared memory,
// threads, an estimate of registers) live here too, so the dispatcher, CLI and autotuner agree.
#include <fmt/format.h>

#include "config/limits.hpp"
#include "flashjit/config.hpp"

namespace flashjit {
namespace {

constexpr int kMaxRegisters = 255;

int round_up(int x, int m) { return (x + m - 1) / m * m; }

// Shared-memory rows are padded to a multiple of 64 elements so the 128-byte XOR swizzle applies.
int padded_head_dim(int head_dim) { return round_up(head_dim, 64); }

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
  if (c.warps < 1 || c.warps > 3)
    add("warps", fmt::format("fa3 counts consumer warpgroups: 1, 2 or 3, got {}", c.warps));
  else if (c.block_m != 64 * c.warps)
    add("block_m", fmt::format("fa3 gives each consumer warpgroup 64 rows: block_m must be {} for {} warpgroups, got {}",
                               64 * c.warps, c.warps, c.block_m));
  if (c.block_n % 16 != 0 || c.block_n < 64 || c.block_n > 256)
    add("block_n", fmt::format("fa3 needs a multiple of 16 in [64, 256] (wgmma N), got {}", c.block_n));
  if (c.stages < 2 || c.stages > 4) add("stages", fmt::format("fa3 needs 2 to 4 stages, got {}", c.stages));
  if (!out.empty()) return;
  int regs = fa3_consumer_registers(c), budget = fa3_consumer_budget(c.warps);
  if (regs > budget)
    add("block_n", fmt::format("register budget exceeded: about {} registers per consumer thread for head_dim {} / "
                               "block_n {} (budget {} with {} consumer warpgroups)",
                               regs, c.head_dim, c.block_n, budget, c.warps));
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
  return c.algorithm == Algorithm::fa3 ? 128 * (c.warps + 1) : 32 * c.warps;
}

int shared_memory_bytes(const KernelConfig& c) {
  int elem = 2;
  switch (c.algorithm) {
    case Algorithm::fa2: {
      int dp = padded_head_dim(c.head_dim);
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

Status check(const KernelConfig& c) {
  auto issues = validate(c);
  if (issues.empty()) return {};
  std::string msg = fmt::format("config {} is invalid:", readable_name(c));
  for (const auto& i : issues) msg += fmt::format("\n  {}: {}", i.field, i.message);
  return Error(ErrorCode::invalid_config, msg);
}

}  // namespace flashjit
