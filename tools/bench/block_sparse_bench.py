#!/usr/bin/env python3
"""Document masking through block sparsity (issue 26), one process: documents of random lengths packed into one
sequence, each causal within itself, llama3 GQA 32/8 d128 bf16. flashjit with the document mask_mod and its block
mask (flashjit.block_mask) against flashjit with the mask_mod alone (every block computed), FlexAttention with the
same mask through create_block_mask, and flashjit's attention_varlen over the same documents (the ragged batch the
block mask restates). Outputs are checked against each other before timing; the block masks' making is timed
too. Timing as attention_bench.py (warm-up, medians, back-to-back launches over rotated input sets).

usage: PYTHONPATH=python python3 tools/bench/block_sparse_bench.py --out OUT.json [--md OUT.md]
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

SETS = 3

DOCUMENT_MOD = """
__device__ bool mask_mod(int b, int h, int q_idx, int kv_idx, const flashjit::ModContext& ctx) {
  const int* doc = ctx.pointer<int>(0);
  return doc[q_idx] == doc[kv_idx];
}
"""


def cases():
    """8 documents in 16k tokens (the issue's case), 8 in 4k, and 32 in 16k; H32/8 d128 causal within each."""
    return [dict(seqlen=16384, docs=8, heads_q=32, heads_kv=8, head_dim=128, seed=1),
            dict(seqlen=4096, docs=8, heads_q=32, heads_kv=8, head_dim=128, seed=2),
            dict(seqlen=16384, docs=32, heads_q=32, heads_kv=8, head_dim=128, seed=3)]


def doc_lengths(c):
    g = torch.Generator().manual_seed(c["seed"])
    cuts = sorted(torch.randperm(c["seqlen"] - 1, generator=g)[: c["docs"] - 1].add(1).tolist())
    edges = [0] + cuts + [c["seqlen"]]
    return [b - a for a, b in zip(edges, edges[1:])]


def label(c):
    return f"{c['docs']} documents in {c['seqlen']} tokens, H{c['heads_q']}/{c['heads_kv']} d{c['head_dim']} causal"


def flops(lens, c):
    return 4.0 * c["heads_q"] * c["head_dim"] * sum(n * (n + 1) / 2 for n in lens)


def make_set(c, lens):
    s, hq, hkv, d = c["seqlen"], c["heads_q"], c["heads_kv"], c["head_dim"]
    q = torch.randn(1, s, hq, d, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(1, s, hkv, d, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(1, s, hkv, d, device="cuda", dtype=torch.bfloat16)
    doc = torch.repeat_interleave(torch.arange(len(lens), device="cuda", dtype=torch.int32),
                                  torch.tensor(lens, device="cuda"))
    cu = torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), device="cuda", dtype=torch.int32)
    return {"q": q, "k": k, "v": v, "o": torch.empty_like(q), "doc": doc, "cu": cu, "max": max(lens)}


def make_masks(c, t):
    """flashjit's block mask and Flex's, for the set's document ids (the same for every set)."""
    bm = flashjit.block_mask(DOCUMENT_MOD, 1, 1, c["seqlen"], c["seqlen"], causal=True, aux_tensors=[t["doc"]])
    flex, create_block_mask = bench.flex_functions()
    doc = t["doc"]

    def document_causal(b, h, q_idx, kv_idx):
        return (doc[q_idx] == doc[kv_idx]) & (q_idx >= kv_idx)
    flex_bm = create_block_mask(document_causal, 1, 1, c["seqlen"], c["seqlen"], device="cuda")
    return bm, flex_bm, document_causal


def runners(c, sets, bm, flex_bm):
    n = len(sets)
    flex, _ = bench.flex_functions()
    out = {}
    out["flashjit_block_sparse"] = lambda i: flashjit.attention(
        sets[i % n]["q"], sets[i % n]["k"], sets[i % n]["v"], causal=True, mask_mod=DOCUMENT_MOD,
        aux_tensors=[sets[i % n]["doc"]], block_mask=bm, out=sets[i % n]["o"])
    out["flashjit_mask_mod"] = lambda i: flashjit.attention(
        sets[i % n]["q"], sets[i % n]["k"], sets[i % n]["v"], causal=True, mask_mod=DOCUMENT_MOD,
        aux_tensors=[sets[i % n]["doc"]], out=sets[i % n]["o"])
    out["flashjit_varlen"] = lambda i: flashjit.attention_varlen(
        sets[i % n]["q"][0], sets[i % n]["k"][0], sets[i % n]["v"][0], sets[i % n]["cu"], sets[i % n]["cu"],
        sets[i % n]["max"], sets[i % n]["max"], causal=True, out=sets[i % n]["o"][0])
    out["flex"] = lambda i: flex(sets[i % n]["q"].transpose(1, 2), sets[i % n]["k"].transpose(1, 2),
                                 sets[i % n]["v"].transpose(1, 2), block_mask=flex_bm, enable_gqa=True).transpose(1, 2)
    return out


def rel_l2(a, b):
    a, b = bench.first_output(a).float().reshape(-1), bench.first_output(b).float().reshape(-1)
    return (torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(b)).item()


def time_mask_making(c, t, args):
    _, create_block_mask = bench.flex_functions()
    doc = t["doc"]

    def document_causal(b, h, q_idx, kv_idx):
        return (doc[q_idx] == doc[kv_idx]) & (q_idx >= kv_idx)
    ours = lambda i: flashjit.block_mask(DOCUMENT_MOD, 1, 1, c["seqlen"], c["seqlen"], causal=True,  # noqa: E731
                                         aux_tensors=[doc])
    theirs = lambda i: create_block_mask(document_causal, 1, 1, c["seqlen"], c["seqlen"], device="cuda")  # noqa: E731
    return {"flashjit_block_mask_ms": bench.time_events(ours, args.iters, args.warmup),
            "flex_create_block_mask_ms": bench.time_events(theirs, args.iters, args.warmup)}


def bench_case(c, args):
    lens = doc_lengths(c)
    sets = [make_set(c, lens) for _ in range(SETS)]
    for t in sets[1:]:
        t["doc"], t["cu"] = sets[0]["doc"], sets[0]["cu"]
    bm, flex_bm, _ = make_masks(c, sets[0])
    run = runners(c, sets, bm, flex_bm)
    row = {"case": c, "label": label(c), "lens": lens, "flops": flops(lens, c), "checks": {}, "results": {},
           "listed_blocks": int(bm.kv_num_blocks.sum().item() + bm.full_kv_num_blocks.sum().item()),
           "full_blocks": int(bm.full_kv_num_blocks.sum().item()),
           "all_blocks": bm.kv_indices.shape[2] * bm.kv_indices.shape[3]}
    mine = bench.first_output(run["flashjit_block_sparse"](0)).float().clone()
    for other in ("flashjit_mask_mod", "flashjit_varlen", "flex"):
        try:
            got = bench.first_output(run[other](0))
            rel = rel_l2(mine, got.reshape(mine.shape))
            row["checks"][other] = {"rel_l2": rel, "ok": math.isfinite(rel) and rel <= bench.CHECK_TOLERANCE}
        except Exception as e:  # noqa: BLE001
            row["checks"][other] = {"error": f"{type(e).__name__}: {str(e)[:160]}", "ok": False}
    for name, fn in run.items():
        try:
            ms = bench.time_back_to_back(fn, args.iters, args.warmup, 4)
        except Exception as e:  # noqa: BLE001
            row["results"][name] = {"error": str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__}
            torch.cuda.synchronize()
            continue
        row["results"][name] = {"ms": ms, "tflops": row["flops"] / (ms * 1e-3) / 1e12}
    row["mask_making"] = time_mask_making(c, sets[0], args)
    del sets
    torch.cuda.empty_cache()
    return row


COLUMNS = ["flashjit_block_sparse", "flashjit_mask_mod", "flashjit_varlen", "flex"]


def markdown(rows, ceil, stamp):
    lines = [f"# Document masking through block sparsity ({stamp['date']}, {stamp['gpu']}, one process)", "",
             f"torch {stamp['torch']}, CUDA {stamp['cuda']}, flashjit {stamp['flashjit']}; bf16 matmul ceiling in "
             f"this run {ceil['matmul_tflops']:.0f} TFLOP/s. TFLOP/s of visible pairs (causal within each "
             "document); blocks 128 x 128.", "",
             "| case | listed / all blocks (full) | " + " | ".join(COLUMNS) +
             " | sparse / Flex | sparse / varlen | block mask ms (ours / Flex) | check |",
             "|---|---|" + "---|" * len(COLUMNS) + "---|---|---|---|"]
    for r in rows:
        res = r["results"]
        tf = {k: res[k]["tflops"] for k in res if "tflops" in res[k]}
        cells = [f"{tf[k]:.0f}" if k in tf else ("err" if k in res else "–") for k in COLUMNS]
        ratio = lambda a, b: f"{tf[a] / tf[b]:.2f}" if a in tf and b in tf else "–"  # noqa: E731
        checks = ", ".join(f"{k} {v['rel_l2']:.1e}" if "rel_l2" in v else f"{k} error" for k, v in r["checks"].items())
        mm = r["mask_making"]
        lines.append(f"| {r['label']} | {r['listed_blocks']} / {r['all_blocks']} ({r['full_blocks']}) | " +
                     " | ".join(cells) + f" | {ratio('flashjit_block_sparse', 'flex')} | "
                     f"{ratio('flashjit_block_sparse', 'flashjit_varlen')} | "
                     f"{mm['flashjit_block_mask_ms']:.3f} / {mm['flex_create_block_mask_ms']:.3f} | {checks} |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--md")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("block_sparse_bench: no CUDA GPU", file=sys.stderr)
        return 1
    stamp = bench.run_stamp()
    ceil = bench.ceilings()
    rows = []
    for c in cases():
        rows.append(bench_case(c, args))
        r = rows[-1]
        print(r["label"], {k: round(v.get("tflops", 0)) for k, v in r["results"].items()}, r["checks"],
              r["mask_making"], flush=True)
    Path(args.out).write_text(json.dumps({"stamp": stamp, "ceilings": ceil, "rows": rows}, indent=1))
    text = markdown(rows, ceil, stamp)
    if args.md:
        Path(args.md).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
