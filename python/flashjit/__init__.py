"""flashjit: FlashAttention CUDA kernels generated and compiled at run time, on PyTorch tensors.

    import flashjit
    o = flashjit.attention(q, k, v, causal=True)   # q [B, Sq, Hq, D], k/v [B, Sk, Hkv, D], bf16 or fp16

CUDA graphs: attention() neither synchronizes nor allocates (besides its outputs), but the first call for a
kind of problem compiles (or reads from the disk cache) and loads its kernel, which must happen before
capture: call flashjit.warmup(q, k, v, ...) or flashjit.precompile(q_shape=..., dtype=...) first.

The library, libflashjit.so, is found through $FLASHJIT_LIBRARY, else inside this package, else in the
repository's build folder. Kernels are cached on disk (FLASHJIT_CACHE_DIR, default ~/.cache/flashjit).
torch is imported only by the functions that take tensors.
"""
from ._attention import attention, precompile, warmup
from ._errors import FlashjitError
from ._info import cache_info, emit, version

__all__ = ["attention", "warmup", "precompile", "cache_info", "emit", "version", "FlashjitError"]
