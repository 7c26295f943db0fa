"""append_kv(): the new tokens' keys and values written into a KV cache (contiguous or paged) by the library's
append kernel, on PyTorch tensors, and the checks of its arguments (also those of flash_attn_with_kvcache's k, v)."""
from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Optional

from . import _abi, _library, _runtime
from ._attention import _stream_handle
from ._checks import (DTYPES, INT32_MAX, _int_arg, _require_dense, _require_devices_and_dtypes, _require_layout, _shape,
                      bshd_strides, check_csr_pair, check_csr_table, csr_tensors, packed_strides)

if TYPE_CHECKING:
    from ._attention import Stream, Tensor


def check_new_rows(name_k, k, name_v, v, k_cache, ragged):
    """k and v like each other, dense [B, S_new, Hkv, D] (or ragged [total_new, Hkv, D]) with k_cache's heads and
    head dim; last dimension contiguous, strides multiples of 8, 16-byte aligned."""
    dims = 3 if ragged else 4
    what = "[total_new, heads_kv, head_dim]" if ragged else "[batch, seqlen_new, heads_kv, head_dim]"
    for name, t in ((name_k, k), (name_v, v)):
        shape = _shape(t)
        if len(shape) != dims or min(shape) < 1:
            raise ValueError(f"{name} must be {dims}-D {what} with every dimension >= 1, got shape {list(shape)}")
    if _shape(v) != _shape(k):
        raise ValueError(f"{name_v}: shape {list(_shape(v))} differs from {name_k}'s {list(_shape(k))}")
    if _shape(k)[-2:] != _shape(k_cache)[-2:]:
        raise ValueError(f"{name_k}: [heads_kv, head_dim] {list(_shape(k)[-2:])} differ from the cache's "
                         f"{list(_shape(k_cache)[-2:])}")
    strides = ("token", "head") if ragged else ("batch", "token", "head")
    _require_layout(name_k, k, strides)
    _require_layout(name_v, v, strides)


def check_cache(k_cache, v_cache, page_table, batch, page_indptr=None, last_page_len=None):
    """(layout, cache_seqlen, num_pages, page_size, max_pages_per_seq) of the caches, contiguous [B, capacity,
    Hkv, D] (page_table None) or paged [num_pages, page_size, Hkv, D] with page_table int32 [B, max_pages], or with
    FlashInfer's CSR table (page_indptr given: check_csr_table; every sequence at most num_indices pages)."""
    paged = page_table is not None
    cache_dims = "[num_pages, page_size, heads_kv, head_dim]" if paged else "[batch, capacity, heads_kv, head_dim]"
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache)):
        shape = _shape(t)
        if len(shape) != 4 or min(shape) < 1:
            raise ValueError(f"{name} must be 4-D {cache_dims} with every dimension >= 1, got shape {list(shape)}")
    if _shape(v_cache) != _shape(k_cache):
        raise ValueError(f"v_cache: shape {list(_shape(v_cache))} differs from k_cache's {list(_shape(k_cache))}")
    n0, n1 = _shape(k_cache)[:2]
    strides = ("page", "token", "head") if paged else ("batch", "sequence", "head")
    _require_layout("k_cache", k_cache, strides)
    _require_layout("v_cache", v_cache, strides)
    if not paged:
        if n0 != batch:
            raise ValueError(f"k_cache: batch {n0} differs from the new rows' {batch} (a paged cache needs page_table)")
        return _abi.KV_CONTIGUOUS, n1, 0, 0, 0
    if page_indptr is not None:
        return _abi.KV_PAGED, 0, n0, n1, check_csr_table(page_table, page_indptr, last_page_len, batch, False)
    shape = _shape(page_table)
    if len(shape) != 2 or shape[0] != batch or shape[1] < 1:
        raise ValueError(f"page_table must have shape [{batch}, max_pages_per_seq] (one row per sequence), got "
                         f"{list(shape)}")
    _require_dense("page_table", page_table, "int32 [batch, max_pages_per_seq], rows back to back")
    return _abi.KV_PAGED, 0, n0, n1, shape[1]


def append_args(k_cache, v_cache, k, v, cache_seqlens, page_table, cu_seqlens, max_new_len, seqlens_out,
                check_pages, page_indptr=None, last_page_len=None):
    """AppendArgs of checked arguments (addresses set, stream not)."""
    ragged = cu_seqlens is not None
    if not check_csr_pair("cache_seqlens", page_table, page_indptr, cache_seqlens, last_page_len) \
            and cache_seqlens is None:
        raise ValueError("cache_seqlens is None: pass each sequence's cached length (int32 [batch]), or with a CSR "
                         "page table (page_indptr) last_page_len")
    tensors = [("k", k), ("k_cache", k_cache), ("v_cache", v_cache), ("v", v)]
    for name, t in (("cache_seqlens", cache_seqlens), ("page_table", page_table), ("cu_seqlens", cu_seqlens),
                    ("seqlens_out", seqlens_out)):
        if t is not None:
            tensors.append((name, t))
    _require_devices_and_dtypes(tensors + list(csr_tensors(page_indptr, last_page_len)), 4)
    check_new_rows("k", k, "v", v, k_cache, ragged)
    if ragged:
        shape = _shape(cu_seqlens)
        if len(shape) != 1 or shape[0] < 2:
            raise ValueError(f"cu_seqlens must have shape [batch + 1] with batch >= 1, got {list(shape)}")
        _require_dense("cu_seqlens", cu_seqlens, "int32 [batch + 1]")
        batch, total_new = shape[0] - 1, _shape(k)[0]
        if total_new > INT32_MAX:
            raise ValueError(f"k may hold at most {INT32_MAX} rows (int32 offsets), got {total_new}")
        new_len = total_new if max_new_len is None else _int_arg("max_new_len", max_new_len, 1, total_new)
        k_strides, v_strides = packed_strides(k), packed_strides(v)
    else:
        if max_new_len is not None:
            raise ValueError("max_new_len bounds ragged rows (cu_seqlens); dense k has k.shape[1] per sequence")
        batch, new_len, total_new = _shape(k)[0], _shape(k)[1], 0
        k_strides, v_strides = bshd_strides(k), bshd_strides(v)
    if batch > 65535:
        raise ValueError(f"at most 65535 sequences (grid limit), got {batch}")
    for name, t in (("cache_seqlens", cache_seqlens), ("seqlens_out", seqlens_out)):
        if t is not None:
            if _shape(t) != (batch,):
                raise ValueError(f"{name} must have shape [{batch}] (one length per sequence), got {list(_shape(t))}")
            _require_dense(name, t, "int32 [batch]")
    for name, t in (("cache_seqlens", cache_seqlens), ("last_page_len", last_page_len)):
        if seqlens_out is not None and t is not None and seqlens_out.data_ptr() == t.data_ptr():
            raise ValueError(f"seqlens_out is {name}: pass another tensor (the kernel reads every {name} entry "
                             f"while it writes the new lengths)")
    layout, cache_seqlen, num_pages, page_size, max_pages = check_cache(k_cache, v_cache, page_table, batch,
                                                                        page_indptr, last_page_len)
    hkv, d = _shape(k_cache)[2:]
    return _abi.AppendArgs(
        k=k.data_ptr(), v=v.data_ptr(), k_cache=k_cache.data_ptr(), v_cache=v_cache.data_ptr(),
        cache_seqlens=0 if cache_seqlens is None else cache_seqlens.data_ptr(), batch=batch, new_len=new_len,
        heads_kv=hkv, head_dim=d,
        dtype=DTYPES[str(k.dtype)], layout=layout, cache_seqlen=cache_seqlen, num_pages=num_pages,
        page_size=page_size, max_pages_per_seq=max_pages,
        page_table=0 if page_table is None else page_table.data_ptr(),
        cu_seqlens=0 if cu_seqlens is None else cu_seqlens.data_ptr(), total_new=total_new,
        seqlens_out=0 if seqlens_out is None else seqlens_out.data_ptr(),
        k_strides=_abi.Strides(*k_strides), v_strides=_abi.Strides(*v_strides),
        k_cache_strides=_abi.Strides(*bshd_strides(k_cache)), v_cache_strides=_abi.Strides(*bshd_strides(v_cache)),
        check_pages=1 if check_pages else 0, page_indptr=0 if page_indptr is None else page_indptr.data_ptr(),
        last_page_len=0 if last_page_len is None else last_page_len.data_ptr())


def append_kv(k_cache: Tensor, v_cache: Tensor, k: Tensor, v: Tensor, cache_seqlens: Optional[Tensor], *,
              page_table: Optional[Tensor] = None, page_indptr: Optional[Tensor] = None,
              last_page_len: Optional[Tensor] = None, cu_seqlens: Optional[Tensor] = None,
              max_new_len: Optional[int] = None, seqlens_out: Optional[Tensor] = None, check_pages: bool = False,
              prepare: bool = False, stream: Stream = None) -> None:
    """Writes new keys and values into a KV cache in place (FlashInfer's append_paged_kv_cache, the append of
    flash_attn_with_kvcache): token s of sequence b goes to position cache_seqlens[b] + s.

    k, v: dense [batch, seqlen_new, heads_kv, head_dim], or ragged [total_new, heads_kv, head_dim] with cu_seqlens
    int32 [batch + 1] (sequence b brings rows cu_seqlens[b] .. cu_seqlens[b + 1] - 1; max_new_len, default
    total_new, bounds each count and sizes the grid). Contiguous cache (page_table None): k_cache, v_cache [batch,
    capacity, heads_kv, head_dim]. Paged: [num_pages, page_size, heads_kv, head_dim] with page_table int32 [batch,
    max_pages] (position j of sequence b is token j % page_size of page page_table[b, j // page_size]); any
    strides with a contiguous last dimension (FlashInfer's HND pool [num_pages, heads_kv, page_size, head_dim] as
    pool.transpose(1, 2)). cache_seqlens: int32 [batch] on the device, the keys already cached (never read on the
    host). FlashInfer's CSR page table (append_paged_kv_cache's paged_kv_indptr / indices / last_page_len): with
    page_indptr, int32 [batch + 1] on the device (non-decreasing from >= 0), page_table is the flat page index array,
    int32 [num_indices], and sequence b's pages are page_table[page_indptr[b]:page_indptr[b + 1]]; its lengths are
    cache_seqlens, or last_page_len instead (int32 [batch], cache_seqlens None): the tokens of each sequence's last
    page AFTER the append, FlashInfer's convention (the new tokens' pages allocated already), so that its new rows
    go to its last positions of (pages - 1) * page_size + last_page_len[b]. A position at or past the capacity
    (capacity, or max_pages * page_size; a CSR sequence's pages' tokens), or on a page index outside [0, num_pages),
    is not written. seqlens_out: an int32 [batch] tensor (not cache_seqlens or last_page_len) that receives each
    sequence's length after the append (cache_seqlens + its new count). check_pages: read the lengths and the page
    table on the host first (synchronizes) and raise FlashjitError for a position past the capacity or a page
    outside the pool.

    Asynchronous on `stream` (default: the current stream); nothing allocated, nothing synchronized. The first
    call for a kind of cache (dtype, head dim, layout, page size) loads its kernels: make it, or one with
    prepare=True (which loads the kernels of every size and writes nothing), before capturing a CUDA graph.
    Returns None. Bad arguments raise ValueError before anything runs; the library's checks raise FlashjitError."""
    args = append_args(k_cache, v_cache, k, v, cache_seqlens, page_table, cu_seqlens, max_new_len, seqlens_out,
                       check_pages, page_indptr, last_page_len)
    args.stream = _stream_handle(stream, k.device)
    lib = _library.load()
    function = lib.flashjit_prepare_append_kv if prepare else lib.flashjit_append_kv
    _runtime.check(function(_runtime.handle(), ctypes.byref(args)))
