"""flash-attn's function names, argument order, names and defaults over flashjit's kernels, so that switching is
one import: `from flashjit import flash_attn_func, flash_attn_varlen_func, flash_attn_with_kvcache`.

softcap and alibi_slopes are flash-attn's (softcap > 0: scores become softcap * tanh(scores / softcap); ALiBi slopes
float32 [heads_q] or [batch, heads_q]); learnable_sink (a keyword after flash-attn 2's arguments) is FA4's name of the
gpt-oss sinks, float32 [heads_q]: flashjit's sinks=. What flashjit does not have is refused with NotImplementedError
naming the argument (dropout, attention probabilities, rotary embedding, cache_batch_idx, cache_leftpad), never
ignored; the forward-only and traced behaviour is that of attention() and decode() (torch.compile and
torch.export work)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Tuple, Union

from ._attention import _traced_tensors, attention, attention_varlen
from ._checks import NO_WINDOW, window_pair
from ._decode import decode, decode_eager

_KVCACHE_NAMES = ("q", "k", "v", "k_cache", "v_cache")

if TYPE_CHECKING:
    from ._attention import Tensor, Window


def _refuse(function, dropout_p=0.0, return_attn_probs=False, **others):
    """NotImplementedError for the first argument flashjit lacks; `others`: name -> value that must be None."""
    if dropout_p != 0.0:
        raise NotImplementedError(f"flashjit.{function}: dropout_p={dropout_p!r} is not supported (flashjit is a "
                                  "forward-only inference kernel): pass dropout_p=0.0")
    if return_attn_probs:
        raise NotImplementedError(f"flashjit.{function}: return_attn_probs=True is not supported (flashjit never "
                                  "materializes the attention probabilities); for the log-sum-exp of each row use "
                                  "flashjit.attention(..., return_lse=True)")
    for name, value in others.items():
        if value is not None:
            raise NotImplementedError(f"flashjit.{function}: {name} is not supported: pass {name}=None")


def flash_attn_func(q: Tensor, k: Tensor, v: Tensor, dropout_p: float = 0.0, softmax_scale: Optional[float] = None,
                    causal: bool = False, window_size: Window = NO_WINDOW, softcap: float = 0.0,
                    alibi_slopes: Optional[Tensor] = None, deterministic: bool = False,
                    return_attn_probs: bool = False, *, learnable_sink: Optional[Tensor] = None) -> Tensor:
    """flash_attn.flash_attn_func: q [batch, seqlen_q, heads_q, head_dim], k, v [batch, seqlen_k, heads_kv,
    head_dim] -> O like q; see flashjit.attention for the tensors' requirements. causal is bottom-right aligned;
    window_size = (left, right), -1 unbounded. softcap, alibi_slopes ([heads_q] or [batch, heads_q] float32) and
    learnable_sink (FA4's keyword: float32 [heads_q]) are flashjit.attention's softcap, alibi_slopes and sinks.
    deterministic is accepted (the forward pass always is)."""
    _refuse("flash_attn_func", dropout_p, return_attn_probs)
    variants = _variants(softcap, alibi_slopes, learnable_sink)
    return attention(q, k, v, causal=causal, window_size=window_size, softmax_scale=softmax_scale, **variants)


def _variants(softcap, alibi_slopes, learnable_sink):
    """attention()'s variant keywords from flash-attn's: only those given (so that a call without them passes none)."""
    given = {"softcap": softcap, "alibi_slopes": alibi_slopes, "sinks": learnable_sink}
    return {name: value for name, value in given.items()
            if not (value is None or (name == "softcap" and type(value) in (int, float) and value == 0))}


def flash_attn_varlen_func(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor, cu_seqlens_k: Tensor,
                           max_seqlen_q: int, max_seqlen_k: int, dropout_p: float = 0.0,
                           softmax_scale: Optional[float] = None, causal: bool = False,
                           window_size: Window = NO_WINDOW, softcap: float = 0.0,
                           alibi_slopes: Optional[Tensor] = None, deterministic: bool = False,
                           return_attn_probs: bool = False, block_table: Optional[Tensor] = None, *,
                           seqused_k: Optional[Tensor] = None,
                           learnable_sink: Optional[Tensor] = None) -> Tensor:
    """flash_attn.flash_attn_varlen_func: packed q [total_q, heads_q, head_dim], k, v [total_k, heads_kv,
    head_dim] with int32 cu_seqlens_q / cu_seqlens_k [batch + 1] -> O like q (v's head dim last); see
    flashjit.attention_varlen. softcap, alibi_slopes and learnable_sink (FA4's keyword) as for flash_attn_func, per
    sequence.
    block_table (int32 [batch, max_blocks]): k and v are a paged cache [num_blocks, page_block_size, heads_kv,
    head_dim] (page_block_size a power of two up to 256), flashjit.attention_varlen's page_table. Each sequence's key
    count is seqused_k (int32 [batch], FA3's keyword) when given, else the differences of cu_seqlens_k (FA2's
    convention), taken on the GPU with torch ops (no synchronization; graph-capturable); max_seqlen_k bounds them.
    Without block_table, seqused_k[b] (at most sequence b's cu_seqlens_k length) keys of each sequence are used."""
    _refuse("flash_attn_varlen_func", dropout_p, return_attn_probs)
    variants = _variants(softcap, alibi_slopes, learnable_sink)
    if block_table is not None:
        if seqused_k is None:
            if cu_seqlens_k is None:
                raise ValueError("flashjit.flash_attn_varlen_func: block_table needs each sequence's key count: pass "
                                 "seqused_k (int32 [batch]) or cu_seqlens_k (int32 [batch + 1])")
            seqused_k = _key_counts(cu_seqlens_k, q)
        return attention_varlen(q, k, v, cu_seqlens_q, None, max_seqlen_q, max_seqlen_k, causal=causal,
                                window_size=window_size, softmax_scale=softmax_scale, page_table=block_table,
                                seqused_k=seqused_k, **variants)
    return attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=causal,
                            window_size=window_size, softmax_scale=softmax_scale, seqused_k=seqused_k, **variants)


def _key_counts(cu_seqlens_k, q):
    """seqused_k from FA2's paged cu_seqlens_k: int32 [batch] differences of the offsets, on their device (torch ops
    only, so a CUDA graph or torch.compile captures them). A shape, dtype or device that gives no valid counts is a
    ValueError naming cu_seqlens_k (attention_varlen's, about the derived seqused_k, would name what the caller never
    passed; an int64 cu_seqlens_k is refused as attention_varlen refuses it, not converted)."""
    shape = tuple(getattr(cu_seqlens_k, "shape", ()))
    if len(shape) != 1 or shape[0] < 2:
        raise ValueError(f"flashjit.flash_attn_varlen_func: cu_seqlens_k must have shape [batch + 1] with batch >= 1 "
                         f"(it gives the key counts with block_table), got {list(shape)}")
    import torch
    if cu_seqlens_k.dtype != torch.int32:
        raise ValueError(f"flashjit.flash_attn_varlen_func: cu_seqlens_k: dtype {cu_seqlens_k.dtype} must be "
                         f"torch.int32")
    if cu_seqlens_k.device != q.device:
        raise ValueError(f"flashjit.flash_attn_varlen_func: cu_seqlens_k is on {cu_seqlens_k.device} but q is on "
                         f"{q.device}: all tensors must be on one CUDA device")
    return cu_seqlens_k[1:] - cu_seqlens_k[:-1]


def flash_attn_with_kvcache(q: Tensor, k_cache: Tensor, v_cache: Tensor, k: Optional[Tensor] = None,
                            v: Optional[Tensor] = None, rotary_cos: Optional[Tensor] = None,
                            rotary_sin: Optional[Tensor] = None,
                            cache_seqlens: Union[int, Tensor, None] = None,
                            cache_batch_idx: Optional[Tensor] = None, cache_leftpad: Optional[Tensor] = None,
                            block_table: Optional[Tensor] = None, softmax_scale: Optional[float] = None,
                            causal: bool = False, window_size: Window = NO_WINDOW, softcap: float = 0.0,
                            rotary_interleaved: bool = True, alibi_slopes: Optional[Tensor] = None,
                            num_splits: int = 0, return_softmax_lse: bool = False, *,
                            learnable_sink: Optional[Tensor] = None) -> Union[Tensor, Tuple[Tensor, Tensor]]:
    """flash_attn.flash_attn_with_kvcache over flashjit.decode: q [batch, seqlen_q (1..16), heads_q, head_dim]
    against k_cache / v_cache [batch, seqlen_cache, heads_kv, head_dim], or paged [num_blocks, page_block_size,
    heads_kv, head_dim] with block_table int32 [batch, max_blocks] (page_block_size a power of two up to 256).

    cache_seqlens (an int or int32 [batch]; default: the cache is full) are the keys in the cache before this
    call. k, v [batch, seqlen_new, heads_kv, head_dim], when given, are written into the cache at positions
    cache_seqlens .. cache_seqlens + seqlen_new (in place, on the GPU, no synchronization), and attention covers
    them too. The queries are the last seqlen_q positions of the keys (bottom-right aligned): with causal, query
    i sees the keys up to its own position, and window_size = (left, right) limits them (right 0 with causal).
    flashjit's decode kernel is causal among the new queries, so seqlen_q > 1 needs causal=True (or right 0);
    with seqlen_q 1 causal changes nothing. Returns O like q, and with return_softmax_lse the log-sum-exp, float32
    [batch, heads_q, seqlen_q]. num_splits: 0 plans the key splits, else forces the count. softcap, alibi_slopes
    and learnable_sink (sinks) as for flash_attn_func: flashjit.decode's variants.
    Not supported (NotImplementedError): rotary_cos / rotary_sin, cache_batch_idx, cache_leftpad; rotary_interleaved
    is then moot.
    """
    _refuse("flash_attn_with_kvcache", 0.0, False, rotary_cos=rotary_cos, rotary_sin=rotary_sin,
            cache_batch_idx=cache_batch_idx, cache_leftpad=cache_leftpad)
    if (k is None) != (v is None):
        raise ValueError("flashjit.flash_attn_with_kvcache: pass k and v together (the new keys and values), or "
                         "neither")
    left, right = window_pair(window_size)
    if causal:
        right = 0
    q_len = q.shape[1]
    if right != 0 and q_len > 1:
        raise NotImplementedError(f"flashjit.flash_attn_with_kvcache: {q_len} queries per sequence with causal=False "
                                  f"and window_size {window_size!r}: flashjit's decode is causal among the new "
                                  "queries; pass causal=True (or seqlen_q 1)")
    import torch
    batch = q.shape[0]
    if block_table is None:
        capacity = k_cache.shape[1]
    else:
        capacity = block_table.shape[1] * k_cache.shape[1]
    if cache_seqlens is None:
        if k is not None:
            raise ValueError("flashjit.flash_attn_with_kvcache: k and v are appended at cache_seqlens: pass "
                             "cache_seqlens")
        seqlens = torch.full((batch,), capacity, dtype=torch.int32, device=q.device)
    elif isinstance(cache_seqlens, int) and not isinstance(cache_seqlens, bool):
        seqlens = torch.full((batch,), cache_seqlens, dtype=torch.int32, device=q.device)
    else:
        seqlens = cache_seqlens
    variants = _variants(softcap, alibi_slopes, learnable_sink)
    if k is not None and not _traced_tensors("flash_attn_with_kvcache", _KVCACHE_NAMES, q, k, v, k_cache, v_cache):
        # The library's fused call: the append kernel, then the decode over seqlens + seqlen_new keys, both on the
        # stream (the new lengths stay on the device).
        o, lse = decode_eager(q, k_cache, v_cache, seqlens, block_table, -1 if left < 0 else left, softmax_scale,
                              return_softmax_lse, None, num_splits, "auto", None, None, 0, variants.get("softcap", 0.0),
                              variants.get("alibi_slopes"), variants.get("sinks"), new_kv=(k, v))
        return (o, lse) if return_softmax_lse else o
    if k is not None:  # traced (torch.compile, torch.export): the append as torch ops the trace sees
        _append(k_cache, v_cache, k, v, seqlens, block_table)
        seqlens = (seqlens + k.shape[1]).to(torch.int32)
    return decode(q, k_cache, v_cache, seqlens, page_table=block_table, window_size=(left, 0),
                  softmax_scale=softmax_scale, num_splits=num_splits, return_lse=return_softmax_lse, **variants)


def _append(k_cache, v_cache, k, v, cache_seqlens, block_table):
    """k, v [B, S_new, Hkv, D] into the caches at positions cache_seqlens[b] + s (through the page table when
    paged), with torch's indexing on the GPU (what a trace records; eager calls take the library's fused append):
    nothing is read on the host."""
    import torch
    batch, new = k.shape[0], k.shape[1]
    positions = cache_seqlens.to(torch.long)[:, None] + torch.arange(new, device=k.device)[None, :]
    if block_table is None:
        rows = torch.arange(batch, device=k.device)[:, None].expand(batch, new)
        k_cache[rows, positions] = k
        v_cache[rows, positions] = v
        return
    page_size = k_cache.shape[1]
    pages = block_table.to(torch.long).gather(1, positions // page_size)
    k_cache[pages, positions % page_size] = k
    v_cache[pages, positions % page_size] = v
