"""decode() (token generation over a KV cache), prepare_decode() before CUDA-graph capture, and merge() of
attention states, on PyTorch tensors.

The split-KV workspace comes from torch's caching allocator on the current stream (never from the library's
own per-stream workspace), so decode may be captured on any stream, torch.cuda.graph's side stream included,
once its kernels are loaded. torch is imported inside the functions, never at module import. Traced calls
(torch.compile, torch.export, fake tensors) go through the custom ops flashjit::decode and flashjit::merge (_ops.py);
plain eager ones straight to the library (decode_eager, merge_eager: what the ops run)."""
from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Optional, Sequence, Tuple, Union

from . import _library, _memo, _runtime
from ._abi import DecodeArgs, MergeArgs, Strides
from ._attention import _call, _output, _snippet_key, _snippets_of, _stream_handle, _traced_tensors, traced_variants
from ._checks import (DECODE_BIAS_DIMS, INT32_MAX, NO_WINDOW, _int_arg, bias_address, bshd_strides, check_bias,
                      check_decode_inputs, check_decode_options, check_merge_inputs, check_merge_out, check_out,
                      check_variants, decode_window_left, renamed_window, scale_of, softcap_of)

if TYPE_CHECKING:
    from ._attention import Stream, Tensor, Window

_DECODE_NAMES = ("q", "k_cache", "v_cache", "seqlens_k", "page_table", "out")

# The checked call (DecodeArgs without addresses or stream, workspace bytes, LSE shape) per call key (_memo),
# and the checked merge (MergeArgs without addresses or stream, LSE shape).
_calls = _memo.Memo()
_merges = _memo.Memo()


def _torch_stream(stream, device):
    import torch
    if isinstance(stream, torch.cuda.Stream):
        return stream
    return torch.cuda.ExternalStream(int(getattr(stream, "cuda_stream", stream)), device=device)


def _call_key(q, k_cache, v_cache, seqlens_k, page_table, out, window_left, softmax_scale, num_splits, split_merge,
              max_seqlen_k, chunk_size, softcap, alibi_slopes, sinks, new_kv=None, page_indptr=None,
              last_page_len=None, bias=None):
    if not (_memo.ints(window_left, num_splits, max_seqlen_k, chunk_size) and _memo.number(softmax_scale)
            and softcap is not None and _memo.number(softcap) and type(split_merge) is str):
        return None

    def key(t):
        return None if t is None else _memo.tensor_key(t)
    try:
        return (key(q), key(k_cache), key(v_cache), key(seqlens_k), key(page_table), key(out), window_left,
                softmax_scale, num_splits, split_merge, max_seqlen_k, chunk_size, softcap, key(alibi_slopes),
                key(sinks), None if new_kv is None else (key(new_kv[0]), key(new_kv[1])), key(page_indptr),
                key(last_page_len), key(bias))
    except Exception:  # noqa: BLE001  (not a tensor: the checks say what is wrong)
        return None


def _addresses(q, out, k_cache, v_cache, seqlens_k, page_table, alibi_slopes=None, sinks=None, new_kv=None,
               page_indptr=None, last_page_len=None):
    """The data pointers in _set_addresses' order (0 for a missing out, lengths, page table, slopes, sinks, new
    rows or CSR arrays)."""
    def ptr(t):
        return 0 if t is None else t.data_ptr()
    return (q.data_ptr(), ptr(out), k_cache.data_ptr(), v_cache.data_ptr(), ptr(seqlens_k), ptr(page_table),
            ptr(alibi_slopes), ptr(sinks), 0 if new_kv is None else new_kv[0].data_ptr(),
            0 if new_kv is None else new_kv[1].data_ptr(), ptr(page_indptr), ptr(last_page_len))


def _checked_call(q, k_cache, v_cache, seqlens_k, page_table, window_left, softmax_scale, out, num_splits,
                  split_merge, max_seqlen_k, chunk_size, softcap=0.0, alibi_slopes=None, sinks=None, snip=None,
                  new_kv=None, page_indptr=None, last_page_len=None, bias=None):
    """Every check, then (DecodeArgs bytes without addresses or stream, workspace bytes, LSE shape) and out
    (allocated like q when None). new_kv: (k, v) [B, S_new, Hkv, D] appended to the cache first (the fused call)."""
    args, problem = decode_args(q, k_cache, v_cache, seqlens_k, page_table, window_left, softmax_scale, num_splits,
                                split_merge, max_seqlen_k, chunk_size, softcap, alibi_slopes, sinks, snip,
                                page_indptr, last_page_len, bias)
    if new_kv is not None:
        _set_new_rows(args, problem, k_cache, *new_kv)
    if out is not None:
        check_out(out, q)
    out = _output(out, q)
    args.o_strides = Strides(*bshd_strides(out))
    # The split plan depends on the device and these fields, not on the addresses (any of the call's will do).
    _set_addresses(args, *_addresses(q, out, k_cache, v_cache, seqlens_k, page_table, alibi_slopes, sinks, new_kv,
                                     page_indptr, last_page_len))
    args.bias = bias_address(bias)
    needed = _library.load().flashjit_decode_workspace_bytes(_runtime.handle(), ctypes.byref(args))
    if needed < 0:
        _runtime.raise_for(-needed)
    _set_addresses(args, *(0,) * 12)
    args.bias = 0
    return (bytes(args), needed, (problem.batch, problem.heads_q, problem.q_len)), out


def decode_args(q, k_cache, v_cache, seqlens_k, page_table, window_left, softmax_scale, num_splits, split_merge,
                max_seqlen_k, chunk_size, softcap=0.0, alibi_slopes=None, sinks=None, snip=None, page_indptr=None,
                last_page_len=None, bias=None):
    """(DecodeArgs without addresses or stream, O's strides those of q, DecodeProblem) after every check of the
    inputs and options (bias: broadcasting to [batch, heads_q, q_len, max_seqlen_k])."""
    problem = check_decode_inputs(q, k_cache, v_cache, seqlens_k, page_table, max_seqlen_k, False, page_indptr,
                                  last_page_len)
    window_left, num_splits, split_merge, chunk_size = check_decode_options(window_left, num_splits, split_merge,
                                                                            chunk_size)
    scale = scale_of(softmax_scale)
    cap, alibi_stride = check_variants(q, problem.batch, problem.heads_q, softcap, alibi_slopes, sinks)
    args = DecodeArgs(
        batch=problem.batch, q_len=problem.q_len, heads_q=problem.heads_q, heads_kv=problem.heads_kv,
        head_dim=problem.head_dim, dtype=problem.dtype, max_seqlen_k=problem.max_seqlen_k, layout=problem.layout,
        cache_seqlen=problem.cache_seqlen, num_pages=problem.num_pages, page_size=problem.page_size,
        max_pages_per_seq=problem.max_pages_per_seq, q_strides=Strides(*bshd_strides(q)),
        o_strides=Strides(*bshd_strides(q)), k_strides=Strides(*bshd_strides(k_cache)),
        v_strides=Strides(*bshd_strides(v_cache)), window_left=window_left, softmax_scale=scale,
        num_splits=num_splits, split_merge=split_merge, chunk_size=chunk_size, softcap=cap,
        alibi_slopes_batch_stride=alibi_stride, **({} if snip is None else snip.fields()),
        **check_bias(q, bias, (problem.batch, problem.heads_q, problem.q_len, problem.max_seqlen_k),
                     DECODE_BIAS_DIMS))
    return args, problem


def _set_addresses(args, q, o, k_cache, v_cache, seqlens_k, page_table, alibi_slopes=0, sinks=0, k_new=0, v_new=0,
                   page_indptr=0, last_page_len=0):
    (args.q, args.o, args.k_cache, args.v_cache, args.seqlens_k, args.page_table, args.alibi_slopes,
     args.sinks, args.k_new, args.v_new, args.page_indptr, args.last_page_len) = (
        q, o, k_cache, v_cache, seqlens_k, page_table, alibi_slopes, sinks, k_new, v_new, page_indptr, last_page_len)


def _set_new_rows(args, problem, k_cache, k, v):
    """The fused append's fields of checked new rows k, v [B, S_new, Hkv, D] (addresses apart)."""
    from ._append import check_new_rows
    check_new_rows("k", k, "v", v, k_cache, False)
    for name, t in (("k", k), ("v", v)):
        if str(t.dtype) != str(k_cache.dtype) or str(t.device) != str(k_cache.device):
            raise ValueError(f"{name}: a {t.dtype} tensor on {t.device}, but the cache is {k_cache.dtype} on "
                             f"{k_cache.device}")
    if k.shape[0] != problem.batch:
        raise ValueError(f"k: batch {k.shape[0]} differs from q's {problem.batch}")
    args.k_new_strides, args.v_new_strides = Strides(*bshd_strides(k)), Strides(*bshd_strides(v))
    args.new_len = k.shape[1]


def _decode_call(q, k_cache, v_cache, seqlens_k, page_table, window_left, softmax_scale, return_lse, out, num_splits,
                 split_merge, max_seqlen_k, stream, chunk_size, softcap=0.0, alibi_slopes=None, sinks=None, snip=None,
                 new_kv=None, page_indptr=None, last_page_len=None, bias=None):
    """(args, tensors kept alive for the call, out, lse) with the arguments checked and the outputs allocated:
    every check on the first call of a key (_memo; its snippets, snip, part of the key), the addresses' alignment (and
    the snippets' aux tensor addresses) on every call."""
    key = _call_key(
        q, k_cache, v_cache, seqlens_k, page_table, out, window_left, softmax_scale, num_splits, split_merge,
        max_seqlen_k, chunk_size, softcap, alibi_slopes, sinks, new_kv, page_indptr, last_page_len, bias)
    if key is not None:
        key += (_snippet_key(snip),)
    checked, out, addresses = _calls.checked(
        key, lambda o: _checked_call(q, k_cache, v_cache, seqlens_k, page_table, window_left, softmax_scale, o,
                                     num_splits, split_merge, max_seqlen_k, chunk_size, softcap, alibi_slopes, sinks,
                                     snip, new_kv, page_indptr, last_page_len, bias),
        out, lambda: _output(None, q),
        lambda o: _addresses(q, o, k_cache, v_cache, seqlens_k, page_table, alibi_slopes, sinks, new_kv, page_indptr,
                             last_page_len))
    template, needed, lse_shape = checked
    args = DecodeArgs.from_buffer_copy(template)
    _set_addresses(args, *addresses)
    args.bias = bias_address(bias)
    if snip is not None:
        snip.set_aux_pointers(args)
    lse = None
    if return_lse or needed > 0:
        import torch
    if return_lse:
        lse = q.new_empty(lse_shape, dtype=torch.float32)
        args.lse = lse.data_ptr()
    args.stream = _stream_handle(stream, q.device)
    workspace = None
    if needed > 0:
        # On the current stream: the caching allocator reuses it only after this stream's decode is done, and
        # inside graph capture it comes from the graph's pool.
        workspace = q.new_empty((needed,), dtype=torch.uint8)
        if stream is not None:  # used on another stream than the one it was allocated on
            workspace.record_stream(_torch_stream(stream, q.device))
        args.workspace, args.workspace_bytes = workspace.data_ptr(), needed
    return args, workspace, out, lse


def _window_left(window_size, window_left, function):
    """decode's window_left of window_size (the default object costs nothing), or of the deprecated keyword."""
    if window_left is not None:
        window_size = renamed_window(window_size, window_left, "window_left", function,
                                     lambda v: (_int_arg("window_left", v, -1, INT32_MAX), 0))
    return -1 if window_size is NO_WINDOW else decode_window_left(window_size)


def decode(q: Tensor, k_cache: Tensor, v_cache: Tensor, seqlens_k: Optional[Tensor], *,
           page_table: Optional[Tensor] = None, page_indptr: Optional[Tensor] = None,
           last_page_len: Optional[Tensor] = None, window_size: Window = NO_WINDOW, chunk_size: int = 0, softmax_scale: Optional[float] = None,
           softcap: float = 0.0, alibi_slopes: Optional[Tensor] = None, sinks: Optional[Tensor] = None,
           return_lse: bool = False, out: Optional[Tensor] = None, num_splits: int = 0, split_merge: str = "auto",
           max_seqlen_k: Optional[int] = None, stream: Stream = None, window_left: Optional[int] = None,
           score_mod: Optional[str] = None, mask_mod: Optional[str] = None, aux_tensors: Sequence[Tensor] = (),
           aux_scalars: Sequence[float] = (), aux_integers: Sequence[int] = (),
           bias: Optional[Tensor] = None) -> Union[Tensor, Tuple[Tensor, Tensor]]:
    """Attention of new query tokens over a KV cache (token generation), with GQA and an optional paged cache.

    q: [batch, q_len, heads_q, head_dim], the q_len (1..16) newest tokens of each sequence, already appended to
    the cache. Contiguous cache (page_table None): k_cache, v_cache [batch, max_seqlen, heads_kv, head_dim].
    Paged cache: k_cache, v_cache [num_pages, page_size, heads_kv, head_dim] and page_table [batch, max_pages]
    int32 (key j of sequence b is token j % page_size of page page_table[b, j // page_size]; page_size a power
    of two up to 256). FlashInfer's CSR page table (paged_kv_indptr / paged_kv_indices / paged_kv_last_page_len):
    with page_indptr, int32 [batch + 1] on the device (non-decreasing from >= 0), page_table is the flat page index
    array, int32 [num_indices], and sequence b's pages are page_table[page_indptr[b]:page_indptr[b + 1]]; its key
    count is seqlens_k[b], or with last_page_len (int32 [batch], the tokens of its last page, in [1, page_size];
    seqlens_k None then) (pages - 1) * page_size + last_page_len[b] (both clamped to its pages on the device).
    seqlens_k: int32 [batch] on the device, the keys of each sequence (new tokens included).
    Token t of sequence b sits at position seqlens_k[b] - q_len + t and sees keys up to it (causal among the new
    tokens); window_size = (left, 0) (flash-attn's convention; right must be 0 or -1) also limits it to the left
    keys before it, or else chunk_size > 0 (chunked-causal attention; not together with a window) to the keys of
    its own chunk, those j with j // chunk_size == position // chunk_size. window_left=N: the deprecated form of
    window_size=(N, 0) (a DeprecationWarning).

    max_seqlen_k: a host-side bound on every seqlens_k entry (the keys are split for parallelism by this bound;
    larger entries are clamped to it). Default: the cache's capacity (max_seqlen, or max_pages * page_size; with a
    CSR table num_indices * page_size, every page one sequence's: pass the longest sequence's length instead, since
    the keys are split by this bound).
    seqlens_k is never read on the host, so decode never synchronizes. softmax_scale: default 1/sqrt(head_dim).
    Variants as for attention(): softcap, alibi_slopes (float32 [heads_q] or [batch, heads_q]; the distance of key j
    from token t is |seqlens_k[b] - q_len + t - j|) and sinks (float32 [heads_q], gpt-oss: they join each row where its
    key splits merge); the snippets score_mod / mask_mod with aux_tensors, aux_scalars, aux_integers (q_idx is the new
    token t, 0 .. q_len - 1, at key seqlens_k[b] - q_len + t; ctx.seqlen_q is q_len, ctx.seqlen_k the sequence's
    length), and bias (float32, bfloat16, float16 or bool, broadcasting to [batch, heads_q, q_len, max_seqlen_k]:
    row t is new token t, column j the sequence's key j); all of them under torch.compile too (the custom op).
    num_splits: 0 plans the key splits, 1..32 forces a count. split_merge: how split partial states merge, "auto"
    (the planner), "combine" (a second kernel) or "cluster" (a thread-block cluster per sequence and KV head,
    sm_90+, at most 16 splits); for tests and tuning. out: a tensor like q to write into.
    return_lse: also return the log-sum-exp of each row, float32 [batch, heads_q, q_len] (what merge takes).
    stream: default torch.cuda.current_stream(q.device).

    Forward only (inputs that require grad raise RuntimeError); traced (torch.compile, torch.export) as the custom
    op flashjit::decode, stream= refused there. Asynchronous; allocates only out, lse and the split workspace,
    through torch's allocator. The first call for a kind of problem compiles or loads its kernels: make it outside
    CUDA-graph capture (prepare_decode). Bad arguments raise ValueError before anything runs; the library's checks
    and failures raise FlashjitError.
    """
    left = _window_left(window_size, window_left, "flashjit.decode")
    traced = _traced_tensors("decode", _DECODE_NAMES, q, k_cache, v_cache, seqlens_k, page_table, out)
    csr = {} if page_indptr is None and last_page_len is None else {"page_indptr": page_indptr,
                                                                  "last_page_len": last_page_len}
    snip = _snippets_of("decode", traced, q, score_mod, mask_mod, aux_tensors, aux_scalars, aux_integers,
                        "bottom_right", with_alignment=False)
    if traced:
        from . import _ops
        _ops.refuse_stream("decode", stream)
        scale = scale_of(softmax_scale)
        o, lse = _ops.ops().decode(q, k_cache, v_cache, seqlens_k, page_table, left, int(chunk_size),
                                   scale if scale > 0 else None, bool(return_lse), int(num_splits), split_merge,
                                   max_seqlen_k, softcap_of(softcap), alibi_slopes, sinks, **csr,
                                   **traced_variants(snip, bias, with_alignment=False))
        if out is not None:
            out.copy_(o)
            o = out
        return (o, lse) if return_lse else o
    o, lse = decode_eager(q, k_cache, v_cache, seqlens_k, page_table, left, softmax_scale, return_lse, out, num_splits,
                          split_merge, max_seqlen_k, stream, chunk_size, softcap, alibi_slopes, sinks, snip, None,
                          page_indptr, last_page_len, bias)
    return (o, lse) if return_lse else o


def decode_eager(q, k_cache, v_cache, seqlens_k, page_table, window_left, softmax_scale, return_lse, out, num_splits,
                 split_merge, max_seqlen_k, stream, chunk_size, softcap=0.0, alibi_slopes=None, sinks=None, snip=None,
                 new_kv=None, page_indptr=None, last_page_len=None, bias=None):
    """decode() straight through the library, window_left an int: (O, LSE or None). new_kv: (k, v) [B, S_new, Hkv,
    D] written into the cache at seqlens_k first (the library's fused append; seqlens_k then counts the keys
    before them)."""
    args, workspace, out, lse = _decode_call(q, k_cache, v_cache, seqlens_k, page_table, window_left, softmax_scale,
                                             return_lse, out, num_splits, split_merge, max_seqlen_k, stream,
                                             chunk_size, softcap, alibi_slopes, sinks, snip, new_kv, page_indptr,
                                             last_page_len, bias)
    _runtime.check(_library.load().flashjit_decode(_runtime.handle(), ctypes.byref(args)))
    del workspace  # freed on this stream, after the kernels that use it
    return out, lse


def prepare_decode(q: Tensor, k_cache: Tensor, v_cache: Tensor, seqlens_k: Optional[Tensor], *,
                   page_table: Optional[Tensor] = None, page_indptr: Optional[Tensor] = None,
                   last_page_len: Optional[Tensor] = None, window_size: Window = NO_WINDOW, chunk_size: int = 0,
                   softmax_scale: Optional[float] = None, softcap: float = 0.0, alibi_slopes: Optional[Tensor] = None,
                   sinks: Optional[Tensor] = None, return_lse: bool = False, out: Optional[Tensor] = None,
                   num_splits: int = 0, split_merge: str = "auto", max_seqlen_k: Optional[int] = None,
                   stream: Stream = None, window_left: Optional[int] = None, score_mod: Optional[str] = None,
                   mask_mod: Optional[str] = None, aux_tensors: Sequence[Tensor] = (), aux_scalars: Sequence[float] = (),
                   aux_integers: Sequence[int] = (), bias: Optional[Tensor] = None) -> None:
    """Gets decode(...)'s kernels, for the same arguments, compiled (or read from the disk cache) and loaded on
    the device without running them (the tensors are not read), so that decode on tensors of this kind (dtype,
    head dim, heads, q_len, layout and page size, mask (window or chunks), variants, split count and merge) may then
    be captured into a CUDA graph, on any stream. Returns None."""
    del return_lse  # the kernels are the same with or without LSE
    left = _window_left(window_size, window_left, "flashjit.prepare_decode")
    snip = _snippets_of("prepare_decode", False, q, score_mod, mask_mod, aux_tensors, aux_scalars, aux_integers,
                        "bottom_right")
    args, workspace, _, _ = _decode_call(q, k_cache, v_cache, seqlens_k, page_table, left, softmax_scale, False,
                                         out, num_splits, split_merge, max_seqlen_k, stream, chunk_size, softcap,
                                         alibi_slopes, sinks, snip, None, page_indptr, last_page_len, bias)
    import torch
    if torch.cuda.is_current_stream_capturing():
        raise RuntimeError("flashjit.prepare_decode must run before CUDA-graph capture, not during it")
    _runtime.check(_library.load().flashjit_prepare_decode(_runtime.handle(), ctypes.byref(args)))
    del workspace


def merge(outs: Sequence[Tensor], lses: Sequence[Tensor], *, out: Optional[Tensor] = None, return_lse: bool = False,
          stream: Stream = None) -> Union[Tensor, Tuple[Tensor, Tensor]]:
    """Merges attention states of the same queries over disjoint key sets (shared-prefix cascades, context
    parallelism): O = sum_i exp(lse_i - lse) * outs[i] with lse = log sum_i exp(lse_i), which is the attention
    over the union of the key sets. A state whose LSE is -inf counts for nothing; a row empty in every state
    gets O = 0 and LSE = -inf.

    outs: 1..32 tensors [batch, seqlen, heads, head_dim] of one dtype (bf16 or fp16), shape and layout (last
    dimension contiguous); lses: as many float32 [batch, heads, seqlen] contiguous tensors (what attention and
    decode return with return_lse=True). out: a tensor like outs[0] to write into (none of the inputs).
    return_lse: also return the merged LSE [batch, heads, seqlen]. stream: default the current stream.

    Forward only; traced as the custom op flashjit::merge. Asynchronous. The first call for a dtype and head dim
    loads its kernel: make one outside CUDA-graph capture before capturing merge."""
    states = (*outs, *lses) if type(outs) in (list, tuple) and type(lses) in (list, tuple) else ()

    def names():
        return (*(f"outs[{i}]" for i in range(len(outs))), *(f"lses[{i}]" for i in range(len(lses))), "out") \
            if states else ("out",)
    if _traced_tensors("merge", names, *states, out, grads=len(states)):
        from . import _ops
        _ops.refuse_stream("merge", stream)
        o, lse = _ops.ops().merge(list(outs), list(lses), bool(return_lse))
        if out is not None:
            out.copy_(o)
            o = out
        return (o, lse) if return_lse else o
    o, lse = merge_eager(outs, lses, out, return_lse, stream)
    return (o, lse) if return_lse else o


def merge_eager(outs, lses, out, return_lse, stream):
    """merge() straight through the library: (O, LSE or None)."""
    key = _merge_key(outs, lses, out)
    checked = _merges.get(key)
    if checked is not None:
        o_in, lse_in = [o.data_ptr() for o in outs], [t.data_ptr() for t in lses]
        if not _memo.aligned((), lse_in) or (out is not None and out.data_ptr() in o_in):
            checked = None  # the checks name the misaligned or aliased tensor
    if checked is None:
        checked, out = _checked_merge(outs, lses, out)
        _merges.put(key, checked)
        o_in, lse_in = [o.data_ptr() for o in outs], [t.data_ptr() for t in lses]
    elif out is None:
        out = _output(None, outs[0])
    template, lse_shape = checked
    args = MergeArgs.from_buffer_copy(template)
    args.o_in = (ctypes.c_void_p * len(o_in))(*o_in)  # kept alive by args
    args.lse_in = (ctypes.c_void_p * len(lse_in))(*lse_in)
    args.o = out.data_ptr()
    return _call("flashjit_merge", args, out, out, lse_shape if return_lse else None, stream)


def _merge_key(outs, lses, out):
    if type(outs) not in (list, tuple) or type(lses) not in (list, tuple):
        return None
    key = _memo.tensor_key
    try:
        return (tuple(key(o) for o in outs), tuple(key(t) for t in lses), None if out is None else key(out))
    except Exception:  # noqa: BLE001  (not tensors: the checks say what is wrong)
        return None


def _checked_merge(outs, lses, out):
    """Every check, then (MergeArgs bytes without addresses or stream, LSE shape) and out (allocated like
    outs[0] when None)."""
    problem = check_merge_inputs(outs, lses)
    first = outs[0]
    if out is not None:
        check_merge_out(out, first, outs)
    out = _output(out, first)
    args = MergeArgs(dtype=problem.dtype, batch=problem.batch, seqlen=problem.seqlen, heads=problem.heads,
                     head_dim=problem.head_dim, num_states=problem.num_states,
                     in_strides=Strides(*bshd_strides(first)), o_strides=Strides(*bshd_strides(out)))
    return (bytes(args), (problem.batch, problem.heads, problem.seqlen)), out
