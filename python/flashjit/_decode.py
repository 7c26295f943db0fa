"""decode() (token generation over a KV cache), prepare_decode() before CUDA-graph capture, and merge() of
attention states, on PyTorch tensors.

The split-KV workspace comes from torch's caching allocator on the current stream (never from the library's
own per-stream workspace), so decode may be captured on any stream, torch.cuda.graph's side stream included,
once its kernels are loaded. torch is imported inside the functions, never at module import."""
import ctypes

from . import _library, _runtime
from ._abi import DecodeArgs, MergeArgs, Strides
from ._attention import _stream_handle
from ._checks import (bshd_strides, check_decode_inputs, check_decode_options, check_merge_inputs, check_merge_out,
                      check_out, scale_of)

# Workspace bytes per kind of problem (the split plan depends on the device and the scalar fields, not on the
# tensors' addresses): asking the library costs a call per decode; bounded for callers whose lengths vary.
_workspace_bytes = {}
_MAX_REMEMBERED = 4096


def _torch_stream(stream, device):
    import torch
    if isinstance(stream, torch.cuda.Stream):
        return stream
    return torch.cuda.ExternalStream(int(getattr(stream, "cuda_stream", stream)), device=device)


def _decode_call(q, k_cache, v_cache, seqlens_k, page_table, window_left, softmax_scale, return_lse, out, num_splits,
                 split_merge, max_seqlen_k, stream):
    """(args, tensors kept alive for the call, out, lse) with the arguments checked and the outputs allocated."""
    problem = check_decode_inputs(q, k_cache, v_cache, seqlens_k, page_table, max_seqlen_k)
    window_left, num_splits, split_merge = check_decode_options(window_left, num_splits, split_merge)
    scale = scale_of(softmax_scale)
    if out is not None:
        check_out(out, q)
    if out is None or return_lse:
        import torch
    if out is None:
        out = torch.empty_like(q)
    lse = None
    if return_lse:
        lse = torch.empty((problem.batch, problem.heads_q, problem.q_len), dtype=torch.float32, device=q.device)
    q_strides, o_strides = bshd_strides(q), bshd_strides(out)
    k_strides, v_strides = bshd_strides(k_cache), bshd_strides(v_cache)
    args = DecodeArgs(
        q=q.data_ptr(), o=out.data_ptr(), lse=None if lse is None else lse.data_ptr(), k_cache=k_cache.data_ptr(),
        v_cache=v_cache.data_ptr(), seqlens_k=seqlens_k.data_ptr(),
        page_table=None if page_table is None else page_table.data_ptr(), batch=problem.batch, q_len=problem.q_len,
        heads_q=problem.heads_q, heads_kv=problem.heads_kv, head_dim=problem.head_dim, dtype=problem.dtype,
        max_seqlen_k=problem.max_seqlen_k, layout=problem.layout, cache_seqlen=problem.cache_seqlen,
        num_pages=problem.num_pages, page_size=problem.page_size, max_pages_per_seq=problem.max_pages_per_seq,
        q_strides=Strides(*q_strides), o_strides=Strides(*o_strides), k_strides=Strides(*k_strides),
        v_strides=Strides(*v_strides), window_left=window_left, softmax_scale=scale, num_splits=num_splits,
        stream=_stream_handle(stream, q.device), split_merge=split_merge)
    lib = _library.load()
    key = (str(q.device), problem, q_strides, o_strides, k_strides, v_strides, window_left, num_splits, split_merge)
    needed = _workspace_bytes.get(key)
    if needed is None:
        needed = lib.flashjit_decode_workspace_bytes(_runtime.handle(), ctypes.byref(args))
        if needed < 0:
            _runtime.raise_for(-needed)
        if len(_workspace_bytes) >= _MAX_REMEMBERED:
            _workspace_bytes.clear()
        _workspace_bytes[key] = needed
    workspace = None
    if needed > 0:
        import torch
        # On the current stream: the caching allocator reuses it only after this stream's decode is done, and
        # inside graph capture it comes from the graph's pool.
        workspace = torch.empty(needed, dtype=torch.uint8, device=q.device)
        if stream is not None:  # used on another stream than the one it was allocated on
            workspace.record_stream(_torch_stream(stream, q.device))
        args.workspace, args.workspace_bytes = workspace.data_ptr(), needed
    return args, workspace, out, lse


def decode(q, k_cache, v_cache, seqlens_k, *, page_table=None, window_left=-1, softmax_scale=None, return_lse=False,
           out=None, num_splits=0, split_merge="auto", max_seqlen_k=None, stream=None):
    """Attention of new query tokens over a KV cache (token generation), with GQA and an optional paged cache.

    q: [batch, q_len, heads_q, head_dim], the q_len (1..16) newest tokens of each sequence, already appended to
    the cache. Contiguous cache (page_table None): k_cache, v_cache [batch, max_seqlen, heads_kv, head_dim].
    Paged cache: k_cache, v_cache [num_pages, page_size, heads_kv, head_dim] and page_table [batch, max_pages]
    int32 (key j of sequence b is token j % page_size of page page_table[b, j // page_size]; page_size a power
    of two up to 256). seqlens_k: int32 [batch] on the device, the keys of each sequence (new tokens included).
    Token t of sequence b sits at position seqlens_k[b] - q_len + t and sees keys up to it (causal among the new
    tokens); window_left >= 0 also limits it to the window_left keys before it.

    max_seqlen_k: a host-side bound on every seqlens_k entry (the keys are split for parallelism by this bound;
    larger entries are clamped to it). Default: the cache's capacity (max_seqlen, or max_pages * page_size).
    seqlens_k is never read on the host, so decode never synchronizes. softmax_scale: default 1/sqrt(head_dim).
    num_splits: 0 plans the key splits, 1..32 forces a count. split_merge: how split partial states merge, "auto"
    (the planner), "combine" (a second kernel) or "cluster" (a thread-block cluster per sequence and KV head,
    sm_90+, at most 16 splits); for tests and tuning. out: a tensor like q to write into.
    return_lse: also return the log-sum-exp of each row, float32 [batch, heads_q, q_len] (what merge takes).
    stream: default torch.cuda.current_stream(q.device).

    Asynchronous; allocates only out, lse and the split workspace, through torch's allocator. The first call for
    a kind of problem compiles or loads its kernels: make it outside CUDA-graph capture (prepare_decode). Bad
    arguments raise ValueError before anything runs; the library's checks and failures raise FlashjitError.
    """
    args, workspace, out, lse = _decode_call(q, k_cache, v_cache, seqlens_k, page_table, window_left, softmax_scale,
                                             return_lse, out, num_splits, split_merge, max_seqlen_k, stream)
    _runtime.check(_library.load().flashjit_decode(_runtime.handle(), ctypes.byref(args)))
    del workspace  # freed on this stream, after the kernels that use it
    return (out, lse) if return_lse else out


def prepare_decode(q, k_cache, v_cache, seqlens_k, *, page_table=None, window_left=-1, softmax_scale=None,
                   return_lse=False, out=None, num_splits=0, split_merge="auto", max_seqlen_k=None, stream=None):
    """Gets decode(...)'s kernels, for the same arguments, compiled (or read from the disk cache) and loaded on
    the device without running them (the tensors are not read), so that decode on tensors of this kind (dtype,
    head dim, heads, q_len, layout and page size, split count and merge) may then be captured into a CUDA graph, on any
    stream. Returns None."""
    del return_lse  # the kernels are the same with or without LSE
    args, workspace, _, _ = _decode_call(q, k_cache, v_cache, seqlens_k, page_table, window_left, softmax_scale, False,
                                         out, num_splits, split_merge, max_seqlen_k, stream)
    import torch
    if torch.cuda.is_current_stream_capturing():
        raise RuntimeError("flashjit.prepare_decode must run before CUDA-graph capture, not during it")
    _runtime.check(_library.load().flashjit_prepare_decode(_runtime.handle(), ctypes.byref(args)))
    del workspace


def merge(outs, lses, *, out=None, return_lse=False, stream=None):
    """Merges attention states of the same queries over disjoint key sets (shared-prefix cascades, context
    parallelism): O = sum_i exp(lse_i - lse) * outs[i] with lse = log sum_i exp(lse_i), which is the attention
    over the union of the key sets. A state whose LSE is -inf counts for nothing; a row empty in every state
    gets O = 0 and LSE = -inf.

    outs: 1..32 tensors [batch, seqlen, heads, head_dim] of one dtype (bf16 or fp16), shape and layout (last
    dimension contiguous); lses: as many float32 [batch, heads, seqlen] contiguous tensors (what attention and
    decode return with return_lse=True). out: a tensor like outs[0] to write into (none of the inputs).
    return_lse: also return the merged LSE [batch, heads, seqlen]. stream: default the current stream.

    Asynchronous. The first call for a dtype and head dim loads its kernel: make one outside CUDA-graph capture
    before capturing merge."""
    problem = check_merge_inputs(outs, lses)
    first = outs[0]
    if out is not None:
        check_merge_out(out, first, outs)
    if out is None or return_lse:
        import torch
    if out is None:
        out = torch.empty_like(first)
    lse = None
    if return_lse:
        lse = torch.empty((problem.batch, problem.heads, problem.seqlen), dtype=torch.float32, device=first.device)
    o_in = (ctypes.c_void_p * problem.num_states)(*[o.data_ptr() for o in outs])
    lse_in = (ctypes.c_void_p * problem.num_states)(*[t.data_ptr() for t in lses])
    args = MergeArgs(dtype=problem.dtype, batch=problem.batch, seqlen=problem.seqlen, heads=problem.heads,
                     head_dim=problem.head_dim, num_states=problem.num_states, o_in=o_in, lse_in=lse_in,
                     o=out.data_ptr(), in_strides=Strides(*bshd_strides(first)), o_strides=Strides(*bshd_strides(out)),
                     lse=None if lse is None else lse.data_ptr(), stream=_stream_handle(stream, first.device))
    _runtime.check(_library.load().flashjit_merge(_runtime.handle(), ctypes.byref(args)))
    return (out, lse) if return_lse else out
