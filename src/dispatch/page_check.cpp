#include "dispatch/page_check.hpp"

#include <fmt/format.h>

#include <vector>

namespace flashjit::dispatch {
namespace {

Status check_length(const DecodeProblem& p, int b, int len) {
  if (len >= 0 && len <= p.max_seqlen_k) return {};
  return Error(ErrorCode::invalid_argument,
               fmt::format("seqlens_k[{}] = {} is outside [0, max_seqlen_k = {}]", b, len, p.max_seqlen_k));
}

}  // namespace

Status check_page_table(const cuda::Api& api, const DecodeProblem& p) {
  const auto stream = static_cast<CUstream>(p.stream);
  if (cuda::capturing(api, stream))
    return Error(ErrorCode::invalid_argument,
                 "check_pages (FLASHJIT_CHECK_PAGES=1) reads the page table on the host and cannot run while the "
                 "stream captures a CUDA graph");
  FLASHJIT_TRY(cuda::check(api.cuStreamSynchronize(stream), "cuStreamSynchronize (check_pages)"));
  std::vector<int> lens(p.batch);
  FLASHJIT_TRY(cuda::check(api.cuMemcpyDtoH(lens.data(), reinterpret_cast<CUdeviceptr>(p.seqlens_k),
                                            lens.size() * sizeof(int)),
                           "cuMemcpyDtoH(seqlens_k)"));
  if (p.layout != KvLayout::paged) {
    for (int b = 0; b < p.batch; ++b) FLASHJIT_TRY(check_length(p, b, lens[b]));
    return {};
  }
  std::vector<int> pages(static_cast<std::size_t>(p.batch) * p.max_pages_per_seq);
  FLASHJIT_TRY(cuda::check(api.cuMemcpyDtoH(pages.data(), reinterpret_cast<CUdeviceptr>(p.page_table),
                                            pages.size() * sizeof(int)),
                           "cuMemcpyDtoH(page_table)"));
  for (int b = 0; b < p.batch; ++b) {
    FLASHJIT_TRY(check_length(p, b, lens[b]));
    const int used = (lens[b] + p.page_size - 1) / p.page_size;
    for (int j = 0; j < used; ++j) {
      const int page = pages[static_cast<std::size_t>(b) * p.max_pages_per_seq + j];
      if (page < 0 || page >= p.num_pages)
        return Error(ErrorCode::invalid_argument,
                     fmt::format("page_table[{}][{}] = {} is outside [0, {}) = [0, num_pages) (sequence {} has {} keys)",
                                 b, j, page, p.num_pages, b, lens[b]));
    }
  }
  return {};
}

}  // namespace flashjit::dispatch
