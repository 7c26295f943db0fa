// The debug checks of device arrays a problem points to, beside the checks that need no device (problem.cpp,
// decode_problem.cpp). The arrays are copied to the host, synchronizing the stream, in pieces of a bounded
// size (whatever the problem's dimensions, the host allocates at most kCheckChunk values); refused while the
// stream captures a CUDA graph.
//   decode (DecodeProblem::check_pages, FLASHJIT_CHECK_PAGES=1): every length in [0, max_seqlen_k] and every
//     page a sequence uses in [0, num_pages);
//   paged forward (AttentionProblem::check_pages, FLASHJIT_CHECK_PAGES=1): every seqused_k in [0, seqlen_k] and
//     every page a sequence uses in [0, num_pages);
//   either over a CSR page table (page_indptr): the offsets non-decreasing from >= 0, at most max_pages_per_seq
//     pages a sequence, each key count (or last_page_len in [1, page_size]) within the sequence's pages;
//   varlen forward (AttentionProblem::check_seqlens, FLASHJIT_CHECK_SEQLENS=1): cu_seqlens_q and cu_seqlens_k
//     non-decreasing from >= 0, the last offset at most total_q / total_k, no length above seqlen_q / seqlen_k;
//     with seqused_k over contiguous keys (dense or varlen, the same option) every seqused_k in [0, seqlen_k] and
//     within its sequence's cu_seqlens_k length;
//   append (AppendProblem::check_pages, FLASHJIT_CHECK_PAGES=1): every cache_seqlens entry >= 0, ragged counts
//     in [0, new_len] (cu_seqlens non-decreasing up to total_new), every position written below the capacity and
//     on a page in [0, num_pages); over a CSR table also the offsets as above, each position within the sequence's
//     pages, and with last_page_len each entry in [1, page_size] and a length after the append of at least the
//     sequence's new rows; for a fused decode's append (max_len > 0) also each new length <= max_len.
#pragma once

#include "cuda/driver.hpp"
#include "flashjit/append.hpp"
#include "flashjit/decode.hpp"
#include "flashjit/problem.hpp"

namespace flashjit::dispatch {

inline constexpr std::size_t kCheckChunk = 1 << 16;

// The problem's device context is current.
Status check_page_table(const cuda::Api& api, const DecodeProblem& problem);
Status check_page_table(const cuda::Api& api, const AttentionProblem& problem);
Status check_seqlens(const cuda::Api& api, const AttentionProblem& problem);
Status check_page_table(const cuda::Api& api, const AppendProblem& problem, int max_len = 0);

}  // namespace flashjit::dispatch
