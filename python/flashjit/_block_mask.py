"""Block sparsity: block_mask() makes a BlockMask on the device from a mask_mod and the built-in masks, like
FlexAttention's create_block_mask; attention(..., block_mask=) takes it, or FlexAttention's own BlockMask (the same
layout: kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices, BLOCK_SIZE).

torch is imported inside the functions, never at module import."""
from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Optional, Sequence, Tuple

from . import _abi, _library, _memo, _runtime
from ._checks import INT32, INT32_MAX, NO_WINDOW, _int_arg, _require_cuda, _require_same_device, mask_of, snippets

if TYPE_CHECKING:
    import torch

    Tensor = torch.Tensor

_MAX_BLOCK = 1 << 20


class BlockMask:
    """Which key blocks each block of query rows visits (FlexAttention's BlockMask layout), on one CUDA device:
    kv_num_blocks int32 [B, H, num_q_blocks] and kv_indices int32 [B, H, num_q_blocks, num_kv_blocks] list the partial
    blocks (the mask_mod decides their pairs), full_kv_num_blocks / full_kv_indices (or None) the full ones (every pair
    the built-in mask shows visible: the mask_mod is not evaluated there); BLOCK_SIZE = (q_block, kv_block); seq_lengths = (seqlen_q, seqlen_k). B and H may be 1 (one mask for
    every batch entry or head)."""

    __slots__ = ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices", "BLOCK_SIZE", "seq_lengths")

    def __init__(self, kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices, BLOCK_SIZE, seq_lengths):
        self.kv_num_blocks, self.kv_indices = kv_num_blocks, kv_indices
        self.full_kv_num_blocks, self.full_kv_indices = full_kv_num_blocks, full_kv_indices
        self.BLOCK_SIZE, self.seq_lengths = tuple(BLOCK_SIZE), tuple(seq_lengths)

    def __repr__(self):
        b, h, nq = tuple(self.kv_num_blocks.shape)
        return (f"flashjit.BlockMask(B={b}, H={h}, seq_lengths={self.seq_lengths}, BLOCK_SIZE={self.BLOCK_SIZE}, "
                f"{nq} x {self.kv_indices.shape[-1]} blocks, full lists: {self.full_kv_indices is not None})")


def _block_size(block_size):
    if isinstance(block_size, int) and not isinstance(block_size, bool):
        block_size = (block_size, block_size)
    try:
        q_block, kv_block = block_size
    except (TypeError, ValueError):
        raise ValueError(f"block_size must be an int or a (q_block, kv_block) pair, got {block_size!r}") from None
    for name, value in (("q_block", q_block), ("kv_block", kv_block)):
        _int_arg(f"block_size's {name}", value, 16, _MAX_BLOCK)
        if value % 16 != 0:
            raise ValueError(f"block_size's {name} must be a multiple of 16, got {value}")
    return int(q_block), int(kv_block)


def block_mask(mask_mod: Optional[str] = None, B: int = 1, H: int = 1, Q_LEN: int = 0, KV_LEN: int = 0, *,
               causal: bool = False, window_size: Tuple[int, int] = NO_WINDOW, chunk_size: int = 0,
               alignment: str = "bottom_right", aux_tensors: Sequence[Tensor] = (), aux_scalars: Sequence[float] = (),
               aux_integers: Sequence[int] = (), block_size=128, full_blocks: bool = True, device=None,
               stream=None) -> BlockMask:
    """The BlockMask of a mask over Q_LEN queries and KV_LEN keys, made on the device by a generated kernel (like
    FlexAttention's create_block_mask, and reusable the same way across calls and layers with the same mask):
    mask_mod is CUDA C++ defining __device__ bool mask_mod(int b, int h, int q_idx, int kv_idx, const
    flashjit::ModContext& ctx) (attention()'s mask_mod, with its aux_tensors, aux_scalars, aux_integers), causal /
    window_size / chunk_size / alignment attention()'s built-in mask; a pair is visible when both say so. B, H: the
    batch entries and heads the mask_mod sees (1: one mask for all of them). block_size: an int or (q_block,
    kv_block), multiples of 16 (default 128, FlexAttention's). full_blocks: list apart (full_kv_*) the blocks
    where the mask_mod passes every pair the built-in mask shows, which attention() then computes without the
    mask_mod (applying the built-in mask, which must be the same); False: all in kv_indices.
    device: the CUDA device (default: that of aux_tensors, else torch's current one). Asynchronous on stream (default
    the device's current one). Bad arguments raise ValueError before torch is imported or anything runs."""
    b = _int_arg("B", B, 1, 65535)
    h = _int_arg("H", H, 1, 65535)
    seqlen_q = _int_arg("Q_LEN", Q_LEN, 1, INT32_MAX)
    seqlen_k = _int_arg("KV_LEN", KV_LEN, 1, INT32_MAX)
    q_block, kv_block = _block_size(block_size)
    mask, left, right, chunk = mask_of(causal, window_size, chunk_size)
    if mask_mod is None and mask == _abi.MASK_NONE:
        raise ValueError("block_mask needs a mask_mod or a mask (causal, window_size, chunk_size): without either "
                         "every block is full")
    import torch
    if device is None:
        first = next(iter(aux_tensors), None) if aux_tensors is not None else None
        device = first.device if first is not None else torch.device("cuda", torch.cuda.current_device())
    device = torch.device(device)
    if device.type != "cuda":
        raise ValueError(f"block_mask makes its mask on a CUDA device, got {device}")
    num_q, num_kv = -(-seqlen_q // q_block), -(-seqlen_k // kv_block)
    counts = torch.zeros((b, h, num_q), dtype=torch.int32, device=device)
    indices = torch.zeros((b, h, num_q, num_kv), dtype=torch.int32, device=device)
    full_counts = torch.zeros_like(counts) if full_blocks else None
    full_indices = torch.zeros_like(indices) if full_blocks else None
    snip = snippets(counts, None, mask_mod, aux_tensors, aux_scalars, aux_integers, alignment,
                    first_name="the block mask")
    args = _abi.BlockMaskArgs(batch=b, heads=h, seqlen_q=seqlen_q, seqlen_k=seqlen_k, q_block=q_block,
                              kv_block=kv_block, mask=mask, window_left=left, window_right=right, chunk_size=chunk,
                              alignment=_abi.ALIGN_BOTTOM_RIGHT if snip is None else snip.alignment,
                              kv_num_blocks=counts.data_ptr(), kv_indices=indices.data_ptr(),
                              full_kv_num_blocks=0 if full_counts is None else full_counts.data_ptr(),
                              full_kv_indices=0 if full_indices is None else full_indices.data_ptr())
    if snip is not None:
        args.mask_mod = snip.mask_mod
        args.aux_scalars = (ctypes.c_float * _abi.AUX_SCALARS)(*snip.aux_scalars)
        args.aux_integers = (ctypes.c_int64 * _abi.AUX_INTEGERS)(*snip.aux_integers)
        snip.set_aux_pointers(args)
    from ._attention import _stream_handle
    args.stream = _stream_handle(stream, device)
    with torch.cuda.device(device):
        _runtime.check(_library.load().flashjit_make_block_mask(_runtime.handle(), ctypes.byref(args)))
    return BlockMask(counts, indices, full_counts, full_indices, (q_block, kv_block), (seqlen_q, seqlen_k))


def _contiguous(shape, strides):
    """Whether row-major strides (those of dimensions of one element aside) lay the tensor out densely."""
    step = 1
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != step:
            return False
        step *= n
    return True


def _require_int32_rows(name, t, dims, q, traced=False):
    if not hasattr(t, "data_ptr") or not hasattr(t, "shape"):
        raise ValueError(f"block_mask.{name} must be a torch.Tensor, got {type(t).__name__}")
    _require_cuda(f"block_mask.{name}", t, traced)
    _require_same_device(f"block_mask.{name}", t, q)
    if str(t.dtype) != INT32:
        raise ValueError(f"block_mask.{name}: dtype {t.dtype} must be torch.int32")
    if len(t.shape) != dims:
        raise ValueError(f"block_mask.{name} must have {dims} dimensions, got shape {tuple(t.shape)}")
    if not _contiguous(tuple(t.shape), tuple(t.stride())):
        raise ValueError(f"block_mask.{name} must be contiguous (strides {tuple(t.stride())})")
    if not traced and t.data_ptr() % 4 != 0:
        raise ValueError(f"block_mask.{name} must be 4-byte aligned")


_LISTS = ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices")


def block_mask_key(mask):
    """What block_mask_fields() reads of a call's block mask besides its lists' data pointers, for the call's memo
    key: BLOCK_SIZE and each list's metadata (None for missing full lists); () without a block mask, None when it
    cannot enter a key (not a block mask, or a BLOCK_SIZE of other types than ints: the checks then run and say)."""
    if mask is None:
        return ()
    try:
        size = mask.BLOCK_SIZE
        sizes = (size,) if type(size) is int else tuple(size)
        if not sizes or not _memo.ints(*sizes) or None in sizes:
            return None
        return sizes + tuple(None if t is None else _memo.tensor_key(t) for t in (getattr(mask, n) for n in _LISTS))
    except Exception:  # noqa: BLE001  (not a block mask: the checks name what is wrong)
        return None


def block_mask_addresses(mask):
    """The data pointers of a call's block-mask lists (0 for missing full lists), () without a block mask: set on
    every call, the rest of its fields come from the checks (block_mask_fields)."""
    if mask is None:
        return ()
    return tuple(0 if t is None else t.data_ptr() for t in (getattr(mask, n) for n in _LISTS))


def block_mask_lists(mask):
    """(kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices, (q_block, kv_block)) of a flashjit.BlockMask
    or FlexAttention's BlockMask: ValueError when it is neither, or its block size is not one."""
    missing = [n for n in _LISTS + ("BLOCK_SIZE",) if not hasattr(mask, n)]
    if missing:
        raise ValueError(f"block_mask must be a flashjit.BlockMask or FlexAttention's BlockMask, got "
                         f"{type(mask).__name__} (no {', '.join(missing)})")
    return tuple(getattr(mask, n) for n in _LISTS) + (_block_size(mask.BLOCK_SIZE),)


def block_mask_fields(mask, q, batch, heads_q, seqlen_q, seqlen_k, traced=False):
    """AttentionArgs fields of a call's block mask (a flashjit.BlockMask or FlexAttention's BlockMask, None: none),
    its pointers included: ValueError naming what does not fit the call. traced: the lists are fake or meta tensors
    (the custom op's fake implementation), whose addresses are not read (0)."""
    if mask is None:
        return {}
    counts, indices, full_counts, full_indices, (q_block, kv_block) = block_mask_lists(mask)
    if (full_counts is None) != (full_indices is None):
        raise ValueError("block_mask.full_kv_num_blocks and full_kv_indices go together: both or neither")
    _require_int32_rows("kv_num_blocks", counts, 3, q, traced)
    _require_int32_rows("kv_indices", indices, 4, q, traced)
    mb, mh, num_q = (int(x) for x in counts.shape)
    if tuple(indices.shape[:3]) != (mb, mh, num_q):
        raise ValueError(f"block_mask.kv_indices {tuple(indices.shape)} does not extend kv_num_blocks "
                         f"{tuple(counts.shape)}")
    num_kv = int(indices.shape[3])
    if full_counts is not None:
        _require_int32_rows("full_kv_num_blocks", full_counts, 3, q, traced)
        _require_int32_rows("full_kv_indices", full_indices, 4, q, traced)
        if tuple(full_counts.shape) != (mb, mh, num_q) or tuple(full_indices.shape) != tuple(indices.shape):
            raise ValueError("block_mask.full_kv_num_blocks / full_kv_indices must have the shapes of kv_num_blocks / "
                             "kv_indices")
    if mb not in (1, batch):
        raise ValueError(f"block_mask is for {mb} batch entries, the call has {batch} (1 broadcasts)")
    if mh not in (1, heads_q):
        raise ValueError(f"block_mask is for {mh} heads, the call has {heads_q} query heads (1 broadcasts)")
    if num_q < -(-seqlen_q // q_block) or num_kv < -(-seqlen_k // kv_block):
        raise ValueError(f"block_mask covers {num_q} x {num_kv} blocks of {q_block} x {kv_block}: too few for "
                         f"seqlen_q {seqlen_q} and seqlen_k {seqlen_k}")
    def ptr(t):
        return 0 if t is None or traced else t.data_ptr()
    return {"bm_kv_num_blocks": ptr(counts), "bm_kv_indices": ptr(indices),
            "bm_full_kv_num_blocks": ptr(full_counts), "bm_full_kv_indices": ptr(full_indices),
            "bm_q_block": q_block, "bm_kv_block": kv_block, "bm_num_q_blocks": num_q, "bm_num_kv_blocks": num_kv,
            "bm_batch_stride": mh * num_q if mb > 1 else 0, "bm_head_stride": num_q if mh > 1 else 0}
