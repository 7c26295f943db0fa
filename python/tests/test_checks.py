"""attention()'s argument checks on fake tensors: each bad argument is a ValueError naming it, raised before
the library (or torch) is touched."""
import math

import pytest

import flashjit
from flashjit import _abi, _checks
from fakes import FakeTensor, qkv


pytestmark = pytest.mark.usefixtures("library_untouched")


def mutate(**changes):
    """q, k, v, out for a valid problem, with some replaced (callables receive the valid tensor)."""
    q, k, v = qkv()
    tensors = {"q": q, "k": k, "v": v, "out": FakeTensor(q.shape)}
    for name, change in changes.items():
        tensors[name] = change(tensors[name]) if callable(change) else change
    return tensors


def like(t, **overrides):
    fields = dict(shape=t.shape, dtype=t.dtype, device=str(t.device), strides=t.stride(), ptr=t.data_ptr())
    fields.update(overrides)
    return FakeTensor(**fields)


TENSOR_CASES = {
    "q on the CPU": (mutate(q=lambda t: like(t, device="cpu")), "q must be a CUDA tensor"),
    "k not CUDA": (mutate(k=lambda t: like(t, device="cpu")), "k must be a CUDA tensor"),
    "k on another GPU": (mutate(k=lambda t: like(t, device="cuda:1")), "k is on cuda:1"),
    "v on another GPU": (mutate(v=lambda t: like(t, device="cuda:1")), "v is on cuda:1"),
    "q float32": (mutate(q=lambda t: like(t, dtype="torch.float32")), "q: dtype torch.float32"),
    "k fp16 with q bf16": (mutate(k=lambda t: like(t, dtype="torch.float16")), "k: dtype torch.float16 differs"),
    "v fp16 with q bf16": (mutate(v=lambda t: like(t, dtype="torch.float16")), "v: dtype torch.float16 differs"),
    "q 3-D": (mutate(q=FakeTensor((64, 8, 64))), "q must be 4-D"),
    "k 5-D": (mutate(k=FakeTensor((2, 96, 2, 1, 64))), "k must be 4-D"),
    "q empty": (mutate(q=FakeTensor((2, 0, 8, 64))), "q is empty"),
    "v shape differs": (mutate(v=FakeTensor((2, 95, 2, 64))), "v: shape"),
    "k batch differs": (mutate(k=FakeTensor((3, 96, 2, 64)), v=FakeTensor((3, 96, 2, 64))), "k: batch 3"),
    "k head_dim differs": (mutate(k=FakeTensor((2, 96, 2, 128)), v=FakeTensor((2, 96, 2, 128))), "k: head_dim 128"),
    "heads not divisible": (mutate(k=FakeTensor((2, 96, 3, 64)), v=FakeTensor((2, 96, 3, 64))), "k: its 3 heads"),
    "head_dim 60": (dict(zip("qkv", qkv(d=60))), "q: head_dim 60"),
    "v head_dim 60": (mutate(v=FakeTensor((2, 96, 2, 60))), "v: head_dim 60"),
    "head_dim 264": (dict(zip("qkv", qkv(d=264))), "q: head_dim 264"),
    "q last dim strided": (mutate(q=lambda t: like(t, strides=(64 * 8 * 128, 8 * 128, 128, 2))), "q: the last dimension"),
    "k sequence stride 12": (mutate(k=lambda t: like(t, strides=(96 * 12, 12, 1, 1))), "k: the sequence stride"),
    "v head stride 68": (mutate(v=lambda t: like(t, strides=(96 * 2 * 68, 2 * 68, 68, 1))), "v: the head stride"),
    "q batch stride 0": (mutate(q=lambda t: like(t, strides=(0, 512, 64, 1))), "q: the batch stride"),
    "q misaligned": (mutate(q=lambda t: like(t, ptr=t.data_ptr() + 2)), "q: data_ptr() "),
    "v misaligned by 8": (mutate(v=lambda t: like(t, ptr=t.data_ptr() + 8)), "v: data_ptr() "),
    "out on the CPU": (mutate(out=lambda t: like(t, device="cpu")), "out must be a CUDA tensor"),
    "out on another GPU": (mutate(out=lambda t: like(t, device="cuda:1")), "out is on cuda:1"),
    "out fp16": (mutate(out=lambda t: like(t, dtype="torch.float16")), "out: dtype"),
    "out shape": (mutate(out=FakeTensor((2, 64, 8, 128))), "out: shape"),
    "out strides": (mutate(out=lambda t: like(t, strides=(64 * 8 * 64, 8 * 64, 66, 1))), "out: the head stride"),
    "out misaligned": (mutate(out=lambda t: like(t, ptr=t.data_ptr() + 4)), "out: data_ptr() "),
}


@pytest.mark.parametrize("case", list(TENSOR_CASES), ids=list(TENSOR_CASES))
def test_tensor_checks(case):
    tensors, message = TENSOR_CASES[case]
    with pytest.raises(ValueError, match=None) as raised:
        flashjit.attention(tensors["q"], tensors["k"], tensors["v"], out=tensors.get("out"), stream=0)
    assert message in str(raised.value)


@pytest.mark.parametrize("window", [(1,), (1, 2, 3), ("a", 1), (-2, 0), (0, -5), (True, 1), (1.5, 2), 5, None])
def test_window_checks(window):
    q, k, v = qkv()
    with pytest.raises(ValueError, match="window_size must be"):
        flashjit.attention(q, k, v, window_size=window, out=FakeTensor(q.shape), stream=0)


@pytest.mark.parametrize("chunk_size,window,message", [
    (-1, (-1, -1), "chunk_size must be in [0, "), (1.0, (-1, -1), "chunk_size must be an integer"),
    (True, (-1, -1), "chunk_size must be an integer"), (64, (8, 0), "chunk_size 64 and window_size (8, 0)"),
])
def test_chunk_size_checks(chunk_size, window, message):
    q, k, v = qkv()
    with pytest.raises(ValueError) as raised:
        flashjit.attention(q, k, v, window_size=window, chunk_size=chunk_size, out=FakeTensor(q.shape), stream=0)
    assert message in str(raised.value)


def test_the_window_keyword_is_deprecated():
    """attention(window=...) still works, with a DeprecationWarning naming window_size; both at once is an error."""
    q, k, v = qkv()
    with pytest.warns(DeprecationWarning, match=r"attention\(window=\.\.\.\) is deprecated: pass window_size"):
        with pytest.raises(ValueError, match="window_size must be"):
            flashjit.attention(q, k, v, window=(-2, 0), out=FakeTensor(q.shape), stream=0)
    with pytest.raises(ValueError, match="pass window_size only"):
        flashjit.attention(q, k, v, window=(8, 0), window_size=(8, 0), out=FakeTensor(q.shape), stream=0)
    with pytest.warns(DeprecationWarning, match="precompile"):
        with pytest.raises(ValueError, match="window_size must be"):
            flashjit.precompile(q_shape=(1, 128, 8, 64), dtype="bf16", window=(-3, 0))


@pytest.mark.parametrize("scale", [0, -1.0, math.nan, math.inf, "x", [1.0], 10**400, 1e300])
def test_softmax_scale_checks(scale):
    q, k, v = qkv()
    with pytest.raises(ValueError, match="softmax_scale"):
        flashjit.attention(q, k, v, softmax_scale=scale, out=FakeTensor(q.shape), stream=0)


@pytest.mark.parametrize("config,message", [(5, "config must be a dict"), ({"x": object()}, "config: not representable")])
def test_config_checks(config, message):
    q, k, v = qkv()
    with pytest.raises(ValueError, match=message):
        flashjit.attention(q, k, v, config=config, out=FakeTensor(q.shape), stream=0)


@pytest.mark.parametrize("kwargs,message", [
    ({}, "needs a config, or q_shape"),
    ({"q_shape": (1, 128, 8)}, "q_shape"),
    ({"q_shape": (1, 0, 8, 64), "dtype": "bf16"}, "q_shape"),
    ({"q_shape": (1, 128, 8, 64), "k_shape": "x", "dtype": "bf16"}, "k_shape"),
    ({"q_shape": (1, 128, 8, 64), "dtype": "fp32"}, "dtype"),
    ({"q_shape": (1, 128, 8, 64), "dtype": "bf16", "window_size": (-3, 0)}, "window_size"),
    ({"q_shape": (1, 128, 8, 64), "dtype": "bf16", "chunk_size": -3}, "chunk_size"),
])
def test_precompile_checks(kwargs, message):
    with pytest.raises(ValueError, match=message):
        flashjit.precompile(**kwargs)


def test_size_one_dimensions_may_have_any_stride():
    # torch reports arbitrary strides for dimensions of size 1 (after slicing, transposes): they are never used.
    q = FakeTensor((1, 1, 8, 64), strides=(7, 3, 64, 1))
    assert _checks.bshd_strides(q) == (0, 0, 64)
    k = FakeTensor((1, 96, 2, 64))
    problem = _checks.check_inputs(q, k, FakeTensor((1, 96, 2, 64)))
    assert (problem.batch, problem.seqlen_q, problem.seqlen_k, problem.heads_q, problem.heads_kv) == (1, 1, 96, 8, 2)
    assert problem.dtype == _abi.DTYPE_BF16


@pytest.mark.parametrize("causal,window,chunk,expected", [
    (False, (-1, -1), 0, (_abi.MASK_NONE, -1, -1, 0)),
    (True, (-1, -1), 0, (_abi.MASK_CAUSAL, -1, -1, 0)),
    (True, (-1, 7), 0, (_abi.MASK_CAUSAL, -1, -1, 0)),
    (True, (128, 5), 0, (_abi.MASK_SLIDING_WINDOW, 128, 0, 0)),
    (False, (128, -1), 0, (_abi.MASK_SLIDING_WINDOW, 128, -1, 0)),
    (False, [-1, 0], 0, (_abi.MASK_SLIDING_WINDOW, -1, 0, 0)),
    (False, (0, 0), 0, (_abi.MASK_SLIDING_WINDOW, 0, 0, 0)),
    (False, (-1, -1), 64, (_abi.MASK_CHUNKED, -1, -1, 64)),
    (True, (-1, -1), 100, (_abi.MASK_CHUNKED_CAUSAL, -1, -1, 100)),
])
def test_mask_of(causal, window, chunk, expected):
    assert _checks.mask_of(causal, window, chunk) == expected


def test_scale_and_dtype_codes():
    assert _checks.scale_of(None) == 0.0
    assert _checks.scale_of(0.125) == 0.125
    assert _checks.dtype_code("torch.float16") == _abi.DTYPE_FP16
    assert _checks.dtype_code("bf16") == _abi.DTYPE_BF16


def test_v_may_have_its_own_head_dim():
    # DeepSeek's 192 / 128: q and k 192, v and o 128; the problem carries v's head dim (0 when it is q's).
    q, k = FakeTensor((2, 64, 8, 192)), FakeTensor((2, 96, 2, 192))
    problem = _checks.check_inputs(q, k, FakeTensor((2, 96, 2, 128)))
    assert (problem.head_dim, problem.head_dim_v) == (192, 128)
    assert _checks.check_inputs(q, k, FakeTensor((2, 96, 2, 192))).head_dim_v == 0
    with pytest.raises(ValueError, match=r"v: shape \[2, 95, 2, 128\] differs from k's"):
        _checks.check_inputs(q, k, FakeTensor((2, 95, 2, 128)))
