"""flashjit's torch.library custom ops, so that torch.compile (fullgraph=True) and torch.export trace through
flashjit's functions instead of stopping at a ctypes call:

    flashjit::attention, flashjit::attention_varlen, flashjit::decode, flashjit::merge

Each returns (O, LSE) as new tensors (LSE is empty, shape [0], when it was not asked for) and has a fake
implementation that runs the argument checks of _checks.py on the fake tensors (traced=True) and makes outputs of
the shapes _checks.py says. The public functions (attention(), decode(), ...) call the ops when they are traced or
given tensors that are not plain torch.Tensor (fake, meta, subclasses) or run under a torch dispatch mode; plain
eager calls go straight to the library (the same code the ops' CUDA implementation runs), which costs less host
time than the dispatcher. out= is then filled by a copy of the op's O.

The ops are forward only: an input that requires grad (with grad mode on) is refused by the public functions
(_attention._traced_tensors, which also decides whether a call is traced), and the ops' autograd formula raises if
a graph reaches backward.

torch is imported here; the package imports this module only once torch is imported (by the caller, or by a
function that takes tensors)."""
import json
from collections.abc import Mapping
from typing import List, Optional, Tuple

import torch
from torch import Tensor

from . import _checks

_registered = False

@torch._dynamo.assume_constant_result
def config_text(config):
    """An explicit config as the ops take it (JSON text, or None); a trace runs it, not traces it (json's encoder
    is C code), and keeps the text as a constant."""
    if config is None or isinstance(config, str):
        return config
    if isinstance(config, Mapping):
        return json.dumps(dict(config))
    raise ValueError(f"config must be a dict or a JSON string, got {type(config).__name__}")


def refuse_stream(function, stream):
    if stream is not None:
        raise ValueError(f"flashjit.{function}(stream=...) cannot be traced (torch.compile, torch.export): run the call "
                         "under `with torch.cuda.stream(s):` instead")


def _empty_lse(like):
    return like.new_empty((0,), dtype=torch.float32)


def _outputs(like, o_shape, lse_shape, return_lse):
    return like.new_empty(o_shape), (like.new_empty(lse_shape, dtype=torch.float32) if return_lse else _empty_lse(like))


def _out(like, shapes):
    """O for an op's real implementation: contiguous, of the shape the fake implementation gives (so a compiled
    graph's assumptions about its strides hold), or None when the inputs are malformed (the checks then say how)."""
    try:
        return like.new_empty(shapes()[0])
    except Exception:  # noqa: BLE001
        return None


def _forward_only(ctx, *grads):
    raise RuntimeError("flashjit's ops are forward only: no backward is implemented (run them under torch.no_grad())")


def _no_context(ctx, inputs, output):
    pass


def register():
    """Defines the ops once (idempotent); returns torch.ops.flashjit."""
    global _registered
    if _registered:
        return torch.ops.flashjit
    from . import _attention, _decode  # the eager implementations

    @torch.library.custom_op("flashjit::attention", mutates_args=())
    def attention(q: Tensor, k: Tensor, v: Tensor, causal: bool, window_left: int, window_right: int, chunk_size: int,
                  softmax_scale: Optional[float], return_lse: bool, config: Optional[str], softcap: float = 0.0,
                  alibi_slopes: Optional[Tensor] = None, sinks: Optional[Tensor] = None,
                  page_table: Optional[Tensor] = None, seqused_k: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
        out = _out(q, lambda: _checks.attention_out_shapes(q, k, v))
        o, lse = _attention.attention_eager(q, k, v, causal, (window_left, window_right), chunk_size, softmax_scale,
                                            return_lse, out, config, None, softcap, alibi_slopes, sinks, None,
                                            page_table, seqused_k)
        return o, (lse if lse is not None else _empty_lse(q))

    @attention.register_fake
    def _(q, k, v, causal, window_left, window_right, chunk_size, softmax_scale, return_lse, config, softcap=0.0,
          alibi_slopes=None, sinks=None, page_table=None, seqused_k=None):
        problem, _pages = _checks.check_attention_inputs(q, k, v, page_table, seqused_k, traced=True)
        _checks.mask_of(causal, (int(window_left), int(window_right)), int(chunk_size))  # options: no symbols
        _checks.check_variants(q, problem.batch, problem.heads_q, softcap, alibi_slopes, sinks, traced=True)
        return _outputs(q, *_checks.attention_out_shapes(q, k, v), return_lse)

    @torch.library.custom_op("flashjit::attention_varlen", mutates_args=())
    def attention_varlen(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor, cu_seqlens_k: Optional[Tensor],
                         max_seqlen_q: int, max_seqlen_k: int, causal: bool, window_left: int, window_right: int,
                         chunk_size: int, softmax_scale: Optional[float], return_lse: bool, config: Optional[str],
                         softcap: float = 0.0, alibi_slopes: Optional[Tensor] = None, sinks: Optional[Tensor] = None,
                         page_table: Optional[Tensor] = None, seqused_k: Optional[Tensor] = None,
                         page_indptr: Optional[Tensor] = None,
                         last_page_len: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
        out = _out(q, lambda: _checks.varlen_out_shapes(q, k, v))
        o, lse = _attention.attention_varlen_eager(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                                   causal, (window_left, window_right), chunk_size, softmax_scale,
                                                   return_lse, out, config, None, softcap, alibi_slopes, sinks, None,
                                                   page_table, seqused_k, page_indptr, last_page_len)
        return o, (lse if lse is not None else _empty_lse(q))

    @attention_varlen.register_fake
    def _(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, window_left, window_right,
          chunk_size, softmax_scale, return_lse, config, softcap=0.0, alibi_slopes=None, sinks=None, page_table=None,
          seqused_k=None, page_indptr=None, last_page_len=None):
        problem, _pages = _checks.check_attention_varlen_inputs(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                                                max_seqlen_k, page_table, seqused_k, True,
                                                                page_indptr, last_page_len)
        _checks.mask_of(causal, (int(window_left), int(window_right)), int(chunk_size))
        _checks.check_variants(q, problem.batch, problem.heads_q, softcap, alibi_slopes, sinks, traced=True)
        return _outputs(q, *_checks.varlen_out_shapes(q, k, v), return_lse)

    @torch.library.custom_op("flashjit::decode", mutates_args=())
    def decode(q: Tensor, k_cache: Tensor, v_cache: Tensor, seqlens_k: Optional[Tensor], page_table: Optional[Tensor],
               window_left: int, chunk_size: int, softmax_scale: Optional[float], return_lse: bool, num_splits: int,
               split_merge: str, max_seqlen_k: Optional[int], softcap: float = 0.0,
               alibi_slopes: Optional[Tensor] = None, sinks: Optional[Tensor] = None,
               page_indptr: Optional[Tensor] = None, last_page_len: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
        out = _out(q, lambda: _checks.decode_out_shapes(q, k_cache, v_cache))
        o, lse = _decode.decode_eager(q, k_cache, v_cache, seqlens_k, page_table, window_left, softmax_scale,
                                      return_lse, out, num_splits, split_merge, max_seqlen_k, None, chunk_size,
                                      softcap, alibi_slopes, sinks, None, None, page_indptr, last_page_len)
        return o, (lse if lse is not None else _empty_lse(q))

    @decode.register_fake
    def _(q, k_cache, v_cache, seqlens_k, page_table, window_left, chunk_size, softmax_scale, return_lse, num_splits,
          split_merge, max_seqlen_k, softcap=0.0, alibi_slopes=None, sinks=None, page_indptr=None, last_page_len=None):
        problem = _checks.check_decode_inputs(q, k_cache, v_cache, seqlens_k, page_table, max_seqlen_k, True,
                                              page_indptr, last_page_len)
        _checks.check_decode_options(int(window_left), int(num_splits), split_merge, int(chunk_size))
        _checks.check_variants(q, problem.batch, problem.heads_q, softcap, alibi_slopes, sinks, traced=True)
        return _outputs(q, *_checks.decode_out_shapes(q, k_cache, v_cache), return_lse)

    @torch.library.custom_op("flashjit::merge", mutates_args=())
    def merge(outs: List[Tensor], lses: List[Tensor], return_lse: bool) -> Tuple[Tensor, Tensor]:
        out = _out(outs[0], lambda: _checks.merge_out_shapes(outs, lses)) if outs else None
        o, lse = _decode.merge_eager(outs, lses, out, return_lse, None)
        return o, (lse if lse is not None else _empty_lse(outs[0]))

    @merge.register_fake
    def _(outs, lses, return_lse):
        _checks.check_merge_inputs(outs, lses, traced=True)
        return _outputs(outs[0], *_checks.merge_out_shapes(outs, lses), return_lse)

    for op in (attention, attention_varlen, decode, merge):
        op.register_autograd(_forward_only, setup_context=_no_context)
    _registered = True
    return torch.ops.flashjit


def ops():
    """torch.ops.flashjit, registered on first use."""
    return torch.ops.flashjit if _registered else register()



register()  # at import: a trace that imports this module (flashjit imported before torch) never defines the ops itself
