#!/usr/bin/env python3
"""Host time per call of flashjit's Python functions and of torch's SDPA on small problems, in one process:
what an eager serving loop pays on the CPU per attention call, apart from the GPU's time. Each figure is the
median over rounds of back-to-back calls timed by the host clock, with the device synchronized only between
rounds; the problems are small enough that the GPU keeps up with the host, and a round's calls fit in the
launch queue, so the host never waits for the GPU inside a round. Repeat calls of one kind are what is
timed (flashjit checks its arguments fully on a kind's first call, _memo).

usage: PYTHONPATH=python python3 tools/bench/host_overhead.py [--out FILE.md]
"""
import argparse
import datetime
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
import flashjit  # noqa: E402

CALLS, ROUNDS, WARMUP = 100, 9, 20


def host_us(call):
    """Median µs of host time per call over ROUNDS rounds of CALLS calls."""
    for _ in range(WARMUP):
        call()
    torch.cuda.synchronize()
    rounds = []
    for _ in range(ROUNDS):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(CALLS):
            call()
        rounds.append((time.perf_counter() - t0) / CALLS * 1e6)
    torch.cuda.synchronize()
    return statistics.median(rounds)


def sdpa(backend, q, k, v, **kwargs):
    """SDPA on [B, S, H, D] tensors through one backend (the context manager entered per call, as a library
    call site would)."""
    def run():
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), **kwargs)
    return run


def cases():
    """(group, name, call) triples: decode B1 Sk 512 H32/KV8 D128 bf16 (one split, four splits, the planner's,
    a 16-token paged cache), prefill S 128 (plain, with a bias, with a document mask_mod and its block mask), a
    merge of two states, and torch's SDPA on the same tensors."""
    dev, bf16 = "cuda", torch.bfloat16
    q = torch.randn(1, 1, 32, 128, device=dev, dtype=bf16)
    k = torch.randn(1, 512, 8, 128, device=dev, dtype=bf16)
    v = torch.randn_like(k)
    o = torch.empty_like(q)
    lens = torch.full((1,), 512, dtype=torch.int32, device=dev)
    pages_k, pages_v = k.view(32, 16, 8, 128), v.view(32, 16, 8, 128)
    table = torch.randperm(32, device=dev).to(torch.int32).view(1, 32)
    yield "decode", "flashjit.decode(out=o), one split", lambda: flashjit.decode(q, k, v, lens, out=o, num_splits=1)
    yield "decode", "flashjit.decode(out=o), four splits", lambda: flashjit.decode(q, k, v, lens, out=o, num_splits=4)
    yield "decode", "flashjit.decode(), planned", lambda: flashjit.decode(q, k, v, lens)
    yield "decode", "flashjit.decode(page_table=..., out=o), planned", \
        lambda: flashjit.decode(q, pages_k, pages_v, lens, page_table=table, out=o)
    yield "decode", "SDPA cuDNN, enable_gqa", sdpa(SDPBackend.CUDNN_ATTENTION, q, k, v, enable_gqa=True)
    yield "decode", "SDPA flash, enable_gqa", sdpa(SDPBackend.FLASH_ATTENTION, q, k, v, enable_gqa=True)
    qp = torch.randn(1, 128, 32, 128, device=dev, dtype=bf16)
    kp = torch.randn(1, 128, 8, 128, device=dev, dtype=bf16)
    vp, op = torch.randn_like(kp), torch.empty_like(qp)
    yield "prefill S 128", "flashjit.attention(causal=True, out=o)", \
        lambda: flashjit.attention(qp, kp, vp, causal=True, out=op)
    yield "prefill S 128", "SDPA cuDNN, enable_gqa, causal", \
        sdpa(SDPBackend.CUDNN_ATTENTION, qp, kp, vp, enable_gqa=True, is_causal=True)
    # Variants (issue 26: a call costs <= 15 µs of host time): a bias, a document mask_mod with its block mask.
    bias = torch.randn(1, 32, 128, 128, device=dev, dtype=bf16)
    ids = (torch.arange(128, device=dev, dtype=torch.int32) // 40).contiguous()
    docs = ("__device__ bool mask_mod(int b, int h, int q, int k, const flashjit::ModContext& ctx) {\n"
            "  const int* d = ctx.pointer<int>(0);\n  return d[q] == d[k];\n}\n")
    mask = flashjit.block_mask(docs, 1, 1, 128, 128, causal=True, aux_tensors=[ids])
    yield "prefill S 128", "flashjit.attention(causal=True, bias=..., out=o)", \
        lambda: flashjit.attention(qp, kp, vp, causal=True, bias=bias, out=op)
    yield "prefill S 128", "flashjit.attention(causal=True, block_mask=..., mask_mod=..., aux_tensors=[ids])", \
        lambda: flashjit.attention(qp, kp, vp, causal=True, block_mask=mask, mask_mod=docs, aux_tensors=[ids], out=op)
    o1, lse1 = flashjit.decode(q, k[:, :256], v[:, :256], torch.full((1,), 256, dtype=torch.int32, device=dev),
                               return_lse=True)
    o2, lse2 = flashjit.decode(q, k[:, 256:], v[:, 256:], torch.full((1,), 256, dtype=torch.int32, device=dev),
                               return_lse=True)
    yield "merge", "flashjit.merge of two states (out=o)", lambda: flashjit.merge([o1, o2], [lse1, lse2], out=o)
    yield "baseline", "torch.empty_like(q)", lambda: torch.empty_like(q)
    yield "baseline", "q.add_(0) (one small torch kernel)", lambda: q.add_(0)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="also write the table to this Markdown file")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("host_overhead: no CUDA GPU", file=sys.stderr)
        return 1
    lines = [f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {torch.cuda.get_device_name(0)}, "
             f"torch {torch.__version__}, flashjit {flashjit.version()}: host µs per call (median of {ROUNDS} rounds "
             f"of {CALLS} calls).", "", "| problem | call | host µs |", "|---|---|---|"]
    for group, name, call in cases():
        lines.append(f"| {group} | {name} | {host_us(call):.1f} |")
        print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
