"""flashjit.attention, attention_varlen, decode and merge on a GPU against torch's scaled_dot_product_attention in
float32.

Used by test_gpu.py under pytest, and runnable without pytest on a GPU machine that lacks it:
    PYTHONPATH=python python3 python/tests/gpu_checks.py
"""
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import flashjit  # noqa: E402

TOLERANCE = {torch.bfloat16: 1e-2, torch.float16: 2e-3}  # relative L2 error of O
LSE_TOLERANCE = 2e-2  # absolute


@dataclass(frozen=True)
class Case:
    batch: int
    seqlen_q: int
    seqlen_k: int
    heads_q: int
    heads_kv: int
    head_dim: int
    dtype: torch.dtype
    causal: bool = False
    window: tuple = (-1, -1)

    def __str__(self):
        mask = ("causal" if self.causal else "full") + ("" if self.window == (-1, -1) else f"-w{self.window[0]},{self.window[1]}")
        return (f"B{self.batch}-Sq{self.seqlen_q}-Sk{self.seqlen_k}-H{self.heads_q}/{self.heads_kv}-D{self.head_dim}-"
                f"{str(self.dtype).replace('torch.', '')}-{mask}")


BF16, FP16 = torch.bfloat16, torch.float16
# Odd lengths (1, 17, 1000, 4097) mixed, GQA groups 1/4/8, causal (also with Sq > Sk: leading rows see no key)
# and sliding windows, both dtypes, head dims 64/128/256.
CASES = [
    Case(2, 17, 17, 8, 8, 64, BF16),
    Case(1, 1, 1000, 32, 8, 128, BF16, causal=True),
    Case(1, 1000, 1000, 8, 1, 128, FP16, causal=True),
    Case(1, 4097, 4097, 4, 1, 128, BF16, causal=True),
    Case(1, 17, 4097, 8, 1, 256, FP16),
    Case(2, 1000, 17, 4, 4, 256, BF16, causal=True),
    Case(1, 1000, 1000, 16, 4, 64, FP16, causal=True, window=(128, 0)),
    Case(1, 4097, 4097, 8, 8, 64, BF16, window=(256, 256)),
    Case(1, 17, 1000, 32, 4, 128, FP16, window=(-1, 32)),
    Case(3, 1, 4097, 8, 1, 64, BF16),
    Case(1, 1000, 4097, 8, 2, 256, FP16, causal=True, window=(512, 0)),
    Case(1, 4097, 1000, 8, 2, 64, BF16, causal=True),
    Case(1, 1000, 1000, 32, 8, 128, BF16),
    Case(2, 1000, 1000, 8, 8, 256, FP16, causal=True),
]


def random_inputs(case):
    shape_q = (case.batch, case.seqlen_q, case.heads_q, case.head_dim)
    shape_kv = (case.batch, case.seqlen_k, case.heads_kv, case.head_dim)
    return tuple(torch.randn(shape, device="cuda", dtype=case.dtype) for shape in (shape_q, shape_kv, shape_kv))


def reference(q, k, v, causal=False, window=(-1, -1), softmax_scale=None):
    """O [B, Sq, Hq, D] and LSE [B, Hq, Sq] in float32 through SDPA with an explicit mask (bottom-right
    aligned); rows that see no key get O = 0 and LSE = -inf, as flashjit defines them."""
    sq, sk, hq, hkv, d = q.shape[1], k.shape[1], q.shape[2], k.shape[2], q.shape[3]
    scale = 1 / math.sqrt(d) if softmax_scale is None else softmax_scale
    qf = q.float().transpose(1, 2)
    kf = k.float().repeat_interleave(hq // hkv, dim=2).transpose(1, 2)
    vf = v.float().repeat_interleave(hq // hkv, dim=2).transpose(1, 2)
    left, right = window
    if causal:
        right = 0
    i = torch.arange(sq, device=q.device)[:, None] + (sk - sq)
    j = torch.arange(sk, device=q.device)[None, :]
    visible = torch.ones(sq, sk, dtype=torch.bool, device=q.device)
    if left >= 0:
        visible &= j >= i - left
    if right >= 0:
        visible &= j <= i + right
    o = F.scaled_dot_product_attention(qf, kf, vf, attn_mask=visible, scale=scale)
    scores = torch.matmul(qf, kf.transpose(-1, -2)) * scale
    lse = torch.logsumexp(scores.masked_fill(~visible, -math.inf), dim=-1)
    empty = ~visible.any(dim=-1)
    o[:, :, empty, :] = 0
    return o.transpose(1, 2), lse


def rel_l2(x, ref):
    x, ref = x.float(), ref.float()
    return (torch.linalg.vector_norm(x - ref) / torch.linalg.vector_norm(ref).clamp_min(1e-30)).item()


def lse_error(lse, ref):
    """Largest |difference| over rows with keys; rows without keys must be -inf in both."""
    finite = torch.isfinite(ref)
    if not torch.equal(torch.isneginf(lse), ~finite):
        return math.inf
    return (lse[finite] - ref[finite]).abs().max().item() if finite.any() else 0.0


def expect_close(o, lse, ref_o, ref_lse, dtype, what):
    error = rel_l2(o, ref_o)
    assert not torch.isnan(o).any(), f"{what}: NaN in O"
    assert error <= TOLERANCE[dtype], f"{what}: O relative L2 error {error:.3e} > {TOLERANCE[dtype]:.0e}"
    if lse is not None:
        lse_err = lse_error(lse, ref_lse)
        assert lse_err <= LSE_TOLERANCE, f"{what}: LSE error {lse_err:.3e} > {LSE_TOLERANCE}"


def check_case(case):
    q, k, v = random_inputs(case)
    o, lse = flashjit.attention(q, k, v, causal=case.causal, window_size=case.window, return_lse=True)
    assert o.shape == q.shape and o.dtype == q.dtype and lse.shape == (case.batch, case.heads_q, case.seqlen_q)
    assert lse.dtype == torch.float32
    ref_o, ref_lse = reference(q, k, v, case.causal, case.window)
    expect_close(o, lse, ref_o, ref_lse, case.dtype, str(case))


def check_softmax_scale_and_strided_views():
    """q, k, v as views into one packed [B, S, 3, H, D] tensor (strides that are not BSHD-contiguous), with a
    custom scale."""
    b, s, h, d = 2, 1000, 8, 128
    qkv = torch.randn(b, s, 3, h, d, device="cuda", dtype=torch.bfloat16)
    q, k, v = qkv.unbind(dim=2)
    o = flashjit.attention(q, k, v, causal=True, softmax_scale=0.05)
    ref_o, _ = reference(q, k, v, causal=True, softmax_scale=0.05)
    expect_close(o, None, ref_o, None, torch.bfloat16, "packed qkv views, scale 0.05")


def check_out_reuse():
    case = Case(1, 1000, 1000, 16, 4, 128, FP16, causal=True)
    out = torch.full((case.batch, case.seqlen_q, case.heads_q, case.head_dim), math.nan, device="cuda", dtype=FP16)
    for _ in range(2):
        q, k, v = random_inputs(case)
        result = flashjit.attention(q, k, v, causal=True, out=out)
        assert result is out
        ref_o, _ = reference(q, k, v, causal=True)
        expect_close(out, None, ref_o, None, FP16, "out= reuse")


def check_graph_capture_and_replay():
    """Warm up, capture attention (writing into a static out, and allocating O and LSE inside the graph), then
    replay with new values copied into the captured inputs."""
    case = Case(2, 1000, 1000, 32, 8, 128, BF16, causal=True)
    q, k, v = random_inputs(case)
    static_out = torch.empty_like(q)
    flashjit.warmup(q, k, v, causal=True, out=static_out)
    flashjit.warmup(q, k, v, causal=True, return_lse=True)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        flashjit.attention(q, k, v, causal=True, out=static_out)
        graph_o, graph_lse = flashjit.attention(q, k, v, causal=True, return_lse=True)
    for step in range(3):
        for captured, new in zip((q, k, v), random_inputs(case)):
            captured.copy_(new)
        graph.replay()
        torch.cuda.synchronize()
        ref_o, ref_lse = reference(q, k, v, causal=True)
        expect_close(static_out, None, ref_o, None, BF16, f"graph replay {step} (static out)")
        expect_close(graph_o, graph_lse, ref_o, ref_lse, BF16, f"graph replay {step} (graph-allocated O, LSE)")


def check_precompile_then_capture():
    """precompile(q_shape=...) loads the kernel without running it: the first call may then be captured."""
    case = Case(1, 1000, 1000, 8, 2, 64, FP16, window=(64, 64))
    q, k, v = random_inputs(case)
    info = flashjit.precompile(q_shape=q.shape, k_shape=k.shape, dtype=q.dtype, window_size=case.window)
    assert info["config"]["mask"] == "sliding_window" and info["config"]["head_dim"] == 64
    out = torch.empty_like(q)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        flashjit.attention(q, k, v, window_size=case.window, out=out)
    graph.replay()
    torch.cuda.synchronize()
    ref_o, _ = reference(q, k, v, window=case.window)
    expect_close(out, None, ref_o, None, FP16, "precompile then capture")


def check_capture_without_warmup_is_an_error():
    """A kernel never run before cannot be compiled or loaded during capture: a clear error. The explicit
    config (fa2 with 48-key tiles and 3 stages) is one no other check uses, so it is surely not loaded yet."""
    case = Case(1, 256, 256, 4, 4, 64, FP16, window=(16, -1))
    q, k, v = random_inputs(case)
    out = torch.empty_like(q)
    fresh = {"algorithm": "fa2", "block_m": 64, "warps": 4, "block_n": 48, "stages": 3}
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            flashjit.attention(q, k, v, window_size=case.window, out=out, config=fresh)
    except flashjit.FlashjitError as e:
        assert "capturing a CUDA graph" in str(e), str(e)
    else:
        raise AssertionError("capturing a kernel that was never loaded did not fail")


def check_explicit_config():
    """A partial config (algorithm and tiles) is completed from the problem and the device."""
    case = Case(1, 1000, 1000, 8, 8, 128, BF16, causal=True)
    q, k, v = random_inputs(case)
    o = flashjit.attention(q, k, v, causal=True, config={"algorithm": "fa2", "block_m": 128, "warps": 4,
                                                         "block_n": 32, "stages": 2})
    ref_o, _ = reference(q, k, v, causal=True)
    expect_close(o, None, ref_o, None, BF16, "explicit fa2 config")


# -- varlen (ragged batches) ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class VarlenCase:
    lens_q: tuple  # query tokens per sequence (0 allowed)
    lens_k: tuple  # keys per sequence (0 allowed: that sequence's rows are empty)
    heads_q: int
    heads_kv: int
    head_dim: int
    dtype: torch.dtype
    causal: bool = False
    window: tuple = (-1, -1)

    def __str__(self):
        mask = ("causal" if self.causal else "full") + ("" if self.window == (-1, -1) else f"-w{self.window[0]},{self.window[1]}")
        return (f"varlen-q{','.join(map(str, self.lens_q))}-k{','.join(map(str, self.lens_k))}-H{self.heads_q}/"
                f"{self.heads_kv}-D{self.head_dim}-{str(self.dtype).replace('torch.', '')}-{mask}")


# Lengths from {0, 1, 7, 300, 4097} paired differently for q and k: len_k < len_q (causal rows without keys),
# empty query and empty key sequences; GQA 1/4/8, both dtypes, head dims 64/128/256, causal and windows.
VARLEN_CASES = [
    VarlenCase((1, 7, 300, 0, 7), (7, 300, 1, 5, 0), 8, 2, 64, BF16),
    VarlenCase((1, 7, 300, 0, 7), (7, 300, 1, 5, 0), 8, 8, 128, FP16, causal=True),
    VarlenCase((300, 4097, 1, 7), (300, 4097, 7, 1), 8, 1, 128, BF16, causal=True),
    VarlenCase((7, 0, 300, 1), (300, 1, 7, 0), 16, 4, 64, FP16, window=(37, 5)),
    VarlenCase((4097, 300), (1, 4097), 4, 1, 256, BF16, causal=True, window=(512, 0)),
    VarlenCase((300, 300, 7), (7, 1, 300), 8, 2, 256, FP16, causal=True),
]


def cu_seqlens(lens):
    return torch.tensor([0] + list(lens), device="cuda", dtype=torch.int32).cumsum(0, dtype=torch.int32)


def varlen_inputs(case):
    tq, tk = sum(case.lens_q), sum(case.lens_k)
    q = torch.randn(tq, case.heads_q, case.head_dim, device="cuda", dtype=case.dtype)
    k = torch.randn(tk, case.heads_kv, case.head_dim, device="cuda", dtype=case.dtype)
    v = torch.randn(tk, case.heads_kv, case.head_dim, device="cuda", dtype=case.dtype)
    return q, k, v, cu_seqlens(case.lens_q), cu_seqlens(case.lens_k)


def varlen_reference(q, k, v, lens_q, lens_k, causal=False, window=(-1, -1), softmax_scale=None):
    """O [total_q, Hq, D] and LSE [Hq, total_q] in float32, sequence by sequence through reference() (SDPA);
    a sequence without keys gets O = 0 and LSE = -inf."""
    o = torch.zeros(q.shape, device=q.device, dtype=torch.float32)
    lse = torch.full((q.shape[1], q.shape[0]), -math.inf, device=q.device, dtype=torch.float32)
    sq = sk = 0
    for lq, lk in zip(lens_q, lens_k):
        if lq > 0 and lk > 0:
            ref_o, ref_lse = reference(q[None, sq:sq + lq], k[None, sk:sk + lk], v[None, sk:sk + lk], causal, window,
                                       softmax_scale)
            o[sq:sq + lq], lse[:, sq:sq + lq] = ref_o[0], ref_lse[0]
        sq, sk = sq + lq, sk + lk
    return o, lse


def check_varlen_case(case):
    q, k, v, cu_q, cu_k = varlen_inputs(case)
    o, lse = flashjit.attention_varlen(q, k, v, cu_q, cu_k, max(case.lens_q), max(case.lens_k), causal=case.causal,
                                       window_size=case.window, return_lse=True)
    assert o.shape == q.shape and o.dtype == q.dtype and lse.shape == (case.heads_q, q.shape[0])
    assert lse.dtype == torch.float32
    ref_o, ref_lse = varlen_reference(q, k, v, case.lens_q, case.lens_k, case.causal, case.window)
    expect_close(o, lse, ref_o, ref_lse, case.dtype, str(case))
    # Rows without keys (a sequence with len_k 0, causal rows before the keys start): exactly 0.
    empty = torch.isneginf(ref_lse).T
    assert (o[empty] == 0).all(), f"{case}: rows without keys are not 0"


def check_varlen_views_out_and_scale():
    """q, k, v as views into one packed [total, 3, H, D] projection (seq stride 3 H D), out= a NaN-filled
    tensor written twice, a custom scale, an explicit fa2 config (varlen completed from the problem)."""
    lens_q = lens_k = (300, 1, 0, 1000)
    qkv = torch.randn(sum(lens_q), 3, 8, 128, device="cuda", dtype=FP16)
    q, k, v = qkv.unbind(dim=1)
    cu = cu_seqlens(lens_q)
    out = torch.full(q.shape, math.nan, device="cuda", dtype=FP16)
    ref_o, _ = varlen_reference(q, k, v, lens_q, lens_k, causal=True, softmax_scale=0.05)
    for config in (None, {"algorithm": "fa2"}):
        out.fill_(math.nan)
        result = flashjit.attention_varlen(q, k, v, cu, cu, 1000, 1000, causal=True, softmax_scale=0.05, out=out,
                                           config=config)
        assert result is out
        expect_close(out, None, ref_o, None, FP16, f"varlen packed views, out=, scale 0.05, config {config}")


def check_varlen_graph_capture_and_replay():
    """A warmed-up varlen call captured and replayed with new lengths written into the captured cu_seqlens
    (the offsets are device data: nothing is re-planned on the host)."""
    heads_q, heads_kv, d, total = 8, 2, 128, 2048
    q = torch.randn(total, heads_q, d, device="cuda", dtype=BF16)
    k = torch.randn(total, heads_kv, d, device="cuda", dtype=BF16)
    v = torch.randn(total, heads_kv, d, device="cuda", dtype=BF16)
    cu_q, cu_k = cu_seqlens((1000, 1000, 48)), cu_seqlens((1000, 48, 1000))
    out = torch.empty_like(q)
    flashjit.attention_varlen(q, k, v, cu_q, cu_k, 1024, 1024, causal=True, out=out)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        flashjit.attention_varlen(q, k, v, cu_q, cu_k, 1024, 1024, causal=True, out=out)
    for lens_q, lens_k in (((1000, 1000, 48), (1000, 48, 1000)), ((1, 1024, 1023), (1024, 0, 1024))):
        cu_q.copy_(cu_seqlens(lens_q))
        cu_k.copy_(cu_seqlens(lens_k))
        out.fill_(math.nan)
        graph.replay()
        torch.cuda.synchronize()
        ref_o, _ = varlen_reference(q, k, v, lens_q, lens_k, causal=True)
        expect_close(out, None, ref_o, None, BF16, f"varlen graph replay with lengths {lens_q} / {lens_k}")


# -- decode and merge ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DecodeCase:
    seqlens: tuple  # keys per sequence (new tokens included), each >= q_len
    q_len: int
    heads_q: int
    heads_kv: int
    head_dim: int
    dtype: torch.dtype
    page_size: int = 0  # 0: contiguous cache
    capacity: int = 0  # contiguous: the cache's max_seq (0: max(seqlens)); paged: pages per sequence * page_size
    window_left: int = -1
    num_splits: int = 0
    split_merge: str = "auto"
    max_seqlen_k: int = None  # None: decode's default (the capacity)
    chunk_size: int = 0  # 0: no chunks (not with window_left >= 0)

    def __str__(self):
        lens = ",".join(str(n) for n in self.seqlens)
        layout = f"paged{self.page_size}" if self.page_size else "contiguous"
        extra = (f"-w{self.window_left}" if self.window_left >= 0 else "") + (
            f"-chunk{self.chunk_size}" if self.chunk_size else "") + (
            f"-splits{self.num_splits}" if self.num_splits else "") + (
            f"-{self.split_merge}" if self.split_merge != "auto" else "") + (
            f"-max{self.max_seqlen_k}" if self.max_seqlen_k else "")
        return (f"decode-{layout}-lens{lens}-q{self.q_len}-H{self.heads_q}/{self.heads_kv}-D{self.head_dim}-"
                f"{str(self.dtype).replace('torch.', '')}{extra}")


DECODE_CASES = [
    DecodeCase((1, 300, 1000), 1, 32, 8, 128, BF16),
    DecodeCase((4, 77, 513), 4, 8, 1, 64, FP16),
    DecodeCase((32768,), 1, 32, 8, 128, BF16),
    DecodeCase((5, 1000, 4097, 16), 1, 32, 8, 128, BF16, page_size=16),
    DecodeCase((4, 130, 2000), 4, 16, 4, 128, FP16, page_size=64),
    DecodeCase((3000, 17), 1, 16, 2, 256, BF16, page_size=1),
    DecodeCase((1000, 2049), 4, 32, 8, 128, BF16, window_left=100),
    DecodeCase((600, 2000), 1, 8, 8, 64, FP16, page_size=32, window_left=512),
    DecodeCase((1000, 999), 1, 32, 8, 128, BF16, num_splits=1),
    DecodeCase((1000, 999), 2, 32, 8, 128, BF16, num_splits=7),
    DecodeCase((1000, 999), 2, 32, 8, 128, BF16, num_splits=7, split_merge="cluster"),
    DecodeCase((3000, 5, 700), 1, 32, 8, 128, BF16, page_size=16, num_splits=2, split_merge="combine"),
    DecodeCase((100, 1500), 1, 32, 8, 128, BF16, capacity=4096, max_seqlen_k=1500),
    DecodeCase((16, 8000), 16, 8, 1, 128, BF16, page_size=256),
    # Chunked-causal: the new tokens of a sequence straddle a chunk boundary (302 with q_len 4: positions 298..301
    # across 300; 1010 and 66 with q_len 16: 994..1009 across 1000 for chunks of 100, 50..65 across 64), a chunk
    # of one key, a chunk longer than the cache.
    DecodeCase((1000, 2049, 302), 4, 32, 8, 128, BF16, chunk_size=100),
    DecodeCase((66, 1010, 4097), 16, 16, 4, 128, FP16, page_size=16, chunk_size=64),
    DecodeCase((17, 1000, 4097), 1, 32, 8, 128, BF16, page_size=1, chunk_size=300, num_splits=3),
    DecodeCase((302, 2000), 4, 32, 8, 128, FP16, chunk_size=300, num_splits=1),
    DecodeCase((1, 17, 1000), 1, 8, 2, 128, BF16, chunk_size=1),
    DecodeCase((1000, 999), 4, 32, 8, 64, FP16, chunk_size=5000),
]


def decode_inputs(case):
    """q, k_cache, v_cache, seqlens_k, page_table (None for a contiguous cache) and, for the reference, each
    sequence's keys and values [len, Hkv, D]. A paged cache has a shuffled page table whose unused entries
    point at (valid) pages of other sequences, so that reading past a sequence's last page shows."""
    b, dev = len(case.seqlens), "cuda"
    q = torch.randn(b, case.q_len, case.heads_q, case.head_dim, device=dev, dtype=case.dtype)
    lens = torch.tensor(case.seqlens, dtype=torch.int32, device=dev)
    if not case.page_size:
        capacity = case.capacity or max(case.seqlens)
        k = torch.randn(b, capacity, case.heads_kv, case.head_dim, device=dev, dtype=case.dtype)
        v = torch.randn_like(k)
        return q, k, v, lens, None, [(k[i, :n], v[i, :n]) for i, n in enumerate(case.seqlens)]
    ps = case.page_size
    max_pages = max(-(-n // ps) for n in case.seqlens)
    if case.capacity:
        max_pages = max(max_pages, case.capacity // ps)
    used = [-(-n // ps) for n in case.seqlens]
    num_pages = sum(used) + 3
    k = torch.randn(num_pages, ps, case.heads_kv, case.head_dim, device=dev, dtype=case.dtype)
    v = torch.randn_like(k)
    order = torch.randperm(num_pages, device=dev).to(torch.int32)
    table = torch.randint(0, num_pages, (b, max_pages), device=dev, dtype=torch.int32)
    start, per_seq = 0, []
    for i, (n, pages) in enumerate(zip(case.seqlens, used)):
        table[i, :pages] = order[start:start + pages]
        start += pages
        idx = table[i, :pages].long()
        per_seq.append((k[idx].reshape(-1, case.heads_kv, case.head_dim)[:n],
                        v[idx].reshape(-1, case.heads_kv, case.head_dim)[:n]))
    return q, k, v, lens, table, per_seq


def decode_reference(q, per_seq, window_left=-1):
    """O [B, q_len, Hq, D] and LSE [B, Hq, q_len], sequence by sequence: token t of sequence b sits at key
    position len_b - q_len + t and sees the keys up to it (and window_left before it)."""
    outs, lses = [], []
    for i, (k, v) in enumerate(per_seq):
        o, lse = reference(q[i:i + 1], k[None], v[None], causal=True, window=(window_left, -1))
        outs.append(o)
        lses.append(lse)
    return torch.cat(outs), torch.cat(lses)


def visible_mask(sq, sk, causal=False, window_size=(-1, -1), device="cuda"):
    """[Sq, Sk] keys each query sees, flash-attn's convention: query i sits at key position i + sk - sq (bottom-right
    aligned) and sees keys in [a - left, a + right] (-1 unbounded; causal: right = 0)."""
    left, right = window_size
    if causal:
        right = 0
    a = torch.arange(sq, device=device)[:, None] + (sk - sq)
    j = torch.arange(sk, device=device)[None, :]
    visible = torch.ones(sq, sk, dtype=torch.bool, device=device)
    if left >= 0:
        visible &= j >= a - left
    if right >= 0:
        visible &= j <= a + right
    return visible


def masked_reference64(q, k, v, visible, softmax_scale=None):
    """float64 O [B, Sq, Hq, D] and LSE [B, Hq, Sq] of q [B, Sq, Hq, D] against k, v [B, Sk, Hkv, D] with a
    [Sq, Sk] mask of visible keys; rows that see no key get O = 0 and LSE = -inf."""
    hq, hkv, d = q.shape[2], k.shape[2], q.shape[3]
    scale = 1 / math.sqrt(d) if softmax_scale is None else softmax_scale
    qd = q.double().transpose(1, 2)
    kd = k.double().repeat_interleave(hq // hkv, dim=2).transpose(1, 2)
    vd = v.double().repeat_interleave(hq // hkv, dim=2).transpose(1, 2)
    scores = torch.matmul(qd, kd.transpose(-1, -2)).mul_(scale).masked_fill_(~visible, -math.inf)
    lse = torch.logsumexp(scores, dim=-1)
    p = torch.where(visible, torch.exp(scores - lse[..., None]), torch.zeros((), dtype=torch.float64, device=q.device))
    return torch.matmul(p, vd).transpose(1, 2), lse


def chunked_decode_reference(q, per_seq, chunk_size):
    """float64 O [B, q_len, Hq, D] and LSE [B, Hq, q_len] of chunked-causal decode: token t of sequence b sits at
    position a = len_b - q_len + t and sees the keys j <= a of its own chunk (j // chunk_size == a // chunk_size);
    a < 0 sees none."""
    outs, lses = [], []
    q_len = q.shape[1]
    for i, (k, v) in enumerate(per_seq):
        n = k.shape[0]
        a = torch.arange(q_len, device=q.device)[:, None] + (n - q_len)
        j = torch.arange(n, device=q.device)[None, :]
        visible = (j <= a) & (torch.div(j, chunk_size, rounding_mode="floor") ==
                              torch.div(a.clamp_min(0), chunk_size, rounding_mode="floor"))
        o, lse = masked_reference64(q[i:i + 1], k[None], v[None], visible)
        outs.append(o)
        lses.append(lse)
    return torch.cat(outs), torch.cat(lses)


def check_decode_case(case):
    q, k, v, lens, table, per_seq = decode_inputs(case)
    if case.split_merge == "cluster" and torch.cuda.get_device_capability()[0] < 9:
        try:  # no thread-block clusters: a forced cluster merge of split keys is refused
            flashjit.decode(q, k, v, lens, page_table=table, num_splits=case.num_splits, split_merge="cluster")
        except flashjit.FlashjitError as e:
            assert "split_merge cluster" in str(e), str(e)
            return
        raise AssertionError("a forced cluster merge below sm_90 did not fail")
    o, lse = flashjit.decode(q, k, v, lens, page_table=table, window_size=(case.window_left, 0), return_lse=True,
                             num_splits=case.num_splits, split_merge=case.split_merge, max_seqlen_k=case.max_seqlen_k,
                             chunk_size=case.chunk_size)
    assert o.shape == q.shape and o.dtype == q.dtype
    assert lse.shape == (q.shape[0], case.heads_q, case.q_len) and lse.dtype == torch.float32
    if case.chunk_size:
        ref_o, ref_lse = chunked_decode_reference(q, per_seq, case.chunk_size)
    else:
        ref_o, ref_lse = decode_reference(q, per_seq, case.window_left)
    expect_close(o, lse, ref_o, ref_lse, case.dtype, str(case))


def check_decode_out_and_strided_q():
    """q as a view of a packed [B, q_len, Hq + 2 Hkv, D] projection, out= a preallocated tensor, custom scale."""
    b, q_len, hq, hkv, d = 3, 2, 16, 4, 128
    packed = torch.randn(b, q_len, hq + 2 * hkv, d, device="cuda", dtype=BF16)
    q = packed[:, :, :hq]
    k = torch.randn(b, 700, hkv, d, device="cuda", dtype=BF16)
    v = torch.randn_like(k)
    lens = torch.tensor([2, 350, 700], dtype=torch.int32, device="cuda")
    out = torch.full((b, q_len, hq, d), math.nan, device="cuda", dtype=BF16)
    result = flashjit.decode(q, k, v, lens, out=out, softmax_scale=0.07)
    assert result is out
    ref_o = torch.cat([reference(q[i:i + 1], k[i:i + 1, :n], v[i:i + 1, :n], causal=True, softmax_scale=0.07)[0]
                       for i, n in enumerate((2, 350, 700))])
    expect_close(out, None, ref_o, None, BF16, "decode into out= from a strided q, scale 0.07")


def check_decode_graph_capture_and_replay():
    """prepare_decode, capture decode (contiguous caches with splits, merged by the combine kernel and, sm_90+,
    in a thread-block cluster, and paged) on torch.cuda.graph's stream,
    then replay with new lengths and values written into the captured tensors: the lengths are read on the
    device at replay."""
    clusters = torch.cuda.get_device_capability()[0] >= 9
    cases = [DecodeCase((300, 4000, 9000), 1, 32, 8, 128, BF16, capacity=9000),
             DecodeCase((50, 3000), 4, 32, 8, 128, BF16, page_size=16, capacity=8192),
             # B6 over 8 KV heads in two splits: merged in a thread-block cluster where one can run.
             DecodeCase((4096, 1, 3000, 4096, 17, 2500), 1, 32, 8, 128, BF16, capacity=4096,
                        split_merge="cluster" if clusters else "auto")]
    captured = []
    for case in cases:
        q, k, v, lens, table, _ = decode_inputs(case)
        out = torch.empty_like(q)
        flashjit.prepare_decode(q, k, v, lens, page_table=table, out=out, split_merge=case.split_merge)
        flashjit.prepare_decode(q, k, v, lens, page_table=table, return_lse=True, split_merge=case.split_merge)
        captured.append((case, q, k, v, lens, table, out))
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    results = []
    with torch.cuda.graph(graph):
        for case, q, k, v, lens, table, out in captured:
            flashjit.decode(q, k, v, lens, page_table=table, out=out, split_merge=case.split_merge)
            results.append(flashjit.decode(q, k, v, lens, page_table=table, return_lse=True,
                                           split_merge=case.split_merge))
    new_lengths = [(9000, 1, 4500), (3000, 8192), (1, 4096, 4096, 10, 4000, 4096)]
    for step in range(3):
        for (case, q, k, v, lens, table, out), new in zip(captured, new_lengths):
            q.copy_(torch.randn_like(q))
            k.copy_(torch.randn_like(k))
            v.copy_(torch.randn_like(v))
            if step > 0:
                lens.copy_(torch.tensor(new, dtype=torch.int32, device="cuda"))
        graph.replay()
        torch.cuda.synchronize()
        for (case, q, k, v, lens, table, out), (graph_o, graph_lse) in zip(captured, results):
            per_seq = []
            for i, n in enumerate(lens.tolist()):
                if table is None:
                    per_seq.append((k[i, :n], v[i, :n]))
                else:
                    idx = table[i, :-(-n // case.page_size)].long()
                    per_seq.append((k[idx].reshape(-1, *k.shape[2:])[:n], v[idx].reshape(-1, *v.shape[2:])[:n]))
            ref_o, ref_lse = decode_reference(q, per_seq)
            expect_close(out, None, ref_o, None, BF16, f"decode graph replay {step} {case} (static out)")
            expect_close(graph_o, graph_lse, ref_o, ref_lse, BF16, f"decode graph replay {step} {case} (graph O, LSE)")


def check_decode_capture_without_prepare_is_an_error():
    """Head dim 48 is used by no other check: its kernel is not loaded, which capture cannot do."""
    case = DecodeCase((100, 200), 1, 8, 2, 48, FP16)
    q, k, v, lens, _, _ = decode_inputs(case)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            flashjit.decode(q, k, v, lens)
    except flashjit.FlashjitError as e:
        assert "capturing a CUDA graph" in str(e), str(e)
    else:
        raise AssertionError("capturing a decode kernel that was never loaded did not fail")


def check_prepare_decode_covers_shorter_caches():
    """prepare_decode at 4096 keys also loads the kernels of shorter caches (at most 64 keys take another
    kernel): a decode with max_seqlen_k=40 can then be captured. fp16, d64 and a window on a contiguous cache
    are used by no other check, so nothing else loaded that kernel."""
    case = DecodeCase((40, 17), 1, 16, 4, 64, FP16, capacity=4096, window_left=20)
    q, k, v, lens, _, per_seq = decode_inputs(case)
    out = torch.empty_like(q)
    flashjit.prepare_decode(q, k, v, lens, window_size=(20, 0), out=out)  # max_seqlen_k: the capacity, 4096
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        flashjit.decode(q, k, v, lens, window_size=(20, 0), out=out, max_seqlen_k=40)
    out.fill_(math.nan)
    graph.replay()
    torch.cuda.synchronize()
    ref_o, _ = decode_reference(q, per_seq, 20)
    expect_close(out, None, ref_o, None, FP16, "decode prepared at 4096 keys, captured at 40")


def check_decode_chunked_causal():
    """Chunked-causal decode against float64: the same tensors with chunk sizes 64, 100, 0 (causal) and 64 again,
    each call matching its own mask (a call is never served from the memo entry of another chunk size);
    prepare_decode with chunk_size, then the chunked decode captured and replayed with new lengths; a chunk
    together with a window is a ValueError."""
    case = DecodeCase((66, 1010, 4097), 4, 32, 8, 128, BF16, page_size=16)
    q, k, v, lens, table, per_seq = decode_inputs(case)
    for chunk in (64, 100, 0, 64):
        o, lse = flashjit.decode(q, k, v, lens, page_table=table, chunk_size=chunk, return_lse=True)
        ref_o, ref_lse = (chunked_decode_reference(q, per_seq, chunk) if chunk else
                          decode_reference(q, per_seq))
        expect_close(o, lse, ref_o, ref_lse, BF16, f"{case} chunk_size {chunk} (one call after another)")
    try:
        flashjit.decode(q, k, v, lens, page_table=table, chunk_size=64, window_size=(128, 0))
    except ValueError as e:
        assert "chunk_size" in str(e) and "window_size" in str(e), str(e)
    else:
        raise AssertionError("chunk_size with window_size was accepted")

    case = DecodeCase((300, 4096), 1, 16, 4, 128, FP16, capacity=4096, chunk_size=256)
    q, k, v, lens, _, _ = decode_inputs(case)
    out = torch.empty_like(q)
    flashjit.prepare_decode(q, k, v, lens, chunk_size=256, out=out)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        flashjit.decode(q, k, v, lens, chunk_size=256, out=out)
    for new in ((300, 4096), (4096, 257), (1, 1000)):
        lens.copy_(torch.tensor(new, dtype=torch.int32, device="cuda"))
        q.copy_(torch.randn_like(q))
        out.fill_(math.nan)
        graph.replay()
        torch.cuda.synchronize()
        ref_o, _ = chunked_decode_reference(q, [(k[i, :n], v[i, :n]) for i, n in enumerate(new)], 256)
        expect_close(out, None, ref_o, None, FP16, f"chunked decode graph replay, lengths {new}")


def split_keys(k, v, bounds):
    return [(k[:, a:b], v[:, a:b]) for a, b in zip(bounds, bounds[1:])]


def decode_csr_of(table, seqlens, page_size):
    """FlashInfer's CSR form of a decode's dense table: (page_indptr [B + 1], flat page indices of the used pages,
    last_page_len [B]), int32 on the GPU."""
    used = [-(-n // page_size) for n in seqlens]
    indptr = torch.tensor([0] + [sum(used[:i + 1]) for i in range(len(used))], dtype=torch.int32, device="cuda")
    indices = torch.cat([table[i, :n] for i, n in enumerate(used)]).contiguous()
    last = torch.tensor([n - (m - 1) * page_size if m else 0 for n, m in zip(seqlens, used)], dtype=torch.int32,
                        device="cuda")
    return indptr, indices, last


def check_decode_csr_tables():
    """decode over FlashInfer's CSR page tables (page_indptr with the flat page_table, counts from seqlens_k or
    last_page_len): shuffled pages, mixed lengths with partly full last pages, pages of 1, 16 and 256 tokens, the
    planner's and forced splits; float64, bit for bit the dense table's output; then captured and replayed with new
    offsets, counts and pages, and compiled (fullgraph)."""
    for page, splits in ((1, 0), (16, 0), (16, 3), (256, 0)):
        case = DecodeCase((1, 7, 300, 4097), 1, 32, 8, 128, BF16, page_size=page, num_splits=splits)
        q, k, v, lens, table, per_seq = decode_inputs(case)
        indptr, indices, last = decode_csr_of(table, case.seqlens, page)
        ref_o, ref_lse = decode_reference(q, per_seq)
        dense_o, dense_lse = flashjit.decode(q, k, v, lens, page_table=table, num_splits=splits, return_lse=True,
                                             max_seqlen_k=4097)
        for counts in (dict(seqlens_k=lens), dict(seqlens_k=None, last_page_len=last)):
            o, lse = flashjit.decode(q, k, v, page_table=indices, page_indptr=indptr, num_splits=splits,
                                     return_lse=True, max_seqlen_k=4097, **counts)
            name = f"CSR decode {case} {'last_page_len' if 'last_page_len' in counts else 'seqlens_k'}"
            expect_close(o, lse, ref_o, ref_lse, BF16, name)
            assert torch.equal(o, dense_o) and torch.equal(lse, dense_lse), f"{name}: differs from the dense table"

    # Captured with room for 64 pages a sequence, replayed after new offsets, counts and pages are written.
    case = DecodeCase((50, 1000, 7), 1, 16, 4, 128, BF16, page_size=16)
    q, k, v, lens, table, _ = decode_inputs(case)
    k, v = torch.randn(200, 16, 4, 128, device="cuda", dtype=BF16), torch.randn(200, 16, 4, 128, device="cuda",
                                                                                 dtype=BF16)
    indptr = torch.zeros(4, dtype=torch.int32, device="cuda")
    last = torch.zeros(3, dtype=torch.int32, device="cuda")
    flat = torch.zeros(200, dtype=torch.int32, device="cuda")
    out = torch.empty_like(q)

    def call():
        flashjit.decode(q, k, v, None, page_table=flat, page_indptr=indptr, last_page_len=last, out=out,
                        max_seqlen_k=1024)
    flashjit.prepare_decode(q, k, v, None, page_table=flat, page_indptr=indptr, last_page_len=last, out=out,
                            max_seqlen_k=1024)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call()
    for seed, seqlens in enumerate(((50, 1000, 7), (1024, 1, 333), (16, 17, 1023)), start=1):
        g = torch.Generator().manual_seed(seed)
        dense = torch.randperm(200, generator=g)[:3 * 64].view(3, 64).to(torch.int32).cuda()
        new_indptr, new_indices, new_last = decode_csr_of(dense, seqlens, 16)
        indptr.copy_(new_indptr), last.copy_(new_last)
        flat[:new_indices.shape[0]] = new_indices
        out.fill_(math.nan)
        graph.replay()
        torch.cuda.synchronize()
        per_seq = [(k[dense[i, :-(-n // 16)].long()].reshape(-1, 4, 128)[:n],
                    v[dense[i, :-(-n // 16)].long()].reshape(-1, 4, 128)[:n]) for i, n in enumerate(seqlens)]
        ref_o, _ = decode_reference(q, per_seq)
        expect_close(out, None, ref_o, None, BF16, f"CSR decode graph replay with lengths {seqlens}")

    def step(q, k, v, flat, indptr, last):
        return flashjit.decode(q, k, v, None, page_table=flat, page_indptr=indptr, last_page_len=last,
                               max_seqlen_k=1024)
    torch._dynamo.reset()
    explained = torch._dynamo.explain(step)(q, k, v, flat, indptr, last)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons
    compiled = torch.compile(step, fullgraph=True)
    assert torch.equal(compiled(q, k, v, flat, indptr, last), step(q, k, v, flat, indptr, last)), \
        "compiled CSR decode differs"


def check_merge_states():
    """attention over disjoint key chunks, merged, against attention over all keys: 2 and 3 states, both
    dtypes, a strided output; and a state without keys (LSE -inf, O full of NaN) counts for nothing."""
    for dtype, bounds in ((BF16, (0, 700, 1500)), (FP16, (0, 1, 900, 2048)), (BF16, (0, 1024, 1100, 3000))):
        q = torch.randn(2, 37, 8, 128, device="cuda", dtype=dtype)
        k = torch.randn(2, bounds[-1], 8, 128, device="cuda", dtype=dtype)
        v = torch.randn_like(k)
        states = [flashjit.attention(q, kc, vc, return_lse=True) for kc, vc in split_keys(k, v, bounds)]
        outs, lses = [s[0] for s in states], [s[1] for s in states]
        o, lse = flashjit.merge(outs, lses, return_lse=True)
        ref_o, ref_lse = reference(q, k, v)
        expect_close(o, lse, ref_o, ref_lse, dtype, f"merge of {len(outs)} states ({dtype})")
        strided_out = torch.empty(2, 37, 2, 8, 128, device="cuda", dtype=dtype)[:, :, 1]
        assert flashjit.merge(outs, lses, out=strided_out) is strided_out
        expect_close(strided_out, None, ref_o, None, dtype, f"merge into a strided out ({dtype})")
        empty_o = torch.full_like(outs[0], math.nan)
        empty_lse = torch.full_like(lses[0], -math.inf)
        o2, lse2 = flashjit.merge(outs + [empty_o], lses + [empty_lse], return_lse=True)
        expect_close(o2, lse2, ref_o, ref_lse, dtype, f"merge with an empty state ({dtype})")
    # Rows empty in every state: O = 0 and LSE = -inf.
    outs = [torch.full((1, 2, 4, 64), math.nan, device="cuda", dtype=BF16) for _ in range(2)]
    lses = [torch.full((1, 4, 2), -math.inf, device="cuda") for _ in range(2)]
    o, lse = flashjit.merge(outs, lses, return_lse=True)
    assert torch.equal(o, torch.zeros_like(o)) and torch.isneginf(lse).all(), "merge of empty rows"


def check_decode_cascade_merge():
    """A shared prefix (the same pages in every row of a page table) and per-sequence suffixes (contiguous): decode
    over each part, merged, equals attention over the concatenated keys."""
    b, hq, hkv, d, prefix, ps = 4, 32, 8, 128, 1000, 16
    suffix_lens = [1, 10, 300, 77]
    q = torch.randn(b, 1, hq, d, device="cuda", dtype=BF16)
    pages = -(-prefix // ps)
    pk = torch.randn(pages + 5, ps, hkv, d, device="cuda", dtype=BF16)
    pv = torch.randn_like(pk)
    shared = torch.randperm(pages + 5, device="cuda")[:pages].to(torch.int32)
    table = shared[None].repeat(b, 1).contiguous()
    prefix_lens = torch.full((b,), prefix, dtype=torch.int32, device="cuda")
    sk = torch.randn(b, max(suffix_lens), hkv, d, device="cuda", dtype=BF16)
    sv = torch.randn_like(sk)
    suffix = torch.tensor(suffix_lens, dtype=torch.int32, device="cuda")
    # With one new token per sequence, the prefix is entirely visible in the prefix decode, and the suffix in its own.
    o1, lse1 = flashjit.decode(q, pk, pv, prefix_lens, page_table=table, return_lse=True)
    o2, lse2 = flashjit.decode(q, sk, sv, suffix, return_lse=True)
    o, lse = flashjit.merge([o1, o2], [lse1, lse2], return_lse=True)
    prefix_k = pk[shared.long()].reshape(-1, hkv, d)[:prefix]
    prefix_v = pv[shared.long()].reshape(-1, hkv, d)[:prefix]
    per_seq = [(torch.cat([prefix_k, sk[i, :n]]), torch.cat([prefix_v, sv[i, :n]])) for i, n in enumerate(suffix_lens)]
    ref_o, ref_lse = decode_reference(q, per_seq)
    expect_close(o, lse, ref_o, ref_lse, BF16, "cascade: shared paged prefix and suffix decodes merged")


def check_merge_graph_capture():
    q = torch.randn(1, 5, 8, 64, device="cuda", dtype=FP16)
    k = torch.randn(1, 600, 8, 64, device="cuda", dtype=FP16)
    v = torch.randn_like(k)
    states = [flashjit.attention(q, kc, vc, return_lse=True) for kc, vc in split_keys(k, v, (0, 200, 600))]
    outs, lses = [s[0] for s in states], [s[1] for s in states]
    out = torch.empty_like(q)
    flashjit.merge(outs, lses, out=out)  # loads the kernel, outside capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        flashjit.merge(outs, lses, out=out)
    out.zero_()
    graph.replay()
    torch.cuda.synchronize()
    expect_close(out, None, reference(q, k, v)[0], None, FP16, "merge graph replay")


def check_repeat_calls_on_new_tensors_and_streams():
    """Calls of one kind (the second and later reuse the first's checks, _memo) on fresh tensors, lengths and
    streams are each right; a view at an address that breaks the alignment is still refused after a hit;
    the default stream handle is torch's current stream, inside a stream context too."""
    from flashjit import _attention
    case = DecodeCase((300, 77), 1, 32, 8, 128, BF16, page_size=16, capacity=512)
    side = torch.cuda.Stream()
    for i, stream in enumerate((None, side, None)):
        q, k, v, lens, table, per_seq = decode_inputs(case)
        side.wait_stream(torch.cuda.current_stream())  # the inputs, written on the default stream
        with torch.cuda.stream(stream if stream is not None else torch.cuda.current_stream()):
            assert _attention._stream_handle(None, q.device) == torch.cuda.current_stream().cuda_stream
            o, lse = flashjit.decode(q, k, v, lens, page_table=table, return_lse=True)
        torch.cuda.synchronize()
        ref_o, ref_lse = decode_reference(q, per_seq)
        expect_close(o, lse, ref_o, ref_lse, BF16, f"paged decode, call {i} of one kind")
    for i in range(2):
        q, k, v = (torch.randn(2, 130, h, 64, device="cuda", dtype=FP16) for h in (8, 2, 2))
        o = flashjit.attention(q, k, v, causal=True)
        expect_close(o, None, reference(q, k, v, causal=True)[0], None, FP16, f"attention, call {i} of one kind")
    if torch.cuda.device_count() > 1:
        # Another device's current stream, a non-default one, while device 0 is current.
        dev = torch.device("cuda", 1)
        with torch.cuda.device(dev):
            other = torch.cuda.Stream()
        current, before = torch.cuda.current_device(), torch.cuda.current_stream(dev)
        torch.cuda.set_stream(other)  # makes device 1 current too
        torch.cuda.set_device(current)
        try:
            assert current != 1 and torch.cuda.current_stream(dev).cuda_stream == other.cuda_stream
            assert _attention._stream_handle(None, dev) == other.cuda_stream
        finally:
            torch.cuda.set_stream(before)
            torch.cuda.set_device(current)
    base = torch.randn(2 * 130 * 8 * 64 + 4, device="cuda", dtype=FP16)
    odd = base[4:].view(2, 130, 8, 64)  # 8 bytes past a 16-byte boundary, same metadata as q
    try:
        flashjit.attention(odd, k, v, causal=True)
    except ValueError as e:
        assert "not 16-byte aligned" in str(e), str(e)
    else:
        raise AssertionError("a misaligned q was accepted after a call of its kind")


CHECKS = [check_softmax_scale_and_strided_views, check_out_reuse, check_graph_capture_and_replay,
          check_varlen_views_out_and_scale, check_varlen_graph_capture_and_replay,
          check_precompile_then_capture, check_capture_without_warmup_is_an_error, check_explicit_config,
          check_decode_out_and_strided_q, check_decode_graph_capture_and_replay,
          check_decode_capture_without_prepare_is_an_error, check_prepare_decode_covers_shorter_caches,
          check_decode_chunked_causal, check_decode_csr_tables,
          check_merge_states, check_decode_cascade_merge,
          check_merge_graph_capture, check_repeat_calls_on_new_tensors_and_streams]


def main():
    def runs():
        out = [(str(case), lambda case=case: check_case(case)) for case in CASES]
        out += [(str(case), lambda case=case: check_varlen_case(case)) for case in VARLEN_CASES]
        out += [(str(case), lambda case=case: check_decode_case(case)) for case in DECODE_CASES]
        import gpu_torch_checks  # torch.compile, torch.export, flash-attn's names, select
        return out + named(CHECKS) + named(gpu_torch_checks.CHECKS)
    return main_of(runs)


def named(checks):
    """(name, check) runs of check functions, named by their functions."""
    return [(check.__name__, check) for check in checks]


def main_of(runs, skipped_as=None):
    """A check script's main without pytest: 0 with a line when there is no CUDA GPU, else run_all(runs(),
    skipped_as) (runs a function, so that nothing is made before the GPU is found) with torch's seed 0."""
    if not torch.cuda.is_available():
        print("no CUDA GPU: nothing to check")
        return 0
    torch.manual_seed(0)
    return run_all(runs(), skipped_as)


def run_all(runs, skipped_as=None):
    """Runs each (name, run) of `runs` without pytest: a line per run (ok, FAIL with the error, or skip for an
    exception of type skipped_as), then the counts; 1 when any failed, else 0."""
    passed = failed = skipped = 0
    for name, run in runs:
        try:
            run()
            passed += 1
            print(f"ok    {name}")
        except Exception as e:  # report every failure, then the count
            if skipped_as is not None and isinstance(e, skipped_as):
                skipped += 1
                print(f"skip  {name}: {e}")
                continue
            failed += 1
            print(f"FAIL  {name}: {type(e).__name__}: {e}")
    print(f"{passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped_as is not None else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
