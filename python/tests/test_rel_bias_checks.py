"""The relative-logits table (attention(rel_bias=, rel_bias_offset=), attention_varlen's) without a GPU: each bad
table or offset is a ValueError naming it, raised before the library is touched; a good one's address, head stride,
extent and offset reach the C struct on every call (memo hits included: a new offset is a new key); traced calls
refuse it."""
import ctypes

import pytest

import flashjit
from flashjit import _abi, _attention
from fakes import FakeTensor
from test_paged_checks import like, recorded  # noqa: F401  (recorded: the fixture)

F32 = "torch.float32"
B, SQ, SK, HQ, HKV, D = 2, 64, 96, 8, 2, 64


# One set of tensors for every call (memo keys compare their device objects).
Q, KV, OUT = FakeTensor((B, SQ, HQ, D)), FakeTensor((B, SK, HKV, D)), FakeTensor((B, SQ, HQ, D))


def table(shape, **kwargs):
    """A float32 table on Q's device (the same device object: keyed alike)."""
    t = FakeTensor(shape, F32, **kwargs)
    t.device = Q.device
    return t


def call_dense(rel_bias, rel_bias_offset=0, **kwargs):
    return flashjit.attention(Q, KV, KV, rel_bias=rel_bias, rel_bias_offset=rel_bias_offset, out=OUT, stream=0,
                              **kwargs)


def call_varlen(rel_bias, rel_bias_offset=0):
    q, kv = FakeTensor((100, HQ, D)), FakeTensor((300, HKV, D))
    cu = FakeTensor((B + 1,), "torch.int32")
    return flashjit.attention_varlen(q, kv, kv, cu, cu, 50, 128, rel_bias=rel_bias, rel_bias_offset=rel_bias_offset,
                                     out=FakeTensor((100, HQ, D)), stream=0)


TABLE = FakeTensor((HQ, 33), F32)
CASES = {
    "not a tensor": (dict(rel_bias=[1.0]), "rel_bias must be a torch.Tensor or None, got list"),
    "bf16": (dict(rel_bias=like(TABLE, dtype="torch.bfloat16")), "rel_bias: dtype torch.bfloat16 must be torch.float32"),
    "on the CPU": (dict(rel_bias=like(TABLE, device="cpu")), "rel_bias"),
    "on another GPU": (dict(rel_bias=like(TABLE, device="cuda:1")), "rel_bias is on cuda:1"),
    "1-D": (dict(rel_bias=FakeTensor((33,), F32)), f"rel_bias must have shape [{HQ}, extent] (or [1, extent]"),
    "other heads": (dict(rel_bias=FakeTensor((HQ // 2, 33), F32)), f"rel_bias must have shape [{HQ}, extent]"),
    "empty rows": (dict(rel_bias=FakeTensor((HQ, 0), F32)), "with extent in [1, 2^30]"),
    "strided rows": (dict(rel_bias=like(TABLE, strides=(66, 2))), "rel_bias: the last dimension must be contiguous"),
    "misaligned": (dict(rel_bias=like(TABLE, ptr=TABLE.data_ptr() + 2)), "rel_bias: data_ptr() "),
    "offset a float": (dict(rel_bias=TABLE, rel_bias_offset=1.5), "rel_bias_offset must be an integer, got 1.5"),
    "offset too large": (dict(rel_bias=TABLE, rel_bias_offset=(1 << 30) + 1), "rel_bias_offset must be in [-"),
    "offset without a table": (dict(rel_bias=None, rel_bias_offset=3), "rel_bias_offset (3) is set but rel_bias is None"),
}


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_rel_bias_checks(case, library_untouched):
    changes, message = CASES[case]
    for call in (call_dense, call_varlen):
        with pytest.raises(ValueError) as raised:
            call(**changes)
        assert message in str(raised.value)


def test_rel_bias_reaches_the_struct(recorded):  # noqa: F811
    tables = [table((HQ, 33)), table((HQ, 33))]
    for t in tables:  # the second call is a memo hit: the address is the call's
        with pytest.raises(flashjit.FlashjitError):
            call_dense(t, -5, causal=True)
    assert len(recorded.calls) == 2 and len(_attention._calls) == 1
    for args, t in zip(recorded.calls, tables):
        assert (args.rel_bias, args.rel_bias_head_stride, args.rel_bias_extent, args.rel_bias_offset) == (
            t.data_ptr(), 33, 33, -5)
    with pytest.raises(flashjit.FlashjitError):
        call_dense(tables[0], 7, causal=True)  # another offset: another key, its own struct
    assert recorded.calls[-1].rel_bias_offset == 7 and len(_attention._calls) == 2
    # One row for every head ([1, extent], or an expand()ed view): head stride 0; padded rows keep theirs.
    for t, stride in ((table((1, 40)), 0), (table((HQ, 40), strides=(0, 1)), 0), (table((HQ, 40), strides=(48, 1)), 48)):
        with pytest.raises(flashjit.FlashjitError):
            call_varlen(t)
        args = recorded.calls[-1]
        assert (args.rel_bias, args.rel_bias_head_stride, args.rel_bias_extent) == (t.data_ptr(), stride, 40)
    # Without it: nothing left over from the memo.
    with pytest.raises(flashjit.FlashjitError):
        call_dense(None, causal=True)
    assert (recorded.calls[-1].rel_bias, recorded.calls[-1].rel_bias_extent) == (None, 0)


def test_rel_bias_fields_follow_the_bias():
    assert _abi.AttentionArgs.rel_bias.offset == _abi.AttentionArgs.bias_strides.offset + 32
    if ctypes.sizeof(ctypes.c_void_p) == 8:
        assert _abi.AttentionArgs.rel_bias.offset == 624  # where the struct ended before (src/capi/args.cpp)
