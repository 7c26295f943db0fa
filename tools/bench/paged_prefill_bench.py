#!/usr/bin/env python3
"""Paged prefill (chunked prefill / prefix caching over a paged KV cache), one process: flashjit over page pools
(page_table + seqused_k) against flashjit on the same keys stored contiguously, FA4 paged (flash_attn_varlen_func
with page_table and seqused_k) and FA4 contiguous, and for non-causal cases cuDNN (SDPA; its causal mask is
top-left, not the bottom-right one a prefill chunk needs). Every pool holds its sequences' pages in a shuffled
order. flashjit's paged output is checked against its contiguous output and FA4's paged output before timing.
For pages smaller than a key tile flashjit's dispatcher takes the grid scheduler (fit_pages); the persistent
scheduler on the same tiles is timed beside it (boxed pages), and fa2 beside fa3's gathered pages (under 16). Timing as attention_bench.py (CUDA graphs for short calls,
events otherwise, warm-up, medians, input sets rotated past the L2); the ceilings measured in the same run.

usage: PYTHONPATH=python python3 tools/bench/paged_prefill_bench.py --out OUT.json [--md OUT.md]
"""
import argparse
import inspect
import itertools
import json
import math
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
import attention_bench as bench  # noqa: E402
import attention_report as report  # noqa: E402
import flashjit  # noqa: E402

SETS = 3  # input sets rotated (each ~0.25-0.5 GiB: past the 60 MB L2)


def cases():
    """llama3 GQA 32/8 d128 bf16: 4 sequences of 1024 new tokens over 8192 keys (FA4's paged figure), causal, at
    page sizes 1 to 256; non-causal at 16; d64 H64/8 at 16; a ragged batch of chunks (len_q <= len_k) at 16."""
    out = [dict(lens_q=[1024] * 4, lens_k=[8192] * 4, heads_q=32, heads_kv=8, head_dim=128, causal=True, page_size=ps)
           for ps in (1, 2, 8, 16, 32, 64, 128, 256)]
    out.append(dict(lens_q=[1024] * 4, lens_k=[8192] * 4, heads_q=32, heads_kv=8, head_dim=128, causal=False,
                    page_size=16))
    out.append(dict(lens_q=[1024] * 4, lens_k=[8192] * 4, heads_q=64, heads_kv=8, head_dim=64, causal=True,
                    page_size=16))
    out.append(dict(lens_q=[2048, 300, 1024, 77, 512, 1500], lens_k=[2048, 7000, 4096, 9000, 513, 6000], heads_q=32,
                    heads_kv=8, head_dim=128, causal=True, page_size=16, ragged=True))
    return out


def label(c):
    kind = "ragged " if c.get("ragged") else f"B{len(c['lens_q'])} Sq {c['lens_q'][0]} Sk {c['lens_k'][0]} "
    return (f"{kind}H{c['heads_q']}/{c['heads_kv']} d{c['head_dim']} {'causal' if c['causal'] else 'non-causal'} "
            f"page {c['page_size']}")


def flops(c):
    pairs = sum(report.visible_pairs(q, k, c["causal"]) for q, k in zip(c["lens_q"], c["lens_k"]))
    return 4.0 * c["heads_q"] * pairs * c["head_dim"]


def make_set(c):
    """Dense (or packed) q and o; contiguous k/v [B, Sk_max, Hkv, D] (zero past each length); the same keys in a
    shuffled page pool with spare pages; the table (int32 [B, pages per row]), seqused_k, cu_seqlens_q."""
    b, hq, hkv, d, ps = len(c["lens_q"]), c["heads_q"], c["heads_kv"], c["head_dim"], c["page_size"]
    sq, sk = max(c["lens_q"]), max(c["lens_k"])
    sk = (sk + ps - 1) // ps * ps
    rows = sum(c["lens_q"]) if c.get("ragged") else b * sq
    q = torch.randn(rows, hq, d, device="cuda", dtype=torch.bfloat16)
    k = torch.zeros(b, sk, hkv, d, device="cuda", dtype=torch.bfloat16)
    v = torch.zeros_like(k)
    for i, n in enumerate(c["lens_k"]):
        k[i, :n].normal_()
        v[i, :n].normal_()
    per_row = sk // ps
    num_pages = b * per_row + 7
    table = torch.randperm(num_pages, device="cuda", dtype=torch.int64)[: b * per_row].view(b, per_row)
    kp = torch.zeros(num_pages, ps, hkv, d, device="cuda", dtype=torch.bfloat16)
    vp = torch.zeros_like(kp)
    kp[table.flatten()] = k.view(b * per_row, ps, hkv, d)
    vp[table.flatten()] = v.view(b * per_row, ps, hkv, d)
    t = {"q": q, "o": torch.empty_like(q), "k": k, "v": v, "kp": kp, "vp": vp, "table": table.int().contiguous(),
         "lens_k": torch.tensor(c["lens_k"], device="cuda", dtype=torch.int32),
         "cu_q": torch.tensor([0] + list(itertools.accumulate(c["lens_q"])), device="cuda", dtype=torch.int32),
         "cu_k": torch.tensor([0] + list(itertools.accumulate(c["lens_k"])), device="cuda", dtype=torch.int32),
         "max_q": sq, "max_k": sk}
    if c.get("ragged"):  # packed contiguous keys for the contiguous twins
        t["k_packed"] = torch.cat([k[i, :n] for i, n in enumerate(c["lens_k"])])
        t["v_packed"] = torch.cat([v[i, :n] for i, n in enumerate(c["lens_k"])])
    return t


def fa4_varlen_kwargs(fn, wanted):
    params = inspect.signature(fn).parameters
    return {k: val for k, val in wanted.items() if k in params or k == "causal"}


def runners(c, sets):
    b, sq = len(c["lens_q"]), max(c["lens_q"])
    hq, d, causal, ragged = c["heads_q"], c["head_dim"], c["causal"], c.get("ragged", False)
    n = len(sets)
    dense = [t["q"].view(b, sq, hq, d) if not ragged else None for t in sets]
    dense_o = [t["o"].view(b, sq, hq, d) if not ragged else None for t in sets]
    out = {}

    def fj_paged(config=None):
        def run(i):
            t = sets[i % n]
            if ragged:
                return flashjit.attention_varlen(t["q"], t["kp"], t["vp"], t["cu_q"], None, t["max_q"], t["max_k"],
                                                 causal=causal, page_table=t["table"], seqused_k=t["lens_k"],
                                                 out=t["o"], config=config)
            return flashjit.attention(dense[i % n], t["kp"], t["vp"], causal=causal, page_table=t["table"],
                                      seqused_k=t["lens_k"], out=dense_o[i % n], config=config)
        return run
    out["flashjit_paged"] = fj_paged()
    chosen = flashjit_config(c, sets[0])
    if chosen.get("algorithm") == "fa3":
        tiles = {k: chosen[k] for k in ("algorithm", "block_m", "block_n", "stages", "consumer_warpgroups") if k in chosen}
        if chosen.get("scheduler") == "grid" and c["page_size"] >= 16:  # boxed pages smaller than a key tile
            out["flashjit_paged_persistent"] = fj_paged(dict(tiles, scheduler="persistent"))
            # A stage more: the lanes' boxes of the next tile go out a tile earlier.
            out["flashjit_paged_stages3"] = fj_paged(dict(tiles, stages=3, scheduler="grid"))
        if c["page_size"] < 16:  # gathered pages: against fa2's cp.async loads
            out["flashjit_paged_fa2"] = fj_paged({"algorithm": "fa2", "block_m": 64, "block_n": 64, "warps": 4,
                                                  "stages": 2})

    def fj_contiguous(i):
        t = sets[i % n]
        if ragged:
            return flashjit.attention_varlen(t["q"], t["k_packed"], t["v_packed"], t["cu_q"], t["cu_k"], t["max_q"],
                                             max(c["lens_k"]), causal=causal, out=t["o"])
        return flashjit.attention(dense[i % n], t["k"], t["v"], causal=causal, out=dense_o[i % n])
    out["flashjit_contiguous"] = fj_contiguous

    fa4v = bench.fa4_function("flash_attn_varlen_func")
    if fa4v is not None:
        def fa4_paged(i):
            t = sets[i % n]
            return fa4v(t["q"], t["kp"], t["vp"], **fa4_varlen_kwargs(fa4v, {
                "cu_seqlens_q": t["cu_q"], "max_seqlen_q": t["max_q"], "max_seqlen_k": t["max_k"],
                "page_table": t["table"], "seqused_k": t["lens_k"], "causal": causal}))
        out["fa4_paged"] = fa4_paged
        if ragged:
            out["fa4_contiguous"] = lambda i: fa4v(sets[i % n]["q"], sets[i % n]["k_packed"], sets[i % n]["v_packed"],
                                                   **fa4_varlen_kwargs(fa4v, {
                                                       "cu_seqlens_q": sets[i % n]["cu_q"],
                                                       "cu_seqlens_k": sets[i % n]["cu_k"],
                                                       "max_seqlen_q": sets[i % n]["max_q"],
                                                       "max_seqlen_k": max(c["lens_k"]), "causal": causal}))
    fa4 = bench.fa4_function()
    if fa4 is not None and not ragged:
        out["fa4_contiguous"] = lambda i: fa4(dense[i % n], sets[i % n]["k"], sets[i % n]["v"], causal=causal)
    if not causal and not ragged:
        def cudnn(i):
            t = sets[i % n]
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return F.scaled_dot_product_attention(dense[i % n].transpose(1, 2), t["k"].transpose(1, 2),
                                                      t["v"].transpose(1, 2), enable_gqa=True).transpose(1, 2)
        out["cudnn"] = cudnn
    return out


def flashjit_config(c, t):
    b, sq, ragged = len(c["lens_q"]), max(c["lens_q"]), c.get("ragged", False)
    try:
        return flashjit.select((b, sq, c["heads_q"], c["head_dim"]), (b, t["max_k"], c["heads_kv"], c["head_dim"]),
                               causal=c["causal"], varlen=ragged, page_size=c["page_size"])
    except Exception as e:  # noqa: BLE001
        return {"error": f"{type(e).__name__}: {str(e)[:120]}"}


def rel_l2(a, b):
    a, b = bench.first_output(a).float().reshape(-1), bench.first_output(b).float().reshape(-1)
    return (torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(b)).item()


def bench_case(c, args):
    sets = [make_set(c) for _ in range(SETS)]
    run = runners(c, sets)
    row = {"case": c, "label": label(c), "flops": flops(c), "config": flashjit_config(c, sets[0]), "checks": {},
           "results": {}}
    mine = bench.first_output(run["flashjit_paged"](0)).float().clone()
    for other in ("flashjit_contiguous", "fa4_paged"):
        if other in run:
            try:
                rel = rel_l2(mine, run[other](0))
                row["checks"][other] = {"rel_l2": rel, "ok": math.isfinite(rel) and rel <= bench.CHECK_TOLERANCE}
            except Exception as e:  # noqa: BLE001
                row["checks"][other] = {"error": f"{type(e).__name__}: {str(e)[:160]}", "ok": False}
    method, calls = report.timing_method(row["flops"])
    for name, fn in run.items():
        try:
            ms, how = bench.measure(fn, method, calls, args)
        except Exception as e:  # noqa: BLE001  (a peer that does not run the case)
            row["results"][name] = {"error": str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__}
            torch.cuda.synchronize()
            continue
        row["results"][name] = {"ms": ms, "tflops": row["flops"] / (ms * 1e-3) / 1e12, "method": how}
    del sets
    torch.cuda.empty_cache()
    return row


COLUMNS = ["flashjit_paged", "flashjit_paged_persistent", "flashjit_paged_stages3", "flashjit_paged_fa2", "flashjit_contiguous", "fa4_paged", "fa4_contiguous", "cudnn"]


def markdown(rows, ceil, stamp):
    lines = [f"# Paged prefill ({stamp['date']}, {stamp['gpu']}, one process)", "",
             f"torch {stamp['torch']}, CUDA {stamp['cuda']}, cuDNN {stamp['cudnn']}, flashjit {stamp['flashjit']}; "
             f"ceilings in this run: bf16 matmul {ceil['matmul_tflops']:.0f} TFLOP/s, copy {ceil['copy_tb_s']:.2f} "
             "TB/s. TFLOP/s of visible pairs (bottom-right causal per sequence).", "",
             "| case | flashjit kernel | " + " | ".join(COLUMNS) + " | paged / FA4 paged | paged / contiguous | check |",
             "|---|---|" + "---|" * len(COLUMNS) + "---|---|---|"]
    for r in rows:
        res = r["results"]
        tf = {k: res[k]["tflops"] for k in res if "tflops" in res[k]}
        cells = [f"{tf[k]:.0f}" if k in tf else ("err" if k in res else "–") for k in COLUMNS]
        cfg = r["config"]
        kernel = (f"{cfg.get('algorithm')} bm{cfg.get('block_m')} bn{cfg.get('block_n')} {cfg.get('scheduler', '')}"
                  if "algorithm" in cfg else cfg.get("error", "?"))
        checks = ", ".join(f"{k} {v['rel_l2']:.1e}" if "rel_l2" in v else f"{k} error" for k, v in r["checks"].items())
        ratio = lambda a, b: f"{tf[a] / tf[b]:.2f}" if a in tf and b in tf else "–"  # noqa: E731
        lines.append(f"| {r['label']} | {kernel} | " + " | ".join(cells) +
                     f" | {ratio('flashjit_paged', 'fa4_paged')} | {ratio('flashjit_paged', 'flashjit_contiguous')} | "
                     f"{checks} |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--md")
    parser.add_argument("--iters", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("paged_prefill_bench: no CUDA GPU", file=sys.stderr)
        return 1
    stamp = dict(bench.run_stamp(), fa4=bench.fa4_function() is not None)
    ceil = bench.ceilings()
    rows = []
    for c in cases():
        rows.append(bench_case(c, args))
        r = rows[-1]
        print(r["label"], {k: round(v.get("tflops", 0)) for k, v in r["results"].items()}, r["checks"], flush=True)
    Path(args.out).write_text(json.dumps({"stamp": stamp, "ceilings": ceil, "rows": rows}, indent=1))
    text = markdown(rows, ceil, stamp)
    if args.md:
        Path(args.md).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
