// The C ABI's append inputs: flashjit_append_args, and the fused append's fields of flashjit_decode_args.
#include <fmt/format.h>

#include "capi/args.hpp"
#include "capi/struct_size.hpp"

namespace flashjit::capi {

// The fused append's fields followed the snippets' aux values, which ended flashjit_decode_args at 472 bytes (LP64).
static_assert(sizeof(void*) != 8 || offsetof(flashjit_decode_args, k_new) == 472,
              "a fused append field starts inside the older struct's size");

// The CSR table's fields followed the stream, which ended flashjit_append_args at 232 bytes (LP64).
static_assert(sizeof(void*) != 8 || offsetof(flashjit_append_args, page_indptr) == 232,
              "a CSR table field starts inside the older struct's size");

void read_fused_append(const flashjit_decode_args& a, DecodeProblem& p) {
  if (FLASHJIT_PRESENT(a, k_new)) p.k_new = a.k_new;
  if (FLASHJIT_PRESENT(a, v_new)) p.v_new = a.v_new;
  if (FLASHJIT_PRESENT(a, k_new_strides)) p.k_new_strides = strides_of(a.k_new_strides);
  if (FLASHJIT_PRESENT(a, v_new_strides)) p.v_new_strides = strides_of(a.v_new_strides);
  if (FLASHJIT_PRESENT(a, new_len)) p.new_len = a.new_len;
  if (FLASHJIT_PRESENT(a, seqlens_out)) p.seqlens_out = a.seqlens_out;
}

Result<AppendProblem> read_append_args(const flashjit_append_args* args) {
  if (args == nullptr) return Error(ErrorCode::invalid_argument, "args is NULL");
  const flashjit_append_args& a = *args;
  FLASHJIT_TRY(check_struct_size(a, FLASHJIT_APPEND_ARGS_MIN_SIZE, "flashjit_append_args"));
  AppendProblem p;
  auto dtype = dtype_of(a.dtype);
  if (!dtype.ok()) return std::move(dtype).error();
  p.dtype = *dtype;
  p.k = a.k, p.v = a.v, p.k_cache = a.k_cache, p.v_cache = a.v_cache, p.cache_seqlens = a.cache_seqlens;
  p.batch = a.batch, p.new_len = a.new_len, p.heads_kv = a.heads_kv, p.head_dim = a.head_dim;
  if (FLASHJIT_PRESENT(a, layout)) {
    if (a.layout != FLASHJIT_KV_CONTIGUOUS && a.layout != FLASHJIT_KV_PAGED)
      return Error(ErrorCode::invalid_argument,
                   fmt::format("layout {} is not a flashjit_kv_layout (0 contiguous, 1 paged)", a.layout));
    p.layout = a.layout == FLASHJIT_KV_PAGED ? KvLayout::paged : KvLayout::contiguous;
  }
  if (FLASHJIT_PRESENT(a, cache_seqlen)) p.cache_seqlen = a.cache_seqlen;
  if (FLASHJIT_PRESENT(a, num_pages)) p.num_pages = a.num_pages;
  if (FLASHJIT_PRESENT(a, page_size)) p.page_size = a.page_size;
  if (FLASHJIT_PRESENT(a, max_pages_per_seq)) p.max_pages_per_seq = a.max_pages_per_seq;
  if (FLASHJIT_PRESENT(a, page_table)) p.page_table = a.page_table;
  if (FLASHJIT_PRESENT(a, cu_seqlens)) p.cu_seqlens = a.cu_seqlens;
  if (FLASHJIT_PRESENT(a, total_new)) p.total_new = a.total_new;
  if (FLASHJIT_PRESENT(a, seqlens_out)) p.seqlens_out = a.seqlens_out;
  if (FLASHJIT_PRESENT(a, k_strides)) p.k_strides = strides_of(a.k_strides);
  if (FLASHJIT_PRESENT(a, v_strides)) p.v_strides = strides_of(a.v_strides);
  if (FLASHJIT_PRESENT(a, k_cache_strides)) p.k_cache_strides = strides_of(a.k_cache_strides);
  if (FLASHJIT_PRESENT(a, v_cache_strides)) p.v_cache_strides = strides_of(a.v_cache_strides);
  if (FLASHJIT_PRESENT(a, check_pages)) p.check_pages = a.check_pages != 0;
  if (FLASHJIT_PRESENT(a, stream)) p.stream = a.stream;
  if (FLASHJIT_PRESENT(a, page_indptr)) p.page_indptr = a.page_indptr;
  if (FLASHJIT_PRESENT(a, last_page_len)) p.last_page_len = a.last_page_len;
  return p;
}

}  // namespace flashjit::capi
