#include "dispatch/heuristics.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "config/limits.hpp"
#include "config/variants.hpp"
#include "dispatch/tuned_table.hpp"
#include "dispatch/variant_check.hpp"

namespace flashjit::dispatch {
namespace {

// The fields a config takes from the problem and the device; the heuristics choose the rest.
KernelConfig problem_fields(Algorithm algorithm, DType dtype, int head_dim, int head_dim_v, MaskKind mask,
                            const Arch& arch) {
  KernelConfig c;
  c.algorithm = algorithm;
  c.arch = arch;
  c.dtype = dtype;
  c.head_dim = head_dim;
  c.head_dim_v = head_dim_v == head_dim ? 0 : head_dim_v;
  c.mask = mask;
  return c;
}

}  // namespace

KernelConfig fa2_heuristic(DType dtype, int head_dim, MaskKind mask, const Arch& arch, int head_dim_v) {
  KernelConfig c = problem_fields(Algorithm::fa2, dtype, head_dim, head_dim_v, mask, arch);
  const int widest = std::max(head_dim, value_head_dim(c));
  // Measured on the H200 (bench/NOTES.md, 2026-11-29, S 8192, llama3 heads): 32 rows per warp halves the
  // shared-memory reads per FLOP and wins wherever O and S still fit in 255 registers without spills.
  if (widest <= 64) {
    // O 32 + S 64 registers: 128-key tiles would spill (68 B), 64-key tiles do not.
    c.block_m = 128, c.warps = 4, c.block_n = 64, c.stages = 2;
  } else if (widest <= 128 && arch.sm >= 90 && (mask == MaskKind::none || mask == MaskKind::causal)) {
    // O 128 + S 64 registers: 64-key tiles fit in 255 without spills for sm_90's code of these two masks
    // (sm_80 code and the chunked masks spill 12-20 bytes: they keep the 32-key tiles below). With the lazy
    // rescale: 383 / 344 TFLOP/s at S 8192 (non-causal / causal) against 354 / 323 for 32-key tiles with
    // three stages, 1.10 / 1.11x torch's FA2 in the same process. A third 64-key stage (3 x 32 KB + Q)
    // leaves one CTA per SM: 236, far slower.
    c.block_m = 128, c.warps = 4, c.block_n = 64, c.stages = 2;
  } else if (widest <= 128 && mask != MaskKind::sliding_window) {
    // 32-key tiles (S 32 registers): 296 TFLOP/s at S 8192 against 272 for 8 warps x 16 rows (before the
    // changes above); the third stage hides more of the K/V latency at no occupancy cost (2 CTAs/SM).
    c.block_m = 128, c.warps = 4, c.block_n = 32, c.stages = 3;
  } else if (config::large_shared_memory(arch)) {
    // Wide rows (or the sliding window's two-sided test, which tips the 32-row variant into spills):
    // 16 rows per warp with Q in shared memory for d > 128, 8 warps sharing each K/V tile (192 KB of
    // shared memory at d256, which only the 227 KB of sm_90 / sm_100 hold).
    c.block_m = 128, c.warps = 8, c.block_n = 64, c.stages = 2;
  } else {
    // sm_80 (163 KB) and sm_86 / 89 / 12x (99 KB): the 64 x 32 tile keeps d256 at 96 KB of shared memory.
    c.block_m = widest <= 128 ? 128 : 64, c.warps = widest <= 128 ? 8 : 4;
    c.block_n = widest <= 128 ? 64 : 32, c.stages = 2;
  }
  return c;
}

KernelConfig fa3_heuristic(DType dtype, int head_dim, MaskKind mask, const Arch& arch, int head_dim_v) {
  KernelConfig c = problem_fields(Algorithm::fa3, dtype, head_dim, head_dim_v, mask, arch);
  const int dv = value_head_dim(c), widest = std::max(head_dim, dv);
  // Measured on the H200 (bench/NOTES.md), TFLOP/s non-causal / causal.
  c.stages = 2;  // a third stage gave nothing (670 vs 672 at d128): the ping-pong already hides the loads
  if (widest <= 96) {
    // Three consumer warpgroups (192 rows, 160 registers each): O is at most 48 registers, and a third
    // warpgroup keeps the tensor cores busy while two run softmax. d64 (S 8192): 477 / 433 vs 446 / 382 with
    // two. d72-d96 (S 16384, 2026-12-01, persistent): 466 / 440 (d72), 540 / 496 (d80), 580 / 543 (d96) against
    // 426 / 401, 488 / 453, 550 / 504 for two warpgroups with 128-key tiles.
    c.block_m = 192, c.consumer_warpgroups = 3, c.block_n = 96;
    c.scheduler = Scheduler::persistent;
    return c;
  }
  // Two consumer warpgroups with 240 registers: O (dv / 2) + S (block_n / 2) + P (block_n / 4). d128: 672 /
  // 629 with 128-key tiles; 112-176 land within 2% (176 is FA3's published choice; 128 is as fast here and
  // tested more widely). d256: O alone takes 128 registers; 80-key tiles keep S + P at 60 and two stages at
  // 208 KB of shared memory (96 would not fit): 750 / 671 vs 636 / 592 with 64-key tiles. Between them the
  // widest tile up to 128 keys that the register budget and shared memory allow (d160 128, d192 112).
  c.block_m = 128, c.consumer_warpgroups = 2;
  for (int bn = 128; bn >= 64; bn -= 16) {
    c.block_n = bn;
    if (validate(c).empty()) break;
  }
  // Persistent CTAs everywhere (with three warpgroups too, above): the producer streams the next work tile's
  // first K/V stages while the consumers run the epilogue of the current one, and causal work is dealt in
  // balanced rounds, heaviest first. llama3 shape, same run, grid -> persistent: S 1024 480 -> 488 / 260 ->
  // 305 (non-causal / causal), S 2048 588 -> 596 / 411 -> 449, S 4096 630 -> 664 / 537 -> 553, S 8192 within
  // noise (602-680 both); d160 S 16384 666 / 580 -> 665 / 615. (The epilogue's addresses are computed per work
  // tile, templates/fa3/epilogue.cuh: hoisted out of the loop they spilled 40-88 bytes from d136 and with three
  // warpgroups.) Not for V rows of 248 (31 16-byte chunks, the generic epilogue copy): 16 bytes spill there.
  c.scheduler = dv > 240 && dv % 16 != 0 ? Scheduler::grid : Scheduler::persistent;
  return c;
}

KernelConfig fa3_config(const AttentionProblem& p, const Arch& arch) {
  KernelConfig c = fa3_heuristic(p.dtype, p.head_dim, p.mask, arch, p.head_dim_v);
  // Small grids: when 128-row tiles give fewer CTAs than half the SMs of an H100 / H200 (132), 64-row tiles
  // (one consumer warpgroup) double the CTAs. Autotuned on the H200 (llama3, B1 H32, S 32-256): +13-27%
  // over the 128-row tile; from S 512 (128 CTAs) the 128-row tile wins.
  constexpr long long kHalfSms = 66;
  const long long ctas = 1LL * ((p.seqlen_q + 127) / 128) * p.heads_q * p.batch;
  // Short sliding windows (a span of at most 256 keys): most key tiles of a query tile are cut by the window,
  // and the work per tile is short; 64-key tiles, persistent, waste the fewest masked pairs and overlap one
  // tile's epilogue with the next one's loads. H200, 2026-12-01, S 8192: window 128 at d64 H64/8 59 TFLOP/s
  // with two warpgroups against 42 for the 192-row tiles on the grid (and 53 with 128-key tiles). Up to d64,
  // three warpgroups, each computing only the key tiles of its own rows (fa3/consumer.cuh): 65 against 58-59
  // for two warpgroups (2026-12-02, one process; 67 in four stages, within the noise and not yet checked
  // against float64 on the GPU, so two stages, the tested kernel).
  const int widest = std::max(p.head_dim, value_head_dim(p));
  if (p.mask == MaskKind::sliding_window && p.window_left >= 0 && p.window_right >= 0 &&
      p.window_left + p.window_right <= 256 && widest <= 128) {
    KernelConfig narrow = c;
    narrow.block_m = 128, narrow.consumer_warpgroups = 2, narrow.block_n = 64, narrow.scheduler = Scheduler::persistent;
    if (widest <= 64) narrow.block_m = 192, narrow.consumer_warpgroups = 3;
    if (validate(narrow).empty()) return narrow;
  }
  if (p.head_dim > 64 && widest <= 128 && ctas < kHalfSms) {
    KernelConfig small = c;
    small.block_m = 64, small.consumer_warpgroups = 1, small.block_n = 64, small.scheduler = Scheduler::grid;
    if (validate(small).empty()) return small;
  }
  return c;
}

KernelConfig naive_config(DType dtype, int head_dim, MaskKind mask, const Arch& arch, int head_dim_v) {
  KernelConfig c = problem_fields(Algorithm::naive, dtype, head_dim, head_dim_v, mask, arch);
  // 4 warps: one key per thread per chunk, enough threads to cover head dims up to 128 in one pass.
  c.block_m = 1, c.warps = 4, c.block_n = 128, c.stages = 1;
  return c;
}

Status supports(const KernelConfig& c, const AttentionProblem& p, const Arch& device) {
  std::vector<std::string> why;
  if (c.dtype != p.dtype) why.push_back(fmt::format("dtype {} != problem dtype {}", to_string(c.dtype), to_string(p.dtype)));
  if (c.head_dim != p.head_dim) why.push_back(fmt::format("head_dim {} != problem head_dim {}", c.head_dim, p.head_dim));
  if (value_head_dim(c) != value_head_dim(p))
    why.push_back(fmt::format("head_dim_v {} != problem head_dim_v {}", value_head_dim(c), value_head_dim(p)));
  if (c.mask != p.mask) why.push_back(fmt::format("mask {} != problem mask {}", to_string(c.mask), to_string(p.mask)));
  if (c.varlen != p.varlen())
    why.push_back(c.varlen ? "a varlen kernel needs cu_seqlens_q/cu_seqlens_k (the problem has none)"
                           : "the problem is varlen (cu_seqlens_q/cu_seqlens_k set) but the kernel is not: set varlen");
  if (const int pages = p.paged() ? p.page_size : 0; c.page_size != pages)
    why.push_back(pages == 0 ? fmt::format("a kernel of page_size {} needs a paged problem (page_table)", c.page_size)
                             : fmt::format("the problem's keys are in pages of {} tokens but the kernel's page_size is "
                                           "{}: set page_size={}",
                                           pages, c.page_size, pages));
  const auto variant = [&](bool kernel, bool problem, const char* name, const char* field) {
    if (kernel && !problem) why.push_back(fmt::format("a {} kernel needs the problem's {}", name, field));
    if (!kernel && problem) why.push_back(fmt::format("the problem has {} but the kernel has no {}: set {}", field, name, name));
  };
  variant(c.softcap, p.softcap > 0.f, "softcap", "softcap > 0");
  variant(c.alibi, p.alibi_slopes != nullptr, "alibi", "alibi_slopes");
  variant(c.sinks, p.sinks != nullptr, "sinks", "sinks");
  variant(c.rel_bias, p.rel_bias != nullptr, "rel_bias", "rel_bias");
  if (c.score_mod != snippet_text(p.score_mod))
    why.push_back(c.score_mod.empty() ? "the problem has a score_mod but the kernel has none"
                                      : "the kernel's score_mod is not the problem's");
  if (c.mask_mod != snippet_text(p.mask_mod))
    why.push_back(c.mask_mod.empty() ? "the problem has a mask_mod but the kernel has none"
                                     : "the kernel's mask_mod is not the problem's");
  if (const BiasType bias = bias_of(p.bias, p.bias_type); c.bias != bias)
    why.push_back(c.bias == BiasType::none ? fmt::format("the problem has a {} bias but the kernel has none: set bias={}",
                                                         to_string(bias), to_string(bias))
                                           : fmt::format("the kernel reads a {} bias but the problem has {}",
                                                         to_string(c.bias),
                                                         bias == BiasType::none ? "none" : to_string(bias)));
  if (c.bias_tma && c.bias == bias_of(p.bias, p.bias_type))
    if (const std::string b = config::bias_tma_layout_issue(p.bias, p.bias_type, p.bias_strides); !b.empty())
      why.push_back("a bias_tma kernel stages the bias through TMA, but " + b);
  if (const std::string pack = config::pack_gqa_mismatch(c, p.heads_q, p.heads_kv); !pack.empty()) why.push_back(pack);
  if (const bool dense = p.seqused_k != nullptr && !p.paged(); c.seqused_k != dense)
    why.push_back(dense ? "the problem has seqused_k over contiguous keys but the kernel does not read it: set seqused_k"
                        : "a seqused_k kernel needs a problem with seqused_k over contiguous keys (no page_table)");
  const BlockMask& bm = p.block_mask;
  if (const std::string b = config::block_mask_mismatch(c, bm.active() ? bm.q_block : 0, bm.kv_block); !b.empty())
    why.push_back(b);
  // A cubin for sm_XY runs on devices of the same major version and minor >= Y; an "a" target only on XY.
  bool loadable = c.arch.accelerated ? c.arch.sm == device.sm
                                     : (c.arch.sm / 10 == device.sm / 10 && c.arch.sm <= device.sm);
  if (!loadable) why.push_back(fmt::format("a {} kernel cannot run on a {} device", c.arch.to_string(), device.to_string()));
  if (why.empty()) return {};
  return Error(ErrorCode::invalid_argument,
               fmt::format("config {} does not fit the problem: {}", readable_name(c), fmt::join(why, "; ")));
}

namespace {

// A bias tensor's entries of a tile stay in the consumers' registers while Q·Kᵀ runs (templates/fa3/consumer.cuh,
// load_bias): block_n / 4 registers, fp32 block_n / 2. NVRTC 13.0, -Xptxas=-v, causal, persistent, spill bytes:
// three consumer warpgroups (160 registers) spill from 64-key tiles on at d96 (12-92) and with fp32 entries at d64
// (16): two warpgroups instead. Two: d64 0 with 128-key tiles (fp32 28, 0 with 96); d128 fp32 88 from 112 keys, bool
// 20 at 128 (0 with 96 and 112); d160 fp32 24 at 96, bf16 164 at 128, bool 32 at 112; d192 fp32 336 at 96, bf16 and
// bool about 200 at 112; d256 bf16 76 and bool 60 at 80, fp32 56 at 64. The widest tile whose estimate
// (config::fa3_bias_registers) fits the budget lands on or under each boundary; where none does (d256 with fp32 or
// bool entries) one warpgroup of 64-key tiles (0 bytes at d256). At d256 another variant beside the bias spills
// with 64-key tiles on two warpgroups too (softcap 8, ALiBi 16, sinks 92 bytes; d192's 96-key tiles 0): one
// warpgroup (0; fp32 entries with softcap, ALiBi and sinks all on 8).
// FA2 (255 registers): sm_90's 64-key tiles of 32 rows per warp spill with a bias from d112 on (d128: 76-88 bytes;
// d96: 0); the 32-key tiles of three stages that sm_80 takes do not (0, softcap, ALiBi and sinks on too).
void fit_bias_registers(KernelConfig& c) {
  if (c.algorithm == Algorithm::fa2) {
    KernelConfig k = c;
    k.block_n = 32, k.stages = 3;
    if (std::max(c.head_dim, value_head_dim(c)) > 96 && c.block_n == 64 && c.block_m == 32 * c.warps &&
        validate(k).empty())
      c = k;
    return;
  }
  if (c.consumer_warpgroups == 1) return;  // the small-grid tiles (64 rows, 64 keys): 48 registers to spare
  const bool others = c.softcap || c.alibi || c.sinks || !c.score_mod.empty() || !c.mask_mod.empty();
  const bool two = !(others && std::max(c.head_dim, value_head_dim(c)) > 240);
  KernelConfig k = c;
  // The three-warpgroup heuristic's 96-key tiles become the two-warpgroup heuristic's 128; the short windows' 64
  // stay.
  const int widest = c.consumer_warpgroups == 3 && c.block_n > 64 ? 128 : c.block_n;
  k.consumer_warpgroups = 2, k.block_m = 128;
  for (int bn = widest / 16 * 16; two && bn >= 64; bn -= 16) {
    k.block_n = bn;
    if (validate(k).empty() &&
        config::fa3_consumer_registers(k) + config::fa3_bias_registers(k) <= config::fa3_consumer_budget(2)) {
      c = k;
      return;
    }
  }
  k.consumer_warpgroups = 1, k.block_m = 64, k.block_n = 64;
  if (validate(k).empty()) c = k;
}

}  // namespace

void fit_variant_registers(KernelConfig& c) {
  if (c.algorithm != Algorithm::naive && c.bias != BiasType::none) fit_bias_registers(c);
  if (c.algorithm != Algorithm::naive && c.rel_bias) fit_rel_bias_registers(c);
  if (c.algorithm != Algorithm::fa3 || !(c.softcap || c.alibi || c.sinks || !c.score_mod.empty() || !c.mask_mod.empty()))
    return;
  // A variant keeps a few more values live in the consumers (the cap, the slope, the sink's finalize): at
  // the register ceilings ptxas spills 4-20 bytes with the heuristic tiles, on three consumer warpgroups
  // above d80 (160 registers; 96-key tiles) and at d256 (80-key tiles). One key tile narrower fits
  // (NVRTC 13.0, -Xptxas=-v: 0 spills with 80- and 64-key tiles).
  const int widest = std::max(c.head_dim, value_head_dim(c));
  KernelConfig narrow = c;
  if (c.consumer_warpgroups == 3 && widest > 80 && c.block_n > 80) narrow.block_n = 80;
  if (widest > 240 && c.block_n > 64) narrow.block_n = 64;
  if (validate(narrow).empty()) c = narrow;
}

void fit_pack_gqa(KernelConfig& c, const AttentionProblem& p) {
  if (c.algorithm != Algorithm::fa3 || c.pack_gqa || p.heads_kv <= 0 || p.heads_q <= p.heads_kv) return;
  if (p.block_mask.active()) return;  // a block mask's list is per query head
  if (p.mask != MaskKind::sliding_window || p.window_left < 0 || p.window_right < 0) return;
  // Sliding windows with grouped heads: a tile of the group's query heads at block_m / group positions sees
  // block_m / group + span keys instead of block_m + span (gpt-oss, window 128, H64/8, 192-row tiles: 152 keys,
  // 3 of 64, instead of 320, 5 of 64), for the same number of tiles. H200, 2026-12-02, one process
  // (bench/results/2026-12-02-session22/ab_pack_windows.md), S 8192 persistent 64-key tiles, plain -> packed:
  // window 128 d64 H64/8 three warpgroups 66 -> 89 TFLOP/s, two 58 -> 75; window 512 d128 H32/8 three
  // warpgroups 236 -> 304, two 244 -> 290, against 260 for the heuristic's 128-key tiles. Window 4096 (S 16384):
  // 500 -> 532 with 128-key tiles, within the noise of the 517 the heuristic's tiles gave: not taken.
  const int span = p.window_left + p.window_right, widest = std::max(p.head_dim, value_head_dim(p));
  auto take = [&](KernelConfig k) {
    k.pack_gqa = true;
    if (!validate(k).empty() || !config::pack_gqa_mismatch(k, p.heads_q, p.heads_kv).empty()) return false;
    c = k;
    return true;
  };
  if (span <= 512 && widest <= 128) {
    KernelConfig k = c;
    k.block_m = 192, k.consumer_warpgroups = 3, k.block_n = 64;
    k.scheduler = Scheduler::persistent;
    if (take(k)) return;
  }
  if (span <= 256) take(c);  // the short-window tiles of fa3_config, packed, where 192 rows do not fit
}

void fit_pages(KernelConfig& c, const AttentionProblem& p) {
  c.page_size = p.paged() ? p.page_size : 0;
  if (c.page_size == 0) return;
  // fa3 needs block_n and the page size to divide one another (both powers of two then): 80-, 96- and
  // 112-key tiles take the power of two below.
  if (c.algorithm == Algorithm::fa3 && c.block_n % c.page_size != 0 && c.page_size % c.block_n != 0) {
    int n = 64;
    while (2 * n <= c.block_n) n *= 2;
    c.block_n = n;
  }
  if (config::fa3_gathers_pages(c) && c.block_n > 128) c.block_n = 128;
  if (c.page_size >= c.block_n) return;
  // Pages smaller than a key tile. fa3: the whole producer warp (or warpgroup, gathering) issues their loads,
  // which with the persistent scheduler's state needs more than the producer's 24 registers (ptxas spills 4 to
  // 16 bytes); the grid scheduler keeps it spill-free. fa2: a page lookup per row of every K and V load, for which its 128-row
  // tiles (255 registers at head dim 128) have no registers left: 64 rows.
  if (c.algorithm == Algorithm::fa3) c.scheduler = Scheduler::grid;
  if (c.algorithm == Algorithm::fa2 && c.block_m > 64 && 64 % (16 * c.warps) == 0) c.block_m = 64;
}

bool fit_block_mask(KernelConfig& c, const AttentionProblem& p) {
  const BlockMask& m = p.block_mask;
  c.block_sparse = m.active();
  if (!m.active() || c.algorithm == Algorithm::naive) return true;
  KernelConfig k = c;
  // Rows: fa3 64 per consumer warpgroup, fa2 16 or 32 per warp; the most that divide q_block.
  if (m.q_block % k.block_m != 0) {
    if (k.algorithm == Algorithm::fa3) {
      k.consumer_warpgroups = m.q_block % 128 == 0 ? 2 : 1;
      k.block_m = 64 * k.consumer_warpgroups;
    } else {
      while (k.block_m > 16 * k.warps && m.q_block % k.block_m != 0) k.block_m /= 2;
    }
  }
  // fa2: the list's state beside 32 rows per warp above head dim 64 (255 registers) spills (ptxas, d128 128-row
  // tiles: 36 bytes); 16 rows per warp do not (208 registers).
  if (k.algorithm == Algorithm::fa2 && k.block_m > 16 * k.warps && std::max(p.head_dim, value_head_dim(p)) > 64)
    k.block_m = 16 * k.warps;
  // Keys: the widest multiple of 16 up to the heuristic's that divides kv_block (fa3: at least 64).
  if (m.kv_block % k.block_n != 0) {
    const int least = k.algorithm == Algorithm::fa3 ? 64 : 16;
    int n = k.block_n / 16 * 16;
    while (n >= least && m.kv_block % n != 0) n -= 16;
    k.block_n = n;
  }
  if (!validate(k).empty() || !config::block_mask_mismatch(k, m.q_block, m.kv_block).empty()) return false;
  c = k;
  return true;
}

void fit_bias_tma(KernelConfig& c, const AttentionProblem& p) {
  if (c.algorithm != Algorithm::fa3 || c.bias == BiasType::none || c.bias_tma) return;
  // Above d192 the consumers sit at their register ceiling with a bias (O alone takes 128 at d256): the staged
  // tile's addressing spilled there (NVRTC 13.0, -Xptxas=-v: d256 bf16 two warpgroups of 64-key tiles 4 bytes, fp32
  // one warpgroup 12-20), and the bias is half the bytes per FLOP of d128's.
  if (std::max(c.head_dim, value_head_dim(c)) > 192) return;
  // Not yet beside a relative-logits table or key counts over contiguous keys, whose register fits do not count a
  // staged tile (NVRTC 13.0, d128 causal persistent, 128-key tiles: rel_bias 68 bytes of spills, seqused_k 20).
  if (c.rel_bias || c.seqused_k) return;
  if (!config::bias_tma_layout_issue(p.bias, p.bias_type, p.bias_strides).empty()) return;
  const BlockMask& m = p.block_mask;
  KernelConfig k = c;
  k.bias_tma = true;
  // Tiles of whole 128-byte bias rows: the key tile rounded down to them (fp32 96 keys stay, bf16 96 -> 64); bool
  // entries (128 keys a block) up to 128 from d128's 112, which the staged kernel takes without spills (NVRTC 13.0:
  // 0 bytes, where loading the entries per thread spilled 20 at 128 keys).
  const int per_block = 128 / config::bias_element_bytes(c.bias);
  k.block_n = c.block_n / per_block * per_block;
  if (k.block_n == 0 && c.block_n >= 96) k.block_n = per_block;
  if (k.block_n >= 64 && validate(k).empty() &&
      config::block_mask_mismatch(k, m.active() ? m.q_block : 0, m.kv_block).empty())
    c = k;
}

namespace {

// choose() but for the varlen flag (false in the result); the page size is the problem's.
Result<KernelConfig> choose_tiles(const AttentionProblem& p, const Arch& arch, Algorithm requested,
                                  const TunedTables* tuned) {
  auto paged = [&](KernelConfig c) {
    fit_pages(c, p);
    return c;
  };
  switch (requested) {
    case Algorithm::naive: return paged(naive_config(p.dtype, p.head_dim, p.mask, arch, p.head_dim_v));
    case Algorithm::fa2: {
      auto c = paged(fa2_heuristic(p.dtype, p.head_dim, p.mask, arch, p.head_dim_v));
      FLASHJIT_TRY(check(c));
      return c;
    }
    case Algorithm::fa3: {
      auto c = paged(fa3_config(p, arch));
      FLASHJIT_TRY(check(c));
      return c;
    }
    case Algorithm::automatic: {
      if (tuned) {
        // Measured on this GPU. Tables hold fixed-length contiguous problems: a varlen or paged one takes the
        // tiles of its padded contiguous twin (max lengths), choose() then turns on varlen and the pages.
        AttentionProblem fixed = p;
        fixed.cu_seqlens_q = fixed.cu_seqlens_k = nullptr;
        fixed.page_table = nullptr, fixed.seqused_k = nullptr, fixed.page_size = 0;
        if (auto c = tuned->lookup(fixed, arch)) {
          if (auto t = paged(*c); validate(t).empty()) return t;
        }
      }
      // FA3 where the GPU has wgmma/TMA (sm_90a) and the head dim (and page size) is one it covers; FA2 elsewhere.
      if (auto c3 = paged(fa3_config(p, arch)); validate(c3).empty()) return c3;
      auto c = paged(fa2_heuristic(p.dtype, p.head_dim, p.mask, arch, p.head_dim_v));
      if (validate(c).empty()) return c;
      // What fa2 does not cover, pre-sm_80.
      return paged(naive_config(p.dtype, p.head_dim, p.mask, arch, p.head_dim_v));
    }
  }
  return Error(ErrorCode::internal, "unknown algorithm");
}

}  // namespace

std::string reference_fallback_reason(const AttentionProblem& p, const Arch& arch) {
  KernelConfig fa3 = fa3_config(p, arch), fa2 = fa2_heuristic(p.dtype, p.head_dim, p.mask, arch, p.head_dim_v);
  const auto fa3_issues = validate(fa3), fa2_issues = validate(fa2);
  auto first = [](const std::vector<ConfigIssue>& issues) { return issues.front().field + ": " + issues.front().message; };
  if (!fa3_issues.empty() && !fa2_issues.empty())
    return fmt::format("no fast kernel runs it on {} (fa3 {}; fa2 {})", arch.to_string(), first(fa3_issues),
                       first(fa2_issues));
  const bool fits = (fa3_issues.empty() && fit_block_mask(fa3, p)) || (fa2_issues.empty() && fit_block_mask(fa2, p));
  if (!fits)
    return fmt::format("no fast kernel's tiles divide the block mask's {} x {} blocks", p.block_mask.q_block,
                       p.block_mask.kv_block);
  return {};
}

Result<KernelConfig> choose(const AttentionProblem& p, const Arch& arch, Algorithm requested,
                            const TunedTables* tuned) {
  auto c = choose_tiles(p, arch, requested, tuned);
  if (!c.ok()) return c;
  auto finish = [&](KernelConfig k) {
    k.varlen = p.varlen();
    k.softcap = p.softcap > 0.f, k.alibi = p.alibi_slopes != nullptr, k.sinks = p.sinks != nullptr;
    k.score_mod = snippet_text(p.score_mod), k.mask_mod = snippet_text(p.mask_mod);
    k.bias = bias_of(p.bias, p.bias_type);
    k.rel_bias = p.rel_bias != nullptr;
    fit_variant_registers(k);
    fit_pack_gqa(k, p);
    fit_seqused(k, p);
    fit_pages(k, p);  // after the tiles' last change
    return k;
  };
  KernelConfig k = finish(*c);
  if (fit_block_mask(k, p)) return k;
  // No tile of the algorithm divides the block mask's blocks: fa2's when the algorithm was the dispatcher's to
  // pick, else the reference kernel, which takes any.
  if (requested == Algorithm::automatic && k.algorithm == Algorithm::fa3) {
    KernelConfig fa2 = finish(fa2_heuristic(p.dtype, p.head_dim, p.mask, arch, p.head_dim_v));
    if (validate(fa2).empty() && fit_block_mask(fa2, p)) return fa2;
  }
  KernelConfig reference = finish(naive_config(p.dtype, p.head_dim, p.mask, arch, p.head_dim_v));
  fit_block_mask(reference, p);
  return reference;
}

}  // namespace flashjit::dispatch
