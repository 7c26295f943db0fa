#!/usr/bin/env python3
"""Appending to a KV cache, one process: flashjit.append_kv's bandwidth (bytes written / time) against a plain device
copy of the same bytes (torch copy_ of a same-size contiguous tensor), contiguous and paged caches (shuffled pages,
NHD and HND), dense and ragged new rows; and the fused append + decode step (flash_attn_with_kvcache with k=, v=)
against the decode alone over the same cache, and the append and decode as two calls. Every append is checked
against torch indexing, the fused output against the decode alone, before timing. Timing as attention_bench.py:
CUDA graphs of back-to-back calls (sources rotated past the L2 for the copies), 50 ms of settling, medians.
Targets (issue 27): append >= 90% of the copy's bandwidth; fused <= decode alone + 10%.

usage: PYTHONPATH=python FLASHJIT_LIBRARY=build/libflashjit.so python3 tools/bench/append_bench.py --out OUT.json
       [--md OUT.md]
"""
import argparse
import json
import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
import attention_bench as bench  # noqa: E402
import flashjit  # noqa: E402

HKV, D = 8, 128
MOVED_PER_REPLAY = 1 << 30  # bytes a graph replay writes at least (calls per replay follow)
SETS_BYTES = 256 << 20      # input sets rotated until they hold this much (past the 60 MB L2)


def append_cases():
    """llama3's KV heads (8 x d128, bf16): prefill chunks of 4096 tokens for 8 sequences and 512 for 64, over
    contiguous caches and shuffled pools of 1-, 16- and 256-token pages (16 also HND), dense and ragged; and one
    decode step's single token for 64 sequences (latency-bound: shown, not a bandwidth target)."""
    out = []
    for batch, new in ((8, 4096), (64, 512)):
        for page in (0, 1, 16, 256):
            out.append(dict(batch=batch, new=new, page=page, hnd=False, ragged=False))
        out.append(dict(batch=batch, new=new, page=16, hnd=True, ragged=False))
        out.append(dict(batch=batch, new=new, page=16, hnd=False, ragged=True))
    out.append(dict(batch=64, new=1, page=16, hnd=False, ragged=False))
    return out


def append_label(c):
    layout = "contiguous" if c["page"] == 0 else f"paged {c['page']}{' HND' if c['hnd'] else ''}"
    return f"B{c['batch']} +{c['new']} tokens {layout}{' ragged' if c['ragged'] else ''}"


def make_append_set(c, cached):
    """New rows (dense [B, new, Hkv, D] or packed), caches holding `cached` + new positions per sequence (pools:
    shuffled pages, one spare row of pages), lengths, table, offsets."""
    b, new, ps = c["batch"], c["new"], max(c["page"], 1)
    capacity = (cached + new + ps - 1) // ps * ps
    shape = (b * new, HKV, D) if c["ragged"] else (b, new, HKV, D)
    k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    t = {"k": k, "v": v, "lens": torch.full((b,), cached, device="cuda", dtype=torch.int32)}
    if c["ragged"]:
        t["cu"] = torch.arange(0, b * new + 1, new, device="cuda", dtype=torch.int32)
    if c["page"] == 0:
        t["kc"], t["vc"] = (torch.zeros(b, capacity, HKV, D, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        return t
    per_row = capacity // ps
    pages = b * per_row + per_row
    t["table"] = torch.randperm(pages, device="cuda", dtype=torch.int32)[: b * per_row].view(b, per_row).contiguous()
    if c["hnd"]:  # [pages, Hkv, page_size, D] viewed as [pages, page_size, Hkv, D]
        pools = [torch.zeros(pages, HKV, ps, D, device="cuda", dtype=torch.bfloat16).transpose(1, 2) for _ in range(2)]
    else:
        pools = [torch.zeros(pages, ps, HKV, D, device="cuda", dtype=torch.bfloat16) for _ in range(2)]
    t["kc"], t["vc"] = pools
    return t


def append_call(t, c):
    return lambda: flashjit.append_kv(t["kc"], t["vc"], t["k"], t["v"], t["lens"], page_table=t.get("table"),
                                      cu_seqlens=t.get("cu"), max_new_len=c["new"] if c["ragged"] else None)


def check_append(t, c, cached):
    """Rows written where torch indexing puts them (max abs difference 0)."""
    append_call(t, c)()
    b, new = c["batch"], c["new"]
    pos = cached + torch.arange(new, device="cuda")
    k = t["k"].view(b, new, HKV, D)
    if c["page"] == 0:
        got = t["kc"][:, pos]
    else:
        ps = c["page"]
        pages = t["table"].long()[:, pos // ps]
        got = t["kc"][pages, (pos % ps)[None, :].expand(b, new)]
    return (got.float() - k.float()).abs().max().item()


def time_calls(calls_of, count):
    """Median ms per call of a graph of `count` calls (calls_of(i): the i-th call, inputs rotating)."""
    return bench.time_graph(lambda i: calls_of(i)(), ITERS, WARMUP, count)


def bench_append(c):
    bytes_written = 2 * c["batch"] * c["new"] * HKV * D * 2
    sets_count = max(1, min(8, math.ceil(SETS_BYTES / bytes_written)))
    cached = 4097  # mid-page for every page size above 1
    sets = [make_append_set(c, cached) for _ in range(sets_count)]
    row = {"case": c, "label": append_label(c), "bytes": bytes_written, "results": {}}
    row["check_max_abs"] = check_append(sets[0], c, cached)
    calls = max(1, min(64, math.ceil(MOVED_PER_REPLAY / bytes_written)))
    runs = [append_call(t, c) for t in sets]
    ms = time_calls(lambda i: runs[i % len(runs)], calls)
    row["results"]["append"] = {"ms": ms, "tb_s": bytes_written / (ms * 1e-3) / 1e12}
    # The same bytes copied: sources and destinations rotated like the append's.
    pairs = [(torch.empty(bytes_written // 2, device="cuda", dtype=torch.bfloat16),
              torch.empty(bytes_written // 2, device="cuda", dtype=torch.bfloat16)) for _ in range(sets_count)]
    copies = [lambda d=d, s=s: d.copy_(s) for s, d in pairs]
    ms = time_calls(lambda i: copies[i % len(copies)], calls)
    row["results"]["copy"] = {"ms": ms, "tb_s": bytes_written / (ms * 1e-3) / 1e12}
    row["ratio"] = row["results"]["append"]["tb_s"] / row["results"]["copy"]["tb_s"]
    del sets, pairs
    torch.cuda.empty_cache()
    return row


def fused_cases():
    return [dict(batch=b, cache=8192, page=p) for b in (8, 64) for p in (16, 0)]


def fused_label(c):
    return f"B{c['batch']} cache {c['cache']} {'paged ' + str(c['page']) if c['page'] else 'contiguous'} +1 token"


def bench_fused(c):
    """Decode of one new token per sequence over cache - 1 cached keys plus the new one."""
    b, n, ps = c["batch"], c["cache"], c["page"]
    q = torch.randn(b, 1, 32, D, device="cuda", dtype=torch.bfloat16)
    k_new, v_new = (torch.randn(b, 1, HKV, D, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    before = torch.full((b,), n - 1, device="cuda", dtype=torch.int32)
    after = before + 1
    table = None
    if ps:
        per_row = n // ps
        table = torch.randperm(b * per_row, device="cuda", dtype=torch.int32).view(b, per_row).contiguous()
        kc, vc = (torch.randn(b * per_row, ps, HKV, D, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    else:
        kc, vc = (torch.randn(b, n, HKV, D, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    fused = lambda i: flashjit.flash_attn_with_kvcache(q, kc, vc, k=k_new, v=v_new, cache_seqlens=before,  # noqa: E731
                                                       block_table=table, causal=True)
    alone = lambda i: flashjit.decode(q, kc, vc, after, page_table=table)  # noqa: E731

    def two_calls(i):
        flashjit.append_kv(kc, vc, k_new, v_new, before, page_table=table)
        return flashjit.decode(q, kc, vc, after, page_table=table)

    row = {"case": c, "label": fused_label(c), "results": {}}
    o_fused = fused(0).float()
    o_alone = alone(0).float()
    row["check_rel_l2"] = (torch.linalg.vector_norm(o_fused - o_alone) / torch.linalg.vector_norm(o_alone)).item()
    for name, fn in (("decode_alone", alone), ("fused", fused), ("append_then_decode", two_calls)):
        ms = bench.time_graph(fn, ITERS, WARMUP, 20)
        row["results"][name] = {"us": ms * 1e3}
    row["fused_over_alone"] = row["results"]["fused"]["us"] / row["results"]["decode_alone"]["us"]
    del kc, vc
    torch.cuda.empty_cache()
    return row


def markdown(appends, fused, ceil, stamp):
    lines = [f"# Append to a KV cache ({stamp['date']}, {stamp['gpu']}, one process)", "",
             f"torch {stamp['torch']}, CUDA {stamp['cuda']}, flashjit {stamp['flashjit']}; copy ceiling in this run "
             f"(2 GiB copy_, read + write) {ceil['copy_tb_s']:.2f} TB/s. llama3 KV heads 8 x d128 bf16.", "",
             "## Append bandwidth (bytes written / time; target >= 0.90 of the copy of the same bytes)", "",
             "| case | MB written | append TB/s | copy_ TB/s | append / copy | check (max abs) |", "|---|---|---|---|---|---|"]
    for r in appends:
        res = r["results"]
        lines.append(f"| {r['label']} | {r['bytes'] / 1e6:.1f} | {res['append']['tb_s']:.2f} | "
                     f"{res['copy']['tb_s']:.2f} | {r['ratio']:.2f} | {r['check_max_abs']:g} |")
    lines += ["", "## Fused append + decode (H32/8 d128, q_len 1; target fused <= 1.10 x decode alone)", "",
              "| case | decode alone µs | fused µs | append_kv + decode µs | fused / alone | check (rel L2) |",
              "|---|---|---|---|---|---|"]
    for r in fused:
        res = r["results"]
        lines.append(f"| {r['label']} | {res['decode_alone']['us']:.1f} | {res['fused']['us']:.1f} | "
                     f"{res['append_then_decode']['us']:.1f} | {r['fused_over_alone']:.3f} | {r['check_rel_l2']:.1e} |")
    return "\n".join(lines) + "\n"


ITERS, WARMUP = 30, 5


def main():
    global ITERS, WARMUP
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--md")
    parser.add_argument("--iters", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()
    ITERS, WARMUP = args.iters, args.warmup
    if not torch.cuda.is_available():
        print("append_bench: no CUDA GPU", file=sys.stderr)
        return 1
    stamp = bench.run_stamp()
    ceil = bench.ceilings()
    appends, fused = [], []
    for c in append_cases():
        appends.append(bench_append(c))
        r = appends[-1]
        print(r["label"], {k: round(v["tb_s"], 2) for k, v in r["results"].items()}, f"check {r['check_max_abs']}",
              flush=True)
    for c in fused_cases():
        fused.append(bench_fused(c))
        r = fused[-1]
        print(r["label"], {k: round(v["us"], 1) for k, v in r["results"].items()}, f"check {r['check_rel_l2']:.1e}",
              flush=True)
    Path(args.out).write_text(json.dumps({"stamp": stamp, "ceilings": ceil, "append": appends, "fused": fused},
                                         indent=1))
    text = markdown(appends, fused, ceil, stamp)
    if args.md:
        Path(args.md).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
