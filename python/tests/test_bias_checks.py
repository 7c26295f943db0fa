"""The bias argument without a GPU or torch (attention, attention_varlen, decode): each bad one is a ValueError naming
it before the library is touched; good ones (every dtype, broadcast dimensions, expand()ed views) reach the C structs
with their type, their strides (0 where broadcast) and their address per call, and enter the memo key."""
import pytest

import flashjit
from flashjit import _abi, _attention, _checks
from fakes import FakeTensor, qkv
from test_variant_checks import decode_tensors, recorded  # noqa: F401  (a fixture)

F32 = "torch.float32"


def bias(*shape, dtype="torch.bfloat16", **kw):
    return FakeTensor(shape, dtype, **kw)


# q [2, 64, 8, 64], k [2, 96, 2, 64]: the bias broadcasts to [2, 8, 64, 96].
BAD = [
    (dict(bias=bias(2, 8, 64, 96, dtype="torch.int32")), "bias: dtype torch.int32 must be torch.float32"),
    (dict(bias=bias(2, 8, 64, 96, device="cpu")), "bias must be a CUDA tensor"),
    (dict(bias=bias(2, 8, 64, 96, device="cuda:1")), "bias is on cuda:1 but q is on cuda:0"),
    (dict(bias=bias(2, 8, 64, 95)), "its seqlen_k dimension is 95"),
    (dict(bias=bias(3, 8, 64, 96)), "its batch dimension is 3"),
    (dict(bias=bias(2, 4, 64, 96)), "its heads_q dimension is 4"),
    (dict(bias=bias(1, 2, 8, 64, 96)), "bias must have at most 4 dimensions"),
    (dict(bias=bias(64, 96, strides=(-96, 1))), "bias: strides must be >= 0"),
    (dict(bias=bias(64, 96, ptr=0x7f0000000001)), "not aligned to its 2-byte entries"),
    (dict(bias=bias(64, 96, dtype=F32, ptr=0x7f0000000002)), "not aligned to its 4-byte entries"),
    (dict(bias="mask"), "bias must be a torch.Tensor or None"),
]


@pytest.mark.parametrize("kwargs,message", BAD, ids=[m for _, m in BAD])
def test_attention_bias_errors_name_the_argument(kwargs, message, library_untouched):
    q, k, v = qkv()
    with pytest.raises(ValueError) as raised:
        flashjit.attention(q, k, v, **kwargs)
    assert message in str(raised.value)


def test_varlen_bias_is_checked_at_the_max_lengths(library_untouched):
    q, k, v = (FakeTensor((128, 8, 64)), FakeTensor((192, 2, 64)), FakeTensor((192, 2, 64)))
    cu = FakeTensor((3,), "torch.int32")
    with pytest.raises(ValueError) as raised:
        flashjit.attention_varlen(q, k, v, cu, cu, 64, 96, bias=bias(2, 8, 128, 96))  # total_q, not max_seqlen_q
    assert "its seqlen_q dimension is 128" in str(raised.value)


def test_decode_bias_is_checked_against_q_len_and_max_seqlen_k(library_untouched):
    with pytest.raises(ValueError) as raised:
        flashjit.decode(*decode_tensors(), bias=bias(2, 8, 1, 255))  # the cache holds 256 keys per sequence
    assert "its max_seqlen_k dimension is 255" in str(raised.value)
    with pytest.raises(ValueError) as raised:
        flashjit.decode(*decode_tensors(), bias=bias(2, 8, 2, 256))
    assert "its q_len dimension is 2" in str(raised.value)


def test_check_bias_gives_the_type_and_the_broadcast_strides():
    q = FakeTensor((2, 64, 8, 64))
    dims = (2, 8, 64, 96)
    assert _checks.check_bias(q, None, dims) == {}

    def fields(t):
        f = _checks.check_bias(q, t, dims)
        s = f["bias_strides"]
        return f["bias_type"], (s.batch, s.head, s.q, s.k)
    assert fields(bias(2, 8, 64, 96)) == (_abi.BIAS_BF16, (8 * 64 * 96, 64 * 96, 96, 1))
    assert fields(bias(64, 96, dtype=F32)) == (_abi.BIAS_FP32, (0, 0, 96, 1))  # torch SDPA's [Sq, Sk] mask
    assert fields(bias(2, 1, 1, 96, dtype="torch.bool")) == (_abi.BIAS_BOOL, (96, 0, 0, 1))  # key padding
    assert fields(bias(1, 8, 64, 96, dtype="torch.float16")) == (_abi.BIAS_FP16, (0, 64 * 96, 96, 1))
    # An expand()ed view: the strides as they are, 0 on the broadcast dimensions; a column view keeps its k stride.
    assert fields(bias(2, 8, 64, 96, strides=(0, 0, 96, 1))) == (_abi.BIAS_BF16, (0, 0, 96, 1))
    assert fields(bias(2, 8, 64, 96, strides=(96, 0, 1, 64 * 2))) == (_abi.BIAS_BF16, (96, 0, 1, 128))


def test_bias_reaches_the_struct_with_each_call_s_address(recorded):  # noqa: F811
    q, k, v = qkv()
    out = FakeTensor(q.shape)
    for b in (bias(1, 8, 64, 96), bias(1, 8, 64, 96)):  # the second call is a memo hit: the address is the call's
        with pytest.raises(flashjit.FlashjitError):
            flashjit.attention(q, k, v, out=out, bias=b)
        args = recorded.calls[-1][1]
        assert (args.bias, args.bias_type) == (b.data_ptr(), _abi.BIAS_BF16)
        assert (args.bias_strides.batch, args.bias_strides.head, args.bias_strides.q) == (0, 64 * 96, 96)
    calls = len(recorded.calls)
    with pytest.raises(ValueError) as raised:  # a memo hit still checks the address's alignment
        flashjit.attention(q, k, v, out=out, bias=bias(1, 8, 64, 96, ptr=0x7f0000000001))
    assert "not aligned to its 2-byte entries" in str(raised.value) and len(recorded.calls) == calls
    with pytest.raises(flashjit.FlashjitError):
        flashjit.attention(q, k, v, out=out, bias=bias(1, 1, 1, 96, dtype="torch.bool"))
    args = recorded.calls[-1][1]
    assert args.bias_type == _abi.BIAS_BOOL and (args.bias_strides.head, args.bias_strides.q) == (0, 0)
    with pytest.raises(flashjit.FlashjitError):
        flashjit.attention(q, k, v, out=out)
    assert (recorded.calls[-1][1].bias, recorded.calls[-1][1].bias_type) == (None, _abi.BIAS_NONE)


def test_decode_bias_reaches_the_workspace_query(recorded):  # noqa: F811
    b = bias(2, 8, 1, 256, dtype=F32)
    with pytest.raises(flashjit.FlashjitError):
        flashjit.decode(*decode_tensors(), out=FakeTensor((2, 1, 8, 64)), bias=b)
    name, args = recorded.calls[-1]
    assert name == "flashjit_decode_workspace_bytes"  # the plan's size is asked with the bias set
    assert (args.bias, args.bias_type, args.bias_strides.k) == (b.data_ptr(), _abi.BIAS_FP32, 1)


def test_bias_enters_the_memo_key():
    q, k, v = qkv()
    keys = {_attention._forward_key((q, k, v, None, None, None, None, None, b), (False, (-1, -1), None, 0.0, 0), None)
            for b in (None, bias(2, 8, 64, 96), bias(2, 8, 64, 96, dtype=F32), bias(64, 96))}
    assert len(keys) == 4 and None not in keys


def test_struct_size_covers_the_bias():
    assert _abi.AttentionArgs.bias.offset == _abi.AttentionArgs.bm_head_stride.offset + 8  # after the block mask
    assert _abi.DecodeArgs.bias.offset == _abi.DecodeArgs.last_page_len.offset + 8


def test_select_names_the_bias():
    llama = dict(q_shape=(1, 4096, 32, 128), k_shape=(1, 4096, 8, 128), causal=True, arch="sm_90a")
    assert "bias" not in flashjit.select(**llama)
    chosen = flashjit.select(**llama, bias="bf16")
    assert chosen["bias"] == "bf16" and chosen["algorithm"] == "fa3"
    assert flashjit.select(**llama, bias="torch.bool")["bias"] == "bool"
    assert "_biasbf16_sm90a" in flashjit.emit(chosen)  # the kernel's name, in its translation unit
    # A short window over grouped heads packs them, but not with a bias (a packed tile spans several heads).
    gpt_oss = dict(q_shape=(1, 8192, 64, 64), k_shape=(1, 8192, 8, 64), window_size=(128, 0), arch="sm_90a")
    assert flashjit.select(**gpt_oss).get("pack_gqa") is True
    assert "pack_gqa" not in flashjit.select(**gpt_oss, bias="fp32")
    with pytest.raises(ValueError) as raised:
        flashjit.select(**llama, bias="int8")
    assert "bias must be None or a bias dtype" in str(raised.value)
