"""decode()'s and merge()'s argument checks on fake tensors: each bad argument is a ValueError naming it, raised
before the library (or torch) is touched."""
import contextlib
import math

import pytest

import flashjit
from flashjit import _abi, _checks, _decode
from fakes import FakeTensor, contiguous

B, QLEN, HQ, HKV, D, MAXSEQ = 2, 1, 8, 2, 64, 96
NUM_PAGES, PAGE, MAX_PAGES = 40, 16, 6


pytestmark = pytest.mark.usefixtures("library_untouched")


def like(t, **overrides):
    fields = dict(shape=t.shape, dtype=t.dtype, device=str(t.device), strides=t.stride(), ptr=t.data_ptr())
    fields.update(overrides)
    return FakeTensor(**fields)


def contiguous_inputs(**changes):
    """q, k_cache, v_cache, seqlens_k, out for a valid contiguous-cache decode, with some replaced (callables
    receive the valid tensor)."""
    tensors = {"q": FakeTensor((B, QLEN, HQ, D)), "k_cache": FakeTensor((B, MAXSEQ, HKV, D)),
               "v_cache": FakeTensor((B, MAXSEQ, HKV, D)), "seqlens_k": FakeTensor((B,), "torch.int32"),
               "out": FakeTensor((B, QLEN, HQ, D))}
    for name, change in changes.items():
        tensors[name] = change(tensors[name]) if callable(change) else change
    return tensors


def paged_inputs(**changes):
    tensors = {"q": FakeTensor((B, QLEN, HQ, D)), "k_cache": FakeTensor((NUM_PAGES, PAGE, HKV, D)),
               "v_cache": FakeTensor((NUM_PAGES, PAGE, HKV, D)), "seqlens_k": FakeTensor((B,), "torch.int32"),
               "page_table": FakeTensor((B, MAX_PAGES), "torch.int32"), "out": FakeTensor((B, QLEN, HQ, D))}
    for name, change in changes.items():
        tensors[name] = change(tensors[name]) if callable(change) else change
    return tensors


def call_decode(tensors, **kwargs):
    return flashjit.decode(tensors["q"], tensors["k_cache"], tensors["v_cache"], tensors["seqlens_k"],
                           page_table=tensors.get("page_table"), out=tensors.get("out"), stream=0, **kwargs)


DECODE_CASES = {
    "q on the CPU": (contiguous_inputs(q=lambda t: like(t, device="cpu")), "q must be a CUDA tensor"),
    "k_cache not CUDA": (contiguous_inputs(k_cache=lambda t: like(t, device="cpu")), "k_cache must be a CUDA tensor"),
    "seqlens_k on the CPU": (contiguous_inputs(seqlens_k=lambda t: like(t, device="cpu")),
                             "seqlens_k must be a CUDA tensor"),
    "page_table on the CPU": (paged_inputs(page_table=lambda t: like(t, device="cpu")),
                              "page_table must be a CUDA tensor"),
    "v_cache on another GPU": (contiguous_inputs(v_cache=lambda t: like(t, device="cuda:1")), "v_cache is on cuda:1"),
    "seqlens_k on another GPU": (contiguous_inputs(seqlens_k=lambda t: like(t, device="cuda:1")),
                                 "seqlens_k is on cuda:1"),
    "page_table on another GPU": (paged_inputs(page_table=lambda t: like(t, device="cuda:1")), "page_table is on cuda:1"),
    "q float32": (contiguous_inputs(q=lambda t: like(t, dtype="torch.float32")), "q: dtype torch.float32"),
    "k_cache fp16 with q bf16": (contiguous_inputs(k_cache=lambda t: like(t, dtype="torch.float16")),
                                 "k_cache: dtype torch.float16 differs"),
    "v_cache fp16 with q bf16": (contiguous_inputs(v_cache=lambda t: like(t, dtype="torch.float16")),
                                 "v_cache: dtype torch.float16 differs"),
    "seqlens_k int64": (contiguous_inputs(seqlens_k=lambda t: like(t, dtype="torch.int64")),
                        "seqlens_k: dtype torch.int64 must be torch.int32"),
    "page_table int64": (paged_inputs(page_table=lambda t: like(t, dtype="torch.int64")),
                         "page_table: dtype torch.int64 must be torch.int32"),
    "q 3-D": (contiguous_inputs(q=FakeTensor((B, HQ, D))), "q must be 4-D"),
    "k_cache 3-D": (contiguous_inputs(k_cache=FakeTensor((B, MAXSEQ, HKV * D))), "k_cache must be 4-D [batch, max_seqlen"),
    "paged k_cache 5-D": (paged_inputs(k_cache=FakeTensor((NUM_PAGES, PAGE, HKV, 1, D))),
                          "k_cache must be 4-D [num_pages, page_size"),
    "empty cache": (contiguous_inputs(k_cache=FakeTensor((B, 0, HKV, D)), v_cache=FakeTensor((B, 0, HKV, D))),
                    "k_cache is empty"),
    "v_cache shape differs": (contiguous_inputs(v_cache=FakeTensor((B, MAXSEQ + 1, HKV, D))), "v_cache: shape"),
    "cache batch differs": (contiguous_inputs(k_cache=FakeTensor((B + 1, MAXSEQ, HKV, D)),
                                              v_cache=FakeTensor((B + 1, MAXSEQ, HKV, D))), "k_cache: batch 3 differs"),
    "cache head_dim differs": (contiguous_inputs(k_cache=FakeTensor((B, MAXSEQ, HKV, 128)),
                                                 v_cache=FakeTensor((B, MAXSEQ, HKV, 128))), "k_cache: head_dim 128"),
    "heads not divisible": (contiguous_inputs(k_cache=FakeTensor((B, MAXSEQ, 3, D)),
                                              v_cache=FakeTensor((B, MAXSEQ, 3, D))), "k_cache: its 3 heads"),
    "head_dim 60": (contiguous_inputs(q=FakeTensor((B, QLEN, HQ, 60)), k_cache=FakeTensor((B, MAXSEQ, HKV, 60)),
                                      v_cache=FakeTensor((B, MAXSEQ, HKV, 60))), "q: head_dim 60"),
    "seqlens_k 2-D": (contiguous_inputs(seqlens_k=FakeTensor((B, 1), "torch.int32")), "seqlens_k must have shape [2]"),
    "seqlens_k too short": (contiguous_inputs(seqlens_k=FakeTensor((B - 1,), "torch.int32")),
                            "seqlens_k must have shape [2]"),
    "seqlens_k strided": (contiguous_inputs(seqlens_k=lambda t: like(t, strides=(2,))), "seqlens_k must be contiguous"),
    "seqlens_k misaligned": (contiguous_inputs(seqlens_k=lambda t: like(t, ptr=t.data_ptr() + 2)),
                             "seqlens_k: data_ptr() "),
    "page_table 1-D": (paged_inputs(page_table=FakeTensor((B * MAX_PAGES,), "torch.int32")),
                       "page_table must have shape [2, max_pages_per_seq]"),
    "page_table batch differs": (paged_inputs(page_table=FakeTensor((B + 1, MAX_PAGES), "torch.int32")),
                                 "page_table must have shape [2, max_pages_per_seq]"),
    "page_table transposed": (paged_inputs(page_table=lambda t: like(t, strides=(1, B))), "page_table must be contiguous"),
    "page_table row padding": (paged_inputs(page_table=lambda t: like(t, strides=(MAX_PAGES + 2, 1))),
                               "page_table must be contiguous"),
    "paged cache without page_table": (contiguous_inputs(k_cache=FakeTensor((NUM_PAGES, PAGE, HKV, D)),
                                                         v_cache=FakeTensor((NUM_PAGES, PAGE, HKV, D))),
                                       "k_cache: batch 40 differs from q's 2 (a paged cache needs page_table)"),
    "q last dim strided": (contiguous_inputs(q=lambda t: like(t, strides=(QLEN * HQ * D * 2, HQ * D * 2, D * 2, 2))),
                           "q: the last dimension"),
    "k_cache sequence stride 12": (contiguous_inputs(k_cache=lambda t: like(t, strides=(MAXSEQ * 12, 12, 1, 1))),
                                   "k_cache: the sequence stride"),
    "paged v_cache token stride": (paged_inputs(v_cache=lambda t: like(t, strides=(PAGE * 200, 200 - 4, D, 1))),
                                   "v_cache: the token stride"),
    "paged k_cache page stride": (paged_inputs(k_cache=lambda t: like(t, strides=(4, HKV * D, D, 1))),
                                  "k_cache: the page stride"),
    "k_cache misaligned": (contiguous_inputs(k_cache=lambda t: like(t, ptr=t.data_ptr() + 8)), "k_cache: data_ptr() "),
    "out fp16": (contiguous_inputs(out=lambda t: like(t, dtype="torch.float16")), "out: dtype"),
    "out shape": (contiguous_inputs(out=FakeTensor((B, QLEN + 1, HQ, D))), "out: shape"),
    "out on another GPU": (contiguous_inputs(out=lambda t: like(t, device="cuda:1")), "out is on cuda:1"),
    "out misaligned": (contiguous_inputs(out=lambda t: like(t, ptr=t.data_ptr() + 4)), "out: data_ptr() "),
}


@pytest.mark.parametrize("case", list(DECODE_CASES), ids=list(DECODE_CASES))
def test_decode_tensor_checks(case):
    tensors, message = DECODE_CASES[case]
    with pytest.raises(ValueError) as raised:
        call_decode(tensors)
    assert message in str(raised.value)


@pytest.mark.parametrize("kwargs,message", [
    ({"max_seqlen_k": 0}, "max_seqlen_k must be in [1"),
    ({"max_seqlen_k": 2**30 + 1}, "max_seqlen_k must be in [1, 1073741824]"),
    ({"max_seqlen_k": MAXSEQ + 1}, f"max_seqlen_k {MAXSEQ + 1} exceeds the cache's sequence capacity"),
    ({"max_seqlen_k": 1.5}, "max_seqlen_k must be an integer"),
    ({"max_seqlen_k": True}, "max_seqlen_k must be an integer"),
    ({"window_size": (-2, 0)}, "window_size must be (left, right) with integers in [-1, 2147483647]"),
    ({"window_size": ("7", 0)}, "window_size must be (left, right)"),
    ({"window_size": (2**31, 0)}, "window_size must be (left, right)"),
    ({"window_size": 8}, "window_size must be (left, right)"),
    ({"window_size": (8, 8)}, "decode is causal (a new token sees no key after itself), so the right size must be 0 "
                              "or -1, got 8"),
    ({"window_size": (8, 0), "window_left": 8}, "pass window_size only (window_left is its deprecated name)"),
    ({"window_left": -2}, "window_left must be in [-1"),
    ({"window_left": "7"}, "window_left must be an integer"),
    ({"window_left": 2**31}, "window_left must be in [-1"),
    ({"chunk_size": -1}, "chunk_size must be in [0, 2147483647], got -1"),
    ({"chunk_size": 2**31}, "chunk_size must be in [0"),
    ({"chunk_size": 64.0}, "chunk_size must be an integer"),
    ({"chunk_size": True}, "chunk_size must be an integer"),
    ({"chunk_size": None}, "chunk_size must be an integer"),
    ({"chunk_size": 64, "window_size": (100, 0)}, "chunk_size 64 and window_size (100, 0): decode takes a sliding "
                                                  "window or chunks, not both"),
    ({"chunk_size": 1, "window_size": (0, -1)}, "chunk_size 1 and window_size (0, 0)"),
    ({"num_splits": -1}, "num_splits must be in [0"),
    ({"num_splits": 2.0}, "num_splits must be an integer"),
    ({"split_merge": "fused"}, "split_merge must be one of auto, combine, cluster, got 'fused'"),
    ({"split_merge": 2}, "split_merge must be one of auto, combine, cluster, got 2"),
    ({"softmax_scale": 0}, "softmax_scale"),
    ({"softmax_scale": math.nan}, "softmax_scale"),
])
def test_decode_option_checks(kwargs, message):
    deprecated = "window_left" in kwargs and "window_size" not in kwargs  # warns, then checks the old keyword
    with pytest.warns(DeprecationWarning) if deprecated else contextlib.nullcontext():
        with pytest.raises(ValueError) as raised:
            call_decode(contiguous_inputs(), **kwargs)
    assert message in str(raised.value)


@pytest.mark.parametrize("kwargs,message", [
    ({"chunk_size": -1}, "chunk_size must be in [0"),
    ({"chunk_size": 16, "window_size": (8, 0)}, "chunk_size 16 and window_size (8, 0)"),
])
def test_prepare_decode_checks_chunk_size(kwargs, message):
    t = paged_inputs()
    with pytest.raises(ValueError) as raised:
        flashjit.prepare_decode(t["q"], t["k_cache"], t["v_cache"], t["seqlens_k"], page_table=t["page_table"],
                                out=t["out"], stream=0, **kwargs)
    assert message in str(raised.value)


def test_window_left_is_deprecated_for_window_size():
    """decode(window_left=N) still works as window_size=(N, 0), with a DeprecationWarning naming window_size."""
    assert _decode._window_left(_checks.NO_WINDOW, None, "f") == -1
    assert _decode._window_left((64, 0), None, "f") == _decode._window_left((64, -1), None, "f") == 64
    with pytest.warns(DeprecationWarning, match=r"flashjit.decode\(window_left=\.\.\.\) is deprecated: pass "
                                                r"window_size=\(left, right\)"):
        assert _decode._window_left(_checks.NO_WINDOW, 64, "flashjit.decode") == 64


def test_decode_options_of_chunks():
    assert _checks.check_decode_options(-1, 0, "auto", 64) == (-1, 0, _abi.SPLIT_MERGE_AUTO, 64)
    assert _checks.check_decode_options(7, 3, "combine") == (7, 3, _abi.SPLIT_MERGE_COMBINE_KERNEL, 0)
    assert _checks.check_decode_options(-1, 0, "auto", 0)[3] == 0


def test_memo_keys_differ_by_chunk_size():
    """A call with another chunk_size is never served from a memo entry of a different one."""
    t = contiguous_inputs()

    def key(chunk_size, window_left=-1):
        return _decode._call_key(t["q"], t["k_cache"], t["v_cache"], t["seqlens_k"], None, t["out"], window_left,
                                 None, 0, "auto", None, chunk_size, 0.0, None, None)
    keys = [key(0), key(1), key(64), key(100), key(0, 64)]
    assert None not in keys
    assert len(set(keys)) == len(keys)
    assert key(64) == key(64)
    # A value the checks refuse, or one that only compares equal to an int, is not memoized.
    assert key(64.0) is None and key(True) is None


def test_paged_max_seqlen_k_bound():
    with pytest.raises(ValueError, match=r"max_seqlen_k 97 exceeds max_pages_per_seq \* page_size = 96"):
        call_decode(paged_inputs(), max_seqlen_k=MAX_PAGES * PAGE + 1)


def test_prepare_decode_checks_too():
    tensors = contiguous_inputs(seqlens_k=lambda t: like(t, dtype="torch.int64"))
    with pytest.raises(ValueError, match="seqlens_k: dtype"):
        flashjit.prepare_decode(tensors["q"], tensors["k_cache"], tensors["v_cache"], tensors["seqlens_k"],
                                out=tensors["out"], stream=0)


def test_decode_problem_of_valid_inputs():
    t = contiguous_inputs()
    p = _checks.check_decode_inputs(t["q"], t["k_cache"], t["v_cache"], t["seqlens_k"])
    assert (p.batch, p.q_len, p.heads_q, p.heads_kv, p.head_dim) == (B, QLEN, HQ, HKV, D)
    assert (p.layout, p.max_seqlen_k, p.cache_seqlen, p.num_pages) == (_abi.KV_CONTIGUOUS, MAXSEQ, MAXSEQ, 0)
    assert _checks.check_decode_inputs(t["q"], t["k_cache"], t["v_cache"], t["seqlens_k"], None, 50).max_seqlen_k == 50
    t = paged_inputs()
    p = _checks.check_decode_inputs(t["q"], t["k_cache"], t["v_cache"], t["seqlens_k"], t["page_table"])
    assert (p.layout, p.num_pages, p.page_size, p.max_pages_per_seq) == (_abi.KV_PAGED, NUM_PAGES, PAGE, MAX_PAGES)
    assert (p.max_seqlen_k, p.cache_seqlen) == (MAX_PAGES * PAGE, 0)


def test_decode_size_one_dimensions_may_have_any_stride():
    # One sequence: seqlens_k [1] and a page table [1, n] with odd strides on the size-1 dimensions.
    q = FakeTensor((1, 1, HQ, D), strides=(5, 3, D, 1))
    k = FakeTensor((NUM_PAGES, PAGE, HKV, D))
    p = _checks.check_decode_inputs(q, k, FakeTensor(k.shape), FakeTensor((1,), "torch.int32", strides=(9,)),
                                    FakeTensor((1, MAX_PAGES), "torch.int32", strides=(3, 1)))
    assert p.batch == 1 and p.max_pages_per_seq == MAX_PAGES


# -- merge --------------------------------------------------------------------------------------------------------

S, H = 3, 8


def states(n=2, dtype="torch.bfloat16"):
    outs = [FakeTensor((B, S, H, D), dtype) for _ in range(n)]
    lses = [FakeTensor((B, H, S), "torch.float32") for _ in range(n)]
    return outs, lses


def replaced(items, index, value):
    items = list(items)
    items[index] = value(items[index]) if callable(value) else value
    return items


def merge_case(outs=None, lses=None, out=None):
    o, l = states()
    return (o if outs is None else outs(o), l if lses is None else lses(l), out)


MERGE_CASES = {
    "outs not a list": ((FakeTensor((B, S, H, D)), [FakeTensor((B, H, S), "torch.float32")], None), "must be lists"),
    "no state": (([], [], None), "outs must hold 1 to 32 states, got 0"),
    "33 states": (states(33) + (None,), "outs must hold 1 to 32 states, got 33"),
    "lses shorter": (merge_case(lses=lambda l: l[:1]), "lses holds 1 tensors but outs holds 2"),
    "outs[1] on the CPU": (merge_case(outs=lambda o: replaced(o, 1, lambda t: like(t, device="cpu"))),
                           "outs[1] must be a CUDA tensor"),
    "lses[0] on the CPU": (merge_case(lses=lambda l: replaced(l, 0, lambda t: like(t, device="cpu"))),
                           "lses[0] must be a CUDA tensor"),
    "lses[1] on another GPU": (merge_case(lses=lambda l: replaced(l, 1, lambda t: like(t, device="cuda:1"))),
                               "lses[1] is on cuda:1"),
    "outs float32": (merge_case(outs=lambda o: [like(t, dtype="torch.float32") for t in o]), "outs[0]: dtype"),
    "outs[1] fp16": (merge_case(outs=lambda o: replaced(o, 1, lambda t: like(t, dtype="torch.float16"))),
                     "outs[1]: dtype torch.float16 differs"),
    "outs[0] 3-D": (merge_case(outs=lambda o: replaced(o, 0, FakeTensor((B, S, H * D)))), "outs[0] must be 4-D"),
    "outs[1] shape": (merge_case(outs=lambda o: replaced(o, 1, FakeTensor((B, S + 1, H, D)))), "outs[1]: shape"),
    "outs[1] last dim strided": (merge_case(outs=lambda o: replaced(o, 1, lambda t: like(
        t, strides=(S * H * D * 2, H * D * 2, D * 2, 2)))), "outs[1]: the last dimension"),
    "outs[1] other layout": (merge_case(outs=lambda o: replaced(o, 1, lambda t: like(
        t, strides=(S * H * D, D, S * D, 1)))), "outs[1]: strides"),
    "lses[0] bf16": (merge_case(lses=lambda l: replaced(l, 0, lambda t: like(t, dtype="torch.bfloat16"))),
                     "lses[0]: dtype torch.bfloat16 must be torch.float32"),
    "lses[1] BSH": (merge_case(lses=lambda l: replaced(l, 1, FakeTensor((B, S, H), "torch.float32"))),
                    "lses[1] must have shape [batch, heads, seqlen]"),
    "lses[1] transposed": (merge_case(lses=lambda l: replaced(l, 1, lambda t: like(t, strides=(H * S, 1, H)))),
                           "lses[1] must be contiguous"),
    "out fp16": (merge_case() [:2] + (FakeTensor((B, S, H, D), "torch.float16"),), "out: dtype"),
    "out shape": (merge_case()[:2] + (FakeTensor((B, S, H, D + 8)),), "out: shape"),
    "out on the CPU": (merge_case()[:2] + (FakeTensor((B, S, H, D), device="cpu"),), "out must be a CUDA tensor"),
}


@pytest.mark.parametrize("case", list(MERGE_CASES), ids=list(MERGE_CASES))
def test_merge_checks(case):
    (outs, lses, out), message = MERGE_CASES[case]
    with pytest.raises(ValueError) as raised:
        flashjit.merge(outs, lses, out=out, stream=0)
    assert message in str(raised.value)


def test_merge_out_aliasing_an_input():
    outs, lses = states(3)
    with pytest.raises(ValueError, match=r"out aliases outs\[2\]"):
        flashjit.merge(outs, lses, out=like(outs[2]), stream=0)


def test_merge_problem_of_valid_inputs():
    outs, lses = states(3, "torch.float16")
    p = _checks.check_merge_inputs(tuple(outs), lses)
    assert (p.batch, p.seqlen, p.heads, p.head_dim, p.num_states, p.dtype) == (B, S, H, D, 3, _abi.DTYPE_FP16)
    # Views of one [B, S, 2, H, D] tensor share a layout that is not contiguous: accepted.
    strides = contiguous((B, S, 2, H, D))
    views = [FakeTensor((B, S, H, D), strides=(strides[0], strides[1], strides[3], 1)) for _ in range(2)]
    assert _checks.check_merge_inputs(views, lses[:2]).num_states == 2


# -- FlashInfer's CSR page tables (page_indptr=, last_page_len=) ---------------------------------------------------

NNZ = 9  # page indices of the flat table


def csr_inputs(last=True, **changes):
    """paged_inputs over a CSR table: page_table [NNZ], page_indptr [B + 1], and last_page_len [B] (seqlens_k None)
    or seqlens_k."""
    t = paged_inputs(page_table=FakeTensor((NNZ,), "torch.int32"))
    t["page_indptr"] = FakeTensor((B + 1,), "torch.int32")
    t["last_page_len"] = FakeTensor((B,), "torch.int32") if last else None
    if last:
        t["seqlens_k"] = None
    for name, change in changes.items():
        t[name] = change(t[name]) if callable(change) else change
    return t


def call_csr(tensors, **kwargs):
    return flashjit.decode(tensors["q"], tensors["k_cache"], tensors["v_cache"], tensors["seqlens_k"],
                           page_table=tensors["page_table"], page_indptr=tensors["page_indptr"],
                           last_page_len=tensors["last_page_len"], out=tensors["out"], stream=0, **kwargs)


CSR_CASES = {
    "both seqlens_k and last_page_len": (csr_inputs(seqlens_k=FakeTensor((B,), "torch.int32")),
                                         "takes exactly one of seqlens_k (each sequence's key count) and "
                                         "last_page_len (the tokens of its last page), got both"),
    "neither count": (csr_inputs(last_page_len=None), "takes exactly one of seqlens_k"),
    "last_page_len without page_indptr": (csr_inputs(page_indptr=None), "last_page_len is for a CSR page table"),
    "seqlens_k None without CSR": (contiguous_inputs(seqlens_k=None), "seqlens_k is None: pass each sequence's key "
                                                                       "count"),
    "page_indptr without page_table": (csr_inputs(page_table=None), "page_indptr needs page_table"),
    "page_table 2-D": (csr_inputs(page_table=FakeTensor((B, MAX_PAGES), "torch.int32")),
                       "page_table must have shape [num_indices] with page_indptr"),
    "page_table int64": (csr_inputs(page_table=lambda t: like(t, dtype="torch.int64")),
                         "page_table: dtype torch.int64 must be torch.int32"),
    "page_indptr of batch entries": (csr_inputs(page_indptr=FakeTensor((B,), "torch.int32")),
                                     f"page_indptr must have shape [{B + 1}]"),
    "page_indptr on another GPU": (csr_inputs(page_indptr=lambda t: like(t, device="cuda:1")),
                                   "page_indptr is on cuda:1"),
    "page_indptr strided": (csr_inputs(page_indptr=lambda t: like(t, strides=(2,))), "page_indptr must be contiguous"),
    "last_page_len on the CPU": (csr_inputs(last_page_len=lambda t: like(t, device="cpu")),
                                 "last_page_len must be a CUDA tensor"),
    "last_page_len int16": (csr_inputs(last_page_len=lambda t: like(t, dtype="torch.int16")),
                            "last_page_len: dtype torch.int16 must be torch.int32"),
    "last_page_len misaligned": (csr_inputs(last_page_len=lambda t: like(t, ptr=t.data_ptr() + 2)),
                                 "last_page_len: data_ptr() "),
    "last_page_len 2-D": (csr_inputs(last_page_len=FakeTensor((B, 1), "torch.int32")),
                          f"last_page_len must have shape [{B}]"),
}


@pytest.mark.parametrize("case", list(CSR_CASES), ids=list(CSR_CASES))
def test_decode_csr_checks(case):
    tensors, message = CSR_CASES[case]
    with pytest.raises(ValueError) as raised:
        call_csr(tensors) if "page_indptr" in tensors else call_decode(tensors)
    assert message in str(raised.value)


def test_decode_csr_problem_and_bound():
    for last in (True, False):
        t = csr_inputs(last=last)
        p = _checks.check_decode_inputs(t["q"], t["k_cache"], t["v_cache"], t["seqlens_k"], t["page_table"], None,
                                        False, t["page_indptr"], t["last_page_len"])
        # Every page could be one sequence's: the flat table's length bounds a sequence's pages and keys.
        assert (p.layout, p.num_pages, p.page_size, p.max_pages_per_seq) == (_abi.KV_PAGED, NUM_PAGES, PAGE, NNZ)
        assert p.max_seqlen_k == NNZ * PAGE
    with pytest.raises(ValueError, match=rf"max_seqlen_k {NNZ * PAGE + 1} exceeds num_indices \(page_table.shape\[0\]\) "
                                         rf"\* page_size = {NNZ * PAGE}"):
        call_csr(csr_inputs(), max_seqlen_k=NNZ * PAGE + 1)


def test_memo_keys_differ_by_csr_arrays():
    t = csr_inputs()

    def key(**csr):
        return _decode._call_key(t["q"], t["k_cache"], t["v_cache"], t["seqlens_k"], t["page_table"], t["out"], -1,
                                 None, 0, "auto", None, 0, 0.0, None, None, None, **csr)
    keys = [key(), key(page_indptr=t["page_indptr"]),
            key(page_indptr=t["page_indptr"], last_page_len=t["last_page_len"])]
    assert None not in keys and len(set(keys)) == len(keys)
