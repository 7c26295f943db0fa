// What the planners hand the launch layer: the kernels of a call and how its work is split. Types only.
#pragma once

#include <cstddef>

#include "flashjit/config.hpp"

namespace flashjit::dispatch {

struct DecodeSplitPlan {
  int num_splits = 1;      // CTAs along the keys of each (sequence, KV head); 1 means no merge of partials
  int keys_per_split = 1;  // split s covers keys [s * keys_per_split, (s + 1) * keys_per_split) of the range
};

// Everything a decode call launches: the split kernel's config, the split plan, the combine kernel's
// config (used when num_splits > 1 and the split kernel does not merge in a cluster) and the workspace the
// partial states take.
struct DecodePlan {
  DecodeKernelConfig split;
  CombineKernelConfig combine;
  DecodeSplitPlan splits;
  // Keys per split are a multiple of this (lcm of the kernel's tile and the page size; decode_split_granule):
  // the kernel's addressing relies on it.
  int granule = 1;
  // Workspace layout: fp32 O partials [num_splits, B, q_len, Hq, D] at offset 0, then fp32 LSE
  // [num_splits, B, Hq, q_len] at lse_offset (256-byte aligned). 0 bytes when num_splits == 1 or with a
  // cluster merge (split.cluster_merge).
  std::size_t lse_offset = 0;
  std::size_t workspace_bytes = 0;
};

}  // namespace flashjit::dispatch
