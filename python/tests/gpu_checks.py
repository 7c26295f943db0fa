"""flashjit.attention on a GPU against torch's scaled_dot_product_attention computed in float32.

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
    o, lse = flashjit.attention(q, k, v, causal=case.causal, window=case.window, return_lse=True)
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
    info = flashjit.precompile(q_shape=q.shape, k_shape=k.shape, dtype=q.dtype, window=case.window)
    assert info["config"]["mask"] == "sliding_window" and info["config"]["head_dim"] == 64
    out = torch.empty_like(q)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        flashjit.attention(q, k, v, window=case.window, out=out)
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
            flashjit.attention(q, k, v, window=case.window, out=out, config=fresh)
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


CHECKS = [check_softmax_scale_and_strided_views, check_out_reuse, check_graph_capture_and_replay,
          check_precompile_then_capture, check_capture_without_warmup_is_an_error, check_explicit_config]


def main():
    if not torch.cuda.is_available():
        print("no CUDA GPU: nothing to check")
        return 0
    torch.manual_seed(0)
    runs = [(str(case), lambda case=case: check_case(case)) for case in CASES]
    runs += [(check.__name__, check) for check in CHECKS]
    passed = failed = 0
    for name, run in runs:
        try:
            run()
            passed += 1
            print(f"ok    {name}")
        except Exception as e:  # report every failure, then the count
            failed += 1
            print(f"FAIL  {name}: {type(e).__name__}: {e}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
