#!/usr/bin/env python3
"""Times torch's attention kernels (SDPA flash / cuDNN / efficient backends) on the shapes of a flashjit_bench
JSON-lines file, in the same run and with the same method (CUDA events, warm-up, median, inputs rotated
past the L2), measures the ceilings (cuBLAS bf16 matmul, device copy), and writes a markdown table and JSON
under bench/results/.

usage: compare.py FLASHJIT_JSONL --name NAME [--iters 30]
"""
import argparse
import datetime
import json
import math
import os
import platform
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def median_ms(fn, iters, warmup=5):
    for _ in range(warmup):
        fn(0)
    torch.cuda.synchronize()
    times = []
    for i in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn(i)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def flops(b, sq, sk, hq, d, mask):
    if mask == "causal":
        pairs = sum(max(0, min(sk, i + sk - sq + 1)) for i in range(sq))
    else:
        pairs = sq * sk
    return 4.0 * b * hq * pairs * d


_flex = None


def flex_runner():
    global _flex
    if _flex is None:
        from torch.nn.attention.flex_attention import flex_attention, create_block_mask
        _flex = (torch.compile(flex_attention), create_block_mask)
    return _flex


def time_peers(shape, dtype, iters, with_flex=False):
    b, sq, sk, hq, hkv, d, mask = shape
    dt = torch.bfloat16 if dtype == "bf16" else torch.float16
    set_bytes = 2 * (b * sq * hq * d * 2 + 2 * b * sk * hkv * d * 2)
    sets = max(1, min(8, math.ceil(240e6 / set_bytes)))
    inputs = []
    for _ in range(sets):
        q = torch.empty(b, sq, hq, d, device="cuda", dtype=dt).uniform_(-1, 1)
        k = torch.empty(b, sk, hkv, d, device="cuda", dtype=dt).uniform_(-1, 1)
        v = torch.empty(b, sk, hkv, d, device="cuda", dtype=dt).uniform_(-1, 1)
        inputs.append((q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)))
    causal = mask == "causal"
    out = {}
    for name, backend in (("torch_flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                          ("torch_efficient", SDPBackend.EFFICIENT_ATTENTION)):
        def run(i, backend=backend):
            q, k, v = inputs[i % sets]
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=hq != hkv)
        try:
            ms = median_ms(run, iters)
            out[name] = {"median_ms": ms, "tflops": flops(b, sq, sk, hq, d, mask) / (ms * 1e-3) / 1e12}
        except Exception as e:  # a backend that does not support the shape
            out[name] = {"error": str(e).splitlines()[0][:160]}
    if with_flex:
        try:
            flex, create_block_mask = flex_runner()
            block_mask = None
            if causal:
                off = sk - sq
                block_mask = create_block_mask(lambda b_, h_, q_, k_: q_ + off >= k_, None, None, sq, sk)
            run = lambda i: flex(*inputs[i % sets], block_mask=block_mask, enable_gqa=hq != hkv)
            ms = median_ms(run, iters)
            out["flex"] = {"median_ms": ms, "tflops": flops(b, sq, sk, hq, d, mask) / (ms * 1e-3) / 1e12}
        except Exception as e:
            out["flex"] = {"error": str(e).splitlines()[0][:160]}
    return out


def ceilings():
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    ms = median_ms(lambda i: a @ b, 10)
    x = torch.empty(2 * 1024**3, device="cuda", dtype=torch.uint8)
    y = torch.empty_like(x)
    cms = median_ms(lambda i: y.copy_(x), 10)
    return {"cublas_bf16_tflops": 2 * 8192**3 / (ms * 1e-3) / 1e12, "copy_tb_s": 2 * x.numel() / (cms * 1e-3) / 1e12}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("flashjit_jsonl")
    ap.add_argument("--name", required=True)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--outdir", default="bench/results")
    ap.add_argument("--flex-min-seqlen", type=int, default=0,
                    help="also time FlexAttention (torch.compile) on shapes with at least this many queries (0: never)")
    args = ap.parse_args()

    rows = [json.loads(l) for l in open(args.flashjit_jsonl) if l.strip()]
    fj = [r for r in rows if r.get("impl") == "flashjit"]
    overheads = [r["overheads"] for r in rows if "overheads" in r]
    stamp = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "host": platform.node(),
    }
    ceil = ceilings()
    results = []
    peers_cache = {}
    for r in fj:
        shape = r["shape"].split(",")
        key = (r["shape"], r["dtype"])
        if key not in peers_cache:
            b, sq, sk, hq, hkv, d = map(int, shape[:6])
            with_flex = args.flex_min_seqlen > 0 and sq >= args.flex_min_seqlen
            peers_cache[key] = time_peers((b, sq, sk, hq, hkv, d, shape[6]), r["dtype"], args.iters, with_flex)
        results.append({"flashjit": r, "peers": peers_cache[key]})

    def tf(p):
        return p.get("tflops") if "tflops" in p else None

    lines = [f"# {args.name}", "",
             f"{stamp['date']} — {stamp['gpu']}, torch {stamp['torch']} (CUDA {stamp['cuda']}, cuDNN {stamp['cudnn']}). "
             f"Ceilings measured in this run: cuBLAS bf16 {ceil['cublas_bf16_tflops']:.0f} TFLOP/s, "
             f"copy {ceil['copy_tb_s']:.2f} TB/s.", "",
             "TFLOP/s (FLOPs = 4·B·H·visible pairs·D); ratios are flashjit / peer, same process, same inputs method.", "",
             "| shape B,Sq,Sk,Hq,Hkv,D,mask | flashjit config | flashjit | torch flash (FA2) | cuDNN | FlexAttention | torch efficient | ×FA2 | ×cuDNN | % cuBLAS | rel err |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for x in results:
        r, p = x["flashjit"], x["peers"]
        f2, cd, ef, fx = tf(p["torch_flash"]), tf(p["cudnn"]), tf(p["torch_efficient"]), tf(p.get("flex", {}))
        fmt = lambda v: f"{v:.0f}" if v else "–"
        ratio = lambda a, b: f"{a / b:.2f}" if a and b else "–"
        lines.append(f"| {r['shape']} | {r['config']} | {r['tflops']:.0f} | {fmt(f2)} | {fmt(cd)} | {fmt(fx)} | {fmt(ef)} | "
                     f"{ratio(r['tflops'], f2)} | {ratio(r['tflops'], cd)} | {100 * r['tflops'] / ceil['cublas_bf16_tflops']:.0f}% | "
                     f"{r['rel_l2']:.1e} |")
    if overheads:
        o = overheads[-1]
        lines += ["", f"Host overhead of `forward()` on an in-process hit: {o['forward_host_us']:.2f} µs; "
                      f"disk-cache hit → launched: {o['cache_hit_to_launch_ms']:.2f} ms."]
    text = "\n".join(lines) + "\n"
    os.makedirs(args.outdir, exist_ok=True)
    base = os.path.join(args.outdir, args.name)
    open(base + ".md", "w").write(text)
    json.dump({"stamp": stamp, "ceilings": ceil, "results": results, "overheads": overheads},
              open(base + ".json", "w"), indent=1)
    print(text)


if __name__ == "__main__":
    sys.exit(main())
