"""append_kv()'s argument checks and the AppendArgs they make, on fake tensors: each bad argument is a ValueError
naming it, raised before the library is touched; flash_attn_with_kvcache's new rows checked the same way."""
import ctypes

import pytest

import flashjit
from flashjit import _abi, _append, _decode
from fakes import FakeTensor

B, NEW, HKV, D, CAP = 3, 5, 4, 128, 64
PAGES, PAGE, MAX_PAGES = 20, 16, 4


pytestmark = pytest.mark.usefixtures("library_untouched")


def inputs(paged=False, **changes):
    t = {"k": FakeTensor((B, NEW, HKV, D)), "v": FakeTensor((B, NEW, HKV, D)),
         "cache_seqlens": FakeTensor((B,), "torch.int32")}
    shape = (PAGES, PAGE, HKV, D) if paged else (B, CAP, HKV, D)
    t["k_cache"], t["v_cache"] = FakeTensor(shape), FakeTensor(shape)
    if paged:
        t["page_table"] = FakeTensor((B, MAX_PAGES), "torch.int32")
    t.update(changes)
    return t


def args_of(t, **kw):
    return _append.append_args(t["k_cache"], t["v_cache"], t["k"], t["v"], t["cache_seqlens"], t.get("page_table"),
                               kw.get("cu_seqlens"), kw.get("max_new_len"), kw.get("seqlens_out"), False,
                               kw.get("page_indptr"), kw.get("last_page_len"))


def test_valid_contiguous_and_paged_args():
    a = args_of(inputs())
    assert (a.batch, a.new_len, a.heads_kv, a.head_dim, a.layout, a.cache_seqlen) == (B, NEW, HKV, D,
                                                                                      _abi.KV_CONTIGUOUS, CAP)
    assert (a.k_strides.batch, a.k_strides.seq, a.k_strides.head) == (NEW * HKV * D, HKV * D, D)
    assert a.struct_size == ctypes.sizeof(_abi.AppendArgs) and not a.cu_seqlens and not a.page_table
    p = args_of(inputs(paged=True))
    assert (p.layout, p.num_pages, p.page_size, p.max_pages_per_seq, p.cache_seqlen) == (_abi.KV_PAGED, PAGES, PAGE,
                                                                                        MAX_PAGES, 0)
    # FlashInfer's HND pool, [pages, Hkv, page, D] viewed as [pages, page, Hkv, D]: its strides reach the library.
    hnd = FakeTensor((PAGES, PAGE, HKV, D), strides=(HKV * PAGE * D, D, PAGE * D, 1))
    h = args_of(inputs(paged=True, k_cache=hnd, v_cache=FakeTensor(hnd.shape, strides=hnd.stride())))
    assert (h.k_cache_strides.batch, h.k_cache_strides.seq, h.k_cache_strides.head) == (HKV * PAGE * D, D, PAGE * D)


def test_ragged_rows():
    t = inputs(k=FakeTensor((17, HKV, D)), v=FakeTensor((17, HKV, D)))
    cu = FakeTensor((B + 1,), "torch.int32")
    a = args_of(t, cu_seqlens=cu)
    assert (a.batch, a.new_len, a.total_new, a.cu_seqlens, a.k_strides.batch) == (B, 17, 17, cu.data_ptr(), 0)
    assert args_of(t, cu_seqlens=cu, max_new_len=9).new_len == 9
    with pytest.raises(ValueError, match="max_new_len"):
        args_of(t, cu_seqlens=cu, max_new_len=18)
    with pytest.raises(ValueError, match="max_new_len bounds ragged rows"):
        args_of(inputs(), max_new_len=3)
    with pytest.raises(ValueError, match="cu_seqlens must have shape"):
        args_of(t, cu_seqlens=FakeTensor((1,), "torch.int32"))


@pytest.mark.parametrize("changes, paged, message", [
    (dict(k=FakeTensor((B, NEW, HKV, D), "torch.float32")), False, "k: dtype torch.float32 is not supported"),
    (dict(v=FakeTensor((B, NEW, HKV, D), "torch.float16")), False, "v: dtype torch.float16 differs from k's"),
    (dict(cache_seqlens=FakeTensor((B,), "torch.int64")), False, "cache_seqlens: dtype torch.int64 must be"),
    (dict(cache_seqlens=FakeTensor((B + 1,), "torch.int32")), False, r"cache_seqlens must have shape \[3\]"),
    (dict(k=FakeTensor((B, NEW, HKV, D), device="cpu")), False, "k must be a CUDA tensor"),
    (dict(v=FakeTensor((B, NEW, HKV, D), device="cuda:1")), False, "v is on cuda:1 but k is on cuda:0"),
    (dict(k=FakeTensor((B, NEW, 2, D)), v=FakeTensor((B, NEW, 2, D))), False, r"\[heads_kv, head_dim\]"),
    (dict(v=FakeTensor((B, NEW + 1, HKV, D))), False, "v: shape"),
    (dict(k=FakeTensor((B, NEW, HKV, D), strides=(NEW * HKV * D, HKV * D, D, 2))), False, "last dimension"),
    (dict(k=FakeTensor((B, NEW, HKV, D), strides=(NEW * HKV * D, HKV * D + 4, D, 1))), False, "token stride"),
    (dict(k=FakeTensor((B, NEW, HKV, D), ptr=0x1008)), False, "16-byte aligned"),
    (dict(k_cache=FakeTensor((B + 1, CAP, HKV, D)), v_cache=FakeTensor((B + 1, CAP, HKV, D))), False,
     "k_cache: batch 4 differs"),
    (dict(v_cache=FakeTensor((B, CAP + 1, HKV, D))), False, "v_cache: shape"),
    (dict(page_table=FakeTensor((B, MAX_PAGES), "torch.int64")), True, "page_table: dtype"),
    (dict(page_table=FakeTensor((B + 1, MAX_PAGES), "torch.int32")), True, r"page_table must have shape \[3,"),
    (dict(page_table=FakeTensor((B, MAX_PAGES), "torch.int32", strides=(8, 1))), True, "page_table must be contiguous"),
])
def test_each_bad_argument_is_named(changes, paged, message):
    with pytest.raises(ValueError, match=message):
        args_of(inputs(paged=paged, **changes))


def test_seqlens_out():
    t = inputs()
    out = FakeTensor((B,), "torch.int32")
    assert args_of(t, seqlens_out=out).seqlens_out == out.data_ptr()
    with pytest.raises(ValueError, match="seqlens_out is cache_seqlens"):
        args_of(t, seqlens_out=t["cache_seqlens"])
    with pytest.raises(ValueError, match="seqlens_out must have shape"):
        args_of(t, seqlens_out=FakeTensor((B + 1,), "torch.int32"))


INDICES = 11


def csr_inputs(**changes):
    """A paged call over FlashInfer's CSR table: page_table the flat indices [num_indices] (page_indptr [B + 1] is
    args_of's)."""
    t = inputs(paged=True, page_table=FakeTensor((INDICES,), "torch.int32"))
    t.update(changes)
    return t


def test_csr_tables():
    t = csr_inputs()
    indptr, last = FakeTensor((B + 1,), "torch.int32"), FakeTensor((B,), "torch.int32")
    a = args_of(t, page_indptr=indptr)
    assert (a.layout, a.page_indptr, a.last_page_len, a.cache_seqlens) == (_abi.KV_PAGED, indptr.data_ptr(), None,
                                                                           t["cache_seqlens"].data_ptr())
    assert (a.max_pages_per_seq, a.num_pages, a.page_size) == (INDICES, PAGES, PAGE)  # every page one sequence's
    # last_page_len instead of cache_seqlens: the lengths after the append.
    t["cache_seqlens"] = None
    a = args_of(t, page_indptr=indptr, last_page_len=last)
    assert (a.cache_seqlens, a.last_page_len) == (None, last.data_ptr())
    cu = FakeTensor((B + 1,), "torch.int32")
    r = args_of(csr_inputs(cache_seqlens=None, k=FakeTensor((17, HKV, D)), v=FakeTensor((17, HKV, D))),
                cu_seqlens=cu, page_indptr=indptr, last_page_len=last)
    assert (r.total_new, r.cu_seqlens, r.last_page_len) == (17, cu.data_ptr(), last.data_ptr())
    assert args_of(t, page_indptr=indptr, last_page_len=last,
                   seqlens_out=FakeTensor((B,), "torch.int32")).seqlens_out


@pytest.mark.parametrize("changes, csr, message", [
    (dict(), dict(last_page_len=FakeTensor((B,), "torch.int32")), "last_page_len is for a CSR page table: pass "
     r"page_indptr too \(int32 \[batch \+ 1\]\), or cache_seqlens instead"),
    (dict(page_table=None), dict(page_indptr=FakeTensor((B + 1,), "torch.int32")), "page_indptr needs page_table"),
    (dict(), dict(page_indptr=FakeTensor((B + 1,), "torch.int32"), last_page_len=FakeTensor((B,), "torch.int32")),
     "exactly one of cache_seqlens .* and last_page_len .*, got both"),
    (dict(cache_seqlens=None), dict(page_indptr=FakeTensor((B + 1,), "torch.int32")), "got neither"),
    (dict(cache_seqlens=None), dict(), "cache_seqlens is None"),
    (dict(page_table=FakeTensor((B, MAX_PAGES), "torch.int32")), dict(page_indptr=FakeTensor((B + 1,), "torch.int32")),
     r"page_table must have shape \[num_indices\] with page_indptr"),
    (dict(), dict(page_indptr=FakeTensor((B,), "torch.int32")), r"page_indptr must have shape \[4\]"),
    (dict(), dict(page_indptr=FakeTensor((B + 1,), "torch.int64")), "page_indptr: dtype torch.int64"),
    (dict(), dict(page_indptr=FakeTensor((B + 1,), "torch.int32", device="cuda:1")), "page_indptr is on cuda:1"),
    (dict(cache_seqlens=None), dict(page_indptr=FakeTensor((B + 1,), "torch.int32"),
                                    last_page_len=FakeTensor((B + 1,), "torch.int32")),
     r"last_page_len must have shape \[3\]"),
])
def test_each_bad_csr_argument_is_named(changes, csr, message):
    with pytest.raises(ValueError, match=message):
        args_of(csr_inputs(**changes), **csr)


def test_seqlens_out_is_not_last_page_len():
    last = FakeTensor((B,), "torch.int32")
    with pytest.raises(ValueError, match="seqlens_out is last_page_len"):
        args_of(csr_inputs(cache_seqlens=None), page_indptr=FakeTensor((B + 1,), "torch.int32"), last_page_len=last,
                seqlens_out=last)


def test_append_kv_checks_before_the_library():
    t = inputs(k=FakeTensor((B, NEW, HKV, 64)), v=FakeTensor((B, NEW, HKV, 64)))
    with pytest.raises(ValueError, match="head_dim"):
        flashjit.append_kv(t["k_cache"], t["v_cache"], t["k"], t["v"], t["cache_seqlens"])


def test_flash_attn_with_kvcache_checks_the_new_rows(monkeypatch):
    """The fused path's new rows: like each other and like the cache (the decode's own checks come first)."""
    monkeypatch.setattr(_decode, "_traced_tensors", lambda *a, **k: False, raising=False)
    q = FakeTensor((B, 1, 8, D))
    k_cache, v_cache = FakeTensor((B, CAP, HKV, D)), FakeTensor((B, CAP, HKV, D))
    lens = FakeTensor((B,), "torch.int32")
    with pytest.raises(ValueError, match="v: shape"):
        _decode._checked_call(q, k_cache, v_cache, lens, None, -1, None, None, 0, "auto", None, 0,
                              new_kv=(FakeTensor((B, 1, HKV, D)), FakeTensor((B, 2, HKV, D))))
    with pytest.raises(ValueError, match="cache is torch.bfloat16"):
        _decode._checked_call(q, k_cache, v_cache, lens, None, -1, None, None, 0, "auto", None, 0,
                              new_kv=(FakeTensor((B, 1, HKV, D), "torch.float16"),
                                      FakeTensor((B, 1, HKV, D), "torch.float16")))
