"""The per-call memo (_memo) of attention(), attention_varlen() and decode() on fake tensors, through a stand-in
for the library that records the structures it is handed: a call whose key was seen hands over exactly what
every check would have built, with this call's addresses and stream; whatever the checks would refuse is
still refused after a hit."""
import ctypes

import pytest

import flashjit
from flashjit import _abi, _attention, _decode, _memo
from fakes import FakeTensor

B, QLEN, HQ, HKV, D, MAXSEQ = 2, 1, 8, 2, 64, 96


class RecordingLibrary:
    """flashjit_forward / flashjit_decode record (struct bytes); decode_workspace_bytes counts its calls."""

    def __init__(self, workspace_bytes=0):
        self.forward, self.decode, self.merge, self.planned = [], [], [], 0
        self.workspace_bytes = workspace_bytes

    def flashjit_forward(self, handle, ref):
        self.forward.append(bytes(ref._obj))
        return 0

    def flashjit_decode(self, handle, ref):
        self.decode.append(bytes(ref._obj))
        return 0

    def flashjit_merge(self, handle, ref):
        args = ref._obj
        n = args.num_states
        self.merge.append((bytes(args), list(args.o_in[:n]), list(args.lse_in[:n])))
        return 0

    def flashjit_decode_workspace_bytes(self, handle, ref):
        self.planned += 1
        return self.workspace_bytes


@pytest.fixture
def lib(monkeypatch):
    recording = RecordingLibrary()
    monkeypatch.setattr(_attention._library, "load", lambda: recording)
    monkeypatch.setattr(_attention._runtime, "handle", lambda: ctypes.c_void_p(1))
    memos = (_attention._calls, _decode._calls, _decode._merges)
    for memo in memos:
        memo.clear()
    yield recording
    for memo in memos:
        memo.clear()


def same_kind(t, ptr=None, strides=None):
    """Another tensor with t's metadata (the same device object, so that it keys alike) at another address."""
    other = FakeTensor(t.shape, t.dtype, str(t.device), strides or t.stride(), ptr)
    other.device = t.device if strides is None else other.device
    return other


def decode_inputs():
    return dict(q=FakeTensor((B, QLEN, HQ, D)), k_cache=FakeTensor((B, MAXSEQ, HKV, D)),
                v_cache=FakeTensor((B, MAXSEQ, HKV, D)), seqlens_k=FakeTensor((B,), "torch.int32"),
                out=FakeTensor((B, QLEN, HQ, D)))


def again(tensors, **ptrs):
    """Tensors keyed like `tensors`, at fresh addresses (or the given ones)."""
    return {name: same_kind(t, ptrs.get(name)) for name, t in tensors.items()}


def run_decode(t, stream=0, **kwargs):
    return flashjit.decode(t["q"], t["k_cache"], t["v_cache"], t["seqlens_k"], out=t["out"], stream=stream, **kwargs)


def decode_args(raw):
    return _abi.DecodeArgs.from_buffer_copy(raw)


POINTERS = ("q", "o", "k_cache", "v_cache", "seqlens_k", "page_table", "lse", "stream", "workspace")


def without_pointers(args):
    """The structure's bytes with its per-call fields cleared (changes args)."""
    for name in POINTERS:
        if hasattr(args, name):
            setattr(args, name, None)
    return bytes(args)


def test_a_hit_hands_over_what_the_checks_built_with_the_new_addresses(lib):
    first = decode_inputs()
    run_decode(first, stream=7, window_size=(5, 0))
    second = again(first)
    run_decode(second, stream=9, window_size=(5, 0))
    assert lib.planned == 1 and len(_decode._calls) == 1  # the second call was a hit
    a, b = decode_args(lib.decode[0]), decode_args(lib.decode[1])
    assert (b.q, b.o, b.k_cache, b.v_cache, b.seqlens_k, b.stream) == (
        second["q"].data_ptr(), second["out"].data_ptr(), second["k_cache"].data_ptr(), second["v_cache"].data_ptr(),
        second["seqlens_k"].data_ptr(), 9)
    assert (a.q, a.stream, a.window_left, a.page_table) == (first["q"].data_ptr(), 7, 5, None)
    assert without_pointers(a) == without_pointers(b)
    # A cleared memo (every check again) builds the same structure.
    _decode._calls.clear()
    run_decode(second, stream=9, window_size=(5, 0))
    assert lib.decode[2] == lib.decode[1] and lib.planned == 2


def test_what_differs_in_the_key_misses(lib):
    first = decode_inputs()
    run_decode(first)
    run_decode(first, window_size=(3, 0))
    run_decode(first, num_splits=2)
    run_decode(first, softmax_scale=0.5)
    run_decode(first, max_seqlen_k=64)
    run_decode(first, chunk_size=64)
    run_decode(first, chunk_size=100)
    strided = dict(first, k_cache=same_kind(first["k_cache"], strides=(MAXSEQ * HKV * D * 2, HKV * D, D, 1)))
    run_decode(strided)
    assert lib.planned == 8 and len(_decode._calls) == 8
    assert decode_args(lib.decode[-1]).k_strides.batch == MAXSEQ * HKV * D * 2
    assert decode_args(lib.decode[4]).max_seqlen_k == 64
    assert [decode_args(raw).chunk_size for raw in lib.decode[4:7]] == [0, 64, 100]
    run_decode(again(first), chunk_size=64)  # a hit: the entry of its own chunk size
    assert lib.planned == 8 and decode_args(lib.decode[-1]).chunk_size == 64


@pytest.mark.parametrize("name,ptr,message", [
    ("q", 0x7e0000000008, "q: data_ptr() 0x7e0000000008 is not 16-byte aligned"),
    ("out", 0x7e0000000004, "out: data_ptr() 0x7e0000000004 is not 16-byte aligned"),
    ("k_cache", 0x7e0000000002, "k_cache: data_ptr() 0x7e0000000002 is not 16-byte aligned"),
    ("v_cache", 0x7e0000000001, "v_cache: data_ptr() 0x7e0000000001 is not 16-byte aligned"),
    ("seqlens_k", 0x7e0000000002, "seqlens_k: data_ptr() 0x7e0000000002 is not 4-byte aligned"),
])
def test_a_misaligned_address_after_a_hit_is_refused(lib, name, ptr, message):
    first = decode_inputs()
    run_decode(first)
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        run_decode(again(first, **{name: ptr}))
    assert len(lib.decode) == 1


@pytest.mark.parametrize("option,good,bad", [("window_size", (1, 0), (True, 0)), ("window_size", (4, 0), (4.0, 0)),
                                             ("chunk_size", 1, True), ("chunk_size", 64, 64.0),
                                             ("num_splits", 1, True), ("max_seqlen_k", 64, 64.0)])
def test_options_the_checks_refuse_are_refused_after_a_hit_of_an_equal_value(lib, option, good, bad):
    first = decode_inputs()
    run_decode(first, **{option: good})
    with pytest.raises(ValueError, match=option):
        run_decode(first, **{option: bad})


def test_unhashable_metadata_runs_every_check(lib):
    first = decode_inputs()
    first["q"]._strides = list(first["q"]._strides)  # a duck-typed tensor whose stride() is a list
    run_decode(first)
    run_decode(first)
    assert lib.planned == 2 and len(_decode._calls) == 0
    assert lib.decode[0] == lib.decode[1]


def test_not_a_tensor_is_named_by_the_checks(lib):
    t = decode_inputs()
    with pytest.raises(ValueError, match="q must be a CUDA tensor"):
        flashjit.decode(None, t["k_cache"], t["v_cache"], t["seqlens_k"], out=t["out"], stream=0)


def test_the_memo_is_bounded(monkeypatch):
    monkeypatch.setattr(_memo, "_MAX_ENTRIES", 3)
    memo = _memo.Memo()
    for i in range(7):
        memo.put(("k", i), i)
        assert 1 <= len(memo) <= 3
    assert memo.get(("k", 6)) == 6 and memo.get(("k", 0)) is None
    memo.put(("list", []), 1)  # unhashable: not stored, no error
    assert memo.get(("list", [])) is None and memo.get(None) is None


def test_aligned():
    assert _memo.aligned((0x100, 0x7f10, 0), (0x104, 0))
    assert not _memo.aligned((0x100, 0x7f18), ())
    assert not _memo.aligned((), (0x102,))


def attention_inputs():
    return dict(q=FakeTensor((B, 64, HQ, D)), k=FakeTensor((B, 96, HKV, D)), v=FakeTensor((B, 96, HKV, D)),
                out=FakeTensor((B, 64, HQ, D)))


def attention_args(raw):
    return _abi.AttentionArgs.from_buffer_copy(raw)


def test_attention_hit_matches_the_checked_structure(lib):
    first = attention_inputs()
    flashjit.attention(first["q"], first["k"], first["v"], causal=True, out=first["out"], stream=3)
    second = again(first)
    flashjit.attention(second["q"], second["k"], second["v"], causal=True, out=second["out"], stream=4)
    assert len(_attention._calls) == 1
    a, b = attention_args(lib.forward[0]), attention_args(lib.forward[1])
    assert (b.q, b.k, b.v, b.o, b.stream) == (second["q"].data_ptr(), second["k"].data_ptr(), second["v"].data_ptr(),
                                              second["out"].data_ptr(), 4)
    assert a.mask == b.mask == _abi.MASK_CAUSAL
    for name in ("q", "k", "v", "o", "stream"):
        setattr(a, name, None), setattr(b, name, None)
    assert bytes(a) == bytes(b)
    # Another mask or window is another key; a bool in the window is refused as before.
    flashjit.attention(second["q"], second["k"], second["v"], window_size=(8, 0), out=second["out"], stream=4)
    assert attention_args(lib.forward[2]).mask == _abi.MASK_SLIDING_WINDOW and len(_attention._calls) == 2
    with pytest.raises(ValueError, match="window_size must be"):
        flashjit.attention(second["q"], second["k"], second["v"], window_size=(True, 0), out=second["out"], stream=4)
    # chunk_size is part of the key too.
    flashjit.attention(second["q"], second["k"], second["v"], chunk_size=64, out=second["out"], stream=4)
    flashjit.attention(second["q"], second["k"], second["v"], causal=True, chunk_size=64, out=second["out"], stream=4)
    assert [attention_args(raw).mask for raw in lib.forward[3:5]] == [_abi.MASK_CHUNKED, _abi.MASK_CHUNKED_CAUSAL]
    assert attention_args(lib.forward[4]).chunk_size == 64 and len(_attention._calls) == 4


def test_attention_with_a_config_is_never_memoized_and_passes_the_config(lib):
    t = attention_inputs()
    for _ in range(2):
        flashjit.attention(t["q"], t["k"], t["v"], out=t["out"], stream=0, config={"algorithm": "fa2"})
    assert len(_attention._calls) == 0 and len(lib.forward) == 2


def test_attention_config_pointer_is_kept_alive(lib, monkeypatch):
    seen = []
    monkeypatch.setattr(lib, "flashjit_forward", lambda handle, ref: seen.append(ref._obj.config_json) or 0)
    t = attention_inputs()
    flashjit.attention(t["q"], t["k"], t["v"], out=t["out"], stream=0, config='{"algorithm": "fa2"}')
    assert seen == [b'{"algorithm": "fa2"}']


def test_varlen_hit_matches_and_checks_offsets_alignment(lib):
    t = dict(q=FakeTensor((40, HQ, D)), k=FakeTensor((100, HKV, D)), v=FakeTensor((100, HKV, D)),
             cu_q=FakeTensor((4,), "torch.int32"), cu_k=FakeTensor((4,), "torch.int32"), out=FakeTensor((40, HQ, D)))

    def run(x, max_q=20, max_k=60):
        return flashjit.attention_varlen(x["q"], x["k"], x["v"], x["cu_q"], x["cu_k"], max_q, max_k, out=x["out"],
                                         stream=0)
    run(t)
    u = again(t)
    run(u)
    assert len(_attention._calls) == 1
    b = attention_args(lib.forward[1])
    assert (b.cu_seqlens_q, b.cu_seqlens_k, b.total_q, b.total_k, b.seqlen_q) == (
        u["cu_q"].data_ptr(), u["cu_k"].data_ptr(), 40, 100, 20)
    run(u, max_q=21)
    assert len(_attention._calls) == 2 and attention_args(lib.forward[2]).seqlen_q == 21
    with pytest.raises(ValueError, match="cu_seqlens_k: data_ptr"):
        run(again(t, cu_k=0x7e0000000002))
    with pytest.raises(ValueError, match="max_seqlen_q"):
        run(u, max_q=20.0)


def test_merge_hit_takes_the_new_states_and_still_refuses_aliasing_and_misalignment(lib):
    outs = [FakeTensor((2, 3, 8, 64)) for _ in range(3)]
    lses = [FakeTensor((2, 8, 3), "torch.float32") for _ in range(3)]
    out = FakeTensor((2, 3, 8, 64))
    flashjit.merge(outs, lses, out=out, stream=5)
    outs2, lses2, out2 = [same_kind(o) for o in outs], [same_kind(t) for t in lses], same_kind(out)
    flashjit.merge(outs2, lses2, out=out2, stream=6)
    assert len(_decode._merges) == 1
    (first, _, _), (second, o_in, lse_in) = lib.merge
    assert o_in == [o.data_ptr() for o in outs2] and lse_in == [t.data_ptr() for t in lses2]
    a, b = _abi.MergeArgs.from_buffer_copy(first), _abi.MergeArgs.from_buffer_copy(second)
    assert (b.o, b.stream, b.num_states) == (out2.data_ptr(), 6, 3)
    for name in ("o_in", "lse_in", "o", "stream"):
        setattr(a, name, None), setattr(b, name, None)
    assert bytes(a) == bytes(b)
    aliased = same_kind(out, ptr=outs2[1].data_ptr())
    with pytest.raises(ValueError, match="out aliases outs"):
        flashjit.merge(outs2, lses2, out=aliased, stream=6)
    with pytest.raises(ValueError, match=r"lses\[2\]: data_ptr"):
        flashjit.merge(outs2, lses2[:2] + [same_kind(lses2[2], ptr=0x7e0000000002)], out=out2, stream=6)
    assert len(lib.merge) == 2


def test_decode_csr_hit_takes_the_new_offsets_and_counts(lib):
    """A CSR decode (page_indptr, last_page_len, seqlens_k None) hands the arrays' addresses over on every call,
    memo hits included; a misaligned offset array after a hit is still refused."""
    pages, page = 12, 16
    first = dict(q=FakeTensor((B, QLEN, HQ, D)), k_cache=FakeTensor((pages, page, HKV, D)),
                 v_cache=FakeTensor((pages, page, HKV, D)), page_table=FakeTensor((7,), "torch.int32"),
                 page_indptr=FakeTensor((B + 1,), "torch.int32"), last_page_len=FakeTensor((B,), "torch.int32"),
                 out=FakeTensor((B, QLEN, HQ, D)))

    def run(t):
        return flashjit.decode(t["q"], t["k_cache"], t["v_cache"], None, page_table=t["page_table"],
                               page_indptr=t["page_indptr"], last_page_len=t["last_page_len"], out=t["out"],
                               stream=0, max_seqlen_k=64)
    second = again(first)
    run(first)
    run(second)
    assert lib.planned == 1 and len(_decode._calls) == 1
    for raw, t in zip(lib.decode, (first, second)):
        args = decode_args(raw)
        assert (args.page_table, args.page_indptr, args.last_page_len, args.seqlens_k) == (
            t["page_table"].data_ptr(), t["page_indptr"].data_ptr(), t["last_page_len"].data_ptr(), None)
        assert (args.layout, args.max_pages_per_seq, args.page_size, args.max_seqlen_k) == (_abi.KV_PAGED, 7, page, 64)
    with pytest.raises(ValueError, match="page_indptr: data_ptr"):
        run(again(first, page_indptr=0x7e0000000002))
