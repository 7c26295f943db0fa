// The append kind's contract beside its field declaration (kinds.hpp): validate(), resources and its readable
// name.
#include <fmt/format.h>

#include <algorithm>

#include "config/fields.hpp"
#include "config/occupancy.hpp"
#include "flashjit/append.hpp"

namespace flashjit {

int threads_per_cta(const AppendKernelConfig& c) { return 32 * c.warps; }
int shared_memory_bytes(const AppendKernelConfig&) { return 0; }  // registers only: loads, then stores

int min_ctas_per_sm(const AppendKernelConfig& c) {
  const int sm_threads = c.arch.sm == 86 || c.arch.sm == 89 || c.arch.sm >= 120 ? 1536 : 2048;
  // Every thread of the SM for one or two vectors per thread (32 registers: measured on the H200, two vectors at
  // full occupancy copy at cudaMemcpy's bandwidth, four at the 7 CTAs that 68 registers leave 0.79-0.89 of it);
  // half or a quarter of them for four or eight (64 or 128 registers).
  return std::max(1, sm_threads / (threads_per_cta(c) * std::max(c.vectors / 2, 1)));
}

std::vector<ConfigIssue> validate(const AppendKernelConfig& c) {
  std::vector<ConfigIssue> out;
  auto add = [&](const char* f, std::string m) { out.push_back({f, std::move(m)}); };
  if (c.arch.sm < 80) add("arch", fmt::format("append needs sm_80 or newer, got {}", c.arch.to_string()));
  if (c.arch.accelerated && c.arch.sm < 90)
    add("arch", fmt::format("the 'a' targets start at sm_90a, got {}", c.arch.to_string()));
  if (c.head_dim < 8 || c.head_dim > kMaxAppendHeadDim || c.head_dim % 8 != 0)
    add("head_dim", fmt::format("append moves rows in 16-byte vectors: a multiple of 8 in [8, {}], got {}",
                                kMaxAppendHeadDim, c.head_dim));
  if (c.layout == KvLayout::paged) {
    if (c.page_size < 1 || c.page_size > kMaxAppendPageSize || (c.page_size & (c.page_size - 1)) != 0)
      add("page_size", fmt::format("a paged append kernel needs a power of two in [1, {}], got {}", kMaxAppendPageSize,
                                   c.page_size));
  } else if (c.page_size != 0) {
    add("page_size", fmt::format("only the paged layout has pages: must be 0 for {}, got {}", to_string(c.layout),
                                 c.page_size));
  }
  if (c.warps < 1 || c.warps > 32) add("warps", fmt::format("append needs 1 to 32 warps, got {}", c.warps));
  if (c.vectors != 1 && c.vectors != 2 && c.vectors != 4 && c.vectors != 8)
    add("vectors", fmt::format("append needs 1, 2, 4 or 8 vectors per thread, got {}", c.vectors));
  return out;
}

Status check(const AppendKernelConfig& c) { return config::as_status(validate(c), readable_name(c)); }

std::string readable_name(const AppendKernelConfig& c) {
  std::string arch = c.arch.to_string();
  arch.erase(arch.find('_'), 1);  // sm_90a -> sm90a
  const std::string layout =
      c.layout == KvLayout::paged ? fmt::format("paged{}", c.page_size) : std::string(to_string(c.layout));
  return fmt::format("append_{}_d{}_{}_w{}_v{}_{}", to_string(c.dtype), c.head_dim, layout, c.warps, c.vectors, arch);
}

}  // namespace flashjit
