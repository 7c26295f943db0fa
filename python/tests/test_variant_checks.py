"""The variants' arguments without a GPU or torch (softcap, alibi_slopes, sinks on attention, attention_varlen,
decode and flash-attn's names; select and select_decode by shapes): each bad one is a ValueError naming it before the
library is touched, good ones reach the C structs, and select names the variant kernels."""
import ctypes

import pytest

import flashjit
from flashjit import _abi, _attention, _checks, _decode, _memo
from fakes import FakeTensor, qkv

F32 = "torch.float32"


def slopes(*shape, **kw):
    return FakeTensor(shape, kw.pop("dtype", F32), **kw)


# q [2, 64, 8, 64]: heads_q 8, batch 2.
BAD = [
    (dict(softcap=-1.0), "softcap must be >= 0 and finite"),
    (dict(softcap=float("inf")), "softcap must be >= 0 and finite"),
    (dict(softcap=float("nan")), "softcap must be >= 0 and finite"),
    (dict(softcap="30"), "softcap must be a number"),
    (dict(softcap=True), "softcap must be a number"),
    (dict(softcap=1e39), "at most 3.40282e+38"),
    (dict(alibi_slopes=slopes(8, dtype="torch.bfloat16")), "alibi_slopes: dtype torch.bfloat16 must be torch.float32"),
    (dict(alibi_slopes=slopes(8, device="cpu")), "alibi_slopes must be a CUDA tensor"),
    (dict(alibi_slopes=slopes(8, device="cuda:1")), "alibi_slopes is on cuda:1 but q is on cuda:0"),
    (dict(alibi_slopes=slopes(4)), "alibi_slopes must have shape [8] (heads_q) or [2, 8]"),
    (dict(alibi_slopes=slopes(3, 8)), "alibi_slopes must have shape [8] (heads_q) or [2, 8]"),
    (dict(alibi_slopes=slopes(2, 8, 1)), "alibi_slopes must have shape"),
    (dict(alibi_slopes=slopes(2, 8, strides=(16, 2))), "alibi_slopes: the last dimension must be contiguous"),
    (dict(alibi_slopes=slopes(2, 8, strides=(-8, 1))), "alibi_slopes: the batch stride must be >= 0"),
    (dict(alibi_slopes=slopes(8, ptr=0x7f0000000002)), "alibi_slopes: data_ptr() 0x7f0000000002 is not 4-byte aligned"),
    (dict(sinks=slopes(8, dtype="torch.float16")), "sinks: dtype torch.float16 must be torch.float32"),
    (dict(sinks=slopes(2, 8)), "sinks must have shape [8] (one logit per query head)"),
    (dict(sinks=slopes(8, device="cpu")), "sinks must be a CUDA tensor"),
    (dict(sinks=slopes(8, strides=(2,))), "sinks: the last dimension must be contiguous"),
]


@pytest.mark.parametrize("variants,message", BAD, ids=[m for _, m in BAD])
def test_attention_variant_errors_name_the_argument(variants, message, library_untouched):
    q, k, v = qkv()
    with pytest.raises(ValueError) as raised:
        flashjit.attention(q, k, v, **variants)
    assert message in str(raised.value)


@pytest.mark.parametrize("variants,message", BAD, ids=[m for _, m in BAD])
def test_varlen_variant_errors_name_the_argument(variants, message, library_untouched):
    # Packed q [128, 8, 64] with 2 sequences: [2, 8] slopes are per sequence.
    q, k, v = (FakeTensor((128, 8, 64)), FakeTensor((192, 2, 64)), FakeTensor((192, 2, 64)))
    cu = FakeTensor((3,), "torch.int32")
    with pytest.raises(ValueError) as raised:
        flashjit.attention_varlen(q, k, v, cu, cu, 64, 96, **variants)
    assert message in str(raised.value)


def decode_tensors(batch=2):
    return (FakeTensor((batch, 1, 8, 64)), FakeTensor((batch, 256, 2, 64)), FakeTensor((batch, 256, 2, 64)),
            FakeTensor((batch,), "torch.int32"))


@pytest.mark.parametrize("variants,message", BAD, ids=[m for _, m in BAD])
def test_decode_variant_errors_name_the_argument(variants, message, library_untouched):
    with pytest.raises(ValueError) as raised:
        flashjit.decode(*decode_tensors(), **variants)
    assert message in str(raised.value)


def test_check_variants_gives_the_c_fields():
    q = FakeTensor((4, 64, 8, 64))
    assert _checks.check_variants(q, 4, 8, 0.0, None, None) == (0.0, 0)
    assert _checks.check_variants(q, 4, 8, 30, slopes(8), slopes(8)) == (30.0, 0)
    assert _checks.check_variants(q, 4, 8, 50.0, slopes(4, 8), None) == (50.0, 8)
    assert _checks.check_variants(q, 4, 8, 0.0, slopes(4, 8, strides=(16, 1)), None) == (0.0, 16)  # a view's stride
    assert _checks.check_variants(q, 4, 8, 0.0, slopes(4, 8, strides=(0, 1)), None) == (0.0, 0)  # expand()ed
    assert _checks.check_variants(q, 1, 8, 0.0, slopes(1, 8, strides=(99, 1)), None) == (0.0, 0)  # one sequence


class Recorder:
    """Stands in for libflashjit: records the struct each call passes and fails (so nothing runs)."""

    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        def call(runtime, args, *rest):
            self.calls.append((name, type(args._obj).from_buffer_copy(args._obj)))
            return -_abi.ERROR_NO_DEVICE if name == "flashjit_decode_workspace_bytes" else _abi.ERROR_NO_DEVICE
        return call

    def flashjit_last_error(self):
        return b"recorded"

    def flashjit_status_string(self, status):
        return b"no device"


@pytest.fixture
def recorded(monkeypatch):
    lib = Recorder()
    for module in (_attention, _decode):
        monkeypatch.setattr(module._library, "load", lambda: lib)
    monkeypatch.setattr(_attention._runtime, "handle", lambda: None)
    monkeypatch.setattr(_attention, "_stream_handle", lambda stream, device: 0)
    _attention._calls.clear()
    _decode._calls.clear()
    return lib


def test_attention_variants_reach_the_struct(recorded):
    q, k, v = qkv()
    s, t = slopes(2, 8), slopes(8)
    out = FakeTensor(q.shape)
    for _ in range(2):  # the second call is a memo hit: the addresses are the call's
        with pytest.raises(flashjit.FlashjitError):
            flashjit.attention(q, k, v, out=out, softcap=30.0, alibi_slopes=s, sinks=t)
    for _, args in recorded.calls:
        assert (args.softcap, args.alibi_slopes, args.alibi_slopes_batch_stride, args.sinks) == (30.0, s.data_ptr(), 8,
                                                                                                t.data_ptr())
    with pytest.raises(flashjit.FlashjitError):
        flashjit.attention(q, k, v, out=out, alibi_slopes=slopes(8))
    last = recorded.calls[-1][1]
    assert (last.softcap, last.alibi_slopes_batch_stride, last.sinks) == (0.0, 0, None)


def test_varlen_variants_reach_the_struct(recorded):
    q, k, v = (FakeTensor((128, 8, 64)), FakeTensor((192, 2, 64)), FakeTensor((192, 2, 64)))
    cu = FakeTensor((3,), "torch.int32")
    s = slopes(2, 8)
    with pytest.raises(flashjit.FlashjitError):
        flashjit.attention_varlen(q, k, v, cu, cu, 64, 96, out=FakeTensor(q.shape), softcap=5, alibi_slopes=s)
    args = recorded.calls[-1][1]
    assert (args.softcap, args.alibi_slopes, args.alibi_slopes_batch_stride, args.sinks) == (5.0, s.data_ptr(), 8, None)


def test_decode_variants_reach_the_struct(recorded):
    t = slopes(8)
    with pytest.raises(flashjit.FlashjitError):
        flashjit.decode(*decode_tensors(), out=FakeTensor((2, 1, 8, 64)), softcap=20.0, sinks=t)
    name, args = recorded.calls[-1]
    assert name == "flashjit_decode_workspace_bytes"  # the plan's size is asked with the variants set
    assert (args.softcap, args.alibi_slopes, args.sinks) == (20.0, None, t.data_ptr())


def test_variants_enter_the_memo_key():
    q, k, v = qkv()
    keys = {_attention._forward_key((q, k, v, None, a, s), (False, (-1, -1), None, cap, 0), None)
            for cap, a, s in [(0.0, None, None), (30.0, None, None), (0.0, slopes(8), None), (0.0, slopes(2, 8), None),
                              (0.0, None, slopes(8))]}
    assert len(keys) == 5 and None not in keys
    assert _attention._forward_key((q, k, v, None, None, None), (False, (-1, -1), None, "30", 0), None) is None
    assert _memo.number(30.0) and not _memo.number(True)


# ---- flash-attn's names --------------------------------------------------------------------------------------

@pytest.fixture
def captured(monkeypatch):
    calls = []
    from flashjit import _flash_attn
    monkeypatch.setattr(_flash_attn, "attention", lambda q, k, v, **kw: calls.append(kw) or "o")
    monkeypatch.setattr(_flash_attn, "attention_varlen", lambda *a, **kw: calls.append(kw) or "o")
    monkeypatch.setattr(_flash_attn, "decode", lambda *a, **kw: calls.append(kw) or "o")
    return calls


def test_flash_attn_variants_reach_flashjit(captured):
    q, k, v = qkv()
    s, t = slopes(8), slopes(8)
    flashjit.flash_attn_func(q, k, v, 0.0, None, True, (-1, -1), 30.0, s, learnable_sink=t)
    assert captured[-1] == dict(causal=True, window_size=(-1, -1), softmax_scale=None, softcap=30.0, alibi_slopes=s,
                                sinks=t)
    flashjit.flash_attn_func(q, k, v, softcap=0.0)
    assert "softcap" not in captured[-1]
    flashjit.flash_attn_varlen_func(q, k, v, "cu_q", "cu_k", 64, 96, alibi_slopes=s)
    assert captured[-1]["alibi_slopes"] is s and "sinks" not in captured[-1]


def test_flash_attn_with_kvcache_variants_reach_decode(monkeypatch, captured):
    import sys
    import types
    fake_torch = types.SimpleNamespace(int32="torch.int32", full=lambda *a, **kw: FakeTensor((2,), "torch.int32"))
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    q, k_cache, v_cache, _ = decode_tensors()
    t = slopes(8)
    flashjit.flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=100, softcap=50.0, learnable_sink=t)
    assert captured[-1]["softcap"] == 50.0 and captured[-1]["sinks"] is t and "alibi_slopes" not in captured[-1]


# ---- select by shapes ----------------------------------------------------------------------------------------

def test_select_names_the_variants():
    llama = dict(q_shape=(1, 4096, 32, 128), k_shape=(1, 4096, 8, 128), causal=True)
    plain = flashjit.select(**llama, arch="sm_90a")
    assert not {"softcap", "alibi", "sinks"} & set(plain)
    capped = flashjit.select(**llama, softcap=50.0, arch="sm_90a")
    assert capped["softcap"] is True and capped["algorithm"] == "fa3" and not {"alibi", "sinks"} & set(capped)
    assert flashjit.select(**llama, softcap=True, arch="sm_90a") == capped
    every = flashjit.select(**llama, softcap=30, alibi=True, sinks=True, varlen=True, arch="sm_80")
    assert (every["algorithm"], every["softcap"], every["alibi"], every["sinks"], every["varlen"]) == ("fa2", True, True,
                                                                                                     True, True)
    assert "_softcap_alibi_sinks" in flashjit.emit(every)  # the kernel's name, in its translation unit


def test_precompile_names_the_variant_kernel():
    config = flashjit.select((1, 256, 8, 64), sinks=True, arch="sm_80")
    info = flashjit.precompile(config)
    assert "_none_sinks_sm80" in info["name"] and info["config"]["sinks"] is True


def test_select_decode_takes_the_variants():
    # gpt-oss-shaped: one sequence over 8k keys splits on 132 SMs; the sinks join where the splits merge.
    chosen = flashjit.select_decode((1, 1, 64, 64), (1, 8192, 8, 64), sinks=True, arch="sm_90a")
    assert chosen["split"]["sinks"] is True and not {"softcap", "alibi"} & set(chosen["split"])
    assert chosen["num_splits"] > 1 and chosen["combine"]["sinks"] is True
    capped = flashjit.select_decode((4, 1, 32, 128), (4, 4096, 8, 128), softcap=True, alibi=True, arch="sm_80", sms=108)
    assert capped["split"]["softcap"] is True and capped["split"]["alibi"] is True and "sinks" not in capped["split"]
    assert capped["combine"] is None or "sinks" not in capped["combine"]


@pytest.mark.parametrize("kwargs,message", [
    (dict(softcap=-3.0), "softcap must be >= 0"),
    (dict(alibi=1), "alibi must be True or False"),
    (dict(sinks="yes"), "sinks must be True or False"),
])
def test_select_variant_errors(kwargs, message):
    for call in (lambda: flashjit.select((1, 128, 8, 64), arch="sm_90a", **kwargs),
                 lambda: flashjit.select_decode((1, 1, 8, 64), (1, 4096, 8, 64), arch="sm_90a", **kwargs)):
        with pytest.raises(ValueError) as raised:
            call()
        assert message in str(raised.value)


def test_select_variants_need_no_torch():
    from test_library import run_python
    done = run_python("import sys, flashjit; c = flashjit.select((1, 64, 8, 64), softcap=30.0, alibi=True, "
                      "arch='sm_90a'); print(c['softcap'], c['alibi'], 'torch' in sys.modules)")
    assert done.returncode == 0 and done.stdout.split() == ["True", "True", "False"], done.stderr


def test_struct_size_covers_the_variants():
    assert _abi.AttentionArgs.softcap.offset >= _abi.AttentionArgs.check_seqlens.offset + 4
    # the snippets' fields follow the variants (test_snippet_checks.py)
    assert _abi.AttentionArgs.score_mod.offset == _abi.AttentionArgs.sinks.offset + 8
    assert _abi.DecodeArgs.score_mod.offset == _abi.DecodeArgs.sinks.offset + 8
