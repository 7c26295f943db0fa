"""The checks attention() makes before anything runs, on duck-typed tensors (.is_cuda, .device, .dtype, .shape,
.stride(), .data_ptr()), so they are testable without torch. Each failure is a ValueError naming the argument."""
import math
from dataclasses import dataclass

from . import _abi

DTYPES = {"torch.bfloat16": _abi.DTYPE_BF16, "torch.float16": _abi.DTYPE_FP16}
MAX_HEAD_DIM = 256


@dataclass(frozen=True)
class Problem:
    batch: int
    seqlen_q: int
    seqlen_k: int
    heads_q: int
    heads_kv: int
    head_dim: int
    dtype: int  # flashjit_dtype


def _shape(t):
    return tuple(int(n) for n in t.shape)


def _require_cuda(name, t):
    if not getattr(t, "is_cuda", False):
        raise ValueError(f"{name} must be a CUDA tensor, got one on {getattr(t, 'device', 'an unknown device')}")


def _require_4d(name, t):
    shape = _shape(t)
    if len(shape) != 4:
        raise ValueError(f"{name} must be 4-D [batch, seqlen, heads, head_dim], got shape {list(shape)}")
    if min(shape) < 1:
        raise ValueError(f"{name} is empty (shape {list(shape)}): every dimension must be at least 1")


def _require_layout(name, t):
    """Last dimension contiguous, the other strides multiples of 8 elements (16 bytes), 16-byte aligned data."""
    shape, stride = _shape(t), tuple(int(s) for s in t.stride())
    if stride[-1] != 1:
        raise ValueError(f"{name}: the last dimension must be contiguous (stride(-1) == 1), got strides {list(stride)}; "
                         f"pass {name}.contiguous()")
    for dim, what in ((0, "batch"), (1, "sequence"), (2, "head")):
        if shape[dim] > 1 and (stride[dim] <= 0 or stride[dim] % 8 != 0):
            raise ValueError(f"{name}: the {what} stride (stride({dim}) = {stride[dim]}) must be a positive multiple of "
                             f"8 elements (16 bytes), got strides {list(stride)}; pass {name}.contiguous()")
    if t.data_ptr() % 16 != 0:
        raise ValueError(f"{name}: data_ptr() {t.data_ptr():#x} is not 16-byte aligned (a view at an odd offset?); "
                         f"pass {name}.contiguous()")


def check_inputs(q, k, v):
    """The Problem of q [B, Sq, Hq, D], k and v [B, Sk, Hkv, D]; ValueError naming the first bad argument."""
    tensors = (("q", q), ("k", k), ("v", v))
    for name, t in tensors:
        _require_cuda(name, t)
    for name, t in tensors[1:]:
        if str(t.device) != str(q.device):
            raise ValueError(f"{name} is on {t.device} but q is on {q.device}: all tensors must be on one CUDA device")
    if str(q.dtype) not in DTYPES:
        raise ValueError(f"q: dtype {q.dtype} is not supported (torch.bfloat16 or torch.float16)")
    for name, t in tensors[1:]:
        if str(t.dtype) != str(q.dtype):
            raise ValueError(f"{name}: dtype {t.dtype} differs from q's {q.dtype}")
    for name, t in tensors:
        _require_4d(name, t)
    (b, sq, hq, d), (bk, sk, hkv, dk) = _shape(q), _shape(k)
    if _shape(v) != _shape(k):
        raise ValueError(f"v: shape {list(_shape(v))} differs from k's {list(_shape(k))}")
    if bk != b:
        raise ValueError(f"k: batch {bk} differs from q's {b}")
    if dk != d:
        raise ValueError(f"k: head_dim {dk} differs from q's {d}")
    if hq % hkv != 0:
        raise ValueError(f"k: its {hkv} heads must divide q's {hq} heads (grouped-query attention)")
    if d % 8 != 0 or d > MAX_HEAD_DIM:
        raise ValueError(f"q: head_dim {d} must be a multiple of 8 and at most {MAX_HEAD_DIM}")
    for name, t in tensors:
        _require_layout(name, t)
    return Problem(b, sq, sk, hq, hkv, d, DTYPES[str(q.dtype)])


def check_out(out, q):
    """`out=` must look like q: same device, dtype and shape, and a layout the kernels can write."""
    _require_cuda("out", out)
    if str(out.device) != str(q.device):
        raise ValueError(f"out is on {out.device} but q is on {q.device}")
    if str(out.dtype) != str(q.dtype):
        raise ValueError(f"out: dtype {out.dtype} differs from q's {q.dtype}")
    if _shape(out) != _shape(q):
        raise ValueError(f"out: shape {list(_shape(out))} differs from q's {list(_shape(q))}")
    _require_layout("out", out)


def bshd_strides(t):
    """(batch, seq, head) element strides for the C ABI; 0 (= contiguous) where a dimension has size 1, whose
    stride is never used and may be anything in torch."""
    shape, stride = _shape(t), tuple(int(s) for s in t.stride())
    return tuple(stride[dim] if shape[dim] > 1 else 0 for dim in range(3))


def mask_of(causal, window):
    """(flashjit_mask, window_left, window_right) for flash_attn-style arguments: window = (left, right), -1
    unbounded; causal forces right = 0 (bottom-right aligned)."""
    if not isinstance(window, (tuple, list)) or len(window) != 2 or not all(
            isinstance(w, int) and not isinstance(w, bool) and w >= -1 for w in window):
        raise ValueError(f"window must be (left, right) with integers >= -1 (-1: unbounded), got {window!r}")
    left, right = window
    if causal:
        return (_abi.MASK_CAUSAL, -1, -1) if left == -1 else (_abi.MASK_SLIDING_WINDOW, left, 0)
    if left == -1 and right == -1:
        return _abi.MASK_NONE, -1, -1
    return _abi.MASK_SLIDING_WINDOW, left, right


def scale_of(softmax_scale):
    """The C ABI's softmax_scale: 0 selects the default 1/sqrt(head_dim)."""
    if softmax_scale is None:
        return 0.0
    try:
        scale = float(softmax_scale)
    except (TypeError, ValueError):
        raise ValueError(f"softmax_scale must be a positive number or None, got {softmax_scale!r}") from None
    if not (scale > 0 and math.isfinite(scale)):
        raise ValueError(f"softmax_scale must be a positive finite number or None, got {softmax_scale!r}")
    return scale


def dtype_code(dtype):
    """flashjit_dtype of a torch dtype or a name (bf16, fp16, bfloat16, float16)."""
    names = {"torch.bfloat16": _abi.DTYPE_BF16, "bf16": _abi.DTYPE_BF16, "bfloat16": _abi.DTYPE_BF16,
             "torch.float16": _abi.DTYPE_FP16, "fp16": _abi.DTYPE_FP16, "float16": _abi.DTYPE_FP16}
    code = names.get(str(dtype))
    if code is None:
        raise ValueError(f"dtype must be torch.bfloat16 or torch.float16 (or 'bf16', 'fp16'), got {dtype!r}")
    return code


def shape4(name, shape):
    """A 4-tuple of positive ints."""
    try:
        dims = tuple(int(n) for n in shape)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be [batch, seqlen, heads, head_dim], got {shape!r}") from None
    if len(dims) != 4 or min(dims) < 1:
        raise ValueError(f"{name} must be [batch, seqlen, heads, head_dim] with every entry >= 1, got {shape!r}")
    return dims
