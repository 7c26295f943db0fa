#!/usr/bin/env python3
"""Times flashjit (through its Python package) and torch's attention kernels in one process, on the same
tensors: SDPA with the cuDNN, flash (FA2) and efficient backends, and FlexAttention (torch.compile; only
from --flex-min-seqlen on, to bound compile time). The decode sweep times flashjit.decode (contiguous and
paged KV caches) against SDPA's cuDNN and flash backends on the same data, in GB/s of the K/V bytes read.
CUDA events, warm-up, medians, input sets rotated past the L2; short kernels are timed as CUDA-graph replays
of many calls so that launch latency is not what is measured (each row says how it was timed). flashjit's
output is checked against cuDNN's before timing (else another peer's; where none runs the case, against a
float64 reference on 64 of its query rows). The variants sweep (softcap, ALiBi, sinks, a bias tensor) has FA4
(softcap, learnable sinks) and FlexAttention (softcap, ALiBi and the bias as a score_mod) for peers; SDPA has none. The ceilings (bf16 matmul 8192³, 2 GiB device copy) are
measured in the same run.

usage: PYTHONPATH=python python3 tools/bench/attention_bench.py --outdir OUT [--sweep llama3] [--sweep fa3]
       [--sweep variants] [--sweep decode]
Writes OUT/SWEEP.json, OUT/SWEEP.md and OUT/SWEEP.png per sweep.
"""
import argparse
import datetime
import inspect
import itertools
import json
import math
import os
import platform
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
import attention_report as report  # noqa: E402
import flashjit  # noqa: E402

CHECK_TOLERANCE = 2e-2
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def median(values):
    values = sorted(values)
    return values[len(values) // 2]


def time_events(run, iters, warmup):
    """Median ms of one call between two events."""
    for i in range(warmup):
        run(i)
    torch.cuda.synchronize()
    times = []
    for i in range(iters):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run(i)
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return median(times)


# GPU time spent running a case before it is timed. A first sample taken right after a heavy case ran up to
# 10% slow (bench/NOTES.md, 2026-11-29: B16 paged decode 3654 GB/s, then 4070 and 4071 on the same graph).
WARMUP_MS = 50.0


def settle(step):
    """Runs step() (one replay or one batch of launches) until WARMUP_MS of GPU time have passed."""
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    while True:
        step()
        stop.record()
        stop.synchronize()
        if start.elapsed_time(stop) >= WARMUP_MS:
            return


def time_graph(run, iters, warmup, calls):
    """Median ms per call of a CUDA graph holding `calls` back-to-back calls (inputs rotating)."""
    for i in range(warmup):
        run(i)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(calls):
            run(i)
    settle(graph.replay)
    times = []
    for _ in range(iters):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / calls)
    return median(times)


def time_back_to_back(run, iters, warmup, calls):
    """Median ms per call of `calls` launches between two events (for what cannot be captured)."""
    for i in range(warmup):
        run(i)
    settle(lambda: [run(i) for i in range(calls)])
    times = []
    for _ in range(iters):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for i in range(calls):
            run(i)
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / calls)
    return median(times)


def measure(run, method, calls, args):
    """(ms per call, method actually used)."""
    if method == "graph":
        try:
            return time_graph(run, args.iters, args.warmup, calls), "graph"
        except RuntimeError:  # not capturable: launches back to back instead
            torch.cuda.synchronize()
            return time_back_to_back(run, args.iters, args.warmup, calls), "back_to_back"
    # One call per event pair would add the Python host time of each call (checks, allocation, dispatch:
    # tens of microseconds) to kernels of a few hundred; launches back to back keep the GPU queue full.
    return time_back_to_back(run, args.iters, args.warmup, max(calls, 8)), "back_to_back"


def run_stamp():
    """The facts of a run: date, GPU, versions, host."""
    return {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version(), "flashjit": flashjit.version(), "host": platform.node()}


def ceilings():
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    matmul_ms = time_events(lambda i: a @ b, 10, 3)
    del a, b
    x = torch.empty(2 * 1024**3, device="cuda", dtype=torch.uint8)
    y = torch.empty_like(x)
    copy_ms = time_events(lambda i: y.copy_(x), 10, 3)
    return {"matmul_tflops": 2 * 8192**3 / (matmul_ms * 1e-3) / 1e12,
            "copy_tb_s": 2 * x.numel() / (copy_ms * 1e-3) / 1e12}


def make_sets(s, count):
    """Input sets of one case: BSHD q, k, v (v with head_dim_v) and o; ragged cases pack their sequences
    ([total, H, D]) and carry cu_seqlens."""
    dtype = DTYPES[s["dtype"]]
    d, dv = s["head_dim"], report.head_dim_v(s)
    sets = []
    for _ in range(count):
        if "lengths" in s:
            total = sum(s["lengths"])
            cu = torch.tensor([0] + list(itertools.accumulate(s["lengths"])), dtype=torch.int32, device="cuda")
            q = torch.randn(total, s["heads_q"], d, device="cuda", dtype=dtype)
            k = torch.randn(total, s["heads_kv"], d, device="cuda", dtype=dtype)
            v = torch.randn(total, s["heads_kv"], dv, device="cuda", dtype=dtype)
            o = torch.empty(total, s["heads_q"], dv, device="cuda", dtype=dtype)
            sets.append({"q": q, "k": k, "v": v, "o": o, "cu": cu})
            continue
        q = torch.randn(s["batch"], s["seqlen_q"], s["heads_q"], d, device="cuda", dtype=dtype)
        k = torch.randn(s["batch"], s["seqlen_k"], s["heads_kv"], d, device="cuda", dtype=dtype)
        v = torch.randn(s["batch"], s["seqlen_k"], s["heads_kv"], dv, device="cuda", dtype=dtype)
        o = torch.empty(s["batch"], s["seqlen_q"], s["heads_q"], dv, device="cuda", dtype=dtype)
        sets.append({"q": q, "k": k, "v": v, "o": o})
    return sets


def variant_tensors(s):
    """flashjit.attention's variant keywords of a case: softcap, ALiBi slopes (2^(-8(h+1)/Hq), the ALiBi
    paper's), sink logits (random, fp32, one per query head), a bias [1, Hq, Sq, Sk] (random, of its dtype; one
    tensor for every input set: at S 4096 it is 1 GiB, past the L2 anyway)."""
    kwargs = {}
    if s.get("softcap"):
        kwargs["softcap"] = s["softcap"]
    if s.get("alibi"):
        h = s["heads_q"]
        kwargs["alibi_slopes"] = torch.tensor([2.0 ** (-8.0 * (i + 1) / h) for i in range(h)], device="cuda",
                                              dtype=torch.float32)
    if s.get("sinks"):
        kwargs["sinks"] = torch.randn(s["heads_q"], device="cuda", dtype=torch.float32)
    if s.get("bias"):
        kwargs["bias"] = torch.randn(1, s["heads_q"], s["seqlen_q"], s["seqlen_k"], device="cuda",
                                     dtype={"fp32": torch.float32, **DTYPES}[s["bias"]])
    return kwargs


def fa4_variant_kwargs(s, variant):
    """FA4's keywords for the case's variants (softcap, learnable_sink), or None where it has none of them
    (ALiBi) or the installed release lacks the keyword."""
    params = inspect.signature(fa4_function()).parameters
    out = {}
    if "alibi_slopes" in variant or "bias" in variant:
        return None
    if "softcap" in variant:
        if "softcap" not in params:
            return None
        out["softcap"] = variant["softcap"]
    if "sinks" in variant:
        if "learnable_sink" not in params:
            return None
        out["learnable_sink"] = variant["sinks"]
    return out


_flex = None


def flex_functions():
    global _flex
    if _flex is None:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
        _flex = (torch.compile(flex_attention), create_block_mask)
    return _flex


_fa4 = None


def fa4_function(name="flash_attn_func"):
    """FlashAttention-4's flash_attn_func (or flash_attn_varlen_func) when it is importable
    (../shared/peers/README.md: install_fa4.sh and its PYTHONPATH), else None."""
    global _fa4
    if _fa4 is None:
        try:
            from flash_attn.cute import flash_attn_func, flash_attn_varlen_func
            _fa4 = {"flash_attn_func": flash_attn_func, "flash_attn_varlen_func": flash_attn_varlen_func}
        except ImportError:
            _fa4 = False
    return _fa4[name] if _fa4 else None


def first_output(result):
    """O of a peer's return value (FA4 returns (out, lse))."""
    return result[0] if isinstance(result, tuple) else result


def fa4_window(s):
    """FA4's window_size: None for an unbounded side."""
    left, right = s.get("window", (-1, -1))
    return (None if left < 0 else left, None if right < 0 else right)


def fa4_varlen_kwargs(s, t):
    """The varlen function's keyword arguments that its signature has (names differ between FA4 releases)."""
    fn = fa4_function("flash_attn_varlen_func")
    wanted = {"cu_seqlens_q": t["cu"], "cu_seqlens_k": t["cu"], "max_seqlen_q": s["seqlen_q"],
              "max_seqlen_k": s["seqlen_k"], "causal": s["causal"]}
    params = inspect.signature(fn).parameters
    return {k: v for k, v in wanted.items() if k in params or k == "causal"}


def runners(s, sets, with_flex):
    """name -> run(i): one call on input set i % len(sets). Peers take [B, H, S, D] views of the BSHD tensors.
    Windows: flashjit, FA4 and FlexAttention (SDPA has none); ragged batches: flashjit and FA4."""
    causal, gqa = s["causal"], s["heads_q"] != s["heads_kv"]
    n = len(sets)
    window = tuple(s.get("window", (-1, -1)))
    if "lengths" in s:
        out = {"flashjit": lambda i: flashjit.attention_varlen(
            sets[i % n]["q"], sets[i % n]["k"], sets[i % n]["v"], sets[i % n]["cu"], sets[i % n]["cu"], s["seqlen_q"],
            s["seqlen_k"], causal=causal, out=sets[i % n]["o"])}
        fa4 = fa4_function("flash_attn_varlen_func")
        if fa4 is not None:
            out["fa4"] = lambda i: fa4(sets[i % n]["q"], sets[i % n]["k"], sets[i % n]["v"],
                                       **fa4_varlen_kwargs(s, sets[i % n]))
        return out
    bhsd = [tuple(t[name].transpose(1, 2) for name in "qkv") for t in sets]
    variant = variant_tensors(s)
    def flashjit_run(i):
        return flashjit.attention(sets[i % n]["q"], sets[i % n]["k"], sets[i % n]["v"], causal=causal,
                                  window_size=window, out=sets[i % n]["o"], **variant)
    flashjit_run.variant = variant  # for the float64 check where no peer runs the case
    out = {"flashjit": flashjit_run}
    fa4 = fa4_function()
    fa4_extra = fa4_variant_kwargs(s, variant) if fa4 is not None else None
    if fa4_extra is not None:  # BSHD like flashjit; GQA by head counts
        if "window" in s:
            fa4_extra["window_size"] = fa4_window(s)
        out["fa4"] = lambda i: fa4(sets[i % n]["q"], sets[i % n]["k"], sets[i % n]["v"], causal=causal, **fa4_extra)

    def sdpa(backend):
        def run(i):
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(*bhsd[i % n], is_causal=causal, enable_gqa=gqa)
        return run

    if "window" not in s and not report.has_variant(s):
        out["cudnn"] = sdpa(SDPBackend.CUDNN_ATTENTION)
        out["torch_flash"] = sdpa(SDPBackend.FLASH_ATTENTION)
        out["torch_efficient"] = sdpa(SDPBackend.EFFICIENT_ATTENTION)
    if with_flex and not s.get("sinks"):  # FlexAttention has no sinks
        out["flex"] = flex_runner(s, bhsd, gqa, variant)
    return out


def flex_score_mod(s, variant):
    """FlexAttention's score_mod for softcap, ALiBi and a bias as flashjit computes them (scores already scaled; the
    cap first, then -slope·|i + Sk - Sq - j|, then + bias[b, h, i, j]), or None."""
    cap, slopes, bias = variant.get("softcap"), variant.get("alibi_slopes"), variant.get("bias")
    if not cap and slopes is None and bias is None:
        return None
    offset = s["seqlen_k"] - s["seqlen_q"]

    def score_mod(score, b, h, qi, ki):
        if cap:
            score = cap * torch.tanh(score / cap)
        if slopes is not None:
            score = score - slopes[h] * (qi + offset - ki).abs()
        if bias is not None:
            score = score + bias[b, h, qi, ki]
        return score
    return score_mod


def flex_runner(s, bhsd, gqa, variant=None):
    """FlexAttention, compiled and given its block mask on the first call (so that failures land where the
    timing records them)."""
    state = {}

    def run(i):
        if not state:
            flex, create_block_mask = flex_functions()
            state["flex"], state["mask"] = flex, None
            offset = s["seqlen_k"] - s["seqlen_q"]
            if "window" in s:
                left, right = s["window"]

                def windowed(b, h, qi, ki):
                    a = qi + offset
                    seen = (ki >= a - left) if left >= 0 else (ki >= 0)
                    return seen & (ki <= a + right) if right >= 0 else seen
                state["mask"] = create_block_mask(windowed, None, None, s["seqlen_q"], s["seqlen_k"], device="cuda")
            elif s["causal"]:
                state["mask"] = create_block_mask(lambda b, h, qi, ki: qi + offset >= ki, None, None, s["seqlen_q"],
                                                  s["seqlen_k"], device="cuda")
            state["score_mod"] = flex_score_mod(s, variant or {})
        return state["flex"](*bhsd[i % len(bhsd)], score_mod=state["score_mod"], block_mask=state["mask"],
                             enable_gqa=gqa)
    return run


def check_against_peer(s, sets, run):
    """flashjit's output on set 0 against cuDNN's (else the next peer that runs the case: the other SDPA
    backends, FA4, FlexAttention; FA4 alone for ragged batches)."""
    mine = first_output(run["flashjit"](0)).float().clone()
    for name in ("cudnn", "torch_flash", "torch_efficient", "fa4", "flex"):
        if name not in run:
            continue
        try:
            theirs = first_output(run[name](0))
        except Exception:  # noqa: BLE001  (a peer that does not run the case)
            continue
        theirs = theirs.float() if name in ("fa4",) else theirs.transpose(1, 2).float()
        rel = (torch.linalg.vector_norm(mine - theirs) / torch.linalg.vector_norm(theirs)).item()
        ok = math.isfinite(rel) and rel <= CHECK_TOLERANCE
        return {"against": name, "rel_l2": rel, "ok": ok}
    if "lengths" in s:
        return {"against": None, "ok": False}
    rows = check_rows(s["seqlen_q"])
    try:
        theirs = reference_rows(s, sets[0], variant_tensors_of(run), rows)
    except Exception as e:  # noqa: BLE001  (out of memory on a huge case: unchecked, said so)
        return {"against": None, "ok": False, "error": f"float64 reference: {type(e).__name__}: {str(e)[:160]}"}
    rel = (torch.linalg.vector_norm(mine[:, rows].double() - theirs) / torch.linalg.vector_norm(theirs)).item()
    return {"against": f"float64 ({len(rows)} query rows)", "rel_l2": rel,
            "ok": math.isfinite(rel) and rel <= CHECK_TOLERANCE}


def check_rows(seqlen_q, count=64):
    """The query rows a float64 check covers: the first and last rows and others spread between them."""
    return sorted({0, seqlen_q - 1} | {round(i * (seqlen_q - 1) / (count - 1)) for i in range(count)})


def variant_tensors_of(run):
    return getattr(run["flashjit"], "variant", {})


def reference_rows(s, t, variant, rows):
    """float64 O of the given query rows of a dense case, as flashjit defines the problem: scores scaled by
    1/sqrt(D), then softcap (cap·tanh(x/cap)), then ALiBi (-slope·|i + Sk - Sq - j|), the causal or window mask
    aligned bottom-right, learnable sinks in the softmax's denominator only; rows without a visible key give 0."""
    q = t["q"][:, rows].double()                                   # [B, R, Hq, D]
    group = s["heads_q"] // s["heads_kv"]
    k = t["k"].double().repeat_interleave(group, dim=2)            # [B, Sk, Hq, D]
    v = t["v"].double().repeat_interleave(group, dim=2)
    scores = torch.einsum("brhd,bkhd->bhrk", q, k) / math.sqrt(s["head_dim"])
    if variant.get("softcap"):
        cap = variant["softcap"]
        scores = cap * torch.tanh(scores / cap)
    i = torch.tensor(rows, device=q.device, dtype=torch.float64)[:, None] + (s["seqlen_k"] - s["seqlen_q"])
    j = torch.arange(s["seqlen_k"], device=q.device, dtype=torch.float64)[None, :]
    if variant.get("alibi_slopes") is not None:
        scores = scores - variant["alibi_slopes"].double()[None, :, None, None] * (i - j).abs()
    if variant.get("bias") is not None:
        scores = scores + variant["bias"][:, :, rows].double()
    left, right = s.get("window", (-1, -1))
    if s["causal"]:
        right = 0
    visible = torch.ones_like(i - j, dtype=torch.bool)
    if left >= 0:
        visible &= j >= i - left
    if right >= 0:
        visible &= j <= i + right
    scores = scores.masked_fill(~visible, -math.inf)
    peak = scores.amax(dim=-1, keepdim=True)
    if variant.get("sinks") is not None:
        sink = variant["sinks"].double()[None, :, None, None]
        peak = torch.maximum(peak, sink)
    peak = torch.where(torch.isfinite(peak), peak, torch.zeros_like(peak))
    p = torch.exp(scores - peak)
    denominator = p.sum(dim=-1, keepdim=True)
    if variant.get("sinks") is not None:
        denominator = denominator + torch.exp(sink - peak)
    p = torch.where(denominator > 0, p / denominator, torch.zeros_like(p))
    return torch.einsum("bhrk,bkhd->brhd", p, v)


def flashjit_kernel_name(s, t):
    """The kernel flashjit's dispatcher picks for the case (flashjit.select), in short."""
    try:
        q_shape = (s["batch"], s["seqlen_q"], s["heads_q"], s["head_dim"])
        k_shape = (s["batch"], s["seqlen_k"], s["heads_kv"], s["head_dim"])
        c = flashjit.select(q_shape, k_shape, dtype=s["dtype"], causal=s["causal"],
                            window_size=tuple(s.get("window", (-1, -1))), varlen="lengths" in s,
                            head_dim_v=s.get("head_dim_v", 0), softcap=s.get("softcap", 0.0),
                            alibi=bool(s.get("alibi")), sinks=bool(s.get("sinks")), bias=s.get("bias"))
        warps = f"wg{c['consumer_warpgroups']}" if "consumer_warpgroups" in c else f"w{c.get('warps')}"
        return (f"{c['algorithm']} bm{c['block_m']} bn{c['block_n']} s{c['stages']} {warps}"
                + (" persistent" if c.get("scheduler") == "persistent" else "")
                + (" packgqa" if c.get("pack_gqa") else ""))
    except Exception as e:  # noqa: BLE001
        return f"? ({type(e).__name__}: {str(e)[:80]})"


def bench_case(s, args, ceil):
    flops = report.attention_flops(s)
    method, calls = report.timing_method(flops)
    sets = make_sets(s, report.rotation_sets(s))
    run_once = runners(s, sets[:1], False)["flashjit"]
    run_once(0)  # compiles (or loads) the kernel outside the timing
    torch.cuda.synchronize()
    info = {"name": flashjit_kernel_name(s, sets[0])}
    run_once = None
    with_flex = args.flex_min_seqlen > 0 and s["seqlen_q"] >= args.flex_min_seqlen
    run = runners(s, sets, with_flex)
    row = {"shape": s, "flops": flops, "io_bytes": report.io_bytes(s), "sets": len(sets), "calls_per_replay": calls,
           "flashjit_config": info["name"], "check": check_against_peer(s, sets, run), "results": {}}
    used = set()
    for name, fn in run.items():
        # FlexAttention is compiled per shape and only runs at lengths where one call outlasts a launch.
        try:
            ms, how = measure(fn, "events" if name == "flex" else method, calls, args)
        except Exception as e:  # a backend that does not support the shape, or a compile failure
            row["results"][name] = {"error": str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__}
            torch.cuda.synchronize()
            continue
        used.add(how)
        seconds = ms * 1e-3
        tflops = flops / seconds / 1e12
        row["results"][name] = {"ms": ms, "tflops": tflops, "method": how,
                                "fraction_of_matmul": tflops / ceil["matmul_tflops"],
                                "fraction_of_copy": row["io_bytes"] / seconds / 1e12 / ceil["copy_tb_s"]}
    row["method"] = "+".join(sorted(used)) or method
    del sets
    torch.cuda.empty_cache()
    return row


# -- decode ---------------------------------------------------------------------------------------------------


def make_decode_sets(s, count):
    """Input sets of one decode shape: q [B, 1, Hq, D], a full contiguous cache [B, Sk, Hkv, D] (every sequence
    holds Sk keys), seqlens_k, and for paged shapes the same keys and values in shuffled pages with their table."""
    dtype = DTYPES[s["dtype"]]
    b, sk, hkv, d, ps = s["batch"], s["seqlen_k"], s["heads_kv"], s["head_dim"], s["page_size"]
    sets = []
    for _ in range(count):
        t = {"q": torch.randn(b, s["q_len"], s["heads_q"], d, device="cuda", dtype=dtype),
             "k": torch.randn(b, sk, hkv, d, device="cuda", dtype=dtype),
             "v": torch.randn(b, sk, hkv, d, device="cuda", dtype=dtype),
             "lens": torch.full((b,), sk, dtype=torch.int32, device="cuda"), "table": None}
        t["o"] = torch.empty_like(t["q"])
        if ps:
            pages_per_seq = -(-sk // ps)
            num_pages = b * pages_per_seq
            table = torch.randperm(num_pages, device="cuda").to(torch.int32).view(b, pages_per_seq)
            for name in "kv":
                padded = torch.zeros(b, pages_per_seq * ps, hkv, d, device="cuda", dtype=dtype)
                padded[:, :sk] = t[name]
                paged = torch.empty(num_pages, ps, hkv, d, device="cuda", dtype=dtype)
                paged[table.long().flatten()] = padded.view(b * pages_per_seq, ps, hkv, d)
                t["paged_" + name] = paged
            t["table"] = table
        sets.append(t)
    return sets


def peer_inputs(backend, sets, group):
    """(BHSD views per set, how GQA is done, enable_gqa) for an SDPA backend: enable_gqa when the backend runs
    it on set 0, else K and V heads repeated (materialized: the peer reads `group` times the bytes; whether
    that runs shows when it is timed)."""
    bhsd = [(t["q"].transpose(1, 2), t["k"].transpose(1, 2), t["v"].transpose(1, 2)) for t in sets]
    if group == 1:
        return bhsd, None, False
    try:
        with sdpa_kernel(backend):
            F.scaled_dot_product_attention(*bhsd[0], enable_gqa=True)
        torch.cuda.synchronize()
        return bhsd, "enable_gqa", True
    except RuntimeError:
        torch.cuda.synchronize()
    expanded = [(q, k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)) for q, k, v in bhsd]
    return expanded, f"KV heads repeated {group}x (materialized; enable_gqa not supported)", False


def decode_runners(s, sets):
    """name -> (run(i), how GQA is done) for flashjit.decode and the SDPA backends on set i % len(sets)."""
    n, group = len(sets), s["heads_q"] // s["heads_kv"]
    paged = bool(s["page_size"])

    def flashjit_run(i):
        t = sets[i % n]
        if paged:
            return flashjit.decode(t["q"], t["paged_k"], t["paged_v"], t["lens"], page_table=t["table"], out=t["o"])
        return flashjit.decode(t["q"], t["k"], t["v"], t["lens"], out=t["o"])

    out = {"flashjit": (flashjit_run, None)}
    for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("torch_flash", SDPBackend.FLASH_ATTENTION)):
        try:
            bhsd, how, gqa = peer_inputs(backend, sets, group)
        except Exception as e:  # noqa: BLE001  (reported as the backend's error)
            out[name] = (e, None)
            continue

        def run(i, bhsd=bhsd, gqa=gqa, backend=backend):
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(*bhsd[i % n], enable_gqa=gqa)
        out[name] = (run, how)
    return out


def check_decode_against_peer(sets, run):
    """flashjit's output on set 0 against cuDNN's (else torch flash's)."""
    mine = run["flashjit"][0](0).float()
    for name in ("cudnn", "torch_flash"):
        fn = run[name][0]
        if not callable(fn):
            continue
        try:
            theirs = fn(0).transpose(1, 2).float()
        except RuntimeError:
            torch.cuda.synchronize()
            continue
        rel = (torch.linalg.vector_norm(mine - theirs) / torch.linalg.vector_norm(theirs)).item()
        return {"against": name, "rel_l2": rel, "ok": math.isfinite(rel) and rel <= CHECK_TOLERANCE}
    return {"against": None, "ok": False}


def bench_decode_case(s, args, ceil):
    sets_count, calls = report.decode_timing(s)
    sets = make_decode_sets(s, sets_count)
    needed = report.kv_bytes(s)
    run = decode_runners(s, sets)
    t = sets[0]
    k, v = (t["paged_k"], t["paged_v"]) if s["page_size"] else (t["k"], t["v"])
    try:
        flashjit.prepare_decode(t["q"], k, v, t["lens"], page_table=t["table"], out=t["o"])
        check = check_decode_against_peer(sets, run)
    except Exception as e:  # noqa: BLE001  (recorded; the timing of flashjit then records its own error)
        check = {"against": None, "ok": False, "error": (str(e).strip().splitlines() or [type(e).__name__])[0][:200]}
        torch.cuda.synchronize()
    row = {"shape": s, "kv_bytes": needed, "sets": len(sets), "calls_per_replay": calls, "check": check,
           "results": {}}
    used = set()
    for name, (fn, how) in run.items():
        if not callable(fn):
            row["results"][name] = {"error": (str(fn).strip().splitlines() or [type(fn).__name__])[0][:200]}
            continue
        try:
            ms, method = measure(fn, "graph", calls, args)
        except Exception as e:  # noqa: BLE001  (a backend that does not run the shape)
            row["results"][name] = {"error": str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__}
            torch.cuda.synchronize()
            continue
        used.add(method)
        gb_s = needed / (ms * 1e-3) / 1e9
        row["results"][name] = {"ms": ms, "gb_s": gb_s, "method": method,
                                "fraction_of_copy": gb_s / (ceil["copy_tb_s"] * 1e3)}
        if how:
            row["results"][name]["gqa"] = how
    row["method"] = "+".join(sorted(used)) or "graph"
    del sets, run
    torch.cuda.empty_cache()
    return row


def print_decode_row(row):
    r = row["results"]
    cells = [f"{name} {r[name]['gb_s']:.0f}" if "gb_s" in r[name] else f"{name} –" for name in report.DECODE_IMPLS
             if name in r]
    fj = r.get("flashjit", {})
    extra = f" ({1e3 * fj['ms']:.1f} us, {100 * fj['fraction_of_copy']:.0f}% of copy BW)" if "gb_s" in fj else ""
    flag = "" if row["check"].get("ok") else "  CHECK FAILED"
    print(f"{report.decode_label(row['shape']):<34} [{row['method']}] GB/s " + ", ".join(cells) + extra + flag,
          flush=True)


def print_row(row):
    r = row["results"]
    cells = [f"{name} {r[name]['tflops']:.0f}" if "tflops" in r.get(name, {}) else f"{name} –" for name in report.IMPLS
             if name in r]
    check = row["check"]
    flag = "" if check.get("ok") else "  CHECK FAILED"
    fj = r.get("flashjit", {})
    frac = (f" ({100 * fj['fraction_of_matmul']:.0f}% of matmul, {100 * fj['fraction_of_copy']:.1f}% of copy BW)"
            if "tflops" in fj else "")
    print(f"{report.label(row['shape']):<34} [{row['method']}] " + ", ".join(cells) + frac + flag, flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--outdir", required=True)
    parser.add_argument("--sweep", action="append", choices=sorted(report.SWEEPS),
                        help="llama3, fa3, headdims, windows, ragged, variants, decode, decode-batches, decode-short and/or "
                             "decode-small (repeatable; default: all)")
    parser.add_argument("--seqlens", type=lambda t: [int(x) for x in t.split(",")],
                        help="llama3 sequence lengths (comma-separated; default: the full sweep)")
    parser.add_argument("--iters", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--flex-min-seqlen", type=int, default=4096,
                        help="time FlexAttention from this query length on (0: never)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("attention_bench: no CUDA GPU", file=sys.stderr)
        return 1

    stamp = run_stamp()
    ceil = ceilings()
    print(f"ceilings: bf16 matmul {ceil['matmul_tflops']:.0f} TFLOP/s, copy {ceil['copy_tb_s']:.2f} TB/s", flush=True)
    os.makedirs(args.outdir, exist_ok=True)
    sweeps = args.sweep or sorted(report.SWEEPS)
    for sweep in sweeps:
        shapes = report.llama3_sweep(args.seqlens) if sweep == "llama3" and args.seqlens else report.SWEEPS[sweep]()
        decode = sweep.startswith("decode")
        rows = []
        for s in shapes:
            rows.append(bench_decode_case(s, args, ceil) if decode else bench_case(s, args, ceil))
            (print_decode_row if decode else print_row)(rows[-1])
        base = Path(args.outdir, sweep)
        with open(base.with_suffix(".json"), "w") as f:
            json.dump({"stamp": stamp, "ceilings": ceil, "methods": report.METHOD_NOTE, "rows": rows}, f, indent=1)
        if decode:
            base.with_suffix(".md").write_text(report.decode_markdown_table(rows, ceil, stamp, sweep))
            report.plot_decode(rows, ceil, str(base.with_suffix(".png")), sweep)
        else:
            base.with_suffix(".md").write_text(report.markdown_table(sweep, rows, ceil, stamp))
            report.plot(sweep, rows, ceil, str(base.with_suffix(".png")))
    for sweep in sweeps:
        print(Path(args.outdir, f"{sweep}.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
