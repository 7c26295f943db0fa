#include "tune/append_shape.hpp"

#include <fmt/format.h>

#include <cstdint>

#include "flashjit/append.hpp"

namespace flashjit::tune {

AppendShape normalized(AppendShape s) {
  if (s.layout != KvLayout::paged) s.page_size = 0;
  return s;
}

std::vector<ConfigIssue> check_shape(const AppendShape& s) {
  std::vector<ConfigIssue> out;
  if (s.heads_kv < 1) out.push_back({"heads_kv", fmt::format("must be >= 1, got {}", s.heads_kv)});
  if (s.head_dim < 8 || s.head_dim > kMaxAppendHeadDim || s.head_dim % 8 != 0)
    out.push_back({"head_dim", fmt::format("append moves rows in 16-byte vectors: a multiple of 8 in [8, {}], got {}",
                                           kMaxAppendHeadDim, s.head_dim)});
  else if (const std::int64_t vectors = std::int64_t{s.heads_kv} * (s.head_dim / 8);
           s.heads_kv >= 1 && vectors > kMaxAppendVectorsPerSequence)
    out.push_back({"heads_kv", fmt::format("heads_kv * head_dim / 8 = {} exceeds 2^30 (16-byte vectors of a token)",
                                           vectors)});
  if (s.layout == KvLayout::paged &&
      (s.page_size < 1 || s.page_size > kMaxAppendPageSize || (s.page_size & (s.page_size - 1)) != 0))
    out.push_back(
        {"page_size", fmt::format("must be a power of two in [1, {}], got {}", kMaxAppendPageSize, s.page_size)});
  return out;
}

std::string describe(const AppendShape& s) {
  const std::string layout = s.layout == KvLayout::paged ? fmt::format("paged{}", s.page_size) : "contiguous";
  return fmt::format("append {} H{} D{} {}", to_string(s.dtype), s.heads_kv, s.head_dim, layout);
}

}  // namespace flashjit::tune
