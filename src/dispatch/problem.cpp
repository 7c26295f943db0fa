// Checks of an AttentionProblem that need no device, and its FLOP count.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

#include "dispatch/block_mask_check.hpp"
#include "dispatch/variant_check.hpp"
#include "flashjit/problem.hpp"

namespace flashjit {
namespace {

// No tensor spans more bytes than a 48-bit virtual address space holds (offsets computed from the strides stay
// far from int64 overflow).
constexpr __int128 kMaxTensorBytes = static_cast<__int128>(1) << 48;

// Keys visible from query row i (aligned as the problem says), for FLOP counts.
std::int64_t visible_keys(const AttentionProblem& p, std::int64_t i) {
  std::int64_t a = i + (p.alignment == Alignment::top_left ? 0 : p.seqlen_k - p.seqlen_q), lo = 0, hi = p.seqlen_k;
  auto floor_div = [](std::int64_t x, std::int64_t y) { return x >= 0 ? x / y : -((-x + y - 1) / y); };
  switch (p.mask) {
    case MaskKind::none: break;
    case MaskKind::causal: hi = std::min(hi, a + 1); break;
    case MaskKind::sliding_window:
      if (p.window_left >= 0) lo = std::max(lo, a - p.window_left);
      if (p.window_right >= 0) hi = std::min(hi, a + p.window_right + 1);
      break;
    case MaskKind::chunked:
    case MaskKind::chunked_causal: {
      const std::int64_t w = std::max(1, p.chunk_size);  // check() rejects 0; never divide by it here
      std::int64_t c = floor_div(a, w);
      lo = std::max(lo, c * w);
      hi = std::min(hi, p.mask == MaskKind::chunked ? (c + 1) * w : a + 1);
      break;
    }
  }
  return std::max<std::int64_t>(0, hi - lo);
}

}  // namespace

const char* to_string(Alignment a) { return a == Alignment::top_left ? "top_left" : "bottom_right"; }

// The strides are resolved before check() has looked at the dimensions: a product past int64 (only shapes that
// check() refuses reach one: seqlen, heads and head_dim up to 2^31 each) saturates instead of overflowing, and
// check() reports the stride along with the dimensions.
static std::int64_t saturating_product(std::int64_t a, std::int64_t b, std::int64_t c) {
  const __int128 v = static_cast<__int128>(a) * b * c;  // |v| < 2^96
  constexpr std::int64_t lo = std::numeric_limits<std::int64_t>::min(), hi = std::numeric_limits<std::int64_t>::max();
  return v > hi ? hi : v < lo ? lo : static_cast<std::int64_t>(v);
}

Strides contiguous_bshd(const Strides& s, int seqlen, int heads, int head_dim) {
  Strides r = s;
  if (r.head == 0) r.head = head_dim;
  if (r.seq == 0) r.seq = static_cast<std::int64_t>(heads) * head_dim;  // |heads * head_dim| < 2^62
  if (r.batch == 0) r.batch = saturating_product(seqlen, heads, head_dim);
  return r;
}

// Varlen tensors are packed [total, heads, head_dim]: no batch dimension (stride 0; check() rejects others).
static Strides resolved(const AttentionProblem& p, const Strides& s, int seqlen, int heads, int dim) {
  Strides r = contiguous_bshd(s, seqlen, heads, dim);
  if (p.varlen()) r.batch = 0;
  return r;
}

Strides resolved_q_strides(const AttentionProblem& p) {
  return resolved(p, p.q_strides, p.seqlen_q, p.heads_q, p.head_dim);
}
Strides resolved_o_strides(const AttentionProblem& p) {
  return resolved(p, p.o_strides, p.seqlen_q, p.heads_q, value_head_dim(p));
}
// Paged K and V: [num_pages, page_size, Hkv, D] pools, batch meaning page (varlen or not).
Strides resolved_kv_strides(const AttentionProblem& p, const Strides& s) {
  if (p.paged()) return contiguous_bshd(s, p.page_size, p.heads_kv, p.head_dim);
  return resolved(p, s, p.seqlen_k, p.heads_kv, p.head_dim);
}
Strides resolved_v_strides(const AttentionProblem& p) {
  if (p.paged()) return contiguous_bshd(p.v_strides, p.page_size, p.heads_kv, value_head_dim(p));
  return resolved(p, p.v_strides, p.seqlen_k, p.heads_kv, value_head_dim(p));
}

Status check(const AttentionProblem& p) {
  std::vector<std::string> issues;
  auto add = [&](std::string s) { issues.push_back(std::move(s)); };
  if (p.batch < 1) add(fmt::format("batch must be >= 1, got {}", p.batch));
  if (p.seqlen_q < 1) add(fmt::format("seqlen_q must be >= 1, got {}", p.seqlen_q));
  if (p.seqlen_k < 1) add(fmt::format("seqlen_k must be >= 1, got {}", p.seqlen_k));
  if (p.heads_q < 1 || p.heads_kv < 1)
    add(fmt::format("heads_q and heads_kv must be >= 1, got {} and {}", p.heads_q, p.heads_kv));
  else if (p.heads_q % p.heads_kv != 0)
    add(fmt::format("heads_q ({}) must be a multiple of heads_kv ({})", p.heads_q, p.heads_kv));
  if (p.head_dim < 8 || p.head_dim > 256 || p.head_dim % 8 != 0)
    add(fmt::format("head_dim must be a multiple of 8 in [8, 256], got {}", p.head_dim));
  if (p.head_dim_v != 0 && (p.head_dim_v < 8 || p.head_dim_v > 256 || p.head_dim_v % 8 != 0))
    add(fmt::format("head_dim_v must be 0 (the same as head_dim) or a multiple of 8 in [8, 256], got {}",
                    p.head_dim_v));
  if (p.batch > 65535 || p.heads_q > 65535) add("batch and heads_q must be <= 65535 (grid limits)");

  const bool varlen = p.varlen(), paged = p.paged();
  auto check_int_array = [&](const int* ptr, const char* name, const char* what) {
    if (ptr == nullptr)
      add(fmt::format("{} is a null pointer: {}", name, what));
    else if (reinterpret_cast<std::uintptr_t>(ptr) % 4 != 0)
      add(fmt::format("{} ({}) must be 4-byte aligned (int32)", name, fmt::ptr(ptr)));
  };
  if (paged) {
    // Paged keys: a page table, per-sequence key counts, the pool's shape; queries dense or ragged.
    if (p.page_indptr != nullptr) {  // CSR: seqused_k or last_page_len gives the key counts
      check_int_array(p.page_indptr, "page_indptr", "");
      if ((p.seqused_k == nullptr) == (p.last_page_len == nullptr))
        add("a CSR page table (page_indptr) needs exactly one of seqused_k (key counts) and last_page_len (tokens "
            "of each sequence's last page)");
      else if (p.last_page_len != nullptr)
        check_int_array(p.last_page_len, "last_page_len", "");
      else
        check_int_array(p.seqused_k, "seqused_k", "");
    } else {
      check_int_array(p.seqused_k, "seqused_k", "a paged problem needs each sequence's key count (int32 [batch])");
      if (p.last_page_len != nullptr)
        add("last_page_len is for CSR page tables: set page_indptr too, or give seqused_k");
    }
    check_int_array(p.page_table, "page_table", "");
    if (p.page_size < 1 || p.page_size > 256 || (p.page_size & (p.page_size - 1)) != 0)
      add(fmt::format("page_size must be a power of two in [1, 256], got {}", p.page_size));
    if (p.num_pages < 1) add(fmt::format("num_pages (pages in the k and v pools) must be >= 1, got {}", p.num_pages));
    if (p.max_pages_per_seq < 1)
      add(fmt::format("max_pages_per_seq (the page table's row length) must be >= 1, got {}", p.max_pages_per_seq));
    else if (p.page_size >= 1 && static_cast<long long>(p.max_pages_per_seq) * p.page_size < p.seqlen_k)
      add(fmt::format("seqlen_k ({}) is more keys than max_pages_per_seq * page_size = {} * {} hold", p.seqlen_k,
                      p.max_pages_per_seq, p.page_size));
    if (p.page_indptr == nullptr && static_cast<long long>(p.batch) * p.max_pages_per_seq > (1ll << 31) - 1)
      add("batch * max_pages_per_seq must fit in int32 (page-table entries of the dense table)");
    if (p.cu_seqlens_k != nullptr)
      add("cu_seqlens_k must be null for a paged problem (seqused_k gives each sequence's key count)");
    if (p.total_k != 0) add(fmt::format("total_k must be 0 for a paged problem, got {}", p.total_k));
  } else if (p.page_indptr != nullptr || p.last_page_len != nullptr || p.page_size != 0 || p.num_pages != 0 ||
             p.max_pages_per_seq != 0) {
    add("page_indptr, last_page_len, page_size, num_pages and max_pages_per_seq are for paged problems: set "
        "page_table, or leave them null and 0");
  }
  if (!paged && p.seqused_k != nullptr) {
    // Contiguous keys of which each sequence uses its first seqused_k[b] (within seqlen_k, or varlen within its
    // cu_seqlens_k length).
    check_int_array(p.seqused_k, "seqused_k", "");
    if (p.block_mask.active())
      add("seqused_k over contiguous keys does not take a block mask (block sparsity takes full-length sequences)");
  }
  if (varlen && paged) {
    // Ragged queries over pages: cu_seqlens_q and total_q.
    check_int_array(p.cu_seqlens_q, "cu_seqlens_q", "ragged queries over pages need cu_seqlens_q");
    if (p.total_q < 1)
      add(fmt::format("total_q (rows of the packed q and o) must be >= 1 for a varlen problem, got {}", p.total_q));
    const std::pair<const Strides*, const char*> batch_strides[] = {{&p.q_strides, "q_strides"},
                                                                     {&p.o_strides, "o_strides"}};
    for (const auto& [strides, name] : batch_strides)
      if (strides->batch != 0)
        add(fmt::format("{}.batch must be 0 for a varlen problem (packed [total, heads, head_dim] tensors), got {}",
                        name, strides->batch));
  } else if (varlen) {
    // Ragged batch: both offset arrays (device int32 [batch + 1]) and the rows of the packed tensors.
    const std::pair<const int*, const char*> offsets[] = {{p.cu_seqlens_q, "cu_seqlens_q"},
                                                          {p.cu_seqlens_k, "cu_seqlens_k"}};
    for (int i = 0; i < 2; ++i) {
      const auto [ptr, name] = offsets[i];
      if (ptr == nullptr)
        add(fmt::format("{} is a null pointer but {} is set: a varlen problem needs both offset arrays", name,
                        offsets[1 - i].second));
      else if (reinterpret_cast<std::uintptr_t>(ptr) % 4 != 0)
        add(fmt::format("{} ({}) must be 4-byte aligned (int32 offsets)", name, fmt::ptr(ptr)));
    }
    if (p.total_q < 1)
      add(fmt::format("total_q (rows of the packed q and o) must be >= 1 for a varlen problem, got {}", p.total_q));
    if (p.total_k < 1)
      add(fmt::format("total_k (rows of the packed k and v) must be >= 1 for a varlen problem, got {}", p.total_k));
    const std::pair<const Strides*, const char*> batch_strides[] = {{&p.q_strides, "q_strides"},
                                                                     {&p.k_strides, "k_strides"},
                                                                     {&p.v_strides, "v_strides"},
                                                                     {&p.o_strides, "o_strides"}};
    for (const auto& [strides, name] : batch_strides)
      if (strides->batch != 0)
        add(fmt::format("{}.batch must be 0 for a varlen problem (packed [total, heads, head_dim] tensors), got {}",
                        name, strides->batch));
  } else if (!paged && (p.total_q != 0 || p.total_k != 0)) {
    add(fmt::format("total_q and total_k ({} and {}) are for varlen problems: set cu_seqlens_q and cu_seqlens_k, "
                    "or leave them 0",
                    p.total_q, p.total_k));
  }

  // Each tensor's extent: batch (1 when packed; paged K and V: pages), rows, heads, and its last dimension.
  struct Tensor { const char* name; const void* ptr; Strides strides; std::int64_t dims[3]; int dim; bool packed; };
  const std::int64_t batch = varlen ? 1 : p.batch;
  const std::int64_t rows_q = varlen ? p.total_q : p.seqlen_q;
  const std::int64_t kv_batch = paged ? p.num_pages : batch,
                     rows_k = paged ? p.page_size : varlen ? p.total_k : p.seqlen_k;
  const bool kv_packed = varlen && !paged;
  const int dv = value_head_dim(p);
  const Tensor tensors[] = {
      {"q", p.q, resolved_q_strides(p), {batch, rows_q, p.heads_q}, p.head_dim, varlen},
      {"k", p.k, resolved_kv_strides(p, p.k_strides), {kv_batch, rows_k, p.heads_kv}, p.head_dim, kv_packed},
      {"v", p.v, resolved_v_strides(p), {kv_batch, rows_k, p.heads_kv}, dv, kv_packed},
      {"o", p.o, resolved_o_strides(p), {batch, rows_q, p.heads_q}, dv, varlen}};
  for (const auto& t : tensors) {
    if (t.ptr == nullptr) {
      add(fmt::format("{} is a null pointer", t.name));
      continue;
    }
    if (reinterpret_cast<std::uintptr_t>(t.ptr) % 16 != 0)
      add(fmt::format("{} ({}) must be 16-byte aligned", t.name, fmt::ptr(t.ptr)));
    const std::int64_t s[] = {t.strides.batch, t.strides.seq, t.strides.head};
    const char* names[] = {"batch", "sequence", "head"};
    bool positive = true;
    for (int i = t.packed ? 1 : 0; i < 3; ++i)  // varlen: no batch dimension (checked above)
      if (s[i] <= 0 || s[i] % 8 != 0) {
        positive = false;
        add(fmt::format("{} {} stride must be a positive multiple of 8 elements (16 bytes), got {}", t.name,
                        names[i], s[i]));
      }
    // The last element's offset, in 128-bit arithmetic: no stride may put it past what an address can reach.
    if (positive) {
      __int128 last = t.dim;
      for (int i = t.packed ? 1 : 0; i < 3; ++i) last += static_cast<__int128>(std::max<std::int64_t>(t.dims[i] - 1, 0)) * s[i];
      if (last * 2 > kMaxTensorBytes)
        add(fmt::format("{} strides ({}, {}, {}) put its last element more than 2^48 bytes past {}: a stride is too "
                        "large for the tensor's shape",
                        t.name, s[0], s[1], s[2], t.name));
    }
  }
  if (p.lse != nullptr && reinterpret_cast<std::uintptr_t>(p.lse) % 4 != 0) add("lse must be 4-byte aligned");
  if (p.softmax_scale && !(*p.softmax_scale > 0.f && std::isfinite(*p.softmax_scale)))
    add(fmt::format("softmax_scale must be positive and finite, got {}", *p.softmax_scale));
  for (auto& issue : dispatch::variant_issues(p.softcap, p.alibi_slopes, p.alibi_slopes_batch_stride, p.sinks,
                                                        p.score_mod, p.mask_mod))
    add(std::move(issue));
  for (auto& issue : dispatch::rel_bias_issues(p.rel_bias, p.rel_bias_head_stride, p.rel_bias_extent, p.rel_bias_offset,
                                               p.heads_q))
    add(std::move(issue));
  if (p.rel_bias != nullptr && (p.seqlen_q > (1 << 30) || p.seqlen_k > (1 << 30)))
    add("rel_bias takes lengths up to 2^30 (its distances are int32)");
  for (auto& issue : dispatch::block_mask_issues(p)) add(std::move(issue));
  // The bias at the max lengths (varlen, paged: positions within each sequence).
  for (auto& issue : dispatch::bias_issues(p.bias, p.bias_type, p.bias_strides, p.batch, p.heads_q, p.seqlen_q, p.seqlen_k))
    add(std::move(issue));
  if (p.alignment != Alignment::bottom_right && p.alignment != Alignment::top_left)
    add(fmt::format("alignment must be bottom_right (0) or top_left (1), got {}", static_cast<int>(p.alignment)));
  for (auto& issue : dispatch::mask_constant_issues(p.mask, p.window_left, p.window_right, p.chunk_size))
    add(std::move(issue));
  if (issues.empty()) return {};
  std::string msg = "invalid attention problem:";
  for (const auto& i : issues) msg += "\n  " + i;
  return Error(ErrorCode::invalid_argument, msg);
}

double attention_flops(const AttentionProblem& p) {
  double pairs = 0;
  if (p.mask == MaskKind::none) {
    pairs = double(p.seqlen_q) * p.seqlen_k;
  } else {
    for (std::int64_t i = 0; i < p.seqlen_q; ++i) pairs += double(visible_keys(p, i));
  }
  return 2.0 * p.batch * p.heads_q * pairs * (p.head_dim + value_head_dim(p));
}

double attention_flops(const AttentionProblem& p, const int* cu_q, const int* cu_k) {
  double flops = 0;
  AttentionProblem one = p;
  one.batch = 1;
  one.cu_seqlens_q = one.cu_seqlens_k = nullptr;
  for (int b = 0; b < p.batch; ++b) {
    one.seqlen_q = cu_q[b + 1] - cu_q[b];
    one.seqlen_k = cu_k[b + 1] - cu_k[b];
    if (one.seqlen_q > 0 && one.seqlen_k > 0) flops += attention_flops(one);
  }
  return flops;
}

}  // namespace flashjit
