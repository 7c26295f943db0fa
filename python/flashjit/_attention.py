"""attention() on PyTorch tensors, and getting kernels ready before CUDA-graph capture (warmup, precompile).

torch is imported inside the functions, never at module import. A call that torch.compile or torch.export traces
(or one on fake tensors) goes through the custom op flashjit::attention (_ops.py); a plain eager call straight to
the library, through attention_eager, which is also what the op runs."""
from __future__ import annotations

import ctypes
import json
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Optional, Sequence, Tuple, Union

from . import _abi, _library, _memo, _runtime
from ._abi import AttentionArgs, Strides
from ._block_mask import block_mask_addresses, block_mask_fields, block_mask_key, block_mask_lists
from ._checks import (INT32_MAX, NO_WINDOW, PAGE_SIZES, REL_BIAS_LIMIT, _int_arg, bias_address, bias_type_code,
                      bshd_strides, check_attention_inputs, check_attention_varlen_inputs, check_bias, check_out,
                      check_rel_bias, check_variants, dtype_code, mask_of, packed_strides, rel_bias_address,
                      renamed_window, scale_of, shape4, shape_variants, snippet_fields, snippets, softcap_of,
                      window_pair)
from ._config import config_json

Config = Union[Mapping[str, Any], str]  # a kernel config: a dict or JSON text
Window = Tuple[int, int]  # (left, right), -1 unbounded
if TYPE_CHECKING:
    import torch

    Tensor = torch.Tensor
    Stream = Union[torch.cuda.Stream, int, None]  # a torch.cuda.Stream or a CUstream handle

# Stands in for the tensors of a problem that is prepared but not run: big enough for any alignment.
_SCRATCH_BYTES = 256
PLACEHOLDER = 256  # an aligned address for tensors given by their shapes (replaced, or never read)

_ATTENTION_NAMES = ("q", "k", "v", "out")
_VARLEN_NAMES = ("q", "k", "v", "cu_seqlens_q", "cu_seqlens_k", "out")

# The checked call (AttentionArgs without addresses, stream or config, LSE shape) per call key (_memo).
_calls = _memo.Memo()


def _stream_handle(stream, device):
    """The CUstream of a torch.cuda.Stream or a handle; None: torch's current stream on `device`."""
    if stream is None:
        import torch
        # The handle alone, as torch's compiled code gets it: torch.cuda.current_stream builds a Stream object,
        # which cost 5-6 µs per call on the H200 machine's host.
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        if raw is not None and device.index is not None:
            return raw(device.index)
        return torch.cuda.current_stream(device).cuda_stream
    return int(getattr(stream, "cuda_stream", stream))


FORWARD_ONLY = ("flashjit.{function} is forward only (no backward is implemented): {names} require grad; call it "
                "under torch.no_grad() or torch.inference_mode(), or pass .detach()ed tensors")


def _traced_tensors(function, names, *tensors, grads=3):
    """Whether a call must go through the custom ops (_ops.py): under torch.compile / torch.export, under a torch
    dispatch mode (FakeTensorMode, make_fx's proxies, ...), or when tensors[0] (q, or the first state) is a
    torch.Tensor subclass (FakeTensor, ...) or on the meta device (the ops' fake implementations then give the
    outputs' shapes); duck-typed tensors are not, nor is anything while torch is not imported. RuntimeError first
    when grad mode is on and one of the first `grads` tensors (the floating-point inputs) requires grad: names[i]
    names tensors[i] (names may be a function returning them, called for the error alone).

    Plain eager calls pay this on every call, so it is a few attribute reads, through torch as sys.modules holds it
    (never importing _ops: an import statement costs microseconds, and a trace's guard on whether sys.modules holds
    _ops would fail when the trace imports it)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    if torch.is_grad_enabled():
        for t in tensors[:grads]:
            if getattr(t, "requires_grad", False):
                names = names() if callable(names) else names
                raise RuntimeError(FORWARD_ONLY.format(function=function, names=", ".join(
                    name for name, u in zip(names, tensors[:grads]) if getattr(u, "requires_grad", False))))
    q = tensors[0]
    if type(q) is not torch.Tensor:
        return isinstance(q, torch.Tensor) or torch.compiler.is_compiling() or torch._C._len_torch_dispatch_stack() > 0
    return q.is_meta or torch.compiler.is_compiling() or torch._C._len_torch_dispatch_stack() > 0


def _forward_key(tensors, options, config):
    """The memo key of a forward call (None: run every check): the tensors' metadata (None for a missing one)
    and the options, which must be plain (causal a bool, window a tuple of ints, softmax_scale and softcap numbers,
    the rest ints)."""
    causal, window, softmax_scale, softcap, *ints = options
    if (config is not None or type(causal) is not bool or type(window) is not tuple or not _memo.ints(*window, *ints)
            or not _memo.number(softmax_scale) or softcap is None or not _memo.number(softcap)):
        return None
    try:
        return tuple(None if t is None else _memo.tensor_key(t) for t in tensors) + tuple(options)
    except Exception:  # noqa: BLE001  (not a tensor: the checks say what is wrong)
        return None


def _snippet_key(snip):
    """A call's snippets in its memo key (Snippets.key; None without snippets): a tensor-like aux argument whose
    metadata cannot be read makes the key unhashable, and the memo then runs every check."""
    if snip is None:
        return None
    try:
        return snip.key()
    except Exception:  # noqa: BLE001
        return []  # unhashable: the memo runs every check


def _forward(key, check, q, k, v, out, cu_seqlens_q, cu_seqlens_k, config, return_lse, stream, alibi_slopes=None,
             sinks=None, snip=None, page_table=None, seqused_k=None, page_indptr=None, last_page_len=None, bias=None,
             block_mask=None, rel_bias=None):
    """Runs flashjit_forward: check(out) -> ((AttentionArgs bytes without addresses, stream or config, LSE
    shape), out allocated when None) on the first call of a key (every call with an explicit config), the addresses'
    alignment on every call (the bias's by its entries, bias_address; a block mask's lists by 4 bytes; the
    relative-logits table's, rel_bias_address), whose snippets' aux tensor addresses (snip) go in here."""
    checked, out, addresses = _calls.checked(
        key, check, out, lambda: _output(None, q, v),
        lambda o: _addresses(q, k, v, o, cu_seqlens_q, cu_seqlens_k, alibi_slopes, sinks, page_table, seqused_k,
                             page_indptr, last_page_len) + block_mask_addresses(block_mask))
    template, lse_shape = checked
    args = AttentionArgs.from_buffer_copy(template)
    (args.q, args.k, args.v, args.o, args.cu_seqlens_q, args.cu_seqlens_k, args.alibi_slopes, args.sinks,
     args.page_table, args.seqused_k, args.page_indptr, args.last_page_len) = addresses[:12]
    if block_mask is not None:
        (args.bm_kv_num_blocks, args.bm_kv_indices, args.bm_full_kv_num_blocks,
         args.bm_full_kv_indices) = addresses[12:]
    if snip is not None:
        snip.set_aux_pointers(args)
    args.bias = bias_address(bias)
    args.rel_bias = rel_bias_address(rel_bias)
    args.config_json = None if config is None else config_json(config)  # ValueError for a bad one
    return _call("flashjit_forward", args, out, q, lse_shape if return_lse else None, stream)


def _call(function, args, out, like, lse_shape, stream):
    """Sets args' LSE (a new float32 tensor of lse_shape on like's device, when lse_shape is not None) and stream
    (like's device's current one when None), calls the library's `function` with them: (out, lse or None)."""
    lse = None
    if lse_shape is not None:
        import torch
        lse = like.new_empty(lse_shape, dtype=torch.float32)
        args.lse = lse.data_ptr()
    args.stream = _stream_handle(stream, like.device)
    _runtime.check(getattr(_library.load(), function)(_runtime.handle(), ctypes.byref(args)))
    return out, lse


def _addresses(q, k, v, out, cu_seqlens_q, cu_seqlens_k, alibi_slopes=None, sinks=None, page_table=None,
               seqused_k=None, page_indptr=None, last_page_len=None):
    """Data pointers (0 for a missing out, offsets, slopes, sinks, page table, key counts or CSR arrays): q, k, v
    and out (16-byte aligned), then the 4-byte aligned ones."""
    def ptr(t):
        return 0 if t is None else t.data_ptr()
    return (q.data_ptr(), k.data_ptr(), v.data_ptr(), ptr(out), ptr(cu_seqlens_q), ptr(cu_seqlens_k),
            ptr(alibi_slopes), ptr(sinks), ptr(page_table), ptr(seqused_k), ptr(page_indptr), ptr(last_page_len))


def _checked_options(q, out, out_dims, causal, window, chunk_size, softmax_scale, v=None):
    """The checks a forward call makes after its tensors' (mask, scale, out like q with strides over out_dims):
    (mask, window_left, window_right, chunk_size, softmax_scale, out allocated when None). An explicit config is
    checked as _forward reads it, per call (it is never part of the memo)."""
    mask, left, right, chunk = mask_of(causal, window, chunk_size)
    scale = scale_of(softmax_scale)
    if out is not None:
        check_out(out, q, strides=out_dims, head_dim_v=None if v is None else v.shape[-1])
    return mask, left, right, chunk, scale, _output(out, q, v)


def _output(out, q, v=None):
    """out, or a new tensor like q (torch.empty_like: its layout follows from q's metadata, so a memo entry's
    output strides hold for every call of the key); contiguous with v's last dimension when that differs."""
    if out is None:
        import torch
        if v is not None and v.shape[-1] != q.shape[-1]:
            out = q.new_empty(tuple(q.shape[:-1]) + (v.shape[-1],))
        else:
            out = torch.empty_like(q)
    return out


def _snippets_of(function, traced, q, score_mod, mask_mod, aux_tensors, aux_scalars, aux_integers, alignment,
                 with_alignment=True):
    """The call's checked Snippets (None without any; traced: of fake or meta aux tensors, for the custom ops). A
    call with every argument at its default (the common one, on every call) returns at the first test, before any
    check."""
    if (score_mod is None and mask_mod is None and alignment == "bottom_right"
            and type(aux_tensors) is tuple and not aux_tensors and type(aux_scalars) is tuple and not aux_scalars
            and type(aux_integers) is tuple and not aux_integers):
        return None
    return snippets(q, score_mod, mask_mod, aux_tensors, aux_scalars, aux_integers, alignment, traced=traced,
                    with_alignment=with_alignment)


def traced_variants(snip, bias, block_mask=None, with_alignment=True, rel=(None, 0)):
    """The custom ops' keyword arguments for a traced call's bias, block mask (its lists and block sizes),
    relative-logits table (rel: (rel_bias, rel_bias_offset)) and snippets (checked: snip; the aux tensors as aux0 ..
    aux7)."""
    kwargs = {} if bias is None else {"bias": bias}
    rel_bias, rel_bias_offset = rel
    if rel_bias is not None or not (type(rel_bias_offset) is int and rel_bias_offset == 0):
        kwargs["rel_bias"] = rel_bias  # the fake implementation checks both (check_rel_bias)
        kwargs["rel_bias_offset"] = _int_arg("rel_bias_offset", rel_bias_offset, -REL_BIAS_LIMIT, REL_BIAS_LIMIT)
    if block_mask is not None:
        counts, indices, full_counts, full_indices, size = block_mask_lists(block_mask)
        kwargs.update(bm_kv_num_blocks=counts, bm_kv_indices=indices, bm_full_kv_num_blocks=full_counts,
                      bm_full_kv_indices=full_indices)
        kwargs["bm_q_block"], kwargs["bm_kv_block"] = size
    if snip is None:
        return kwargs
    for name in ("score_mod", "mask_mod"):
        text = getattr(snip, name)  # the checked text's UTF-8 bytes
        if text is not None:
            kwargs[name] = text.decode("utf-8")
    if snip.aux_scalars:
        kwargs["aux_scalars"] = list(snip.aux_scalars)
    if snip.aux_integers:
        kwargs["aux_integers"] = list(snip.aux_integers)
    if with_alignment and snip.alignment == _abi.ALIGN_TOP_LEFT:
        kwargs["alignment"] = "top_left"
    kwargs.update({f"aux{i}": t for i, t in enumerate(snip.aux_tensors)})
    return kwargs


def _traced_call(op_name, function, tensors, options, causal, window_size, chunk_size, softmax_scale, return_lse,
                 out, config, stream, softcap, alibi_slopes, sinks, page_table=None, seqused_k=None, csr=(),
                 variants=None):
    """A forward through the custom op (torch.compile, torch.export, fake tensors): the op returns a new O, which
    fills out= by a copy. csr: attention_varlen's (page_indptr, last_page_len); variants: traced_variants()."""
    from . import _ops
    _ops.refuse_stream(function, stream)
    left, right = window_pair(window_size)
    scale = scale_of(softmax_scale)
    o, lse = getattr(_ops.ops(), op_name)(*tensors, *options, bool(causal), left, right, int(chunk_size),
                                          scale if scale > 0 else None, bool(return_lse), _ops.config_text(config),
                                          softcap_of(softcap), alibi_slopes, sinks, page_table, seqused_k, *csr,
                                          **(variants or {}))
    if out is not None:
        out.copy_(o)
        o = out
    return (o, lse) if return_lse else o


def attention(q: Tensor, k: Tensor, v: Tensor, *, causal: bool = False, window_size: Window = NO_WINDOW,
              chunk_size: int = 0, softmax_scale: Optional[float] = None, softcap: float = 0.0,
              alibi_slopes: Optional[Tensor] = None, sinks: Optional[Tensor] = None, return_lse: bool = False,
              out: Optional[Tensor] = None, config: Optional[Config] = None, stream: Stream = None,
              window: Optional[Window] = None, score_mod: Optional[str] = None, mask_mod: Optional[str] = None,
              aux_tensors: Sequence[Tensor] = (), aux_scalars: Sequence[float] = (), aux_integers: Sequence[int] = (),
              alignment: str = "bottom_right", page_table: Optional[Tensor] = None, seqused_k: Optional[Tensor] = None,
              bias: Optional[Tensor] = None, block_mask=None, rel_bias: Optional[Tensor] = None,
              rel_bias_offset: int = 0) -> Union[Tensor, Tuple[Tensor, Tensor]]:
    """Attention forward like flash_attn_func: softmax(q·kᵀ·scale + mask)·v.

    q: [batch, seqlen_q, heads_q, head_dim]; k, v: [batch, seqlen_k, heads_kv, head_dim]; CUDA tensors of
    torch.bfloat16 or torch.float16 on one device, last dimension contiguous, other strides multiples of 8
    elements; heads_kv divides heads_q (grouped-query attention); head_dim a multiple of 8, at most 256.
    causal: bottom-right aligned when seqlen_q != seqlen_k (query i sees keys j <= i + seqlen_k - seqlen_q).
    window_size: (left, right) sliding window around that diagonal, -1 = unbounded (flash-attn's convention);
    with causal, right = 0. chunk_size > 0: chunked attention, each query sees the keys of its own chunk of
    chunk_size keys (chunk index of position i + seqlen_k - seqlen_q), up to itself with causal; not with a window.
    softmax_scale: default 1/sqrt(head_dim). out: a tensor like q to write into (else torch.empty_like(q)).
    Variants (each compiled into the kernel only when used; with x = softmax_scale * q·k the logit of query i and
    key j):
      softcap > 0: x becomes softcap * tanh(x / softcap) (Gemma 2), before ALiBi and the mask; 0.0: off.
      alibi_slopes: torch.float32 [heads_q] or [batch, heads_q] on q's device: slope * |i + seqlen_k - seqlen_q - j|
        is subtracted from x (flash-attn's alibi_slopes).
      sinks: torch.float32 [heads_q] on q's device, one learnable logit per query head (gpt-oss): each row's softmax
        denominator gains exp(sinks[h]), O = sum_j e^x_j v_j / (e^sink + sum_j e^x_j); the LSE includes it, and a
        row that sees no key gets O = 0 and LSE = sinks[h].
    User snippets (CUDA C++ source text compiled into the kernel by NVRTC; the text is part of the kernel's cache
    key, and a compile error names the snippet's own lines, "score_mod(3): error ..."):
      score_mod: defines __device__ float score_mod(float score, int b, int h, int q_idx, int kv_idx,
        const flashjit::ModContext& ctx), which rewrites each logit x (after softcap and ALiBi);
      mask_mod: defines __device__ bool mask_mod(int b, int h, int q_idx, int kv_idx, const flashjit::ModContext&
        ctx), false hiding the pair (on top of the mask);
      ctx.seqlen_q, ctx.seqlen_k, and what the call passes: ctx.pointer<T>(i) the data pointer of aux_tensors[i]
      (CUDA tensors on q's device, at most 8), ctx.scalar(i) aux_scalars[i] (float32, at most 8), ctx.integer(i)
      aux_integers[i] (int64, at most 8). templates/attention/mod.cuh documents what a snippet sees.
    alignment: "bottom_right" (default: query i sits at key i + seqlen_k - seqlen_q, flash-attn's) or "top_left"
      (query i at key i, torch SDPA's is_causal): moves every mask's diagonal and ALiBi's distances.
    bias: an additive bias, like torch SDPA's attn_mask: a CUDA tensor on q's device of torch.float32, bfloat16,
      float16 or bool that broadcasts to [batch, heads_q, seqlen_q, seqlen_k] (expand() views and size-1 dimensions
      are read in place, stride 0). bias[b, h, i, j] is added to x after softcap and ALiBi, before score_mod (which
      sees the sum); a bool entry False hides the pair (True adds 0). A row whose keys are all hidden gets O = 0 and
      LSE = -inf (or the sink). Compiled into the kernel by its dtype.
    rel_bias: a relative-logits table (T5-style relative positions), torch.float32 [heads_q, extent] (or [1, extent]
      for every head) on q's device, its last dimension contiguous: query i, aligned to key a = i + seqlen_k -
      seqlen_q (top-left: a = i; per sequence where sequences have lengths of their own), and key j gain
      rel_bias[h, clamp(a - j + rel_bias_offset, 0, extent - 1)] in natural-log units, added with ALiBi (after
      softcap, before bias and score_mod). rel_bias_offset: an int in [-2^30, 2^30] (0 puts distance 0 at entry 0;
      extent - 1 - offset is then the last distance of its own). Eager calls only (ValueError under torch.compile).
    Paged keys and values (chunked prefill or prefix caching over a serving engine's cache, vLLM's block tables):
      page_table: torch.int32 [batch, max_pages_per_seq] on q's device (last dimension contiguous, rows back to
        back); k and v are then page pools [num_pages, page_size, heads_kv, head_dim] (page_size a power of two in
        [1, 256]; v's last dimension may differ), and key j of sequence b is token j % page_size of page
        page_table[b, j // page_size].
      seqused_k: torch.int32 [batch] on q's device, required with page_table: sequence b has seqused_k[b] keys
        (at most max_pages_per_seq * page_size; never read on the host) and its seqlen_q queries are its last
        positions (causal and windows bottom-right per sequence, or top-left with alignment). A page index outside
        [0, num_pages) reads as zeros (FLASHJIT_CHECK_PAGES=1 checks the table on the host first); the tokens of
        a sequence's last page past its length are read and masked, so they must hold finite values.
      seqused_k without page_table: a padded batch of contiguous k and v (flash-attn's seqused_k, a key padding
        mask): sequence b uses its first seqused_k[b] keys only (in [0, seqlen_k]; FLASHJIT_CHECK_SEQLENS=1 checks
        on the host), its queries being its last positions as with pages (or top-left with alignment); the other
        keys are never used, whatever they hold (NaN included). 0 keys: O = 0 and LSE = -inf (or the sink).
    block_mask: block sparsity, a flashjit.BlockMask (flashjit.block_mask(mask_mod, ...)) or FlexAttention's
      BlockMask (torch.nn.attention.flex_attention.create_block_mask): key blocks a query block does not list are
      never loaded, and its full blocks skip the mask_mod (pass the mask_mod the block mask was made from as well, for
      its partial blocks). Its B and H are 1 or the call's batch and heads_q; dense keys only (no page_table).
    return_lse: also return the log-sum-exp of each row, float32 [batch, heads_q, seqlen_q].
    config: an explicit kernel config (dict or JSON; missing fields come from the problem and the device).
    stream: torch.cuda.Stream or CUstream handle; default torch.cuda.current_stream(q.device).
    window: the deprecated name of window_size (a DeprecationWarning).

    Forward only: inputs that require grad (with grad mode on) raise RuntimeError. Under torch.compile and
    torch.export the call is the custom op flashjit::attention, variants, bias, snippets and block_mask included
    (stream= is then refused: use torch.cuda.stream).
    Asynchronous on the stream, no synchronization, no allocation besides out and lse. The first call for a
    kind of problem compiles (or reads from the disk cache) and loads its kernel: make it outside CUDA-graph
    capture (warmup, precompile). Bad arguments raise ValueError before anything runs; failures in the library
    raise FlashjitError.
    """
    if window is not None:
        window_size = renamed_window(window_size, window, "window", "flashjit.attention")
    traced = _traced_tensors("attention", _ATTENTION_NAMES, q, k, v, out)
    snip = _snippets_of("attention", traced, q, score_mod, mask_mod, aux_tensors, aux_scalars, aux_integers, alignment)
    if traced:
        return _traced_call("attention", "attention", (q, k, v), (), causal, window_size, chunk_size, softmax_scale,
                            return_lse, out, config, stream, softcap, alibi_slopes, sinks, page_table, seqused_k,
                            variants=traced_variants(snip, bias, block_mask, rel=(rel_bias, rel_bias_offset)))
    o, lse = attention_eager(q, k, v, causal, window_size, chunk_size, softmax_scale, return_lse, out, config, stream,
                             softcap, alibi_slopes, sinks, snip, page_table, seqused_k, bias, block_mask,
                             (rel_bias, rel_bias_offset))
    return (o, lse) if return_lse else o


def _page_fields(pages):
    """AttentionArgs fields of a paged call's Pages (none for contiguous keys; the pointers are set per call)."""
    return {} if pages is None else pages.fields()


def attention_eager(q, k, v, causal, window_size, chunk_size, softmax_scale, return_lse, out, config, stream,
                    softcap=0.0, alibi_slopes=None, sinks=None, snip=None, page_table=None, seqused_k=None, bias=None,
                    block_mask=None, rel=(None, 0)):
    """attention() straight through the library: (O, LSE or None). A block mask's metadata is part of the memo key
    (block_mask_key), its lists' addresses are set on every call. rel: (rel_bias, rel_bias_offset)."""
    rel_bias, rel_bias_offset = rel
    def check(out):
        problem, pages = check_attention_inputs(q, k, v, page_table, seqused_k)
        if block_mask is not None and pages is not None:
            raise ValueError("flashjit.attention: block_mask takes dense keys, not a page_table")
        sparse = block_mask_fields(block_mask, q, problem.batch, problem.heads_q, problem.seqlen_q, problem.seqlen_k)
        cap, alibi_stride = check_variants(q, problem.batch, problem.heads_q, softcap, alibi_slopes, sinks)
        bias_fields = check_bias(q, bias, (problem.batch, problem.heads_q, problem.seqlen_q, problem.seqlen_k))
        bias_fields.update(check_rel_bias(q, rel_bias, rel_bias_offset, problem.heads_q))
        mask, left, right, chunk, scale, out = _checked_options(q, out, ("batch", "sequence", "head"), causal,
                                                                window_size, chunk_size, softmax_scale, v)
        args = AttentionArgs(
            batch=problem.batch, seqlen_q=problem.seqlen_q, seqlen_k=problem.seqlen_k, heads_q=problem.heads_q,
            heads_kv=problem.heads_kv, head_dim=problem.head_dim, head_dim_v=problem.head_dim_v, dtype=problem.dtype,
            q_strides=Strides(*bshd_strides(q)), k_strides=Strides(*bshd_strides(k)),
            v_strides=Strides(*bshd_strides(v)), o_strides=Strides(*bshd_strides(out)),
            mask=mask, window_left=left, window_right=right, chunk_size=chunk, softmax_scale=scale, softcap=cap,
            alibi_slopes_batch_stride=alibi_stride, **snippet_fields(snip), **_page_fields(pages), **bias_fields,
            **sparse)
        return (bytes(args), (problem.batch, problem.heads_q, problem.seqlen_q)), out

    sparse_key = block_mask_key(block_mask)
    key = None if sparse_key is None else _forward_key(
        (q, k, v, out, alibi_slopes, sinks, page_table, seqused_k, bias, rel_bias),
        (causal, window_size, softmax_scale, softcap, chunk_size, rel_bias_offset), config)
    if key is not None:
        key += (sparse_key, _snippet_key(snip))
    return _forward(key, check, q, k, v, out, None, None, config, return_lse, stream, alibi_slopes, sinks, snip,
                    page_table, seqused_k, bias=bias, block_mask=block_mask, rel_bias=rel_bias)


def attention_varlen(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor, cu_seqlens_k: Optional[Tensor],
                     max_seqlen_q: int, max_seqlen_k: int, *, causal: bool = False, window_size: Window = NO_WINDOW,
                     chunk_size: int = 0, softmax_scale: Optional[float] = None, softcap: float = 0.0,
                     alibi_slopes: Optional[Tensor] = None, sinks: Optional[Tensor] = None, return_lse: bool = False,
                     out: Optional[Tensor] = None, config: Optional[Config] = None, stream: Stream = None,
                     window: Optional[Window] = None, score_mod: Optional[str] = None, mask_mod: Optional[str] = None,
                     aux_tensors: Sequence[Tensor] = (), aux_scalars: Sequence[float] = (),
                     aux_integers: Sequence[int] = (), alignment: str = "bottom_right",
                     page_table: Optional[Tensor] = None, seqused_k: Optional[Tensor] = None,
                     page_indptr: Optional[Tensor] = None, last_page_len: Optional[Tensor] = None,
                     bias: Optional[Tensor] = None, rel_bias: Optional[Tensor] = None,
                     rel_bias_offset: int = 0) -> Union[Tensor, Tuple[Tensor, Tensor]]:
    """Attention over a ragged batch of packed sequences, like flash_attn_varlen_func.

    q: [total_q, heads_q, head_dim], k, v: [total_k, heads_kv, head_dim] (the sequences back to back);
    cu_seqlens_q, cu_seqlens_k: torch.int32 [batch + 1] on the same device, the offsets of each sequence
    (sequence b owns rows cu_seqlens_q[b]:cu_seqlens_q[b + 1] of q and cu_seqlens_k[b]:cu_seqlens_k[b + 1] of
    k and v; a length may be 0). They are never read on the host (no synchronization): they must be
    non-decreasing and stay within total_q / total_k. max_seqlen_q, max_seqlen_k: the longest lengths (ints;
    query rows past max_seqlen_q are not computed). Masks apply per sequence with its own lengths: causal is
    bottom-right aligned (query i of a sequence sees keys j <= i + len_k - len_q), and so is the window's
    diagonal; rows that see no key get O = 0 and LSE = -inf.
    Other arguments as for attention(): dtypes, strides (last dimension contiguous, the others multiples of 8
    elements), causal, window_size, chunk_size, softmax_scale, the variants softcap, alibi_slopes ([heads_q] or
    [batch, heads_q], batch the number of sequences; distances within each sequence) and sinks, the snippets
    score_mod / mask_mod with aux_tensors, aux_scalars, aux_integers (b is the sequence, q_idx and kv_idx positions
    within it), alignment (per sequence), bias (broadcasting to [batch, heads_q, max_seqlen_q, max_seqlen_k],
    indexed by positions within each sequence: row i of sequence b is its i-th query, column j its j-th key),
    rel_bias and rel_bias_offset (distances within each sequence), out
    (like q), config (varlen is set from the problem), stream, window (deprecated).
    Paged keys and values (chunked prefill, prefix caching; flash-attn's block_table): with page_table, torch.int32
    [batch, max_pages_per_seq] on q's device (last dimension contiguous, rows back to back), k and v are page pools
    [num_pages, page_size, heads_kv, head_dim] (page_size a power of two in [1, 256]) and key j of sequence b is
    token j % page_size of page page_table[b, j // page_size]; cu_seqlens_k must be None and seqused_k, torch.int32
    [batch] on q's device, gives each sequence's key count (never read on the host); max_seqlen_k bounds them, at
    most max_pages_per_seq * page_size. Each sequence's queries are its last key positions (masks bottom-right per
    sequence). A page index outside [0, num_pages) reads as zeros (FLASHJIT_CHECK_PAGES=1 checks the table on the
    host first); the tokens of a sequence's last page past its length are read and masked (finite values there).
    FlashInfer's CSR page table (paged_kv_indptr / paged_kv_indices / paged_kv_last_page_len): with page_indptr,
    torch.int32 [batch + 1] on q's device (non-decreasing from >= 0), page_table is the flat page index array,
    torch.int32 [num_indices], and sequence b's pages are page_table[page_indptr[b]:page_indptr[b + 1]]; its key
    count is seqused_k[b], or with last_page_len (torch.int32 [batch], the tokens of its last page, in [1,
    page_size]; seqused_k None then) (pages - 1) * page_size + last_page_len[b]. max_seqlen_k bounds the counts
    (at most num_indices * page_size). Neither array is read on the host (FLASHJIT_CHECK_PAGES=1 checks them).
    seqused_k without page_table (beside cu_seqlens_k, FA3's): sequence b uses the first seqused_k[b] of its
    cu_seqlens_k keys (torch.int32 [batch] on q's device; masks aligned to that count); the others are never used,
    whatever they hold (FLASHJIT_CHECK_SEQLENS=1 checks the counts on the host).
    return_lse: also return the log-sum-exp, float32 [heads_q, total_q] (flash-attn's varlen layout).

    Forward only (inputs that require grad raise RuntimeError); traced as the custom op flashjit::attention_varlen.
    Asynchronous on the stream, no allocation besides out and lse; warm up (one call of the kind) before
    CUDA-graph capture. Bad arguments raise ValueError before anything runs; library failures FlashjitError.
    """
    if window is not None:
        window_size = renamed_window(window_size, window, "window", "flashjit.attention_varlen")
    traced = _traced_tensors("attention_varlen", _VARLEN_NAMES, q, k, v, cu_seqlens_q, cu_seqlens_k, out)
    snip = _snippets_of("attention_varlen", traced, q, score_mod, mask_mod, aux_tensors, aux_scalars, aux_integers,
                        alignment)
    if traced:
        return _traced_call("attention_varlen", "attention_varlen", (q, k, v, cu_seqlens_q, cu_seqlens_k),
                            (max_seqlen_q, max_seqlen_k), causal, window_size, chunk_size, softmax_scale, return_lse,
                            out, config, stream, softcap, alibi_slopes, sinks, page_table, seqused_k,
                            (page_indptr, last_page_len), traced_variants(snip, bias, rel=(rel_bias, rel_bias_offset)))
    o, lse = attention_varlen_eager(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal,
                                    window_size, chunk_size, softmax_scale, return_lse, out, config, stream, softcap,
                                    alibi_slopes, sinks, snip, page_table, seqused_k, page_indptr, last_page_len, bias,
                                    (rel_bias, rel_bias_offset))
    return (o, lse) if return_lse else o


def attention_varlen_eager(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, window_size,
                           chunk_size, softmax_scale, return_lse, out, config, stream, softcap=0.0, alibi_slopes=None,
                           sinks=None, snip=None, page_table=None, seqused_k=None, page_indptr=None,
                           last_page_len=None, bias=None, rel=(None, 0)):
    """attention_varlen() straight through the library: (O, LSE or None). rel: (rel_bias, rel_bias_offset)."""
    rel_bias, rel_bias_offset = rel
    def check(out):
        problem, pages = check_attention_varlen_inputs(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                                       max_seqlen_k, page_table, seqused_k, False, page_indptr,
                                                       last_page_len)
        cap, alibi_stride = check_variants(q, problem.batch, problem.heads_q, softcap, alibi_slopes, sinks)
        bias_fields = check_bias(q, bias, (problem.batch, problem.heads_q, problem.max_seqlen_q, problem.max_seqlen_k))
        bias_fields.update(check_rel_bias(q, rel_bias, rel_bias_offset, problem.heads_q))
        mask, left, right, chunk, scale, out = _checked_options(q, out, ("sequence", "head"), causal, window_size,
                                                                chunk_size, softmax_scale, v)
        # Page pools [num_pages, page_size, Hkv, D] have a page stride (the batch field); packed k and v none.
        kv_strides = packed_strides if pages is None else bshd_strides
        args = AttentionArgs(
            batch=problem.batch, seqlen_q=problem.max_seqlen_q, seqlen_k=problem.max_seqlen_k, heads_q=problem.heads_q,
            heads_kv=problem.heads_kv, head_dim=problem.head_dim, head_dim_v=problem.head_dim_v, dtype=problem.dtype,
            q_strides=Strides(*packed_strides(q)), k_strides=Strides(*kv_strides(k)),
            v_strides=Strides(*kv_strides(v)), o_strides=Strides(*packed_strides(out)),
            mask=mask, window_left=left, window_right=right, chunk_size=chunk, softmax_scale=scale,
            total_q=problem.total_q, total_k=problem.total_k, softcap=cap, alibi_slopes_batch_stride=alibi_stride,
            **snippet_fields(snip), **_page_fields(pages), **bias_fields)
        return (bytes(args), (problem.heads_q, problem.total_q)), out

    key = _forward_key(
        (q, k, v, out, cu_seqlens_q, cu_seqlens_k, alibi_slopes, sinks, page_table, seqused_k, page_indptr,
         last_page_len, bias, rel_bias),
        (causal, window_size, softmax_scale, softcap, max_seqlen_q, max_seqlen_k, chunk_size, rel_bias_offset), config)
    if key is not None:
        key += (_snippet_key(snip),)
    return _forward(key, check, q, k, v, out, cu_seqlens_q, cu_seqlens_k, config, return_lse, stream, alibi_slopes,
                    sinks, snip, page_table, seqused_k, page_indptr, last_page_len, bias, rel_bias=rel_bias)


def warmup(q: Tensor, k: Tensor, v: Tensor, **kwargs: Any) -> Union[Tensor, Tuple[Tensor, Tensor]]:
    """Runs attention(q, k, v, **kwargs) once, outside CUDA-graph capture, so that the kernel for this kind of
    problem (dtype, head dim, mask, shapes) is compiled or read from the disk cache and loaded on the device;
    later calls, captured ones included, only launch. Returns what attention returns."""
    import torch
    if torch.cuda.is_current_stream_capturing():
        raise RuntimeError("flashjit.warmup must run before CUDA-graph capture, not during it")
    return attention(q, k, v, **kwargs)


def _scratch(device):
    """A small tensor on `device` (default: the current CUDA device) whose address names the device to the library."""
    import torch
    target = torch.device("cuda", torch.cuda.current_device()) if device is None else torch.device(device)
    return torch.empty(_SCRATCH_BYTES, dtype=torch.uint8, device=target)


def _problem_args(q_shape, k_shape, dtype, causal, window_size, chunk_size, address, softcap=0.0, alibi=False,
                  sinks=False, page_size=0, bias=None, rel_bias=False, seqused_k=False, **fields):
    """AttentionArgs of a problem given by shapes, every tensor at `address` (nonzero), alibi_slopes and sinks too
    when asked for (else NULL), and a bias of dtype `bias` (broadcast everywhere: strides 0) unless None.
    page_size > 0: keys in pages of that many tokens (page_table and seqused_k at `address`, each sequence's
    seqlen_k keys in its own pages). rel_bias: a relative-logits table (one row for every head); seqused_k: key
    counts over contiguous keys (with pages they are always there)."""
    b, sq, hq, d = shape4("q_shape", q_shape)
    _, sk, hkv, _ = shape4("k_shape", q_shape if k_shape is None else k_shape)
    code = dtype_code(dtype)
    mask, left, right, chunk = mask_of(causal, window_size, chunk_size)
    cap, alibi, sinks = shape_variants(softcap, alibi, sinks)
    bias_type = bias_type_code(bias)
    if bias_type:
        fields.update(bias=address, bias_type=bias_type)
    for name, flag in (("rel_bias", rel_bias), ("seqused_k", seqused_k)):
        if type(flag) is not bool:
            raise ValueError(f"{name} must be True or False (the kernel of a call with {name}=), got {flag!r}")
    if rel_bias:
        fields.update(rel_bias=address, rel_bias_extent=1)
    if seqused_k:
        fields.update(seqused_k=address)
    page_size = _int_arg("page_size", page_size, 0, 256)
    if page_size:
        if page_size not in PAGE_SIZES:
            raise ValueError(f"page_size must be 0 (contiguous keys) or a power of two in [1, 256], got {page_size}")
        pages_per_seq = -(-sk // page_size)
        fields.update(page_table=address, seqused_k=address, page_size=page_size, max_pages_per_seq=pages_per_seq,
                      num_pages=min(b * pages_per_seq, INT32_MAX))
    return AttentionArgs(q=address, k=address, v=address, o=address, batch=b, seqlen_q=sq, seqlen_k=sk, heads_q=hq,
                         heads_kv=hkv, head_dim=d, dtype=code, mask=mask, window_left=left, window_right=right,
                         chunk_size=chunk, softcap=cap, alibi_slopes=address if alibi else None,
                         sinks=address if sinks else None, **fields)


def set_addresses(args, address):
    """Moves every tensor of _problem_args' args to `address`: q, k, v, o, and alibi_slopes / sinks / page_table /
    seqused_k / bias when set."""
    args.q = args.k = args.v = args.o = address
    for name in ("alibi_slopes", "sinks", "page_table", "seqused_k", "bias", "rel_bias"):
        if getattr(args, name):
            setattr(args, name, address)


def precompile(config: Optional[Config] = None, *, q_shape: Optional[Tuple[int, int, int, int]] = None,
               k_shape: Optional[Tuple[int, int, int, int]] = None, dtype: Any = None, causal: bool = False,
               window_size: Window = NO_WINDOW, chunk_size: int = 0, softcap: Union[float, bool] = 0.0,
               alibi: bool = False, sinks: bool = False, device: Any = None,
               window: Optional[Window] = None, score_mod: Optional[str] = None, mask_mod: Optional[str] = None,
               alignment: str = "bottom_right", page_size: int = 0, bias: Any = None, rel_bias: bool = False,
               seqused_k: bool = False) -> dict:
    """Gets a kernel ready ahead of use and returns its info (name, config, registers, spills, compile_ms,
    cache_hit, ...).

    precompile(config): compiles a config (dict or JSON) into the disk cache; needs no GPU.
    precompile(q_shape=..., k_shape=..., dtype=..., causal=..., window_size=..., chunk_size=..., device=...): the
    kernel attention() would use for that problem (or `config`, completed from the problem) is compiled or read
    from the cache and loaded on the device (default: the current CUDA device), without running it, so
    that attention() on such tensors may be captured into a CUDA graph. k_shape defaults to q_shape. The variants:
    softcap (a number > 0 or True: on), alibi and sinks (True: the kernel attention() uses with alibi_slopes= and
    sinks=), score_mod and mask_mod (the snippets' text) and alignment, as for attention(); page_size > 0: the kernel
    of a call with page_table= over pages of that many tokens (k_shape's seqlen_k keys per sequence); bias: the
    kernel of a call with bias= of that dtype (torch.float32, bfloat16, float16, bool, or 'fp32', 'bf16', 'fp16',
    'bool'); rel_bias, seqused_k (True): that of a call with rel_bias=, or with seqused_k= over contiguous keys.
    window: the deprecated name of window_size.
    """
    if window is not None:
        window_size = renamed_window(window_size, window, "window", "flashjit.precompile")
    explicit = None if config is None else config_json(config)
    if q_shape is None:
        if explicit is None:
            raise ValueError("precompile needs a config, or q_shape and dtype of the problem to prepare")
        return json.loads(_runtime.text(_library.load().flashjit_compile, _runtime.handle(), explicit))
    snip = snippets(None, score_mod, mask_mod, alignment=alignment)
    args = _problem_args(q_shape, k_shape, dtype, causal, window_size, chunk_size, PLACEHOLDER, softcap, alibi, sinks,
                         page_size, bias, rel_bias, seqused_k, config_json=explicit, **snippet_fields(snip))
    lib = _library.load()
    scratch = _scratch(device)
    set_addresses(args, scratch.data_ptr())
    info = _runtime.text(lib.flashjit_prepare, _runtime.handle(), ctypes.byref(args))
    del scratch  # only its address was used, to name the device
    return json.loads(info)
