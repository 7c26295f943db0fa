"""flashjit's torch.library custom ops, so that torch.compile (fullgraph=True) and torch.export trace through
flashjit's functions instead of stopping at a ctypes call:

    flashjit::attention, flashjit::attention_varlen, flashjit::decode, flashjit::merge

Each returns (O, LSE) as new tensors (LSE is empty, shape [0], when it was not asked for) and has a fake
implementation that runs the argument checks of _checks.py on the fake tensors (traced=True) and makes outputs of
the shapes _checks.py says. The variants go through them too: the bias tensor, a relative-logits table (prefill), a
block mask (its lists and block sizes, attention only) and the snippets (their text, aux tensors, scalars and
integers, and the alignment; the aux tensors as aux0 .. aux7, since a list of tensors takes no default in a schema),
each defaulted, so a graph made before an argument was added still calls the op. The public functions (attention(),
decode(), ...) call the ops when they are traced or given tensors that are not plain torch.Tensor (fake, meta,
subclasses) or run under a torch dispatch mode; plain eager calls go straight to the library (the same code the ops'
CUDA implementation runs), which costs less host time than the dispatcher. out= is then filled by a copy of the op's
O.

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


def _snippets(q, score_mod, mask_mod, aux_tensors, aux_scalars, aux_integers, alignment="bottom_right", traced=False,
              with_alignment=True):
    """An op call's Snippets (None without any), checked as the public functions check them."""
    return _checks.snippets(q, score_mod, mask_mod, tuple(aux_tensors), tuple(aux_scalars or ()),
                            tuple(aux_integers or ()), alignment, traced=traced, with_alignment=with_alignment)


def _aux(tensors):
    """The aux tensors of an op call: its aux0 .. aux7 arguments up to the first None (a list of tensors takes no
    default in an op's schema, so each is an optional tensor of its own and graphs made before them still load)."""
    out = []
    for t in tensors:
        if t is None:
            break
        out.append(t)
    return out


def _block_mask(counts, indices, full_counts, full_indices, q_block, kv_block):
    """An op call's block mask (its lists and block sizes) as the eager functions take it, or None."""
    if counts is None and indices is None:
        return None
    from ._block_mask import BlockMask
    return BlockMask(counts, indices, full_counts, full_indices, (q_block, kv_block), (0, 0))


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
                  page_table: Optional[Tensor] = None, seqused_k: Optional[Tensor] = None,
                  bias: Optional[Tensor] = None, bm_kv_num_blocks: Optional[Tensor] = None,
                  bm_kv_indices: Optional[Tensor] = None, bm_full_kv_num_blocks: Optional[Tensor] = None,
                  bm_full_kv_indices: Optional[Tensor] = None, bm_q_block: int = 0, bm_kv_block: int = 0,
                  score_mod: Optional[str] = None, mask_mod: Optional[str] = None,
                  aux_scalars: Optional[List[float]] = None, aux_integers: Optional[List[int]] = None,
                  alignment: str = "bottom_right", rel_bias: Optional[Tensor] = None, rel_bias_offset: int = 0,
                  aux0: Optional[Tensor] = None, aux1: Optional[Tensor] = None, aux2: Optional[Tensor] = None,
                  aux3: Optional[Tensor] = None, aux4: Optional[Tensor] = None, aux5: Optional[Tensor] = None,
                  aux6: Optional[Tensor] = None, aux7: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
        out = _out(q, lambda: _checks.attention_out_shapes(q, k, v))
        aux_tensors = _aux([aux0, aux1, aux2, aux3, aux4, aux5, aux6, aux7])
        snip = _snippets(q, score_mod, mask_mod, aux_tensors, aux_scalars, aux_integers, alignment)
        mask = _block_mask(bm_kv_num_blocks, bm_kv_indices, bm_full_kv_num_blocks, bm_full_kv_indices, bm_q_block,
                           bm_kv_block)
        o, lse = _attention.attention_eager(q, k, v, causal, (window_left, window_right), chunk_size, softmax_scale,
                                            return_lse, out, config, None, softcap, alibi_slopes, sinks, snip,
                                            page_table, seqused_k, bias, mask, (rel_bias, rel_bias_offset))
        return o, (lse if lse is not None else _empty_lse(q))

    @attention.register_fake
    def _(q, k, v, causal, window_left, window_right, chunk_size, softmax_scale, return_lse, config, softcap=0.0,
          alibi_slopes=None, sinks=None, page_table=None, seqused_k=None, bias=None, bm_kv_num_blocks=None,
          bm_kv_indices=None, bm_full_kv_num_blocks=None, bm_full_kv_indices=None, bm_q_block=0, bm_kv_block=0,
          score_mod=None, mask_mod=None, aux_scalars=None, aux_integers=None, alignment="bottom_right",
          rel_bias=None, rel_bias_offset=0, aux0=None, aux1=None, aux2=None, aux3=None, aux4=None, aux5=None,
          aux6=None, aux7=None):
        aux_tensors = _aux([aux0, aux1, aux2, aux3, aux4, aux5, aux6, aux7])
        problem, pages = _checks.check_attention_inputs(q, k, v, page_table, seqused_k, traced=True)
        _checks.mask_of(causal, (int(window_left), int(window_right)), int(chunk_size))  # options: no symbols
        _checks.check_variants(q, problem.batch, problem.heads_q, softcap, alibi_slopes, sinks, traced=True)
        dims = (problem.batch, problem.heads_q, problem.seqlen_q, problem.seqlen_k)
        _checks.check_bias(q, bias, dims, traced=True)
        _checks.check_rel_bias(q, rel_bias, rel_bias_offset, problem.heads_q, traced=True)
        mask = _block_mask(bm_kv_num_blocks, bm_kv_indices, bm_full_kv_num_blocks, bm_full_kv_indices, bm_q_block,
                           bm_kv_block)
        if mask is not None:
            if pages is not None:
                raise ValueError("flashjit.attention: block_mask takes dense keys, not a page_table")
            from ._block_mask import block_mask_fields
            block_mask_fields(mask, q, *dims, traced=True)
        _snippets(q, score_mod, mask_mod, aux_tensors, aux_scalars, aux_integers, alignment, traced=True)
        return _outputs(q, *_checks.attention_out_shapes(q, k, v), return_lse)

    @torch.library.custom_op("flashjit::attention_varlen", mutates_args=())
    def attention_varlen(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor, cu_seqlens_k: Optional[Tensor],
                         max_seqlen_q: int, max_seqlen_k: int, causal: bool, window_left: int, window_right: int,
                         chunk_size: int, softmax_scale: Optional[float], return_lse: bool, config: Optional[str],
                         softcap: float = 0.0, alibi_slopes: Optional[Tensor] = None,
                         sinks: Optional[Tensor] = None, page_table: Optional[Tensor] = None,
                         seqused_k: Optional[Tensor] = None, page_indptr: Optional[Tensor] = None,
                         last_page_len: Optional[Tensor] = None, bias: Optional[Tensor] = None,
                         score_mod: Optional[str] = None, mask_mod: Optional[str] = None,
                         aux_scalars: Optional[List[float]] = None, aux_integers: Optional[List[int]] = None,
                         alignment: str = "bottom_right", rel_bias: Optional[Tensor] = None,
                         rel_bias_offset: int = 0, aux0: Optional[Tensor] = None, aux1: Optional[Tensor] = None,
                         aux2: Optional[Tensor] = None, aux3: Optional[Tensor] = None, aux4: Optional[Tensor] = None,
                         aux5: Optional[Tensor] = None, aux6: Optional[Tensor] = None,
                         aux7: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
        out = _out(q, lambda: _checks.varlen_out_shapes(q, k, v))
        aux_tensors = _aux([aux0, aux1, aux2, aux3, aux4, aux5, aux6, aux7])
        snip = _snippets(q, score_mod, mask_mod, aux_tensors, aux_scalars, aux_integers, alignment)
        o, lse = _attention.attention_varlen_eager(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                                   causal, (window_left, window_right), chunk_size, softmax_scale,
                                                   return_lse, out, config, None, softcap, alibi_slopes, sinks, snip,
                                                   page_table, seqused_k, page_indptr, last_page_len, bias,
                                                   (rel_bias, rel_bias_offset))
        return o, (lse if lse is not None else _empty_lse(q))

    @attention_varlen.register_fake
    def _(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, window_left, window_right,
          chunk_size, softmax_scale, return_lse, config, softcap=0.0, alibi_slopes=None, sinks=None,
          page_table=None, seqused_k=None, page_indptr=None, last_page_len=None, bias=None, score_mod=None,
          mask_mod=None, aux_scalars=None, aux_integers=None, alignment="bottom_right", rel_bias=None,
          rel_bias_offset=0, aux0=None, aux1=None, aux2=None, aux3=None, aux4=None, aux5=None, aux6=None, aux7=None):
        aux_tensors = _aux([aux0, aux1, aux2, aux3, aux4, aux5, aux6, aux7])
        problem, _pages = _checks.check_attention_varlen_inputs(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                                                max_seqlen_k, page_table, seqused_k, True,
                                                                page_indptr, last_page_len)
        _checks.mask_of(causal, (int(window_left), int(window_right)), int(chunk_size))
        _checks.check_variants(q, problem.batch, problem.heads_q, softcap, alibi_slopes, sinks, traced=True)
        _checks.check_bias(q, bias, (problem.batch, problem.heads_q, problem.max_seqlen_q, problem.max_seqlen_k),
                           traced=True)
        _checks.check_rel_bias(q, rel_bias, rel_bias_offset, problem.heads_q, traced=True)
        _snippets(q, score_mod, mask_mod, aux_tensors, aux_scalars, aux_integers, alignment, traced=True)
        return _outputs(q, *_checks.varlen_out_shapes(q, k, v), return_lse)

    @torch.library.custom_op("flashjit::decode", mutates_args=())
    def decode(q: Tensor, k_cache: Tensor, v_cache: Tensor, seqlens_k: Optional[Tensor], page_table: Optional[Tensor],
               window_left: int, chunk_size: int, softmax_scale: Optional[float], return_lse: bool, num_splits: int,
               split_merge: str, max_seqlen_k: Optional[int], softcap: float = 0.0,
               alibi_slopes: Optional[Tensor] = None, sinks: Optional[Tensor] = None,
               page_indptr: Optional[Tensor] = None, last_page_len: Optional[Tensor] = None,
               bias: Optional[Tensor] = None, score_mod: Optional[str] = None, mask_mod: Optional[str] = None,
               aux_scalars: Optional[List[float]] = None,
               aux_integers: Optional[List[int]] = None, aux0: Optional[Tensor] = None, aux1: Optional[Tensor] = None,
               aux2: Optional[Tensor] = None, aux3: Optional[Tensor] = None, aux4: Optional[Tensor] = None,
               aux5: Optional[Tensor] = None, aux6: Optional[Tensor] = None,
               aux7: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
        out = _out(q, lambda: _checks.decode_out_shapes(q, k_cache, v_cache))
        aux_tensors = _aux([aux0, aux1, aux2, aux3, aux4, aux5, aux6, aux7])
        snip = _snippets(q, score_mod, mask_mod, aux_tensors, aux_scalars, aux_integers, with_alignment=False)
        o, lse = _decode.decode_eager(q, k_cache, v_cache, seqlens_k, page_table, window_left, softmax_scale,
                                      return_lse, out, num_splits, split_merge, max_seqlen_k, None, chunk_size,
                                      softcap, alibi_slopes, sinks, snip, None, page_indptr, last_page_len, bias)
        return o, (lse if lse is not None else _empty_lse(q))

    @decode.register_fake
    def _(q, k_cache, v_cache, seqlens_k, page_table, window_left, chunk_size, softmax_scale, return_lse, num_splits,
          split_merge, max_seqlen_k, softcap=0.0, alibi_slopes=None, sinks=None, page_indptr=None,
          last_page_len=None, bias=None, score_mod=None, mask_mod=None, aux_scalars=None, aux_integers=None,
          aux0=None, aux1=None, aux2=None, aux3=None, aux4=None, aux5=None, aux6=None, aux7=None):
        aux_tensors = _aux([aux0, aux1, aux2, aux3, aux4, aux5, aux6, aux7])
        problem = _checks.check_decode_inputs(q, k_cache, v_cache, seqlens_k, page_table, max_seqlen_k, True,
                                              page_indptr, last_page_len)
        _checks.check_decode_options(int(window_left), int(num_splits), split_merge, int(chunk_size))
        _checks.check_variants(q, problem.batch, problem.heads_q, softcap, alibi_slopes, sinks, traced=True)
        _checks.check_bias(q, bias, (problem.batch, problem.heads_q, problem.q_len, problem.max_seqlen_k),
                           _checks.DECODE_BIAS_DIMS, traced=True)
        _snippets(q, score_mod, mask_mod, aux_tensors, aux_scalars, aux_integers, with_alignment=False, traced=True)
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
    _register_block_mask_pytree()
    _registered = True
    return torch.ops.flashjit


def _register_block_mask_pytree():
    """flashjit.BlockMask as a pytree node (its four lists the children; the block sizes and lengths the context),
    so torch.export takes one as an input, as it takes FlexAttention's."""
    import torch.utils._pytree as pytree
    from ._block_mask import BlockMask

    def flatten(m):
        return [m.kv_num_blocks, m.kv_indices, m.full_kv_num_blocks, m.full_kv_indices], (m.BLOCK_SIZE, m.seq_lengths)

    def unflatten(children, context):
        return BlockMask(*children, *context)

    def flatten_with_keys(m):
        children, context = flatten(m)
        names = ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices")
        return [(pytree.GetAttrKey(n), c) for n, c in zip(names, children)], context

    pytree.register_pytree_node(BlockMask, flatten, unflatten, serialized_type_name="flashjit.BlockMask",
                                flatten_with_keys_fn=flatten_with_keys)


def ops():
    """torch.ops.flashjit, registered on first use."""
    return torch.ops.flashjit if _registered else register()



register()  # at import: a trace that imports this module (flashjit imported before torch) never defines the ops itself
