// Append planning: the append kernel's config for a problem (a pure function of its size and the device's SM
// count, with the reason for each rule beside it), its grid, and the append a decode with new keys and values
// runs before its attention (the fused call).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "flashjit/append.hpp"
#include "flashjit/config.hpp"
#include "flashjit/decode.hpp"

namespace flashjit::dispatch {

inline constexpr int kAppendWarps = 4;

// 16-byte vectors of the problem's new rows, keys and values (every sequence counted at new_len).
std::int64_t append_vectors(const AppendProblem& problem);

// The kernel for `vectors` 16-byte vectors on a device of `sms` multiprocessors (append_kernel_config's rules).
AppendKernelConfig append_kernel_config(DType dtype, int head_dim, KvLayout layout, int page_size, const Arch& arch,
                                        std::int64_t vectors, int sms);
AppendKernelConfig append_kernel(const AppendProblem& problem, const Arch& arch, int sms);
// Every kernel append_kernel_config picks for any size of that kind of problem (distinct): what the prepare calls
// load, so that any size may then be captured.
std::vector<AppendKernelConfig> append_prepare_kernels(DType dtype, int head_dim, KvLayout layout, int page_size,
                                                       const Arch& arch);

// CTAs along one sequence's new rows (grid.x; the grid is (that, batch, 2)).
unsigned append_blocks(const AppendKernelConfig& config, const AppendProblem& problem);

// A decode's fused append (DecodeProblem::new_len > 0): its new rows into its cache at seqlens_k (a CSR table's
// last_page_len: the lengths after the append, the rows before them), the new lengths into `seqlens_out`.
AppendProblem append_of(const DecodeProblem& problem, int* seqlens_out);
// Workspace bytes a fused decode takes for the new lengths (int32 [batch], at offset 0 of its workspace, the split
// partials behind them): 0 without new rows, when the caller gives seqlens_out, or with a CSR table's
// last_page_len (which counts the new rows already: the decode reads it); a multiple of 256.
std::size_t fused_lengths_bytes(const DecodeProblem& problem);

}  // namespace flashjit::dispatch
