#include "dispatch/page_check.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace flashjit::dispatch {
namespace {

// Not while capturing (the copies would be captured, or fail); then the stream's work is done.
Status synchronize(const cuda::Api& api, CUstream stream, const char* what) {
  if (cuda::capturing(api, stream))
    return Error(ErrorCode::invalid_argument,
                 fmt::format("{} reads device arrays on the host and cannot run while the stream captures a CUDA graph",
                             what));
  return cuda::check(api.cuStreamSynchronize(stream), fmt::format("cuStreamSynchronize ({})", what).c_str());
}

// Copies `count` ints from device `base` + `first` into `out` (resized), in one call.
Status copy_ints(const cuda::Api& api, const int* base, std::size_t first, std::size_t count, std::vector<int>& out,
                 const char* name) {
  out.resize(count);
  if (count == 0) return {};
  return cuda::check(api.cuMemcpyDtoH(out.data(), reinterpret_cast<CUdeviceptr>(base + first), count * sizeof(int)),
                     fmt::format("cuMemcpyDtoH({})", name).c_str());
}

// The offsets of a ragged batch, kCheckChunk at a time.
Status check_offsets(const cuda::Api& api, const int* cu, const char* name, int batch, int total,
                     const char* total_name, int max_len, const char* max_name) {
  std::vector<int> part;
  long long previous = 0;
  for (std::size_t first = 0; first < static_cast<std::size_t>(batch) + 1; first += kCheckChunk) {
    const std::size_t count = std::min<std::size_t>(kCheckChunk, static_cast<std::size_t>(batch) + 1 - first);
    FLASHJIT_TRY(copy_ints(api, cu, first, count, part, name));
    for (std::size_t i = 0; i < count; ++i) {
      const std::size_t b = first + i;
      const int v = part[i];
      if (b == 0 && v < 0) return Error(ErrorCode::invalid_argument, fmt::format("{}[0] = {} is negative", name, v));
      if (b > 0 && v < previous)
        return Error(ErrorCode::invalid_argument,
                     fmt::format("{}[{}] = {} is below {}[{}] = {}: offsets must not decrease", name, b, v, name, b - 1,
                                 previous));
      if (v > total)
        return Error(ErrorCode::invalid_argument,
                     fmt::format("{}[{}] = {} is past the {} packed rows ({})", name, b, v, total, total_name));
      if (b > 0 && v - previous > max_len)
        return Error(ErrorCode::invalid_argument,
                     fmt::format("sequence {} has {} rows in {}, more than {} = {}", b - 1, v - previous, name, max_name,
                                 max_len));
      previous = v;
    }
  }
  return {};
}

// Each of `batch` lengths (device `lens`) in [0, max_len] and, with a page table, every page a sequence uses
// in [0, num_pages): a row of the table at a time and kCheckChunk entries at most per copy. With `indptr` the
// table is FlashInfer's CSR one (check_csr_keys).
struct PagedKeys {
  const int* lens;  // CSR: null when the counts come from last_page_len
  const char* lens_name;
  int batch, max_len;
  const char* max_name;
  const int* table;  // null: contiguous keys (lengths only)
  int row_len, page_size, num_pages;  // row_len: max_pages_per_seq
  const int* indptr = nullptr;         // CSR: [batch + 1] offsets into table
  const int* last_page_len = nullptr;  // CSR: [batch], instead of lens
};

// A CSR page table (indptr set): offsets non-decreasing from >= 0, at most row_len pages a sequence, each key
// count (lens, or from last_page_len in [1, page_size]) within its pages and max_len, and every page index a
// sequence uses in [0, num_pages). batch + 1 <= 65536 = kCheckChunk offsets: one copy each.
Status check_csr_keys(const cuda::Api& api, const PagedKeys& k) {
  std::vector<int> indptr, lens, pages;
  const std::size_t batch = static_cast<std::size_t>(k.batch);
  FLASHJIT_TRY(copy_ints(api, k.indptr, 0, batch + 1, indptr, "page_indptr"));
  const bool from_last = k.last_page_len != nullptr;
  FLASHJIT_TRY(copy_ints(api, from_last ? k.last_page_len : k.lens, 0, batch, lens,
                         from_last ? "last_page_len" : k.lens_name));
  if (indptr[0] < 0)
    return Error(ErrorCode::invalid_argument, fmt::format("page_indptr[0] = {} is negative", indptr[0]));
  for (std::size_t b = 0; b < batch; ++b) {
    const long long count = static_cast<long long>(indptr[b + 1]) - indptr[b];
    if (count < 0 || count > k.row_len)
      return Error(ErrorCode::invalid_argument,
                   fmt::format("page_indptr[{}] - page_indptr[{}] = {} pages is outside [0, {} = max_pages_per_seq]",
                               b + 1, b, count, k.row_len));
    long long keys = lens[b];
    if (from_last) {
      if (count > 0 && (lens[b] < 1 || lens[b] > k.page_size))
        return Error(ErrorCode::invalid_argument, fmt::format("last_page_len[{}] = {} is outside [1, {} = page_size]",
                                                              b, lens[b], k.page_size));
      keys = count > 0 ? (count - 1) * k.page_size + lens[b] : 0;
    } else if (keys < 0 || keys > count * k.page_size) {
      return Error(ErrorCode::invalid_argument,
                   fmt::format("{}[{}] = {} is outside [0, {}] (sequence {} has {} pages of {} tokens)", k.lens_name,
                               b, keys, count * k.page_size, b, count, k.page_size));
    }
    if (keys > k.max_len)
      return Error(ErrorCode::invalid_argument,
                   fmt::format("sequence {} has {} keys, more than {} = {}", b, keys, k.max_name, k.max_len));
    const std::size_t used = static_cast<std::size_t>((keys + k.page_size - 1) / k.page_size);
    for (std::size_t j0 = 0; j0 < used; j0 += kCheckChunk) {
      const std::size_t n = std::min(kCheckChunk, used - j0);
      FLASHJIT_TRY(copy_ints(api, k.table, static_cast<std::size_t>(indptr[b]) + j0, n, pages, "page_table"));
      for (std::size_t j = 0; j < n; ++j)
        if (pages[j] < 0 || pages[j] >= k.num_pages)
          return Error(ErrorCode::invalid_argument,
                       fmt::format("page_table[{}] = {} (page {} of sequence {}) is outside [0, {}) = [0, num_pages)",
                                   indptr[b] + j0 + j, pages[j], j0 + j, b, k.num_pages));
    }
  }
  return {};
}

Status check_keys(const cuda::Api& api, const PagedKeys& k) {
  if (k.indptr != nullptr) return check_csr_keys(api, k);
  std::vector<int> lens, pages;
  for (std::size_t first = 0; first < static_cast<std::size_t>(k.batch); first += kCheckChunk) {
    const std::size_t count = std::min<std::size_t>(kCheckChunk, static_cast<std::size_t>(k.batch) - first);
    FLASHJIT_TRY(copy_ints(api, k.lens, first, count, lens, k.lens_name));
    for (std::size_t i = 0; i < count; ++i) {
      const int b = static_cast<int>(first + i);
      if (lens[i] < 0 || lens[i] > k.max_len)
        return Error(ErrorCode::invalid_argument, fmt::format("{}[{}] = {} is outside [0, {} = {}]", k.lens_name, b,
                                                              lens[i], k.max_name, k.max_len));
      if (k.table == nullptr) continue;
      const std::size_t used = (static_cast<std::size_t>(lens[i]) + k.page_size - 1) / k.page_size;
      const std::size_t row = static_cast<std::size_t>(b) * static_cast<std::size_t>(k.row_len);
      for (std::size_t j0 = 0; j0 < used; j0 += kCheckChunk) {
        const std::size_t n = std::min(kCheckChunk, used - j0);
        FLASHJIT_TRY(copy_ints(api, k.table, row + j0, n, pages, "page_table"));
        for (std::size_t j = 0; j < n; ++j) {
          const int page = pages[j];
          if (page < 0 || page >= k.num_pages)
            return Error(ErrorCode::invalid_argument,
                         fmt::format("page_table[{}][{}] = {} is outside [0, {}) = [0, num_pages) (sequence {} has {} "
                                     "keys)",
                                     b, j0 + j, page, k.num_pages, b, lens[i]));
        }
      }
    }
  }
  return {};
}

// The pages of positions [first, end) of sequence b (first < end), whose row of the table starts at entry `row`
// (a dense table: b * max_pages_per_seq; a CSR one: page_indptr[b]).
Status check_written_pages(const cuda::Api& api, const AppendProblem& p, int b, std::size_t row, long long first,
                           long long end) {
  std::vector<int> pages;
  const std::size_t j_first = static_cast<std::size_t>(first / p.page_size);
  const std::size_t j_end = static_cast<std::size_t>((end - 1) / p.page_size) + 1;
  for (std::size_t j0 = j_first; j0 < j_end; j0 += kCheckChunk) {
    const std::size_t n = std::min(kCheckChunk, j_end - j0);
    FLASHJIT_TRY(copy_ints(api, p.page_table, row + j0, n, pages, "page_table"));
    for (std::size_t j = 0; j < n; ++j) {
      if (pages[j] >= 0 && pages[j] < p.num_pages) continue;
      const std::string entry = p.csr() ? fmt::format("page_table[{}] = {} (page {} of sequence {})", row + j0 + j,
                                                      pages[j], j0 + j, b)
                                        : fmt::format("page_table[{}][{}] = {}", b, j0 + j, pages[j]);
      return Error(ErrorCode::invalid_argument,
                   fmt::format("{} is outside [0, {}) = [0, num_pages) (sequence {} appends positions {} .. {})", entry,
                               p.num_pages, b, first, end - 1));
    }
  }
  return {};
}

// Where sequence b of an append starts and what it may hold: the position of its first new row and the capacity
// (the whole cache's, or a CSR sequence's pages), and its row of the table. `length` is its cache_seqlens entry or
// (CSR) last_page_len entry, `pages` its CSR page count (offsets[b + 1] - offsets[b], already checked).
struct AppendTarget {
  long long start, capacity;
  std::size_t row;
};

Result<AppendTarget> append_target(const AppendProblem& p, int b, long long length, long long n, long long indptr,
                                   long long pages) {
  AppendTarget t{length, append_capacity(p), static_cast<std::size_t>(b) * static_cast<std::size_t>(p.max_pages_per_seq)};
  if (p.csr()) {
    t.capacity = std::min(t.capacity, pages * p.page_size), t.row = static_cast<std::size_t>(indptr);
    if (p.last_page_len != nullptr) {
      if (pages > 0 && (length < 1 || length > p.page_size))
        return Error(ErrorCode::invalid_argument,
                     fmt::format("last_page_len[{}] = {} is outside [1, {} = page_size]", b, length, p.page_size));
      const long long after = pages > 0 ? (pages - 1) * p.page_size + length : 0;
      t.start = after - n;
      if (t.start < 0)
        return Error(ErrorCode::invalid_argument,
                     fmt::format("sequence {} appends {} rows but has {} keys after the append (last_page_len[{}] = {} "
                                 "on its {} pages): last_page_len counts the new rows too",
                                 b, n, after, b, length, pages));
      return t;
    }
  }
  if (t.start < 0)
    return Error(ErrorCode::invalid_argument, fmt::format("cache_seqlens[{}] = {} is negative", b, t.start));
  return t;
}

}  // namespace

Status check_page_table(const cuda::Api& api, const AppendProblem& p, int max_len) {
  FLASHJIT_TRY(synchronize(api, static_cast<CUstream>(p.stream), "check_pages (FLASHJIT_CHECK_PAGES=1)"));
  if (p.ragged())
    FLASHJIT_TRY(check_offsets(api, p.cu_seqlens, "cu_seqlens", p.batch, p.total_new, "total_new", p.new_len, "new_len"));
  // check(p) has passed: a CSR table (page_indptr) is a paged cache's, and last_page_len goes with it.
  const bool paged = p.layout == KvLayout::paged, csr = p.csr(), from_last = p.last_page_len != nullptr;
  std::vector<int> lens, offsets, indptr;
  for (std::size_t first = 0; first < static_cast<std::size_t>(p.batch); first += kCheckChunk) {
    const std::size_t count = std::min<std::size_t>(kCheckChunk, static_cast<std::size_t>(p.batch) - first);
    FLASHJIT_TRY(copy_ints(api, from_last ? p.last_page_len : p.cache_seqlens, first, count, lens,
                           from_last ? "last_page_len" : "cache_seqlens"));
    if (p.ragged()) FLASHJIT_TRY(copy_ints(api, p.cu_seqlens, first, count + 1, offsets, "cu_seqlens"));
    if (csr) {
      FLASHJIT_TRY(copy_ints(api, p.page_indptr, first, count + 1, indptr, "page_indptr"));
      if (first == 0 && indptr[0] < 0)
        return Error(ErrorCode::invalid_argument, fmt::format("page_indptr[0] = {} is negative", indptr[0]));
    }
    for (std::size_t i = 0; i < count; ++i) {
      const int b = static_cast<int>(first + i);
      const long long n = p.ragged() ? offsets[i + 1] - offsets[i] : p.new_len;
      const long long pages = csr ? static_cast<long long>(indptr[i + 1]) - indptr[i] : 0;
      if (pages < 0 || pages > p.max_pages_per_seq)
        return Error(ErrorCode::invalid_argument,
                     fmt::format("page_indptr[{}] - page_indptr[{}] = {} pages is outside [0, {} = max_pages_per_seq]",
                                 b + 1, b, pages, p.max_pages_per_seq));
      auto target = append_target(p, b, lens[i], n, csr ? indptr[i] : 0, pages);
      if (!target.ok()) return std::move(target).error();
      const long long start = target->start;
      if (start + n > target->capacity)
        return Error(ErrorCode::invalid_argument,
                     fmt::format("sequence {} appends positions {} .. {}, past the cache's capacity of {} ({})", b,
                                 start, start + n - 1, target->capacity,
                                 csr ? fmt::format("its {} pages of {} tokens", pages, p.page_size)
                                 : paged ? "max_pages_per_seq x page_size" : "cache_seqlen"));
      if (max_len > 0 && start + n > max_len)
        return Error(ErrorCode::invalid_argument,
                     fmt::format("sequence {} has {} keys after appending {}, more than max_seqlen_k = {}", b,
                                 start + n, n, max_len));
      if (paged && n > 0) FLASHJIT_TRY(check_written_pages(api, p, b, target->row, start, start + n));
    }
  }
  return {};
}

Status check_page_table(const cuda::Api& api, const DecodeProblem& p) {
  FLASHJIT_TRY(synchronize(api, static_cast<CUstream>(p.stream), "check_pages (FLASHJIT_CHECK_PAGES=1)"));
  const bool paged = p.layout == KvLayout::paged;
  return check_keys(api, PagedKeys{p.seqlens_k, "seqlens_k", p.batch, p.max_seqlen_k, "max_seqlen_k",
                                   paged ? p.page_table : nullptr, p.max_pages_per_seq, p.page_size, p.num_pages,
                                   paged ? p.page_indptr : nullptr, p.last_page_len});
}

Status check_page_table(const cuda::Api& api, const AttentionProblem& p) {
  FLASHJIT_TRY(synchronize(api, static_cast<CUstream>(p.stream), "check_pages (FLASHJIT_CHECK_PAGES=1)"));
  return check_keys(api, PagedKeys{p.seqused_k, "seqused_k", p.batch, p.seqlen_k, "seqlen_k", p.page_table,
                                   p.max_pages_per_seq, p.page_size, p.num_pages, p.page_indptr, p.last_page_len});
}

// Contiguous keys with seqused_k: each count in [0, seqlen_k], and varlen within its sequence's cu_seqlens_k
// length (the offsets already checked).
static Status check_used_keys(const cuda::Api& api, const AttentionProblem& p) {
  FLASHJIT_TRY(check_keys(api, PagedKeys{p.seqused_k, "seqused_k", p.batch, p.seqlen_k, "seqlen_k", nullptr, 0, 0, 0}));
  if (!p.varlen()) return {};
  std::vector<int> used, offsets;
  for (std::size_t first = 0; first < static_cast<std::size_t>(p.batch); first += kCheckChunk) {
    const std::size_t count = std::min<std::size_t>(kCheckChunk, static_cast<std::size_t>(p.batch) - first);
    FLASHJIT_TRY(copy_ints(api, p.seqused_k, first, count, used, "seqused_k"));
    FLASHJIT_TRY(copy_ints(api, p.cu_seqlens_k, first, count + 1, offsets, "cu_seqlens_k"));
    for (std::size_t i = 0; i < count; ++i)
      if (used[i] > offsets[i + 1] - offsets[i])
        return Error(ErrorCode::invalid_argument,
                     fmt::format("seqused_k[{}] = {} is more keys than sequence {} has in cu_seqlens_k ({})", first + i,
                                 used[i], first + i, offsets[i + 1] - offsets[i]));
  }
  return {};
}

Status check_seqlens(const cuda::Api& api, const AttentionProblem& p) {
  FLASHJIT_TRY(synchronize(api, static_cast<CUstream>(p.stream), "check_seqlens (FLASHJIT_CHECK_SEQLENS=1)"));
  if (p.varlen())
    FLASHJIT_TRY(check_offsets(api, p.cu_seqlens_q, "cu_seqlens_q", p.batch, p.total_q, "total_q", p.seqlen_q, "seqlen_q"));
  if (p.paged()) return {};  // the key counts are seqused_k's (check_page_table)
  if (p.varlen())
    FLASHJIT_TRY(check_offsets(api, p.cu_seqlens_k, "cu_seqlens_k", p.batch, p.total_k, "total_k", p.seqlen_k, "seqlen_k"));
  return p.seqused_k != nullptr ? check_used_keys(api, p) : Status{};
}

}  // namespace flashjit::dispatch
