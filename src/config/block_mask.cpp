// The block_mask kind's contract beside its field declaration (kinds.hpp): validate(), resources and its readable
// name.
#include <fmt/format.h>

#include "config/fields.hpp"
#include "config/variants.hpp"

namespace flashjit {

int threads_per_cta(const BlockMaskKernelConfig& c) { return 32 * c.warps; }
// One byte per key block (the blocks' kinds before they are listed) is the launch's dynamic shared memory; the
// config's own is none.
int shared_memory_bytes(const BlockMaskKernelConfig&) { return 0; }

std::vector<ConfigIssue> validate(const BlockMaskKernelConfig& c) {
  std::vector<ConfigIssue> out;
  auto add = [&](const char* f, std::string m) { out.push_back({f, std::move(m)}); };
  if (c.arch.sm < 80) add("arch", fmt::format("block_mask needs sm_80 or newer, got {}", c.arch.to_string()));
  if (c.arch.accelerated && c.arch.sm < 90)
    add("arch", fmt::format("the 'a' targets start at sm_90a, got {}", c.arch.to_string()));
  if (c.warps < 1 || c.warps > 32) add("warps", fmt::format("block_mask needs 1 to 32 warps, got {}", c.warps));
  config::validate_snippets({}, c.mask_mod, out);
  return out;
}

Status check(const BlockMaskKernelConfig& c) { return config::as_status(validate(c), readable_name(c)); }

std::string readable_name(const BlockMaskKernelConfig& c) {
  std::string arch = c.arch.to_string();
  arch.erase(arch.find('_'), 1);  // sm_90a -> sm90a
  return fmt::format("block_mask_{}{}_w{}_{}", to_string(c.mask), config::variant_tag(false, false, false, {}, c.mask_mod),
                     c.warps, arch);
}

}  // namespace flashjit
