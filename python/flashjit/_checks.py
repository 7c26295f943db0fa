"""The checks attention(), decode() and merge() make before anything runs, on duck-typed tensors (.is_cuda,
.device, .dtype, .shape, .stride(), .data_ptr()), so they are testable without torch. Each failure is a ValueError
naming the argument.

The same checks run on the fake tensors of torch.compile and torch.export (the custom ops' fake implementations,
_ops.py) with traced=True: tensors on the meta device pass as CUDA ones, addresses are not checked (fake tensors
have none), and sizes stay symbolic (no int() of a shape or a stride). The output shapes are also said here
(attention_out_shapes, ...), so a change of what a shape may be is made in this file alone."""
import ctypes
import math
import numbers
import operator
from dataclasses import dataclass
from typing import Optional

from . import _abi, _memo

DTYPES = {"torch.bfloat16": _abi.DTYPE_BF16, "torch.float16": _abi.DTYPE_FP16}
MAX_HEAD_DIM = 256
FLOAT32_MAX = 3.4028234663852886e38


@dataclass(frozen=True)
class Problem:
    batch: int
    seqlen_q: int
    seqlen_k: int
    heads_q: int
    heads_kv: int
    head_dim: int
    dtype: int  # flashjit_dtype
    head_dim_v: int = 0  # v's and o's last dim when it differs from head_dim (0: the same)


def _shape(t):
    return tuple(t.shape)


def _strides(t):
    return tuple(t.stride())


def _require_cuda(name, t, traced=False):
    if traced and str(getattr(t, "device", "")) == "meta":
        return
    if not getattr(t, "is_cuda", False):
        raise ValueError(f"{name} must be a CUDA tensor, got one on {getattr(t, 'device', 'an unknown device')}")


def _require_heads_and_head_dim(k_name, hq, hkv, d, dk):
    """K's head_dim equals q's, its heads divide q's (GQA), and q's head_dim is one the kernels take."""
    if dk != d:
        raise ValueError(f"{k_name}: head_dim {dk} differs from q's {d}")
    if hq % hkv != 0:
        raise ValueError(f"{k_name}: its {hkv} heads must divide q's {hq} heads (grouped-query attention)")
    if d % 8 != 0 or d > MAX_HEAD_DIM:
        raise ValueError(f"q: head_dim {d} must be a multiple of 8 and at most {MAX_HEAD_DIM}")


def _value_head_dim(k, v, d):
    """v's head dim for the C ABI: 0 when it equals q's, else a multiple of 8 up to MAX_HEAD_DIM. v must match k
    in every other dimension."""
    shape_k, shape_v = _shape(k), _shape(v)
    if shape_v[:-1] != shape_k[:-1]:
        raise ValueError(f"v: shape {list(shape_v)} differs from k's {list(shape_k)} (only the last dimension, "
                         f"head_dim_v, may differ)")
    dv = shape_v[-1]
    if dv % 8 != 0 or dv > MAX_HEAD_DIM:
        raise ValueError(f"v: head_dim {dv} must be a multiple of 8 and at most {MAX_HEAD_DIM}")
    return 0 if dv == d else dv


def _require_4d(name, t):
    shape = _shape(t)
    if len(shape) != 4:
        raise ValueError(f"{name} must be 4-D [batch, seqlen, heads, head_dim], got shape {list(shape)}")
    if min(shape) < 1:
        raise ValueError(f"{name} is empty (shape {list(shape)}): every dimension must be at least 1")


def _require_layout(name, t, dims=("batch", "sequence", "head"), traced=False):
    """Last dimension contiguous, the other strides multiples of 8 elements (16 bytes), 16-byte aligned data."""
    shape, stride = _shape(t), _strides(t)
    if stride[-1] != 1:
        raise ValueError(f"{name}: the last dimension must be contiguous (stride(-1) == 1), got strides {list(stride)}; "
                         f"pass {name}.contiguous()")
    for dim, what in enumerate(dims):
        if shape[dim] > 1 and (stride[dim] <= 0 or stride[dim] % 8 != 0):
            raise ValueError(f"{name}: the {what} stride (stride({dim}) = {stride[dim]}) must be a positive multiple of "
                             f"8 elements (16 bytes), got strides {list(stride)}; pass {name}.contiguous()")
    if not traced and t.data_ptr() % 16 != 0:
        raise ValueError(f"{name}: data_ptr() {t.data_ptr():#x} is not 16-byte aligned (a view at an odd offset?); "
                         f"pass {name}.contiguous()")


def check_inputs(q, k, v, traced=False):
    """The Problem of q [B, Sq, Hq, D], k [B, Sk, Hkv, D] and v [B, Sk, Hkv, Dv] (Dv: head_dim_v, usually D);
    ValueError naming the first bad argument."""
    tensors = (("q", q), ("k", k), ("v", v))
    _require_devices_and_dtypes(tensors, 3, traced)
    for name, t in tensors:
        _require_4d(name, t)
    (b, sq, hq, d), (bk, sk, hkv, dk) = _shape(q), _shape(k)
    if bk != b:
        raise ValueError(f"k: batch {bk} differs from q's {b}")
    _require_heads_and_head_dim("k", hq, hkv, d, dk)
    dv = _value_head_dim(k, v, d)
    for name, t in tensors:
        _require_layout(name, t, traced=traced)
    return Problem(b, sq, sk, hq, hkv, d, DTYPES[str(q.dtype)], dv)


def attention_out_shapes(q, k, v):
    """(O's shape, LSE's shape) of attention(q, k, v): O [B, Sq, Hq, D], LSE [B, Hq, Sq]."""
    b, sq, hq, _ = _shape(q)
    return (b, sq, hq, _shape(v)[3]), (b, hq, sq)


def varlen_out_shapes(q, k, v):
    """(O's shape, LSE's shape) of attention_varlen: O [total_q, Hq, Dv], LSE [Hq, total_q] (v packed
    [total_k, Hkv, Dv] or a page pool [num_pages, page_size, Hkv, Dv]: its last dimension either way)."""
    total_q, hq, _ = _shape(q)
    return (total_q, hq, _shape(v)[-1]), (hq, total_q)


def decode_out_shapes(q, k_cache, v_cache):
    """(O's shape, LSE's shape) of decode: O [B, q_len, Hq, D], LSE [B, Hq, q_len]."""
    b, q_len, hq, _ = _shape(q)
    return (b, q_len, hq, _shape(v_cache)[3]), (b, hq, q_len)


def merge_out_shapes(outs, lses):
    """(O's shape, LSE's shape) of merge: those of outs[0] and lses[0]."""
    return _shape(outs[0]), _shape(lses[0])


def check_out(out, q, strides=("batch", "sequence", "head"), head_dim_v=None):
    """`out=` must look like q: same device, dtype and shape (the last dimension v's head dim when `head_dim_v`
    is given), and a layout the kernels can write (`strides` names the dimensions before the last: packed
    varlen tensors have no batch)."""
    _require_cuda("out", out)
    if str(out.device) != str(q.device):
        raise ValueError(f"out is on {out.device} but q is on {q.device}")
    if str(out.dtype) != str(q.dtype):
        raise ValueError(f"out: dtype {out.dtype} differs from q's {q.dtype}")
    expected = _shape(q) if head_dim_v is None else _shape(q)[:-1] + (head_dim_v,)
    if _shape(out) != expected:
        raise ValueError(f"out: shape {list(_shape(out))} differs from {list(expected)} (q's, with v's head dim last)")
    _require_layout("out", out, strides)


def bshd_strides(t):
    """(batch, seq, head) element strides for the C ABI; 0 (= contiguous) where a dimension has size 1, whose
    stride is never used and may be anything in torch."""
    shape, stride = _shape(t), _strides(t)
    return tuple(int(stride[dim]) if shape[dim] > 1 else 0 for dim in range(3))


NO_WINDOW = (-1, -1)


def window_pair(window_size, name="window_size"):
    """window_size as (left, right) ints >= -1 (-1: unbounded), flash-attn's convention: query i (bottom-right
    aligned, at key position i + seqlen_k - seqlen_q) sees keys [i' - left, i' + right]."""
    if not isinstance(window_size, (tuple, list)) or len(window_size) != 2 or not all(
            isinstance(w, int) and not isinstance(w, bool) and -1 <= w <= INT32_MAX for w in window_size):
        raise ValueError(f"{name} must be (left, right) with integers in [-1, {INT32_MAX}] (-1: unbounded), got "
                         f"{window_size!r}")
    return int(window_size[0]), int(window_size[1])


def renamed_window(window_size, old_value, old_name, function, pair=lambda v: v):
    """The window_size of a call that used an old keyword (`window` of attention, `window_left` of decode):
    a DeprecationWarning naming the new keyword, and pair(old_value) as the window; ValueError if both were
    given."""
    import warnings
    if not (isinstance(window_size, (tuple, list)) and tuple(window_size) == NO_WINDOW):
        raise ValueError(f"{function}: pass window_size only ({old_name} is its deprecated name), got both "
                         f"window_size={window_size!r} and {old_name}={old_value!r}")
    warnings.warn(f"{function}({old_name}=...) is deprecated: pass window_size=(left, right) (flash-attn's name"
                  f"{'; decode: (window_left, 0)' if old_name == 'window_left' else ''})", DeprecationWarning,
                  stacklevel=3)
    return pair(old_value)


def mask_of(causal, window_size, chunk_size=0):
    """(flashjit_mask, window_left, window_right, chunk_size) for flash-attn-style arguments: window_size = (left,
    right), -1 unbounded; causal forces right = 0 (bottom-right aligned); chunk_size > 0: each query sees the keys of
    its own chunk of chunk_size keys (with causal: up to itself), not together with a window."""
    left, right = window_pair(window_size)
    chunk_size = _int_arg("chunk_size", chunk_size, 0, INT32_MAX)
    if chunk_size > 0:
        if (left, right) != NO_WINDOW:
            raise ValueError(f"chunk_size {chunk_size} and window_size {window_size!r}: attention takes a sliding "
                             "window or chunks, not both")
        return (_abi.MASK_CHUNKED_CAUSAL if causal else _abi.MASK_CHUNKED), -1, -1, chunk_size
    if causal:
        return ((_abi.MASK_CAUSAL, -1, -1, 0) if left == -1 else (_abi.MASK_SLIDING_WINDOW, left, 0, 0))
    if left == -1 and right == -1:
        return _abi.MASK_NONE, -1, -1, 0
    return _abi.MASK_SLIDING_WINDOW, left, right, 0


def decode_window_left(window_size):
    """decode()'s window_left (-1: none) of window_size = (left, right): a token sees no key after itself, so right
    must be -1 or 0."""
    left, right = window_pair(window_size)
    if right not in (-1, 0):
        raise ValueError(f"window_size {window_size!r}: decode is causal (a new token sees no key after itself), so "
                         f"the right size must be 0 or -1, got {right}")
    return left


def scale_of(softmax_scale):
    """The C ABI's softmax_scale: 0 selects the default 1/sqrt(head_dim)."""
    if softmax_scale is None:
        return 0.0
    try:
        scale = float(softmax_scale)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"softmax_scale must be a positive number or None, got {softmax_scale!r}") from None
    if not (scale > 0 and math.isfinite(scale)):
        raise ValueError(f"softmax_scale must be a positive finite number or None, got {softmax_scale!r}")
    if scale > FLOAT32_MAX:  # the C ABI's float would be infinite
        raise ValueError(f"softmax_scale must be at most {FLOAT32_MAX:.6g} (a float32), got {softmax_scale!r}")
    return scale


def softcap_of(softcap):
    """The C ABI's softcap: 0.0 (off) or a positive finite float32 (scores become softcap * tanh(scores / softcap))."""
    if isinstance(softcap, bool) or not isinstance(softcap, numbers.Real):
        raise ValueError(f"softcap must be a number (0.0: off), got {softcap!r}")
    try:
        cap = float(softcap)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"softcap must be a number >= 0 (0.0: off), got {softcap!r}") from None
    if not cap >= 0 or cap == math.inf:  # comparisons only: a traced (symbolic) float takes them as guards
        raise ValueError(f"softcap must be >= 0 and finite (0.0: off), got {softcap!r}")
    if cap > FLOAT32_MAX:
        raise ValueError(f"softcap must be at most {FLOAT32_MAX:.6g} (a float32), got {softcap!r}")
    return cap


def shape_variants(softcap, alibi, sinks):
    """The variants of a problem given by shapes (select, precompile): (softcap for the C ABI, alibi, sinks).
    softcap: a number >= 0 (0: off) or a bool (True: on; the cap's value is a run-time argument, which no kernel
    choice depends on); alibi, sinks: bools."""
    for name, value in (("alibi", alibi), ("sinks", sinks)):
        if not isinstance(value, bool):
            raise ValueError(f"{name} must be True or False (whether the kernel has {name}), got {value!r}")
    if isinstance(softcap, bool):
        return (1.0 if softcap else 0.0), alibi, sinks
    return softcap_of(softcap), alibi, sinks


def _require_float32_vector(name, t, q, traced):
    """A float32 CUDA tensor on q's device whose last dimension is contiguous, 4-byte aligned."""
    _require_cuda(name, t, traced)
    _require_same_device(name, t, q)
    if str(t.dtype) != FLOAT32:
        raise ValueError(f"{name}: dtype {t.dtype} must be torch.float32")
    shape, stride = _shape(t), _strides(t)
    if shape and shape[-1] > 1 and stride[-1] != 1:
        raise ValueError(f"{name}: the last dimension must be contiguous (stride(-1) == 1), got strides {list(stride)}; "
                         f"pass {name}.contiguous()")
    if not traced and t.data_ptr() % 4 != 0:
        raise ValueError(f"{name}: data_ptr() {t.data_ptr():#x} is not 4-byte aligned")


def check_variants(q, batch, heads_q, softcap, alibi_slopes, sinks, traced=False):
    """(softcap, alibi_slopes_batch_stride) for the C ABI after the variants' checks: softcap a number >= 0 (0: off);
    alibi_slopes None or float32 [heads_q] (one slope per head, every sequence) or [batch, heads_q] (its batch stride
    in elements; 0 when batch is 1 or the dimension is broadcast); sinks None or float32 [heads_q]; both on q's
    device, last dimension contiguous. ValueError naming the argument."""
    cap = softcap_of(softcap)
    stride = 0
    if alibi_slopes is not None:
        _require_float32_vector("alibi_slopes", alibi_slopes, q, traced)
        shape = _shape(alibi_slopes)
        if shape == (heads_q,):
            pass
        elif shape == (batch, heads_q):
            stride = _strides(alibi_slopes)[0] if batch > 1 else 0
            if stride < 0:
                raise ValueError(f"alibi_slopes: the batch stride must be >= 0, got strides "
                                 f"{list(_strides(alibi_slopes))}")
        else:
            raise ValueError(f"alibi_slopes must have shape [{heads_q}] (heads_q) or [{batch}, {heads_q}] (batch, "
                             f"heads_q), got {list(shape)}")
    if sinks is not None:
        _require_float32_vector("sinks", sinks, q, traced)
        if _shape(sinks) != (heads_q,):
            raise ValueError(f"sinks must have shape [{heads_q}] (one logit per query head), got {list(_shape(sinks))}")
    return cap, stride


# A bias tensor's torch dtype -> (flashjit_bias_type, bytes of one entry).
BIAS_DTYPES = {"torch.float32": (_abi.BIAS_FP32, 4), "torch.bfloat16": (_abi.BIAS_BF16, 2),
               "torch.float16": (_abi.BIAS_FP16, 2), "torch.bool": (_abi.BIAS_BOOL, 1)}
BIAS_DIMS = ("batch", "heads_q", "seqlen_q", "seqlen_k")
DECODE_BIAS_DIMS = ("batch", "heads_q", "q_len", "max_seqlen_k")


def check_bias(q, bias, dims, dim_names=BIAS_DIMS, traced=False):
    """AttentionArgs / DecodeArgs fields of an additive bias (none without one; its address is set per call,
    bias_address): a CUDA tensor on q's device of torch.float32, bfloat16, float16 or bool (False hides the pair)
    that broadcasts to dims, [batch, heads_q, seqlen_q, seqlen_k] (decode: [batch, heads_q, q_len, max_seqlen_k]),
    as torch SDPA's attn_mask does: missing leading dimensions and dimensions of size 1 broadcast (stride 0, as
    expand() makes them). Strides must be >= 0. ValueError naming bias. traced: a fake or meta tensor (the custom
    ops' fake implementations), whose address is not read."""
    if bias is None:
        return {}
    if not hasattr(bias, "data_ptr"):
        raise ValueError(f"bias must be a torch.Tensor or None, got {type(bias).__name__}")
    _require_cuda("bias", bias, traced)
    _require_same_device("bias", bias, q)
    kind = BIAS_DTYPES.get(str(bias.dtype))
    if kind is None:
        raise ValueError(f"bias: dtype {bias.dtype} must be torch.float32, torch.bfloat16, torch.float16 or "
                         f"torch.bool")
    shape, stride = _shape(bias), _strides(bias)
    if len(shape) > 4:
        raise ValueError(f"bias must have at most 4 dimensions ([{', '.join(dim_names)}]), got {list(shape)}")
    shape, stride = (1,) * (4 - len(shape)) + shape, (0,) * (4 - len(stride)) + stride
    strides = []
    for name, n, s, want in zip(dim_names, shape, stride, dims):
        if n != want and n != 1:
            raise ValueError(f"bias: shape {list(_shape(bias))} does not broadcast to [{', '.join(dim_names)}] = "
                             f"{list(dims)}: its {name} dimension is {n}")
        if n > 1 and s < 0:
            raise ValueError(f"bias: strides must be >= 0, got {list(_strides(bias))}")
        strides.append(s if n > 1 else 0)
    if not traced:
        bias_address(bias)
    return {"bias_type": kind[0], "bias_strides": _abi.BiasStrides(*strides)}


REL_BIAS_LIMIT = 1 << 30  # the largest extent and |offset| of a relative-logits table


def check_rel_bias(q, rel_bias, rel_bias_offset, heads_q, traced=False):
    """AttentionArgs fields of a relative-logits table (none without one; its address is set per call,
    rel_bias_address): a torch.float32 CUDA tensor [heads_q, extent] on q's device, extent >= 1, its last dimension
    contiguous ([1, extent], or an expand()ed view, serves every head: head stride 0); rel_bias_offset an int in
    [-2^30, 2^30]. ValueError naming the argument. traced: a fake or meta tensor (the custom ops' fake
    implementations), whose address is not read."""
    if rel_bias is None:
        if not (type(rel_bias_offset) is int and rel_bias_offset == 0):
            raise ValueError(f"rel_bias_offset ({rel_bias_offset!r}) is set but rel_bias is None")
        return {}
    if not hasattr(rel_bias, "data_ptr"):
        raise ValueError(f"rel_bias must be a torch.Tensor or None, got {type(rel_bias).__name__}")
    _require_cuda("rel_bias", rel_bias, traced)
    _require_same_device("rel_bias", rel_bias, q)
    if str(rel_bias.dtype) != "torch.float32":
        raise ValueError(f"rel_bias: dtype {rel_bias.dtype} must be torch.float32")
    shape, stride = _shape(rel_bias), _strides(rel_bias)
    if len(shape) != 2 or shape[0] not in (1, heads_q) or not 1 <= shape[1] <= REL_BIAS_LIMIT:
        raise ValueError(f"rel_bias must have shape [{heads_q}, extent] (or [1, extent]: one row for every head) with "
                         f"extent in [1, 2^30], got {list(shape)}")
    if shape[1] > 1 and stride[1] != 1:
        raise ValueError(f"rel_bias: the last dimension must be contiguous (stride(-1) == 1), got strides "
                         f"{list(stride)}; pass rel_bias.contiguous()")
    if shape[0] > 1 and stride[0] < 0:
        raise ValueError(f"rel_bias: strides must be >= 0, got {list(stride)}")
    offset = _int_arg("rel_bias_offset", rel_bias_offset, -REL_BIAS_LIMIT, REL_BIAS_LIMIT)
    if not traced:
        rel_bias_address(rel_bias)
    return {"rel_bias_head_stride": stride[0] if shape[0] > 1 else 0, "rel_bias_extent": shape[1],
            "rel_bias_offset": offset}


def rel_bias_address(rel_bias):
    """rel_bias's data pointer (0 for None), 4-byte aligned (ValueError otherwise)."""
    if rel_bias is None:
        return 0
    if rel_bias.data_ptr() % 4 != 0:
        raise ValueError(f"rel_bias: data_ptr() {rel_bias.data_ptr():#x} is not 4-byte aligned")
    return rel_bias.data_ptr()


def bias_type_code(bias):
    """flashjit_bias_type of a bias given by its dtype (select, precompile): a torch dtype or a name, "fp32",
    "bf16", "fp16" or "bool" (None: no bias)."""
    if bias is None:
        return _abi.BIAS_NONE
    names = {"fp32": _abi.BIAS_FP32, "float32": _abi.BIAS_FP32, "bf16": _abi.BIAS_BF16, "bfloat16": _abi.BIAS_BF16,
             "fp16": _abi.BIAS_FP16, "float16": _abi.BIAS_FP16, "bool": _abi.BIAS_BOOL}
    code = names.get(str(bias).replace("torch.", ""))
    if code is None:
        raise ValueError(f"bias must be None or a bias dtype (torch.float32, bfloat16, float16, bool, or 'fp32', "
                         f"'bf16', 'fp16', 'bool'), got {bias!r}")
    return code


def bias_address(bias):
    """bias's data pointer (0 for None), aligned to one entry (ValueError otherwise)."""
    if bias is None:
        return 0
    address = bias.data_ptr()
    size = BIAS_DTYPES[str(bias.dtype)][1]
    if address % size != 0:
        raise ValueError(f"bias: data_ptr() {address:#x} is not aligned to its {size}-byte entries")
    return address


@dataclass(frozen=True)
class Snippets:
    """User snippets and what they read, checked (snippets()): the C ABI's score_mod / mask_mod text (UTF-8, kept
    alive by _snippet_bytes), aux tensors (their addresses go in per call), scalars, integers, and the alignment."""
    score_mod: Optional[bytes]
    mask_mod: Optional[bytes]
    aux_tensors: tuple
    aux_scalars: tuple
    aux_integers: tuple
    alignment: int

    def fields(self):
        """AttentionArgs / DecodeArgs fields (the aux pointers excepted: set_aux_pointers)."""
        return {"score_mod": self.score_mod, "mask_mod": self.mask_mod,
                "aux_scalars": (ctypes.c_float * _abi.AUX_SCALARS)(*self.aux_scalars),
                "aux_integers": (ctypes.c_int64 * _abi.AUX_INTEGERS)(*self.aux_integers)}

    def set_aux_pointers(self, args):
        for i, t in enumerate(self.aux_tensors):
            args.aux_pointers[i] = t.data_ptr()

    def key(self):
        """What a call's memo key holds of its snippets, which this call's checks passed (snippets()): the texts (the
        bytes of _SNIPPET_BYTES, one object per text, so hashed once), the aux tensors' metadata (their addresses go in
        per call), the scalars, integers and alignment as the structure holds them."""
        return (self.score_mod, self.mask_mod, tuple(_memo.tensor_key(t) for t in self.aux_tensors), self.aux_scalars,
                self.aux_integers, self.alignment)


# Snippet text -> its NUL-terminated UTF-8 bytes, which AttentionArgs templates point at for as long as the process
# lives (a few distinct snippets per program; each at most 64 KiB, the library's limit).
_SNIPPET_BYTES = {}
ALIGNMENTS = {"bottom_right": _abi.ALIGN_BOTTOM_RIGHT, "top_left": _abi.ALIGN_TOP_LEFT}


def _snippet_bytes(name, text):
    if text is None:
        return None
    if not isinstance(text, str):
        raise ValueError(f"{name} must be CUDA C++ source text (a str) or None, got {type(text).__name__}")
    if not text:
        raise ValueError(f"{name} is empty (None for none)")
    if "\0" in text:
        raise ValueError(f"{name} holds a NUL character")
    data = _SNIPPET_BYTES.get(text)
    if data is None:
        data = _SNIPPET_BYTES[text] = text.encode("utf-8")
    return data


def snippets(q, score_mod=None, mask_mod=None, aux_tensors=(), aux_scalars=(), aux_integers=(),
             alignment="bottom_right", traced=False, with_alignment=True, first_name="q"):
    """The checked Snippets of a call, or None when it has none (every argument at its default): score_mod and
    mask_mod CUDA C++ text; aux_tensors up to 8 CUDA tensors on q's device (any dtype; the snippets get their
    data pointers), aux_scalars up to 8 numbers (float32), aux_integers up to 8 ints (int64); alignment
    "bottom_right" or "top_left" (with_alignment False: decode, which has none). ValueError naming the argument."""
    if with_alignment:
        if alignment not in ALIGNMENTS:
            raise ValueError(f"alignment must be 'bottom_right' or 'top_left', got {alignment!r}")
    elif alignment != "bottom_right":
        raise ValueError("decode has no alignment: its new tokens sit at the end of each sequence")
    lists = {}
    for name, values, limit in (("aux_tensors", aux_tensors, _abi.AUX_POINTERS),
                                ("aux_scalars", aux_scalars, _abi.AUX_SCALARS),
                                ("aux_integers", aux_integers, _abi.AUX_INTEGERS)):
        if values is None:
            values = ()
        try:
            values = tuple(values)
        except TypeError:
            raise ValueError(f"{name} must be a sequence (at most {limit} entries), got {type(values).__name__}") \
                from None
        if len(values) > limit:
            raise ValueError(f"{name} takes at most {limit} entries, got {len(values)}")
        lists[name] = values
    for i, t in enumerate(lists["aux_tensors"]):
        name = f"aux_tensors[{i}]"
        if not hasattr(t, "data_ptr"):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        _require_cuda(name, t, traced)
        _require_same_device(name, t, q, first_name)
    for i, x in enumerate(lists["aux_scalars"]):
        if isinstance(x, bool) or not isinstance(x, numbers.Real) or not math.isfinite(float(x)):
            raise ValueError(f"aux_scalars[{i}] must be a finite number, got {x!r}")
    for i, x in enumerate(lists["aux_integers"]):
        if isinstance(x, bool) or not isinstance(x, numbers.Integral) or not -2**63 <= int(x) < 2**63:
            raise ValueError(f"aux_integers[{i}] must be an int in int64's range, got {x!r}")
    out = Snippets(_snippet_bytes("score_mod", score_mod), _snippet_bytes("mask_mod", mask_mod),
                   lists["aux_tensors"], tuple(float(x) for x in lists["aux_scalars"]),
                   tuple(int(x) for x in lists["aux_integers"]), ALIGNMENTS.get(alignment, _abi.ALIGN_BOTTOM_RIGHT))
    if (out.score_mod is None and out.mask_mod is None and not out.aux_tensors and not out.aux_scalars
            and not out.aux_integers and out.alignment == _abi.ALIGN_BOTTOM_RIGHT):
        return None
    return out


def snippet_fields(snip):
    """AttentionArgs fields of a call's Snippets (none without; the aux pointers are set per call)."""
    return {} if snip is None else {**snip.fields(), "alignment": snip.alignment}


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


# ---------------------------------------------------------------------------------------------------------------
# decode() and merge()

INT32 = "torch.int32"
INT32_MAX = 2**31 - 1
MAX_DECODE_SEQLEN = 1 << 30  # keys per sequence (flashjit/decode.hpp kMaxDecodeSeqlen)
FLOAT32 = "torch.float32"


@dataclass(frozen=True)
class DecodeProblem:
    batch: int
    q_len: int
    heads_q: int
    heads_kv: int
    head_dim: int
    dtype: int  # flashjit_dtype
    layout: int  # flashjit_kv_layout
    max_seqlen_k: int
    cache_seqlen: int  # contiguous: the cache's max_seq; paged: 0
    num_pages: int  # paged only
    page_size: int
    max_pages_per_seq: int


def _require_same_device(name, t, first, first_name="q"):
    if str(t.device) != str(first.device):
        raise ValueError(f"{name} is on {t.device} but {first_name} is on {first.device}: all tensors must be on one "
                         f"CUDA device")


def _require_devices_and_dtypes(tensors, floats, traced=False):
    """tensors: (name, tensor) pairs, the one the others are measured by first (q; append's new rows k), all CUDA
    tensors on its device; the first `floats` in its dtype (bf16 or fp16), the rest int32. Messages name the
    tensors as given."""
    first_name, first = tensors[0]
    for name, t in tensors:
        _require_cuda(name, t, traced)
    for name, t in tensors[1:]:
        _require_same_device(name, t, first, first_name)
    if str(first.dtype) not in DTYPES:
        raise ValueError(f"{first_name}: dtype {first.dtype} is not supported (torch.bfloat16 or torch.float16)")
    for name, t in tensors[1:floats]:
        if str(t.dtype) != str(first.dtype):
            raise ValueError(f"{name}: dtype {t.dtype} differs from {first_name}'s {first.dtype}")
    for name, t in tensors[floats:]:
        if str(t.dtype) != INT32:
            raise ValueError(f"{name}: dtype {t.dtype} must be torch.int32")


def _require_dense(name, t, what, traced=False):
    """Contiguous (dimensions of size 1 may have any stride), elements aligned."""
    shape, stride = _shape(t), _strides(t)
    expected = 1
    for n, s in zip(reversed(shape), reversed(stride)):
        if n > 1 and s != expected:
            raise ValueError(f"{name} must be contiguous ({what}), got shape {list(shape)} with strides {list(stride)}; "
                             f"pass {name}.contiguous()")
        expected *= n
    if not traced and t.data_ptr() % 4 != 0:
        raise ValueError(f"{name}: data_ptr() {t.data_ptr():#x} is not 4-byte aligned")


def _int_arg(name, value, low, high=None):
    """An integer (int or anything with __index__, not bool) in [low, high]."""
    if isinstance(value, bool):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    try:
        value = operator.index(value)
    except TypeError:
        raise ValueError(f"{name} must be an integer, got {value!r}") from None
    if value < low or (high is not None and value > high):
        bound = f"in [{low}, {high}]" if high is not None else f">= {low}"
        raise ValueError(f"{name} must be {bound}, got {value}")
    return value


def check_decode_inputs(q, k_cache, v_cache, seqlens_k, page_table=None, max_seqlen_k=None, traced=False,
                        page_indptr=None, last_page_len=None):
    """The DecodeProblem of q [B, q_len, Hq, D] over a contiguous cache [B, max_seq, Hkv, D] (page_table None) or
    a paged one [num_pages, page_size, Hkv, D] with page_table [B, max_pages] int32, or with FlashInfer's CSR table
    (page_indptr [B + 1], page_table [num_indices], and last_page_len [B] instead of seqlens_k or not); seqlens_k
    [B] int32 on the device. Kernel limits (q_len, head_dim, page_size, group * q_len) are the library's checks."""
    paged = page_table is not None
    csr = check_csr_pair("seqlens_k", page_table, page_indptr, seqlens_k, last_page_len)
    if seqlens_k is None and not csr:
        raise ValueError("seqlens_k is None: pass each sequence's key count (int32 [batch]), or with a CSR page table "
                         "(page_indptr) last_page_len")
    tensors = [("q", q), ("k_cache", k_cache), ("v_cache", v_cache)]
    if seqlens_k is not None:
        tensors.append(("seqlens_k", seqlens_k))
    if paged:
        tensors.append(("page_table", page_table))
    _require_devices_and_dtypes(tensors + list(csr_tensors(page_indptr, last_page_len)), 3, traced)
    _require_4d("q", q)
    cache_dims = "[num_pages, page_size, heads_kv, head_dim]" if paged else "[batch, max_seqlen, heads_kv, head_dim]"
    for name, t in tensors[1:3]:
        shape = _shape(t)
        if len(shape) != 4:
            raise ValueError(f"{name} must be 4-D {cache_dims}, got shape {list(shape)}")
        if min(shape) < 1:
            raise ValueError(f"{name} is empty (shape {list(shape)}): every dimension must be at least 1")
    if _shape(v_cache) != _shape(k_cache):
        raise ValueError(f"v_cache: shape {list(_shape(v_cache))} differs from k_cache's {list(_shape(k_cache))}")
    (b, q_len, hq, d), (n0, n1, hkv, dk) = _shape(q), _shape(k_cache)
    if not paged and n0 != b:
        raise ValueError(f"k_cache: batch {n0} differs from q's {b} (a paged cache needs page_table)")
    _require_heads_and_head_dim("k_cache", hq, hkv, d, dk)
    if seqlens_k is not None:
        if _shape(seqlens_k) != (b,):
            raise ValueError(f"seqlens_k must have shape [{b}] (one length per sequence of q), got "
                             f"{list(_shape(seqlens_k))}")
        _require_dense("seqlens_k", seqlens_k, "int32 [batch]", traced)
    max_pages = 0
    if csr:
        max_pages = check_csr_table(page_table, page_indptr, last_page_len, b, traced)
    elif paged:
        shape = _shape(page_table)
        if len(shape) != 2 or shape[0] != b or shape[1] < 1:
            raise ValueError(f"page_table must have shape [{b}, max_pages_per_seq] (one row per sequence of q), got "
                             f"{list(shape)}")
        _require_dense("page_table", page_table, "int32 [batch, max_pages_per_seq], rows back to back", traced)
        max_pages = shape[1]
    _require_layout("q", q, traced=traced)
    cache_strides = ("page", "token", "head") if paged else ("batch", "sequence", "head")
    _require_layout("k_cache", k_cache, cache_strides, traced)
    _require_layout("v_cache", v_cache, cache_strides, traced)
    capacity = max_pages * n1 if paged else n1
    if max_seqlen_k is None:
        max_seqlen_k = capacity
        if max_seqlen_k > MAX_DECODE_SEQLEN:
            raise ValueError(f"the cache holds {capacity} keys per sequence, beyond 2^30: pass max_seqlen_k")
    else:
        what = ("num_indices (page_table.shape[0]) * page_size" if csr else
                "max_pages_per_seq * page_size" if paged else "the cache's sequence capacity k_cache.shape[1]")
        max_seqlen_k = _int_arg("max_seqlen_k", max_seqlen_k, 1, MAX_DECODE_SEQLEN)
        if max_seqlen_k > capacity:
            raise ValueError(f"max_seqlen_k {max_seqlen_k} exceeds {what} = {capacity}")
    if paged:
        return DecodeProblem(b, q_len, hq, hkv, d, DTYPES[str(q.dtype)], _abi.KV_PAGED, max_seqlen_k, 0, n0, n1,
                             max_pages)
    return DecodeProblem(b, q_len, hq, hkv, d, DTYPES[str(q.dtype)], _abi.KV_CONTIGUOUS, max_seqlen_k, n1, 0, 0, 0)


SPLIT_MERGES = {"auto": _abi.SPLIT_MERGE_AUTO, "combine": _abi.SPLIT_MERGE_COMBINE_KERNEL,
                "cluster": _abi.SPLIT_MERGE_CLUSTER}


def check_decode_options(window_left, num_splits, split_merge="auto", chunk_size=0):
    """(window_left, num_splits, split_merge, chunk_size) as ints: window_left >= -1 (-1: no window), num_splits
    >= 0 (0: planned), split_merge one of SPLIT_MERGES' names, chunk_size >= 0 (0: no chunks; not together with
    window_left >= 0)."""
    if not isinstance(split_merge, str) or split_merge not in SPLIT_MERGES:
        raise ValueError(f"split_merge must be one of {', '.join(SPLIT_MERGES)}, got {split_merge!r}")
    window_left = _int_arg("window_left", window_left, -1, INT32_MAX)
    chunk_size = _int_arg("chunk_size", chunk_size, 0, INT32_MAX)
    if chunk_size > 0 and window_left >= 0:
        raise ValueError(f"chunk_size {chunk_size} and window_size ({window_left}, 0): decode takes a sliding window "
                         "or chunks, not both")
    return window_left, _int_arg("num_splits", num_splits, 0, INT32_MAX), SPLIT_MERGES[split_merge], chunk_size


@dataclass(frozen=True)
class MergeProblem:
    batch: int
    seqlen: int
    heads: int
    head_dim: int
    dtype: int
    num_states: int


def check_merge_inputs(outs, lses, traced=False):
    """The MergeProblem of states outs[i] [B, S, H, D] (one dtype, one layout) with lses[i] [B, H, S] float32."""
    if not isinstance(outs, (list, tuple)) or not isinstance(lses, (list, tuple)):
        raise ValueError("outs and lses must be lists (or tuples) of tensors, one O and one LSE per state")
    if not 1 <= len(outs) <= _abi.MAX_MERGE_STATES:
        raise ValueError(f"outs must hold 1 to {_abi.MAX_MERGE_STATES} states, got {len(outs)}")
    if len(lses) != len(outs):
        raise ValueError(f"lses holds {len(lses)} tensors but outs holds {len(outs)}: one LSE per state")
    first = outs[0]
    for i, (o, lse) in enumerate(zip(outs, lses)):
        _require_cuda(f"outs[{i}]", o, traced)
        _require_cuda(f"lses[{i}]", lse, traced)
    for i, (o, lse) in enumerate(zip(outs, lses)):
        for name, t in ((f"outs[{i}]", o), (f"lses[{i}]", lse)):
            if str(t.device) != str(first.device):
                raise ValueError(f"{name} is on {t.device} but outs[0] is on {first.device}: all tensors must be on one "
                                 f"CUDA device")
    if str(first.dtype) not in DTYPES:
        raise ValueError(f"outs[0]: dtype {first.dtype} is not supported (torch.bfloat16 or torch.float16)")
    _require_4d("outs[0]", first)
    b, s, h, d = _shape(first)
    strides = _bshd_strides(first)
    for i, (o, lse) in enumerate(zip(outs, lses)):
        if str(o.dtype) != str(first.dtype):
            raise ValueError(f"outs[{i}]: dtype {o.dtype} differs from outs[0]'s {first.dtype}")
        if _shape(o) != (b, s, h, d):
            raise ValueError(f"outs[{i}]: shape {list(_shape(o))} differs from outs[0]'s {[b, s, h, d]}")
        _require_last_dim_contiguous(f"outs[{i}]", o)
        if _bshd_strides(o) != strides:
            raise ValueError(f"outs[{i}]: strides {list(o.stride())} differ from outs[0]'s {list(first.stride())}: every "
                             f"state must have one layout (pass .contiguous())")
        if str(lse.dtype) != FLOAT32:
            raise ValueError(f"lses[{i}]: dtype {lse.dtype} must be torch.float32")
        if _shape(lse) != (b, h, s):
            raise ValueError(f"lses[{i}] must have shape [batch, heads, seqlen] = {[b, h, s]}, got {list(_shape(lse))}")
        _require_dense(f"lses[{i}]", lse, "float32 [batch, heads, seqlen]", traced)
    return MergeProblem(b, s, h, d, DTYPES[str(first.dtype)], len(outs))


def _bshd_strides(t):
    """bshd_strides without int(): symbolic strides of fake tensors stay symbolic."""
    shape, stride = _shape(t), _strides(t)
    return tuple(stride[dim] if shape[dim] > 1 else 0 for dim in range(3))


def _require_last_dim_contiguous(name, t):
    shape, stride = _shape(t), _strides(t)
    if stride[-1] != 1:
        raise ValueError(f"{name}: the last dimension must be contiguous (stride(-1) == 1), got strides {list(stride)}; "
                         f"pass {name}.contiguous()")
    for dim in range(3):
        if shape[dim] > 1 and stride[dim] <= 0:
            raise ValueError(f"{name}: stride({dim}) = {stride[dim]} must be positive, got strides {list(stride)}")


def check_merge_out(out, first, outs):
    """`out=` of merge: like outs[0] (device, dtype, shape), last dimension contiguous, no input's memory."""
    _require_cuda("out", out)
    if str(out.device) != str(first.device):
        raise ValueError(f"out is on {out.device} but outs[0] is on {first.device}")
    if str(out.dtype) != str(first.dtype):
        raise ValueError(f"out: dtype {out.dtype} differs from outs[0]'s {first.dtype}")
    if _shape(out) != _shape(first):
        raise ValueError(f"out: shape {list(_shape(out))} differs from outs[0]'s {list(_shape(first))}")
    _require_last_dim_contiguous("out", out)
    for i, o in enumerate(outs):
        if o.data_ptr() == out.data_ptr():
            raise ValueError(f"out aliases outs[{i}]: the merge reads every state while writing out")


# ---------------------------------------------------------------------------------------------------------------
# attention_varlen()

@dataclass(frozen=True)
class VarlenProblem:
    batch: int
    total_q: int
    total_k: int
    max_seqlen_q: int
    max_seqlen_k: int
    heads_q: int
    heads_kv: int
    head_dim: int
    dtype: int  # flashjit_dtype
    head_dim_v: int = 0  # v's and o's last dim when it differs from head_dim (0: the same)


def _require_3d(name, t):
    shape = _shape(t)
    if len(shape) != 3:
        raise ValueError(f"{name} must be 3-D [total_tokens, heads, head_dim] (sequences packed back to back), got "
                         f"shape {list(shape)}")
    if min(shape) < 1:
        raise ValueError(f"{name} is empty (shape {list(shape)}): every dimension must be at least 1")


def _check_cu_seqlens_q(cu_seqlens_q, traced):
    """The batch of a ragged query's offsets (int32 [batch + 1], dense, at most 65535 sequences)."""
    shape_q = _shape(cu_seqlens_q)
    if len(shape_q) != 1 or shape_q[0] < 2:
        raise ValueError(f"cu_seqlens_q must have shape [batch + 1] with batch >= 1 (offsets of each sequence in q, "
                         f"starting at 0), got {list(shape_q)}")
    batch = shape_q[0] - 1
    if batch > 65535:
        raise ValueError(f"cu_seqlens_q: at most 65535 sequences (grid limit), got {batch}")
    _require_dense("cu_seqlens_q", cu_seqlens_q, "int32 [batch + 1]", traced)
    return batch


def check_varlen_inputs(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, traced=False):
    """The VarlenProblem of packed q [total_q, Hq, D], k and v [total_k, Hkv, D] with cu_seqlens_q / cu_seqlens_k
    int32 [batch + 1] on the device (never read on the host); ValueError naming the first bad argument."""
    tensors = (("q", q), ("k", k), ("v", v), ("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k))
    _require_devices_and_dtypes(tensors, 3, traced)
    for name, t in tensors[:3]:
        _require_3d(name, t)
    (total_q, hq, d), (total_k, hkv, dk) = _shape(q), _shape(k)
    _require_heads_and_head_dim("k", hq, hkv, d, dk)
    dv = _value_head_dim(k, v, d)
    if total_q > INT32_MAX or total_k > INT32_MAX:
        raise ValueError(f"q and k may hold at most {INT32_MAX} tokens (int32 offsets), got {total_q} and {total_k}")
    batch = _check_cu_seqlens_q(cu_seqlens_q, traced)
    if _shape(cu_seqlens_k) != _shape(cu_seqlens_q):
        raise ValueError(f"cu_seqlens_k: shape {list(_shape(cu_seqlens_k))} differs from cu_seqlens_q's "
                         f"{list(_shape(cu_seqlens_q))} (one offset per sequence boundary of each)")
    _require_dense("cu_seqlens_k", cu_seqlens_k, "int32 [batch + 1]", traced)
    max_seqlen_q = _int_arg("max_seqlen_q", max_seqlen_q, 1, INT32_MAX)
    max_seqlen_k = _int_arg("max_seqlen_k", max_seqlen_k, 1, INT32_MAX)
    for name, t in tensors[:3]:
        _require_layout(name, t, ("sequence", "head"), traced)
    return VarlenProblem(batch, total_q, total_k, max_seqlen_q, max_seqlen_k, hq, hkv, d, DTYPES[str(q.dtype)], dv)


def packed_strides(t):
    """(batch, seq, head) element strides of a packed [total, H, D] tensor for the C ABI: batch 0 (there is
    none), and 0 (= contiguous) where a dimension has size 1."""
    shape, stride = _shape(t), _strides(t)
    return (0,) + tuple(int(stride[dim]) if shape[dim] > 1 else 0 for dim in range(2))


# ---------------------------------------------------------------------------------------------------------------
# Paged keys and values (page_table=, seqused_k= of attention() and attention_varlen())

PAGE_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256)  # tokens per page (a power of two, the kernels' limit)


@dataclass(frozen=True)
class Pages:
    """The page pools' shape for the C ABI (AttentionArgs.page_size, num_pages, max_pages_per_seq)."""
    page_size: int
    num_pages: int
    max_pages_per_seq: int

    @property
    def capacity(self):
        """Keys one sequence's row of the table holds."""
        return self.max_pages_per_seq * self.page_size

    def fields(self):
        return {"page_size": self.page_size, "num_pages": self.num_pages, "max_pages_per_seq": self.max_pages_per_seq}


def check_csr_pair(counts_name, page_table, page_indptr, counts, last_page_len):
    """Whether a paged call's table is FlashInfer's CSR one (page_indptr given), after the rules of its arguments:
    page_indptr goes with page_table (the flat page indices), last_page_len with page_indptr, and a CSR table takes
    exactly one of `counts_name` (counts, each sequence's key count) and last_page_len."""
    if page_indptr is None:
        if last_page_len is not None:
            raise ValueError(f"last_page_len is for a CSR page table: pass page_indptr too (int32 [batch + 1]), or "
                             f"{counts_name} instead")
        return False
    if page_table is None:
        raise ValueError("page_indptr needs page_table: the CSR table's flat page indices, torch.int32 [num_indices] "
                         "on q's device")
    if (counts is None) == (last_page_len is None):
        raise ValueError(f"a CSR page table (page_indptr) takes exactly one of {counts_name} (each sequence's key "
                         f"count) and last_page_len (the tokens of its last page), got "
                         f"{'both' if counts is not None else 'neither'}")
    return True


def check_csr_table(page_table, page_indptr, last_page_len, batch, traced):
    """max_pages_per_seq for the C ABI of FlashInfer's CSR table: page_table int32 [num_indices] (the flat page
    indices, contiguous), page_indptr int32 [batch + 1] (sequence b's pages are page_table[page_indptr[b] :
    page_indptr[b + 1]]) and last_page_len int32 [batch] or None. Every sequence has at most num_indices pages: that
    is the bound (the offsets and counts are read on the device only). Devices and dtypes are checked before."""
    shape = _shape(page_table)
    if len(shape) != 1 or shape[0] < 1:
        raise ValueError(f"page_table must have shape [num_indices] with page_indptr (FlashInfer's CSR table: the "
                         f"flat page indices of every sequence), got {list(shape)}")
    _require_dense("page_table", page_table, "int32 [num_indices]", traced)
    if shape[0] > INT32_MAX:
        raise ValueError(f"page_table holds {shape[0]} page indices, more than int32 offsets (page_indptr) address")
    if _shape(page_indptr) != (batch + 1,):
        raise ValueError(f"page_indptr must have shape [{batch + 1}] (batch + 1 offsets into page_table), got "
                         f"{list(_shape(page_indptr))}")
    _require_dense("page_indptr", page_indptr, "int32 [batch + 1]", traced)
    if last_page_len is not None:
        if _shape(last_page_len) != (batch,):
            raise ValueError(f"last_page_len must have shape [{batch}] (the tokens of each sequence's last page), got "
                             f"{list(_shape(last_page_len))}")
        _require_dense("last_page_len", last_page_len, "int32 [batch]", traced)
    return shape[0]


def csr_tensors(page_indptr, last_page_len):
    """(name, tensor) pairs of a call's CSR arguments that are given, for the device and dtype checks."""
    return tuple((name, t) for name, t in (("page_indptr", page_indptr), ("last_page_len", last_page_len))
                 if t is not None)


def check_paged_pair(page_table, seqused_k, cu_seqlens_k=None, varlen=False, page_indptr=None, last_page_len=None):
    """Whether a call is paged (page_table given), after the rules of the pair: page_table needs seqused_k (or a
    CSR table's last_page_len: check_csr_pair), seqused_k without it counts the keys each sequence uses of
    contiguous k and v (check_used_keys), and a paged attention_varlen takes no cu_seqlens_k (an unpaged one needs
    it)."""
    csr = check_csr_pair("seqused_k", page_table, page_indptr, seqused_k, last_page_len)
    if page_table is None:
        if varlen and cu_seqlens_k is None:
            raise ValueError("cu_seqlens_k is None: pass the keys' offsets (int32 [batch + 1]), or page_table and "
                             "seqused_k for keys in pages")
        return False
    if seqused_k is None and not csr:
        raise ValueError("page_table needs seqused_k: each sequence's key count, torch.int32 [batch] on q's device "
                         "(or, with a CSR table's page_indptr, last_page_len)")
    if varlen and cu_seqlens_k is not None:
        raise ValueError("cu_seqlens_k must be None with page_table: seqused_k gives each sequence's key count "
                         "(flash_attn_varlen_func derives it from cu_seqlens_k)")
    return True


def _check_pages(q, k, v, page_table, seqused_k, batch, traced, page_indptr=None, last_page_len=None):
    """(heads_kv, head_dim, head_dim_v for the C ABI, Pages) of page pools k [num_pages, page_size, Hkv, D] and
    v [num_pages, page_size, Hkv, Dv] addressed by page_table int32 [batch, max_pages_per_seq] (rows back to back),
    or by a CSR table (page_indptr given: check_csr_table), seqused_k int32 [batch] (None with last_page_len); q's
    heads and head dim. The devices and dtypes are checked before."""
    pools = "[num_pages, page_size, heads_kv, head_dim]"
    for name, t in (("k", k), ("v", v)):
        shape = _shape(t)
        if len(shape) != 4:
            raise ValueError(f"{name} must be 4-D {pools} with page_table (a page pool), got shape {list(shape)}")
        if min(shape) < 1:
            raise ValueError(f"{name} is empty (shape {list(shape)}): every dimension must be at least 1")
    num_pages, page_size, hkv, dk = _shape(k)
    hq, d = _shape(q)[-2], _shape(q)[-1]
    _require_heads_and_head_dim("k", hq, hkv, d, dk)
    dv = _value_head_dim(k, v, d)
    if page_size not in PAGE_SIZES:
        raise ValueError(f"k: page_size (k.shape[1]) {page_size} must be a power of two in [1, 256]")
    if num_pages > INT32_MAX:
        raise ValueError(f"k: at most {INT32_MAX} pages (int32 page indices), got {num_pages}")
    if page_indptr is not None:
        max_pages = check_csr_table(page_table, page_indptr, last_page_len, batch, traced)
    else:
        shape = _shape(page_table)
        if len(shape) != 2 or shape[0] != batch or shape[1] < 1:
            raise ValueError(f"page_table must have shape [{batch}, max_pages_per_seq] (one row of page indices per "
                             f"sequence), got {list(shape)}")
        if shape[1] > 1 and _strides(page_table)[1] != 1:
            raise ValueError(f"page_table: the last dimension must be contiguous (stride(-1) == 1), got strides "
                             f"{list(_strides(page_table))}; pass page_table.contiguous()")
        _require_dense("page_table", page_table, "int32 [batch, max_pages_per_seq], rows back to back", traced)
        max_pages = shape[1]
        if batch * max_pages > INT32_MAX:
            raise ValueError(f"page_table holds {batch} x {max_pages} entries, more than int32 indexes")
    if seqused_k is not None:
        if _shape(seqused_k) != (batch,):
            raise ValueError(f"seqused_k must have shape [{batch}] (one key count per sequence), got "
                             f"{list(_shape(seqused_k))}")
        _require_dense("seqused_k", seqused_k, "int32 [batch]", traced)
    cache_dims = ("page", "token", "head")
    _require_layout("k", k, cache_dims, traced)
    _require_layout("v", v, cache_dims, traced)
    return hkv, d, dv, Pages(page_size, num_pages, max_pages)


def check_paged_inputs(q, k, v, page_table, seqused_k, traced=False):
    """(Problem, Pages) of dense queries q [B, Sq, Hq, D] over page pools k, v [num_pages, page_size, Hkv, D]
    with page_table int32 [B, max_pages_per_seq] and seqused_k int32 [B]: seqlen_k is the table's capacity,
    max_pages_per_seq * page_size. ValueError naming the first bad argument."""
    tensors = (("q", q), ("k", k), ("v", v), ("page_table", page_table), ("seqused_k", seqused_k))
    _require_devices_and_dtypes(tensors, 3, traced)
    _require_4d("q", q)
    b, sq, hq, _ = _shape(q)
    hkv, d, dv, pages = _check_pages(q, k, v, page_table, seqused_k, b, traced)
    if pages.capacity > INT32_MAX:
        raise ValueError(f"page_table: {pages.max_pages_per_seq} pages of {pages.page_size} tokens per sequence are "
                         f"more keys than int32 counts")
    _require_layout("q", q, traced=traced)
    return Problem(b, sq, pages.capacity, hq, hkv, d, DTYPES[str(q.dtype)], dv), pages


def check_paged_varlen_inputs(q, k, v, cu_seqlens_q, page_table, seqused_k, max_seqlen_q, max_seqlen_k,
                              traced=False, page_indptr=None, last_page_len=None):
    """(VarlenProblem with total_k 0, Pages) of packed queries q [total_q, Hq, D] with cu_seqlens_q int32
    [batch + 1] over page pools k, v [num_pages, page_size, Hkv, D] with page_table int32 [batch,
    max_pages_per_seq] and seqused_k int32 [batch], or FlashInfer's CSR table (page_table int32 [num_indices],
    page_indptr int32 [batch + 1], and seqused_k or last_page_len int32 [batch]); max_seqlen_k at most
    max_pages_per_seq * page_size (CSR: num_indices * page_size)."""
    tensors = (("q", q), ("k", k), ("v", v), ("cu_seqlens_q", cu_seqlens_q), ("page_table", page_table),
               *((("seqused_k", seqused_k),) if seqused_k is not None else ()),
               *csr_tensors(page_indptr, last_page_len))
    _require_devices_and_dtypes(tensors, 3, traced)
    _require_3d("q", q)
    total_q, hq, _ = _shape(q)
    if total_q > INT32_MAX:
        raise ValueError(f"q may hold at most {INT32_MAX} tokens (int32 offsets), got {total_q}")
    batch = _check_cu_seqlens_q(cu_seqlens_q, traced)
    hkv, d, dv, pages = _check_pages(q, k, v, page_table, seqused_k, batch, traced, page_indptr, last_page_len)
    max_seqlen_q = _int_arg("max_seqlen_q", max_seqlen_q, 1, INT32_MAX)
    max_seqlen_k = _int_arg("max_seqlen_k", max_seqlen_k, 1, INT32_MAX)
    if max_seqlen_k > pages.capacity:
        held = ("the CSR table's pages hold: num_indices (page_table.shape[0]) * page_size" if page_indptr is not None
                else "a row of page_table holds: max_pages_per_seq * page_size")
        raise ValueError(f"max_seqlen_k {max_seqlen_k} exceeds what {held} = {pages.max_pages_per_seq} * "
                         f"{pages.page_size} = {pages.capacity}")
    _require_layout("q", q, ("sequence", "head"), traced)
    return VarlenProblem(batch, total_q, 0, max_seqlen_q, max_seqlen_k, hq, hkv, d, DTYPES[str(q.dtype)], dv), pages


def check_used_keys(q, seqused_k, batch, traced=False):
    """seqused_k over contiguous k and v (sequence b uses its first seqused_k[b] keys): torch.int32 [batch] on q's
    device, contiguous."""
    _require_devices_and_dtypes((("q", q), ("seqused_k", seqused_k)), 1, traced)
    if _shape(seqused_k) != (batch,):
        raise ValueError(f"seqused_k must have shape [{batch}] (the keys each sequence uses), got "
                         f"{list(_shape(seqused_k))}")
    _require_dense("seqused_k", seqused_k, "int32 [batch]", traced)


def check_attention_inputs(q, k, v, page_table=None, seqused_k=None, traced=False):
    """attention()'s inputs: (Problem, Pages or None for contiguous k and v)."""
    if check_paged_pair(page_table, seqused_k):
        return check_paged_inputs(q, k, v, page_table, seqused_k, traced)
    problem = check_inputs(q, k, v, traced)
    if seqused_k is not None:
        check_used_keys(q, seqused_k, problem.batch, traced)
    return problem, None


def check_attention_varlen_inputs(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, page_table=None,
                                  seqused_k=None, traced=False, page_indptr=None, last_page_len=None):
    """attention_varlen()'s inputs: (VarlenProblem, Pages or None for packed k and v)."""
    if check_paged_pair(page_table, seqused_k, cu_seqlens_k, True, page_indptr, last_page_len):
        return check_paged_varlen_inputs(q, k, v, cu_seqlens_q, page_table, seqused_k, max_seqlen_q, max_seqlen_k,
                                         traced, page_indptr, last_page_len)
    problem = check_varlen_inputs(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, traced)
    if seqused_k is not None:
        check_used_keys(q, seqused_k, problem.batch, traced)
    return problem, None
