// The debug check of a decode problem's lengths and page table (DecodeProblem::check_pages,
// FLASHJIT_CHECK_PAGES=1), beside the checks that need no device (decode_problem.cpp): seqlens_k and the page
// table are copied to the host, synchronizing the stream, and every length must be in [0, max_seqlen_k] and
// every page a sequence uses in [0, num_pages). Refused while the stream captures a CUDA graph.
#pragma once

#include "cuda/driver.hpp"
#include "flashjit/decode.hpp"

namespace flashjit::dispatch {

// The problem's device context is current.
Status check_page_table(const cuda::Api& api, const DecodeProblem& problem);

}  // namespace flashjit::dispatch
