"""attention() on PyTorch tensors, and getting kernels ready before CUDA-graph capture (warmup, precompile).

torch is imported inside the functions, never at module import."""
import ctypes
import json

from . import _library, _memo, _runtime
from ._abi import AttentionArgs, Strides
from ._checks import (bshd_strides, check_inputs, check_out, check_varlen_inputs, dtype_code, mask_of, packed_strides,
                      scale_of, shape4)
from ._config import config_json

# Stands in for the tensors of a problem that is prepared but not run: big enough for any alignment.
_SCRATCH_BYTES = 256

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


def _forward_key(tensors, options, config):
    """The memo key of a forward call (None: run every check): the tensors' metadata (None for a missing one)
    and the options, which must be plain (causal a bool, window a tuple of ints, the rest ints or numbers)."""
    causal, window, softmax_scale, *ints = options
    if (config is not None or type(causal) is not bool or type(window) is not tuple or not _memo.ints(*window, *ints)
            or not _memo.number(softmax_scale)):
        return None
    try:
        return tuple(None if t is None else _memo.tensor_key(t) for t in tensors) + tuple(options)
    except Exception:  # noqa: BLE001  (not a tensor: the checks say what is wrong)
        return None


def _forward(key, check, q, k, v, out, cu_seqlens_q, cu_seqlens_k, config, return_lse, stream):
    """Runs flashjit_forward: check(out) -> ((AttentionArgs bytes without addresses, stream or config, LSE
    shape), out allocated when None) on the first call of a key (every call with an explicit config), the
    addresses' alignment on every call."""
    checked, out, addresses = _calls.checked(key, check, out, lambda: _output(None, q),
                                             lambda o: _addresses(q, k, v, o, cu_seqlens_q, cu_seqlens_k))
    template, lse_shape = checked
    args = AttentionArgs.from_buffer_copy(template)
    args.q, args.k, args.v, args.o, args.cu_seqlens_q, args.cu_seqlens_k = addresses
    args.config_json = None if config is None else config_json(config)  # ValueError for a bad one
    return _call("flashjit_forward", args, out, q, lse_shape if return_lse else None, stream)


def _call(function, args, out, like, lse_shape, stream):
    """Sets args' LSE (a new float32 tensor of lse_shape on like's device, when lse_shape is not None) and stream
    (like's device's current one when None), calls the library's `function` with them: out, or (out, lse)."""
    lse = None
    if lse_shape is not None:
        import torch
        lse = like.new_empty(lse_shape, dtype=torch.float32)
        args.lse = lse.data_ptr()
    args.stream = _stream_handle(stream, like.device)
    _runtime.check(getattr(_library.load(), function)(_runtime.handle(), ctypes.byref(args)))
    return out if lse is None else (out, lse)


def _addresses(q, k, v, out, cu_seqlens_q, cu_seqlens_k):
    """Data pointers (0 for a missing out or offsets)."""
    return (q.data_ptr(), k.data_ptr(), v.data_ptr(), 0 if out is None else out.data_ptr(),
            0 if cu_seqlens_q is None else cu_seqlens_q.data_ptr(),
            0 if cu_seqlens_k is None else cu_seqlens_k.data_ptr())


def _checked_options(q, out, out_dims, causal, window, softmax_scale):
    """The checks a forward call makes after its tensors' (mask, scale, out like q with strides over out_dims):
    (mask, window_left, window_right, softmax_scale, out allocated when None). An explicit config is checked
    as _forward reads it, per call (it is never part of the memo)."""
    mask, left, right = mask_of(causal, window)
    scale = scale_of(softmax_scale)
    if out is not None:
        check_out(out, q, strides=out_dims)
    return mask, left, right, scale, _output(out, q)


def _output(out, q):
    """out, or a new tensor like q (torch.empty_like: its layout follows from q's metadata, so a memo entry's
    output strides hold for every call of the key)."""
    if out is None:
        import torch
        out = torch.empty_like(q)
    return out


def attention(q, k, v, *, causal=False, window=(-1, -1), softmax_scale=None, return_lse=False, out=None,
              config=None, stream=None):
    """Attention forward like flash_attn_func: softmax(q·kᵀ·scale + mask)·v.

    q: [batch, seqlen_q, heads_q, head_dim]; k, v: [batch, seqlen_k, heads_kv, head_dim]; CUDA tensors of
    torch.bfloat16 or torch.float16 on one device, last dimension contiguous, other strides multiples of 8
    elements; heads_kv divides heads_q (grouped-query attention); head_dim a multiple of 8, at most 256.
    causal: bottom-right aligned when seqlen_q != seqlen_k (query i sees keys j <= i + seqlen_k - seqlen_q).
    window: (left, right) sliding window around that diagonal, -1 = unbounded; with causal, right = 0.
    softmax_scale: default 1/sqrt(head_dim). out: a tensor like q to write into (else torch.empty_like(q)).
    return_lse: also return the log-sum-exp of each row, float32 [batch, heads_q, seqlen_q].
    config: an explicit kernel config (dict or JSON; missing fields come from the problem and the device).
    stream: torch.cuda.Stream or CUstream handle; default torch.cuda.current_stream(q.device).

    Asynchronous on the stream, no synchronization, no allocation besides out and lse. The first call for a
    kind of problem compiles (or reads from the disk cache) and loads its kernel: make it outside CUDA-graph
    capture (warmup, precompile). Bad arguments raise ValueError before anything runs; failures in the library
    raise FlashjitError.
    """
    def check(out):
        problem = check_inputs(q, k, v)
        mask, left, right, scale, out = _checked_options(q, out, ("batch", "sequence", "head"), causal, window,
                                                         softmax_scale)
        args = AttentionArgs(
            batch=problem.batch, seqlen_q=problem.seqlen_q, seqlen_k=problem.seqlen_k, heads_q=problem.heads_q,
            heads_kv=problem.heads_kv, head_dim=problem.head_dim, dtype=problem.dtype,
            q_strides=Strides(*bshd_strides(q)), k_strides=Strides(*bshd_strides(k)),
            v_strides=Strides(*bshd_strides(v)), o_strides=Strides(*bshd_strides(out)),
            mask=mask, window_left=left, window_right=right, softmax_scale=scale)
        return (bytes(args), (problem.batch, problem.heads_q, problem.seqlen_q)), out

    key = _forward_key((q, k, v, out), (causal, window, softmax_scale), config)
    return _forward(key, check, q, k, v, out, None, None, config, return_lse, stream)


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, *, causal=False,
                     window=(-1, -1), softmax_scale=None, return_lse=False, out=None, config=None, stream=None):
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
    elements), causal, window, softmax_scale, out (like q), config (varlen is set from the problem), stream.
    return_lse: also return the log-sum-exp, float32 [heads_q, total_q] (flash-attn's varlen layout).

    Asynchronous on the stream, no allocation besides out and lse; warm up (one call of the kind) before
    CUDA-graph capture. Bad arguments raise ValueError before anything runs; library failures FlashjitError.
    """
    def check(out):
        problem = check_varlen_inputs(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
        mask, left, right, scale, out = _checked_options(q, out, ("sequence", "head"), causal, window, softmax_scale)
        args = AttentionArgs(
            batch=problem.batch, seqlen_q=problem.max_seqlen_q, seqlen_k=problem.max_seqlen_k, heads_q=problem.heads_q,
            heads_kv=problem.heads_kv, head_dim=problem.head_dim, dtype=problem.dtype,
            q_strides=Strides(*packed_strides(q)), k_strides=Strides(*packed_strides(k)),
            v_strides=Strides(*packed_strides(v)), o_strides=Strides(*packed_strides(out)),
            mask=mask, window_left=left, window_right=right, softmax_scale=scale, total_q=problem.total_q,
            total_k=problem.total_k)
        return (bytes(args), (problem.heads_q, problem.total_q)), out

    key = _forward_key((q, k, v, out, cu_seqlens_q, cu_seqlens_k),
                       (causal, window, softmax_scale, max_seqlen_q, max_seqlen_k), config)
    return _forward(key, check, q, k, v, out, cu_seqlens_q, cu_seqlens_k, config, return_lse, stream)


def warmup(q, k, v, **kwargs):
    """Runs attention(q, k, v, **kwargs) once, outside CUDA-graph capture, so that the kernel for this kind of
    problem (dtype, head dim, mask, shapes) is compiled or read from the disk cache and loaded on the device;
    later calls, captured ones included, only launch. Returns what attention returns."""
    import torch
    if torch.cuda.is_current_stream_capturing():
        raise RuntimeError("flashjit.warmup must run before CUDA-graph capture, not during it")
    return attention(q, k, v, **kwargs)


def precompile(config=None, *, q_shape=None, k_shape=None, dtype=None, causal=False, window=(-1, -1), device=None):
    """Gets a kernel ready ahead of use and returns its info (name, config, registers, spills, compile_ms,
    cache_hit, ...).

    precompile(config): compiles a config (dict or JSON) into the disk cache; needs no GPU.
    precompile(q_shape=..., k_shape=..., dtype=..., causal=..., window=..., device=...): the kernel
    attention() would use for that problem (or `config`, completed from the problem) is compiled or read
    from the cache and loaded on the device (default: the current CUDA device), without running it, so
    that attention() on such tensors may be captured into a CUDA graph. k_shape defaults to q_shape.
    """
    explicit = None if config is None else config_json(config)
    if q_shape is None:
        if explicit is None:
            raise ValueError("precompile needs a config, or q_shape and dtype of the problem to prepare")
        return json.loads(_runtime.text(_library.load().flashjit_compile, _runtime.handle(), explicit))
    b, sq, hq, d = shape4("q_shape", q_shape)
    _, sk, hkv, _ = shape4("k_shape", q_shape if k_shape is None else k_shape)
    code = dtype_code(dtype)
    mask, left, right = mask_of(causal, window)
    lib = _library.load()
    import torch
    target = torch.device("cuda", torch.cuda.current_device()) if device is None else torch.device(device)
    scratch = torch.empty(_SCRATCH_BYTES, dtype=torch.uint8, device=target)
    address = scratch.data_ptr()
    args = AttentionArgs(q=address, k=address, v=address, o=address, batch=b, seqlen_q=sq, seqlen_k=sk, heads_q=hq,
                         heads_kv=hkv, head_dim=d, dtype=code, mask=mask, window_left=left, window_right=right,
                         config_json=explicit)
    info = _runtime.text(lib.flashjit_prepare, _runtime.handle(), ctypes.byref(args))
    del scratch  # only its address was used, to name the device
    return json.loads(info)
