"""select() and select_decode(): which kernels a problem gets, given by shapes, on the current GPU or on a GPU
that need not be present (an arch and an SM count): the dispatcher is host code (flashjit_select_target,
flashjit_select_decode)."""
from __future__ import annotations

import ctypes
import json
from typing import Any, Optional, Sequence, Union

from . import _library, _runtime
from ._abi import Target
from ._attention import _problem_args, _scratch, set_addresses
from ._checks import DTYPES, NO_WINDOW, dtype_code, shape4, shape_variants, snippet_fields, snippets
from ._decode import _window_left, decode_args

_PLACEHOLDER = 256  # an aligned address for the shapes' stand-ins (never read)


class _Spec:
    """A contiguous tensor of a shape and dtype on cuda:0, for the checks of decode (never read)."""

    is_cuda = True
    device = "cuda:0"

    def __init__(self, name, shape, dtype):
        self.shape = shape4(name, shape) if len(tuple(shape)) == 4 else tuple(int(n) for n in shape)
        self.dtype = dtype
        strides, step = [], 1
        for n in reversed(self.shape):
            strides.append(step)
            step *= n
        self._strides = tuple(reversed(strides))

    def stride(self):
        return self._strides

    def data_ptr(self):
        return _PLACEHOLDER


def _target(arch, sms, gpu):
    """The flashjit_target of arch / sms / gpu, or None (arch None: the current device)."""
    if arch is None:
        if sms is not None or gpu is not None:
            raise ValueError("sms and gpu describe a target GPU: pass arch too (e.g. arch='sm_90a')")
        return None
    if not isinstance(arch, str):
        raise ValueError(f"arch must be a string such as 'sm_90a' or 'sm_80', got {arch!r}")
    if sms is not None and (isinstance(sms, bool) or not isinstance(sms, int) or sms < 1):
        raise ValueError(f"sms must be a positive integer (multiprocessors of the target GPU), got {sms!r}")
    if gpu is not None and not isinstance(gpu, str):
        raise ValueError(f"gpu must be a GPU name as `flashjit info` shows it, got {gpu!r}")
    return Target(arch=arch.encode(), sms=sms or 0, gpu_name=None if gpu is None else gpu.encode())


def _dtype_name(dtype):
    """The torch dtype name the checks compare ("torch.bfloat16") of a dtype or a name."""
    code = dtype_code(dtype)
    return next(name for name, c in DTYPES.items() if c == code)


def select(q_shape: Sequence[int], k_shape: Optional[Sequence[int]] = None, *, dtype: Any = "bf16",
           causal: bool = False, window_size: tuple = NO_WINDOW, chunk_size: int = 0, varlen: bool = False,
           arch: Optional[str] = None, sms: Optional[int] = None, gpu: Optional[str] = None,
           head_dim_v: int = 0, softcap: Union[float, bool] = 0.0, alibi: bool = False, sinks: bool = False,
           score_mod: Optional[str] = None, mask_mod: Optional[str] = None, alignment: str = "bottom_right",
           page_size: int = 0, bias: Any = None, rel_bias: bool = False, seqused_k: bool = False) -> dict:
    """The kernel config attention() gets for a problem (the dispatcher's choice: tuned tables, then heuristics),
    as a dict (the config's canonical JSON: algorithm, arch, tiles, ...).

    q_shape [batch, seqlen_q, heads_q, head_dim], k_shape [batch, seqlen_k, heads_kv, head_dim] (default q_shape);
    head_dim_v: v's last dimension when it differs from q's (0: the same);
    dtype, causal, window_size, chunk_size as for attention(); varlen: the ragged-batch kernel (lengths are then
    the longest ones). Variants: softcap (a number > 0, or True), alibi, sinks (True: the kernel of a call with
    alibi_slopes= / sinks=); the config then has "softcap": true, "alibi": true, "sinks": true, and its kernel's
    name (flashjit.precompile(config)["name"]) has _softcap, _alibi, _sinks before the arch. score_mod, mask_mod:
    the snippets' text, as for attention() (the config carries it; the name has _smod<hash>, _mmod<hash>);
    alignment as for attention(). page_size > 0: keys in pages of that many tokens (a power of two in [1, 256]: the
    kernel of a call with page_table=; k_shape's seqlen_k keys per sequence, with varlen ragged queries over
    pages), the config's "page_size". bias: a bias dtype (torch.float32, bfloat16, float16, bool, or 'fp32', 'bf16',
    'fp16', 'bool'): the kernel of a call with bias= of that dtype ("bias": "bf16", ...). rel_bias, seqused_k (True):
    the kernel of a call with rel_bias= ("rel_bias": true) or with seqused_k= over contiguous keys ("seqused_k":
    true). arch (e.g. "sm_90a", "sm_80"): answer for a GPU of that arch without one
    being present (no GPU, no torch needed), with sms multiprocessors (default 132; the prefill choice does not
    depend on it today, decode's does) and, with gpu (its name as `flashjit info` shows it), the tuned tables
    stamped for that GPU; without arch: on the current CUDA device (needs torch and a GPU).
    """
    target = _target(arch, sms, gpu)
    if isinstance(head_dim_v, bool) or not isinstance(head_dim_v, int) or head_dim_v < 0:
        raise ValueError(f"head_dim_v must be 0 (the same as head_dim) or a multiple of 8, got {head_dim_v!r}")
    snip = snippets(None, score_mod, mask_mod, alignment=alignment)
    args = _problem_args(q_shape, k_shape, dtype, causal, window_size, chunk_size, _PLACEHOLDER, softcap, alibi,
                         sinks, page_size, bias, rel_bias, seqused_k, head_dim_v=head_dim_v, **snippet_fields(snip))
    paged = bool(args.page_table)
    if varlen:  # over pages: ragged queries only (seqused_k counts the keys)
        args.cu_seqlens_q = _PLACEHOLDER
        args.total_q = args.batch * args.seqlen_q
        if not paged:
            args.cu_seqlens_k, args.total_k = _PLACEHOLDER, args.batch * args.seqlen_k
    lib = _library.load()
    if target is not None:
        return json.loads(_runtime.text(lib.flashjit_select_target, _runtime.handle(), ctypes.byref(args),
                                        ctypes.byref(target)))
    scratch = _scratch(None)
    set_addresses(args, scratch.data_ptr())
    if varlen:
        args.cu_seqlens_q = scratch.data_ptr()
        if not paged:
            args.cu_seqlens_k = scratch.data_ptr()
    return json.loads(_runtime.text(lib.flashjit_select_target, _runtime.handle(), ctypes.byref(args), None))


def select_decode(q_shape: Sequence[int], cache_shape: Sequence[int], *, dtype: Any = "bf16",
                  page_table_shape: Optional[Sequence[int]] = None, max_seqlen_k: Optional[int] = None,
                  window_size: tuple = NO_WINDOW, chunk_size: int = 0, num_splits: int = 0, split_merge: str = "auto",
                  arch: Optional[str] = None, sms: Optional[int] = None, gpu: Optional[str] = None,
                  softcap: Union[float, bool] = 0.0, alibi: bool = False, sinks: bool = False,
                  score_mod: Optional[str] = None, mask_mod: Optional[str] = None) -> dict:
    """What decode() launches for a problem, as a dict: {"split": the split kernel's config, "num_splits",
    "keys_per_split", "combine": the combine kernel's config or None, "append": None (the C ABI's fused append
    kernel, which decode() never runs), "workspace_bytes"}.

    The shapes of decode's tensors: q_shape [batch, q_len, heads_q, head_dim]; cache_shape [batch, max_seqlen,
    heads_kv, head_dim] (contiguous) or, with page_table_shape [batch, max_pages], [num_pages, page_size,
    heads_kv, head_dim] (paged). dtype, max_seqlen_k (default: the cache's capacity), window_size, chunk_size,
    num_splits and split_merge as for decode(). arch, sms (default 132: the split plan depends on it), gpu: as for
    select(); without arch, the current CUDA device. softcap, alibi, sinks: the variants, as for select() (the split
    kernel has each one asked for, the combine kernel the sinks); score_mod, mask_mod: the snippets' text, as for
    decode() (the split kernel carries it).
    """
    target = _target(arch, sms, gpu)
    name = _dtype_name(dtype)
    q = _Spec("q_shape", q_shape, name)
    cache = _Spec("cache_shape", cache_shape, name)
    seqlens = _Spec("seqlens_k", (q.shape[0],), "torch.int32")
    table = None if page_table_shape is None else _Spec("page_table_shape", page_table_shape, "torch.int32")
    left = _window_left(window_size, None, "flashjit.select_decode")
    args, _ = decode_args(q, cache, cache, seqlens, table, left, None, num_splits, split_merge, max_seqlen_k,
                          chunk_size)
    args.softcap, alibi, sinks = shape_variants(softcap, alibi, sinks)
    snip = snippets(None, score_mod, mask_mod, with_alignment=False)
    if snip is not None:
        args.score_mod, args.mask_mod = snip.score_mod, snip.mask_mod
    lib = _library.load()
    scratch = None
    if target is None:
        scratch = _scratch(None)
        address = scratch.data_ptr()
    else:
        address = 0  # not read; NULL pointers are filled in by the library
    args.q = args.o = args.k_cache = args.v_cache = args.seqlens_k = address
    if table is not None:
        args.page_table = address
    # Any aligned address asks for the variant (never read); a NULL one is none.
    args.alibi_slopes = (address or _PLACEHOLDER) if alibi else None
    args.sinks = (address or _PLACEHOLDER) if sinks else None
    text = _runtime.text(lib.flashjit_select_decode, _runtime.handle(), ctypes.byref(args),
                         None if target is None else ctypes.byref(target))
    del scratch
    return json.loads(text)
