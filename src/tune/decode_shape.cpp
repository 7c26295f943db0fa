#include "tune/decode_shape.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "config/variants.hpp"
#include "dispatch/problem_shape.hpp"

namespace flashjit::tune {

DecodeProblem to_problem(const DecodeShape& s) {
  DecodeProblem p;
  p.dtype = s.dtype;
  p.batch = s.batch, p.q_len = s.q_len;
  p.heads_q = s.heads_q, p.heads_kv = s.heads_kv, p.head_dim = s.head_dim;
  p.max_seqlen_k = s.seqlen_k;
  p.layout = s.layout;
  if (s.layout == KvLayout::paged) {
    p.page_size = s.page_size;
    p.max_pages_per_seq = s.page_size > 0 ? static_cast<int>((s.seqlen_k + s.page_size - 1LL) / s.page_size) : 0;
    p.num_pages = static_cast<int>(std::min<long long>(1LL * s.batch * p.max_pages_per_seq, 1LL << 30));
  } else {
    p.cache_seqlen = s.seqlen_k;
  }
  p.window_left = s.window_left;
  static const float stand_in[1] = {0.f};  // the variants' arrays: never read
  if (s.softcap) p.softcap = dispatch::kShapeSoftcap;
  if (s.alibi) p.alibi_slopes = stand_in;
  if (s.sinks) p.sinks = stand_in;
  if (!s.score_mod.empty()) p.score_mod = s.score_mod.c_str();
  if (!s.mask_mod.empty()) p.mask_mod = s.mask_mod.c_str();
  if (s.append) p.new_len = s.q_len;
  return p;
}

DecodeShape normalized(DecodeShape s) {
  if (s.layout != KvLayout::paged) s.page_size = 0;
  return s;
}

std::vector<ConfigIssue> check_shape(const DecodeShape& s) {
  std::vector<ConfigIssue> out;
  auto positive = [&](const char* field, int v) {
    if (v < 1) out.push_back({field, fmt::format("must be >= 1, got {}", v)});
  };
  positive("batch", s.batch);
  positive("heads_q", s.heads_q);
  positive("heads_kv", s.heads_kv);
  positive("seqlen_k", s.seqlen_k);
  if (s.batch > 65535) out.push_back({"batch", fmt::format("must be <= 65535 (grid limit), got {}", s.batch)});
  if (s.q_len < 1 || s.q_len > kMaxDecodeQueryLen)
    out.push_back({"q_len", fmt::format("must be in [1, {}] (new tokens per sequence), got {}", kMaxDecodeQueryLen, s.q_len)});
  if (s.heads_q >= 1 && s.heads_kv >= 1) {
    if (s.heads_q % s.heads_kv != 0) {
      out.push_back({"heads_kv", fmt::format("heads_q ({}) must be a multiple of heads_kv ({})", s.heads_q, s.heads_kv)});
    } else if (s.heads_kv > 65535) {
      out.push_back({"heads_kv", fmt::format("must be <= 65535 (grid limit), got {}", s.heads_kv)});
    } else if (s.q_len >= 1 && s.q_len <= kMaxDecodeQueryLen && (s.heads_q / s.heads_kv) * s.q_len > kMaxDecodeRows) {
      out.push_back({"q_len", fmt::format("group * q_len = {} * {} query rows share one KV head's CTA; at most {} are "
                                          "supported",
                                          s.heads_q / s.heads_kv, s.q_len, kMaxDecodeRows)});
    }
  }
  if (s.head_dim < 16 || s.head_dim > 256 || s.head_dim % 16 != 0)
    out.push_back({"head_dim", fmt::format("decode needs a multiple of 16 in [16, 256], got {}", s.head_dim)});
  if (s.layout == KvLayout::paged &&
      (s.page_size < 1 || s.page_size > kMaxDecodePageSize || (s.page_size & (s.page_size - 1)) != 0))
    out.push_back({"page_size", fmt::format("must be a power of two in [1, {}], got {}", kMaxDecodePageSize, s.page_size)});
  if (s.window_left < -1)
    out.push_back({"window_left", fmt::format("must be >= 0 or -1 (no window), got {}", s.window_left)});
  config::validate_snippets(s.score_mod, s.mask_mod, out);
  return out;
}

std::string describe(const DecodeShape& s) {
  std::string layout = s.layout == KvLayout::paged ? fmt::format("paged{}", s.page_size) : "contiguous";
  std::string window = s.window_left >= 0 ? fmt::format(" window{}", s.window_left) : "";
  std::string variants = config::variant_tag(s.softcap, s.alibi, s.sinks, s.score_mod, s.mask_mod);
  std::replace(variants.begin(), variants.end(), '_', ' ');
  window += variants;
  if (s.append) window += " append";
  return fmt::format("decode {} B{} q{} Sk{} H{}/{} D{} {}{}", to_string(s.dtype), s.batch, s.q_len, s.seqlen_k,
                     s.heads_q, s.heads_kv, s.head_dim, layout, window);
}

}  // namespace flashjit::tune
