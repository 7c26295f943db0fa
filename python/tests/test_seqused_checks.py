"""seqused_k over contiguous keys (attention(seqused_k=) on a padded batch, attention_varlen(seqused_k=) beside
cu_seqlens_k) without a GPU: each bad key-count tensor is a ValueError naming it, raised before the library is
touched; a good one's address reaches the C struct on every call (memo hits included), with nothing paged."""
import pytest

import flashjit
from flashjit import _attention
from fakes import FakeTensor
from test_paged_checks import like, recorded  # noqa: F401  (recorded: the fixture)

INT32 = "torch.int32"
B, SQ, SK, HQ, HKV, D = 3, 64, 96, 8, 2, 64


def dense(**changes):
    t = dict(q=FakeTensor((B, SQ, HQ, D)), k=FakeTensor((B, SK, HKV, D)), v=FakeTensor((B, SK, HKV, D)),
             seqused_k=FakeTensor((B,), INT32), out=FakeTensor((B, SQ, HQ, D)))
    for name, change in changes.items():
        t[name] = change(t[name]) if callable(change) else change
    return t


def call_dense(**changes):
    t = dense(**changes)
    return flashjit.attention(t["q"], t["k"], t["v"], seqused_k=t["seqused_k"], out=t["out"], stream=0)


def call_varlen(seqused_k):
    q, kv = FakeTensor((100, HQ, D)), FakeTensor((300, HKV, D))
    return flashjit.attention_varlen(q, kv, kv, FakeTensor((B + 1,), INT32), FakeTensor((B + 1,), INT32), 50, 128,
                                     seqused_k=seqused_k, out=FakeTensor((100, HQ, D)), stream=0)


CASES = {
    "int64": (dict(seqused_k=lambda t: like(t, dtype="torch.int64")), "seqused_k: dtype torch.int64 must be torch.int32"),
    "on the CPU": (dict(seqused_k=lambda t: like(t, device="cpu")), "seqused_k"),
    "on another GPU": (dict(seqused_k=lambda t: like(t, device="cuda:1")), "seqused_k is on cuda:1"),
    "of other length": (dict(seqused_k=FakeTensor((B + 1,), INT32)), f"seqused_k must have shape [{B}]"),
    "2-D": (dict(seqused_k=FakeTensor((B, 1), INT32)), f"seqused_k must have shape [{B}]"),
    "strided": (dict(seqused_k=lambda t: like(t, strides=(2,))), "seqused_k must be contiguous"),
    "misaligned": (dict(seqused_k=lambda t: like(t, ptr=t.data_ptr() + 2)), "seqused_k: data_ptr() "),
}


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_dense_seqused_k_checks(case, library_untouched):
    changes, message = CASES[case]
    with pytest.raises(ValueError) as raised:
        call_dense(**changes)
    assert message in str(raised.value)


def test_varlen_seqused_k_checks(library_untouched):
    with pytest.raises(ValueError, match=r"seqused_k must have shape \[3\]"):
        call_varlen(FakeTensor((B + 1,), INT32))
    with pytest.raises(ValueError, match="seqused_k: dtype torch.float32 must be torch.int32"):
        call_varlen(FakeTensor((B,), "torch.float32"))


def test_dense_seqused_k_reaches_the_struct(recorded):  # noqa: F811
    t = dense()
    used = [FakeTensor((B,), INT32), FakeTensor((B,), INT32)]
    used[1].device = used[0].device  # keyed alike (the same device object)
    for counts in used:  # the second call is a memo hit: the address is the call's
        with pytest.raises(flashjit.FlashjitError):
            flashjit.attention(t["q"], t["k"], t["v"], causal=True, seqused_k=counts, out=t["out"])
    assert len(recorded.calls) == 2 and len(_attention._calls) == 1
    for args, counts in zip(recorded.calls, used):
        assert args.seqused_k == counts.data_ptr()
        assert (args.batch, args.seqlen_q, args.seqlen_k) == (B, SQ, SK)
        assert (args.page_table, args.page_size, args.num_pages, args.max_pages_per_seq) == (None, 0, 0, 0)
    # Without it: nothing left over from the memo.
    with pytest.raises(flashjit.FlashjitError):
        flashjit.attention(t["q"], t["k"], t["v"], causal=True, out=t["out"])
    assert recorded.calls[-1].seqused_k is None


def test_varlen_seqused_k_reaches_the_struct(recorded):  # noqa: F811
    counts = FakeTensor((B,), INT32)
    with pytest.raises(flashjit.FlashjitError):
        call_varlen(counts)
    args = recorded.calls[-1]
    assert args.seqused_k == counts.data_ptr() and args.page_table is None
