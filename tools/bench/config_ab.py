#!/usr/bin/env python3
"""Times explicit flashjit configs against each other on the same inputs, one process: for each case of a
sweep (attention_report.SWEEPS), the dispatcher's kernel and every config of --configs completed from the
problem (flashjit's config= argument), TFLOP/s and the ratio to the dispatcher's. For tuning the heuristics.

usage: PYTHONPATH=python python3 tools/bench/config_ab.py --sweep headdims --configs 'block_n=96;block_n=176' \
       [--head-dims 80,96] [--out OUT.md]
Each config is key=value pairs separated by spaces; configs are separated by ';'.
"""
import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import attention_bench as bench  # noqa: E402
import attention_report as report  # noqa: E402
import flashjit  # noqa: E402


def config_of(text):
    pairs = dict(item.split("=", 1) for item in text.split())

    def value(v):
        if v in ("true", "false"):
            return v == "true"
        return int(v) if v.lstrip("-").isdigit() else v
    return {k: value(v) for k, v in pairs.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sweep", required=True, choices=sorted(report.SWEEPS))
    parser.add_argument("--configs", required=True, help="';'-separated configs of key=value pairs")
    parser.add_argument("--head-dims", type=lambda t: {int(x) for x in t.split(",")}, help="only these head dims")
    parser.add_argument("--seqlens", type=lambda t: {int(x) for x in t.split(",")}, help="only these lengths")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--out", help="write the markdown table here too")
    args = parser.parse_args()
    configs = [c.strip() for c in args.configs.split(";") if c.strip()]
    lines = ["| case | dispatcher | " + " | ".join(configs) + " |", "|---|---|" + "---|" * len(configs)]
    for s in report.SWEEPS[args.sweep]():
        if args.head_dims and s["head_dim"] not in args.head_dims:
            continue
        if args.seqlens and s["seqlen_q"] not in args.seqlens:
            continue
        flops = report.attention_flops(s)
        method, calls = report.timing_method(flops)
        sets = bench.make_sets(s, report.rotation_sets(s))
        base = bench.runners(s, sets, False)["flashjit"]
        variant = bench.variant_tensors(s)
        cells = []
        for config in [None] + configs:
            if config is None:
                run = base
            else:
                c = config_of(config)
                t = sets
                if "lengths" in s:
                    def run(i, c=c):
                        x = t[i % len(t)]
                        return flashjit.attention_varlen(x["q"], x["k"], x["v"], x["cu"], x["cu"], s["seqlen_q"],
                                                         s["seqlen_k"], causal=s["causal"], out=x["o"], config=c)
                else:
                    def run(i, c=c):
                        x = t[i % len(t)]
                        return flashjit.attention(x["q"], x["k"], x["v"], causal=s["causal"],
                                                  window_size=tuple(s.get("window", (-1, -1))), out=x["o"], config=c,
                                                  **variant)
            try:
                ms, _ = bench.measure(run, method, calls, args)
                cells.append(flops / (ms * 1e-3) / 1e12)
            except Exception as e:  # noqa: BLE001  (an invalid config for this case)
                cells.append(str(e).strip().splitlines()[0][:60] if str(e).strip() else type(e).__name__)
                torch.cuda.synchronize()
        ref = cells[0] if isinstance(cells[0], float) else None

        def cell(x):
            if not isinstance(x, float):
                return x
            return f"{x:.0f}" + (f" ({x / ref:.2f})" if ref and x is not cells[0] else "")
        lines.append(f"| {report.label(s)} | " + " | ".join(cell(x) for x in cells) + " |")
        print(lines[-1], flush=True)
        del sets
        torch.cuda.empty_cache()
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
