"""flashjit: FlashAttention CUDA kernels generated and compiled at run time, on PyTorch tensors.

    import flashjit
    o = flashjit.attention(q, k, v, causal=True)   # q [B, Sq, Hq, D], k/v [B, Sk, Hkv, D], bf16 or fp16
    o = flashjit.attention_varlen(q, k, v, cu_q, cu_k, max_q, max_k, causal=True)   # packed ragged batch
    o = flashjit.attention_varlen(q, k_pages, v_pages, cu_q, None, max_q, max_k, page_table=table, seqused_k=lens)
    o = flashjit.decode(q, k_cache, v_cache, seqlens_k)            # q [B, q_len, Hq, D] over a KV cache
    o = flashjit.decode(q, k_pages, v_pages, seqlens_k, page_table=page_table)   # paged cache
    flashjit.append_kv(k_pages, v_pages, k_new, v_new, cache_seqlens, page_table=page_table)   # write new K/V
    bm = flashjit.block_mask(docs_mod, 1, 1, S, S, causal=True, aux_tensors=[doc_ids])   # block sparsity
    o = flashjit.attention(q, k, v, causal=True, mask_mod=docs_mod, aux_tensors=[doc_ids], block_mask=bm)
    o, lse = flashjit.merge([o1, o2], [lse1, lse2], return_lse=True)            # states over disjoint keys
    from flashjit import flash_attn_func, flash_attn_varlen_func, flash_attn_with_kvcache   # flash-attn's names
    flashjit.select((1, 4096, 32, 128), (1, 4096, 8, 128), causal=True, arch="sm_90a")   # which kernel, no GPU

Windows follow flash-attn: window_size=(left, right), -1 unbounded, everywhere (the former `window` of attention
and `window_left` of decode still work, with a DeprecationWarning). Forward only: inputs that require grad raise.
torch.compile (fullgraph=True) and torch.export trace the calls as the custom ops flashjit::attention,
flashjit::attention_varlen, flashjit::decode and flashjit::merge, which have fake implementations.

CUDA graphs: attention() neither synchronizes nor allocates (besides its outputs), but the first call for a
kind of problem compiles (or reads from the disk cache) and loads its kernel, which must happen before
capture: call flashjit.warmup(q, k, v, ...) or flashjit.precompile(q_shape=..., dtype=...) first; for decode,
flashjit.prepare_decode(q, k_cache, v_cache, seqlens_k, ...); for merge, one merge() call; for append_kv, one call
or append_kv(..., prepare=True).

The library, libflashjit.so, is found through $FLASHJIT_LIBRARY, else inside this package, else in the
repository's build folder. Kernels are cached on disk (FLASHJIT_CACHE_DIR, default ~/.cache/flashjit).
torch is imported only by the functions that take tensors.
"""
import sys as _sys

from ._append import append_kv
from ._attention import attention, attention_varlen, precompile, warmup
from ._block_mask import BlockMask, block_mask
from ._decode import decode, merge, prepare_decode
from ._errors import FlashjitError
from ._flash_attn import flash_attn_func, flash_attn_varlen_func, flash_attn_with_kvcache
from ._info import cache_info, emit, version
from ._select import select, select_decode
from ._version import __version__

__all__ = ["__version__", "attention", "attention_varlen", "warmup", "precompile", "decode", "prepare_decode", "merge",
           "append_kv", "block_mask", "BlockMask", "cache_info", "emit", "version", "select", "select_decode", "flash_attn_func", "flash_attn_varlen_func",
           "flash_attn_with_kvcache", "FlashjitError"]

if "torch" in _sys.modules:  # the custom ops now, so that a trace never has to define them (else on first use)
    from . import _ops

    _ops.register()
