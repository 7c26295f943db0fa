"""Paged keys and values (page_table=, seqused_k= of attention() and attention_varlen()) without a GPU: each bad
argument is a ValueError naming it, raised before the library is touched; the checked call's struct carries the
page pools' shape, strides and this call's table and key-count addresses (memo hits included); the ctypes mirror's
paged fields land where libflashjit reads them; and valid calls on fake pointers reach the library's own checks."""
import ctypes
import re

import pytest

import flashjit
from flashjit import _abi, _attention, _checks, _library
from fakes import FakeTensor

INT32 = "torch.int32"
B, SQ, HQ, HKV, D, PAGES, PAGE, MAX_PAGES = 2, 64, 8, 2, 64, 40, 16, 8  # capacity 128 keys per sequence


def dense_inputs(page=PAGE, pages=PAGES, d=D, dv=None):
    """q [B, Sq, Hq, D], page pools k, v [pages, page, Hkv, D], page_table [B, MAX_PAGES], seqused_k [B], out."""
    dv = d if dv is None else dv
    return dict(q=FakeTensor((B, SQ, HQ, d)), k=FakeTensor((pages, page, HKV, d)), v=FakeTensor((pages, page, HKV, dv)),
                page_table=FakeTensor((B, MAX_PAGES), INT32), seqused_k=FakeTensor((B,), INT32),
                out=FakeTensor((B, SQ, HQ, dv)))


def varlen_inputs(total_q=100, batch=3):
    """Packed q [total_q, Hq, D] with cu_seqlens_q [batch + 1] over the page pools."""
    return dict(q=FakeTensor((total_q, HQ, D)), k=FakeTensor((PAGES, PAGE, HKV, D)),
                v=FakeTensor((PAGES, PAGE, HKV, D)), cu_seqlens_q=FakeTensor((batch + 1,), INT32), cu_seqlens_k=None,
                page_table=FakeTensor((batch, MAX_PAGES), INT32), seqused_k=FakeTensor((batch,), INT32),
                out=FakeTensor((total_q, HQ, D)))


def changed(inputs, changes):
    for name, change in changes.items():
        inputs[name] = change(inputs[name]) if callable(change) else change
    return inputs


def call_dense(**changes):
    t = changed(dense_inputs(), changes)
    return flashjit.attention(t["q"], t["k"], t["v"], page_table=t["page_table"], seqused_k=t["seqused_k"],
                              out=t["out"], stream=0)


def call_varlen(max_seqlen_q=50, max_seqlen_k=128, **changes):
    t = changed(varlen_inputs(), changes)
    return flashjit.attention_varlen(t["q"], t["k"], t["v"], t["cu_seqlens_q"], t["cu_seqlens_k"], max_seqlen_q,
                                     max_seqlen_k, page_table=t["page_table"], seqused_k=t["seqused_k"],
                                     out=t["out"], stream=0)


def like(t, **overrides):
    fields = dict(shape=t.shape, dtype=t.dtype, device=str(t.device), strides=t.stride(), ptr=t.data_ptr())
    fields.update(overrides)
    return FakeTensor(**fields)


# Cases of both functions: (changes, message).
COMMON_CASES = {
    "page_table without seqused_k": (dict(seqused_k=None), "page_table needs seqused_k"),
    "page_table on the CPU": (dict(page_table=lambda t: like(t, device="cpu")), "page_table must be a CUDA tensor"),
    "seqused_k on another GPU": (dict(seqused_k=lambda t: like(t, device="cuda:1")), "seqused_k is on cuda:1"),
    "page_table int64": (dict(page_table=lambda t: like(t, dtype="torch.int64")),
                         "page_table: dtype torch.int64 must be torch.int32"),
    "seqused_k float": (dict(seqused_k=lambda t: like(t, dtype="torch.float32")),
                        "seqused_k: dtype torch.float32 must be torch.int32"),
    "k fp16 with q bf16": (dict(k=lambda t: like(t, dtype="torch.float16")), "k: dtype torch.float16 differs"),
    "k a 3-D packed tensor": (dict(k=FakeTensor((PAGES * PAGE, HKV, D))),
                              "k must be 4-D [num_pages, page_size, heads_kv, head_dim] with page_table"),
    "v pool of other pages": (dict(v=FakeTensor((PAGES + 1, PAGE, HKV, D))), "v: shape [41, 16, 2, 64] differs"),
    "page_size 24": (dict(k=FakeTensor((PAGES, 24, HKV, D)), v=FakeTensor((PAGES, 24, HKV, D))),
                     "k: page_size (k.shape[1]) 24 must be a power of two in [1, 256]"),
    "page_size 512": (dict(k=FakeTensor((PAGES, 512, HKV, D)), v=FakeTensor((PAGES, 512, HKV, D))),
                      "page_size (k.shape[1]) 512"),
    "k heads not dividing": (dict(k=FakeTensor((PAGES, PAGE, 3, D)), v=FakeTensor((PAGES, PAGE, 3, D))),
                             "k: its 3 heads"),
    "k head_dim differs": (dict(k=FakeTensor((PAGES, PAGE, HKV, 128)), v=FakeTensor((PAGES, PAGE, HKV, 128))),
                           "k: head_dim 128 differs"),
    "page_table 1-D": (dict(page_table=FakeTensor((MAX_PAGES,), INT32)), "page_table must have shape ["),
    "page_table last dim strided": (dict(page_table=lambda t: like(t, strides=(1, t.shape[0]))),
                                    "page_table: the last dimension must be contiguous (stride(-1) == 1)"),
    "page_table rows apart": (dict(page_table=lambda t: like(t, strides=(2 * MAX_PAGES, 1))),
                              "page_table must be contiguous (int32 [batch, max_pages_per_seq], rows back to back)"),
    "page_table misaligned": (dict(page_table=lambda t: like(t, ptr=t.data_ptr() + 2)), "page_table: data_ptr() "),
    "seqused_k strided": (dict(seqused_k=lambda t: like(t, strides=(2,))), "seqused_k must be contiguous"),
    "seqused_k misaligned": (dict(seqused_k=lambda t: like(t, ptr=t.data_ptr() + 1)), "seqused_k: data_ptr() "),
    "k token stride 12": (dict(k=lambda t: like(t, strides=(PAGE * 12, 12, 1, 1))), "k: the token stride"),
    "v head stride 68": (dict(v=lambda t: like(t, strides=(PAGE * HKV * 68, HKV * 68, 68, 1))), "v: the head stride"),
    "k page stride 0": (dict(k=lambda t: like(t, strides=(0,) + t.stride()[1:])), "k: the page stride"),
    "k misaligned": (dict(k=lambda t: like(t, ptr=t.data_ptr() + 8)), "k: data_ptr() "),
}

DENSE_CASES = {
    **COMMON_CASES,
    "page_table of other rows": (dict(page_table=FakeTensor((B + 1, MAX_PAGES), INT32)),
                                 f"page_table must have shape [{B}, max_pages_per_seq]"),
    "seqused_k of other length": (dict(seqused_k=FakeTensor((B + 1,), INT32)),
                                  f"seqused_k must have shape [{B}] (one key count per sequence)"),
    "q 3-D": (dict(q=FakeTensor((SQ, HQ, D))), "q must be 4-D"),
    "out shape": (dict(out=FakeTensor((B, SQ, HQ, 128))), "out: shape"),
}

VARLEN_CASES = {
    **COMMON_CASES,
    "cu_seqlens_k with page_table": (dict(cu_seqlens_k=FakeTensor((4,), INT32)),
                                     "cu_seqlens_k must be None with page_table"),
    "seqused_k without page_table or cu_seqlens_k": (dict(page_table=None), "cu_seqlens_k is None"),
    "page_table of other rows": (dict(page_table=FakeTensor((2, MAX_PAGES), INT32)),
                                 "page_table must have shape [3, max_pages_per_seq]"),
    "seqused_k of other length": (dict(seqused_k=FakeTensor((4,), INT32)), "seqused_k must have shape [3]"),
    "cu_seqlens_q int64": (dict(cu_seqlens_q=lambda t: like(t, dtype="torch.int64")), "cu_seqlens_q: dtype"),
    "cu_seqlens_q 2-D": (dict(cu_seqlens_q=FakeTensor((2, 2), INT32)), "cu_seqlens_q must have shape [batch + 1]"),
    "q 4-D": (dict(q=FakeTensor((1, 100, HQ, D))), "q must be 3-D"),
    "max_seqlen_k past the table": (dict(max_seqlen_k=129),
                                    "max_seqlen_k 129 exceeds what a row of page_table holds: max_pages_per_seq * "
                                    "page_size = 8 * 16 = 128"),
    "max_seqlen_k 0": (dict(max_seqlen_k=0), "max_seqlen_k must be in [1, "),
    "max_seqlen_q a float": (dict(max_seqlen_q=5.0), "max_seqlen_q must be an integer"),
}


@pytest.mark.parametrize("case", list(DENSE_CASES), ids=list(DENSE_CASES))
def test_paged_attention_argument_checks(case, library_untouched):
    changes, message = DENSE_CASES[case]
    with pytest.raises(ValueError) as raised:
        call_dense(**changes)
    assert message in str(raised.value)


@pytest.mark.parametrize("case", list(VARLEN_CASES), ids=list(VARLEN_CASES))
def test_paged_varlen_argument_checks(case, library_untouched):
    changes, message = VARLEN_CASES[case]
    lengths = {name: changes.pop(name) for name in ("max_seqlen_q", "max_seqlen_k") if name in changes}
    with pytest.raises(ValueError) as raised:
        call_varlen(**lengths, **changes)
    assert message in str(raised.value)


def test_unpaged_varlen_still_needs_cu_seqlens_k(library_untouched):
    t = varlen_inputs()
    with pytest.raises(ValueError, match="cu_seqlens_k is None: pass the keys' offsets"):
        flashjit.attention_varlen(FakeTensor((100, HQ, D)), FakeTensor((300, HKV, D)), FakeTensor((300, HKV, D)),
                                  t["cu_seqlens_q"], None, 50, 128, stream=0)


def test_paged_problems():
    t = dense_inputs(dv=128)
    problem, pages = _checks.check_paged_inputs(t["q"], t["k"], t["v"], t["page_table"], t["seqused_k"])
    # seqlen_k is the table's capacity, a host bound on every seqused_k.
    assert problem == _checks.Problem(batch=B, seqlen_q=SQ, seqlen_k=MAX_PAGES * PAGE, heads_q=HQ, heads_kv=HKV,
                                      head_dim=D, dtype=_abi.DTYPE_BF16, head_dim_v=128)
    assert pages == _checks.Pages(page_size=PAGE, num_pages=PAGES, max_pages_per_seq=MAX_PAGES)
    assert pages.fields() == {"page_size": PAGE, "num_pages": PAGES, "max_pages_per_seq": MAX_PAGES}
    v = varlen_inputs()
    problem, pages = _checks.check_paged_varlen_inputs(v["q"], v["k"], v["v"], v["cu_seqlens_q"], v["page_table"],
                                                       v["seqused_k"], 50, 100)
    assert problem == _checks.VarlenProblem(batch=3, total_q=100, total_k=0, max_seqlen_q=50, max_seqlen_k=100,
                                            heads_q=HQ, heads_kv=HKV, head_dim=D, dtype=_abi.DTYPE_BF16)
    # Pages of one token and one page of 256; a single-row table may have any row stride.
    for page, pages_count in ((1, 1000), (256, 3)):
        one = dense_inputs(page=page, pages=pages_count)
        _, got = _checks.check_paged_inputs(one["q"], one["k"], one["v"], one["page_table"], one["seqused_k"])
        assert (got.page_size, got.num_pages) == (page, pages_count)
    row = FakeTensor((1, MAX_PAGES), INT32, strides=(1000, 1))
    pool = FakeTensor((PAGES, PAGE, HKV, D))
    _checks.check_paged_varlen_inputs(FakeTensor((5, HQ, D)), pool, pool, FakeTensor((2,), INT32), row,
                                      FakeTensor((1,), INT32), 5, 128)
    # The output follows q and v's last dimension, packed or paged.
    assert _checks.varlen_out_shapes(v["q"], v["k"], FakeTensor((PAGES, PAGE, HKV, 128))) == ((100, HQ, 128),
                                                                                                (HQ, 100))
    assert _checks.attention_out_shapes(t["q"], t["k"], t["v"]) == ((B, SQ, HQ, 128), (B, HQ, SQ))


# ---- the struct a checked call hands the library ---------------------------------------------------------------

class Recorder:
    """flashjit_forward records the AttentionArgs it is handed and fails as without a GPU."""

    def __init__(self):
        self.calls = []

    def flashjit_forward(self, handle, ref):
        self.calls.append(_abi.AttentionArgs.from_buffer_copy(bytes(ref._obj)))
        return _abi.ERROR_NO_DEVICE

    def flashjit_last_error(self):
        return b"recorded"

    def flashjit_status_string(self, status):
        return b"no device"


@pytest.fixture
def recorded(monkeypatch):
    lib = Recorder()
    monkeypatch.setattr(_attention._library, "load", lambda: lib)
    monkeypatch.setattr(_attention._runtime, "handle", lambda: None)
    monkeypatch.setattr(_attention, "_stream_handle", lambda stream, device: 0)
    _attention._calls.clear()
    yield lib
    _attention._calls.clear()


def test_paged_attention_reaches_the_struct(recorded):
    t = dense_inputs()
    tables = [FakeTensor((B, MAX_PAGES), INT32), FakeTensor((B, MAX_PAGES), INT32)]
    used = [FakeTensor((B,), INT32), FakeTensor((B,), INT32)]
    tables[1].device, used[1].device = tables[0].device, used[0].device  # keyed alike (the same device object)
    for table, counts in zip(tables, used):  # the second call is a memo hit: the addresses are the call's
        with pytest.raises(flashjit.FlashjitError):
            flashjit.attention(t["q"], t["k"], t["v"], causal=True, page_table=table, seqused_k=counts, out=t["out"])
    assert len(recorded.calls) == 2 and len(_attention._calls) == 1
    for args, table, counts in zip(recorded.calls, tables, used):
        assert (args.page_table, args.seqused_k) == (table.data_ptr(), counts.data_ptr())
        assert (args.page_size, args.num_pages, args.max_pages_per_seq) == (PAGE, PAGES, MAX_PAGES)
        assert (args.batch, args.seqlen_q, args.seqlen_k) == (B, SQ, MAX_PAGES * PAGE)
        assert (args.cu_seqlens_q, args.cu_seqlens_k, args.total_q, args.total_k) == (None, None, 0, 0)
        # Pools: (page, token, head) in the (batch, seq, head) fields.
        ks = args.k_strides
        assert (ks.batch, ks.seq, ks.head) == (PAGE * HKV * D, HKV * D, D)
        assert args.mask == _abi.MASK_CAUSAL and args.check_pages == 0
    # Without the table: a contiguous problem, nothing paged left over from the memo.
    k = FakeTensor((B, 96, HKV, D))
    with pytest.raises(flashjit.FlashjitError):
        flashjit.attention(t["q"], k, FakeTensor((B, 96, HKV, D)), out=t["out"])
    last = recorded.calls[-1]
    assert (last.page_table, last.seqused_k, last.page_size, last.num_pages, last.max_pages_per_seq) == (
        None, None, 0, 0, 0)


def test_paged_varlen_reaches_the_struct(recorded):
    t = varlen_inputs()
    pools = FakeTensor((PAGES, PAGE, HKV, D), strides=(PAGE * HKV * D + 64, HKV * D, D, 1))  # pages apart
    with pytest.raises(flashjit.FlashjitError):
        flashjit.attention_varlen(t["q"], pools, pools, t["cu_seqlens_q"], None, 50, 100, window_size=(32, 0),
                                  page_table=t["page_table"], seqused_k=t["seqused_k"], out=t["out"])
    args = recorded.calls[-1]
    assert (args.cu_seqlens_q, args.cu_seqlens_k) == (t["cu_seqlens_q"].data_ptr(), None)
    assert (args.page_table, args.seqused_k) == (t["page_table"].data_ptr(), t["seqused_k"].data_ptr())
    assert (args.batch, args.seqlen_q, args.seqlen_k, args.total_q, args.total_k) == (3, 50, 100, 100, 0)
    assert (args.page_size, args.num_pages, args.max_pages_per_seq) == (PAGE, PAGES, MAX_PAGES)
    ks, qs = args.k_strides, args.q_strides
    assert (ks.batch, ks.seq, ks.head) == (PAGE * HKV * D + 64, HKV * D, D)
    assert (qs.batch, qs.seq, qs.head) == (0, HQ * D, D)
    assert (args.mask, args.window_left, args.window_right) == (_abi.MASK_SLIDING_WINDOW, 32, 0)


# ---- the ctypes mirror against the library ---------------------------------------------------------------------

def test_attention_args_paged_fields_are_appended():
    names = [name for name, _ in _abi.AttentionArgs._fields_]
    names = names[:len(names) - len(_abi.BLOCK_MASK_FIELDS) - 7]  # the block mask's, the bias's and rel_bias's follow
    assert names[-9:] == ["alignment", "page_table", "seqused_k", "page_size", "num_pages", "max_pages_per_seq",
                          "check_pages", "page_indptr", "last_page_len"]
    args = _abi.AttentionArgs()
    assert (args.page_table, args.seqused_k, args.page_size, args.num_pages, args.max_pages_per_seq,
            args.check_pages) == (None, None, 0, 0, 0, 0)
    # Appended at the end of the struct the header had before them (LP64: 464 bytes), as the struct_size rules
    # require.
    if ctypes.sizeof(ctypes.c_void_p) == 8:
        assert _abi.AttentionArgs.page_table.offset == 464


def paged_args(**fields):
    base = dict(q=0x10000, k=0x20000, v=0x30000, o=0x40000, batch=2, seqlen_q=16, seqlen_k=128, heads_q=8,
                heads_kv=2, head_dim=64, dtype=_abi.DTYPE_BF16, page_table=0x50000, seqused_k=0x60000, page_size=16,
                num_pages=32, max_pages_per_seq=8)
    base.update(fields)
    return _abi.AttentionArgs(**base)


@pytest.mark.parametrize("fields,message", [
    (dict(seqused_k=None), "seqused_k is a null pointer"),
    (dict(seqused_k=0x60002), "seqused_k (0x60002) must be 4-byte aligned"),
    (dict(page_size=12), "page_size must be a power of two in [1, 256], got 12"),
    (dict(num_pages=0), "num_pages (pages in the k and v pools) must be >= 1"),
    (dict(max_pages_per_seq=4), "seqlen_k (128) is more keys than max_pages_per_seq * page_size = 4 * 16"),
    (dict(cu_seqlens_k=0x70000), "cu_seqlens_k must be null for a paged problem"),
    (dict(cu_seqlens_q=0x70000), "total_q (rows of the packed q and o) must be >= 1"),
    (dict(page_table=None), "are for paged problems"),
])
def test_attention_args_paged_fields_reach_the_library(fields, message):
    # Each paged field of the ctypes mirror lands where libflashjit reads it: the library's check names it.
    args = paged_args(**fields)
    lib = _library.load()
    assert lib.flashjit_forward(flashjit._runtime.handle(), ctypes.byref(args)) == _abi.ERROR_INVALID_ARGUMENT
    assert message in lib.flashjit_last_error().decode()


def test_an_older_struct_size_leaves_the_pages_out():
    # A caller of the header before the paged fields: what lies past its struct_size is not read.
    args = paged_args(seqused_k=None, page_size=12, struct_size=_abi.AttentionArgs.page_table.offset, page_table=0x3)
    lib = _library.load()
    status = lib.flashjit_forward(flashjit._runtime.handle(), ctypes.byref(args))
    assert status in (_abi.ERROR_NO_DEVICE, _abi.ERROR_INVALID_ARGUMENT)
    assert re.search(r"no CUDA driver|cuInit failed|not a CUDA device pointer", lib.flashjit_last_error().decode())


@pytest.mark.parametrize("function", ["attention", "attention_varlen"])
def test_paged_calls_on_fake_pointers_raise_the_library_error(function):
    with pytest.raises(flashjit.FlashjitError) as raised:
        call_dense() if function == "attention" else call_varlen()
    # No GPU: the driver is missing; with one: these are not device pointers.
    assert raised.value.status in (_abi.ERROR_NO_DEVICE, _abi.ERROR_INVALID_ARGUMENT)
    assert re.search(r"no CUDA driver|cuInit failed|not a CUDA device pointer", str(raised.value))


# ---- FlashInfer's CSR page tables (page_indptr=, last_page_len= of attention_varlen) ---------------------------

NNZ = 30  # page indices of the flat table


def csr_inputs(batch=3, last=True):
    """varlen_inputs over a CSR table: page_table [NNZ], page_indptr [batch + 1], and last_page_len [batch] (or
    seqused_k)."""
    t = varlen_inputs(batch=batch)
    t.update(page_table=FakeTensor((NNZ,), INT32), page_indptr=FakeTensor((batch + 1,), INT32),
             last_page_len=FakeTensor((batch,), INT32) if last else None)
    if last:
        t["seqused_k"] = None
    return t


def call_csr(max_seqlen_q=50, max_seqlen_k=128, last=True, **changes):
    t = changed(csr_inputs(last=last), changes)
    return flashjit.attention_varlen(t["q"], t["k"], t["v"], t["cu_seqlens_q"], t["cu_seqlens_k"], max_seqlen_q,
                                     max_seqlen_k, page_table=t["page_table"], seqused_k=t["seqused_k"],
                                     page_indptr=t["page_indptr"], last_page_len=t["last_page_len"], out=t["out"],
                                     stream=0)


CSR_CASES = {
    "both seqused_k and last_page_len": (dict(seqused_k=FakeTensor((3,), INT32)),
                                         "takes exactly one of seqused_k (each sequence's key count) and "
                                         "last_page_len (the tokens of its last page), got both"),
    "neither count": (dict(last_page_len=None), "takes exactly one of seqused_k"),
    "last_page_len without page_indptr": (dict(page_indptr=None), "last_page_len is for a CSR page table: pass "
                                                                   "page_indptr too"),
    "page_indptr without page_table": (dict(page_table=None), "page_indptr needs page_table: the CSR table's flat "
                                                              "page indices"),
    "page_table 2-D": (dict(page_table=FakeTensor((3, 10), INT32)), "page_table must have shape [num_indices] with "
                                                                   "page_indptr"),
    "page_table strided": (dict(page_table=lambda t: like(t, strides=(2,))), "page_table must be contiguous "
                                                                             "(int32 [num_indices])"),
    "page_indptr of batch entries": (dict(page_indptr=FakeTensor((3,), INT32)),
                                     "page_indptr must have shape [4] (batch + 1 offsets into page_table)"),
    "page_indptr int64": (dict(page_indptr=lambda t: like(t, dtype="torch.int64")),
                          "page_indptr: dtype torch.int64 must be torch.int32"),
    "page_indptr on the CPU": (dict(page_indptr=lambda t: like(t, device="cpu")), "page_indptr must be a CUDA tensor"),
    "page_indptr misaligned": (dict(page_indptr=lambda t: like(t, ptr=t.data_ptr() + 2)), "page_indptr: data_ptr() "),
    "last_page_len of batch + 1": (dict(last_page_len=FakeTensor((4,), INT32)),
                                   "last_page_len must have shape [3] (the tokens of each sequence's last page)"),
    "last_page_len on another GPU": (dict(last_page_len=lambda t: like(t, device="cuda:1")),
                                     "last_page_len is on cuda:1"),
    "last_page_len float": (dict(last_page_len=lambda t: like(t, dtype="torch.float32")),
                            "last_page_len: dtype torch.float32 must be torch.int32"),
    "max_seqlen_k past the pages": (dict(max_seqlen_k=NNZ * PAGE + 1),
                                    f"max_seqlen_k {NNZ * PAGE + 1} exceeds what the CSR table's pages hold: "
                                    f"num_indices (page_table.shape[0]) * page_size = {NNZ} * {PAGE}"),
}


@pytest.mark.parametrize("case", list(CSR_CASES), ids=list(CSR_CASES))
def test_csr_varlen_argument_checks(case, library_untouched):
    changes, message = CSR_CASES[case]
    lengths = {name: changes.pop(name) for name in ("max_seqlen_q", "max_seqlen_k") if name in changes}
    with pytest.raises(ValueError) as raised:
        call_csr(**lengths, **changes)
    assert message in str(raised.value)


def test_csr_problems():
    for last in (True, False):
        t = csr_inputs(last=last)
        problem, pages = _checks.check_attention_varlen_inputs(
            t["q"], t["k"], t["v"], t["cu_seqlens_q"], None, 50, 100, t["page_table"], t["seqused_k"], False,
            t["page_indptr"], t["last_page_len"])
        assert (problem.batch, problem.max_seqlen_k, problem.total_k) == (3, 100, 0)
        # Every page could be one sequence's: the flat table's length bounds a sequence's pages.
        assert pages == _checks.Pages(page_size=PAGE, num_pages=PAGES, max_pages_per_seq=NNZ)
    # A batch whose dense table would pass int32 entries is fine: CSR entries are the flat table's.
    many = FakeTensor((65535 + 1,), INT32)
    _checks.check_csr_table(FakeTensor((40000,), INT32), many, FakeTensor((65535,), INT32), 65535, False)


def test_csr_varlen_reaches_the_struct(recorded):
    for last in (True, False):
        t = csr_inputs(last=last)
        with pytest.raises(flashjit.FlashjitError):
            flashjit.attention_varlen(t["q"], t["k"], t["v"], t["cu_seqlens_q"], None, 50, 100, causal=True,
                                      page_table=t["page_table"], seqused_k=t["seqused_k"],
                                      page_indptr=t["page_indptr"], last_page_len=t["last_page_len"], out=t["out"])
        args = recorded.calls[-1]
        assert (args.page_table, args.page_indptr) == (t["page_table"].data_ptr(), t["page_indptr"].data_ptr())
        if last:
            assert (args.seqused_k, args.last_page_len) == (None, t["last_page_len"].data_ptr())
        else:
            assert (args.seqused_k, args.last_page_len) == (t["seqused_k"].data_ptr(), None)
        assert (args.page_size, args.num_pages, args.max_pages_per_seq, args.seqlen_k) == (PAGE, PAGES, NNZ, 100)
    # The memo keys the CSR arrays: a dense call after them carries none.
    t = varlen_inputs()
    with pytest.raises(flashjit.FlashjitError):
        flashjit.attention_varlen(t["q"], t["k"], t["v"], t["cu_seqlens_q"], None, 50, 100, causal=True,
                                  page_table=t["page_table"], seqused_k=t["seqused_k"], out=t["out"])
    assert (recorded.calls[-1].page_indptr, recorded.calls[-1].last_page_len) == (None, None)


@pytest.mark.parametrize("fields,message", [
    (dict(page_indptr=0x70000, last_page_len=0x80000), "needs exactly one of seqused_k (key counts) and "
                                                       "last_page_len"),
    (dict(page_indptr=0x70000, seqused_k=None), "needs exactly one of seqused_k"),
    (dict(page_indptr=0x70002), "page_indptr (0x70002) must be 4-byte aligned"),
    (dict(last_page_len=0x80000), "last_page_len is for CSR page tables: set page_indptr too"),
])
def test_attention_args_csr_fields_reach_the_library(fields, message):
    args = paged_args(**fields)
    lib = _library.load()
    assert lib.flashjit_forward(flashjit._runtime.handle(), ctypes.byref(args)) == _abi.ERROR_INVALID_ARGUMENT
    assert message in lib.flashjit_last_error().decode()


def test_csr_calls_on_fake_pointers_raise_the_library_error():
    for last in (True, False):
        with pytest.raises(flashjit.FlashjitError) as raised:
            call_csr(last=last)
        assert raised.value.status in (_abi.ERROR_NO_DEVICE, _abi.ERROR_INVALID_ARGUMENT)
        assert re.search(r"no CUDA driver|cuInit failed|not a CUDA device pointer", str(raised.value))
