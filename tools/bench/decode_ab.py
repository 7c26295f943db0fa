"""Times flashjit.decode with and without masks (sliding window, chunks) on a fixed list of cases, for A/B
comparisons of two builds in one device session (FLASHJIT_LIBRARY picks the build).

  decode_ab.py --out RUN.json            time every case (CUDA-graph replays of back-to-back calls, medians)
  decode_ab.py --compare BASE.json... --against HEAD.json...
                                         a markdown table: per case the median over each side's runs, head / base

H32 KV8 D128 bf16, one new token, sequences of the full length, inputs rotated past the L2 (one graph replays
calls over several K/V sets; attention_bench.time_graph). Cases a build cannot run (chunk_size before it
existed) are recorded as errors.
"""
import argparse
import inspect
import json
import statistics
import sys

CASES = [  # batch, seqlen_k, page_size (0: contiguous), window_left (-1: none), chunk_size (0: none)
    (b, sk, page, window, chunk)
    for (b, sk) in ((1, 32768), (16, 8192), (64, 4096))
    for page in (0, 16)
    for (window, chunk) in ((-1, 0), (1024, 0), (-1, 1024))
]
HEADS_Q, HEADS_KV, HEAD_DIM = 32, 8, 128
L2_BYTES = 64 << 20


def label(case):
    b, sk, page, window, chunk = case
    mask = f"window {window}" if window >= 0 else f"chunk {chunk}" if chunk > 0 else "causal"
    return f"B{b} Sk {sk} {'paged' + str(page) if page else 'contiguous'} {mask}"


def time_case(case, iters, flashjit, torch, bench):
    b, sk, page, window, chunk = case
    kv_bytes = 2 * b * sk * HEADS_KV * HEAD_DIM * 2
    sets = max(1, min(8, -(-2 * L2_BYTES // kv_bytes)))
    # window_size=(N, 0) since the window convention became flash-attn's; builds before that take window_left.
    new_names = "window_size" in inspect.signature(flashjit.decode).parameters
    opts = {"window_size": (window, 0)} if new_names else {"window_left": window}
    if chunk > 0:
        opts["chunk_size"] = chunk
    calls = []
    for _ in range(sets):
        q = torch.randn(b, 1, HEADS_Q, HEAD_DIM, device="cuda", dtype=torch.bfloat16)
        lens = torch.full((b,), sk, device="cuda", dtype=torch.int32)
        if page:
            pages = b * sk // page
            k = torch.randn(pages, page, HEADS_KV, HEAD_DIM, device="cuda", dtype=torch.bfloat16)
            table = torch.randperm(pages, device="cuda", dtype=torch.int32).view(b, sk // page)
        else:
            k = torch.randn(b, sk, HEADS_KV, HEAD_DIM, device="cuda", dtype=torch.bfloat16)
            table = None
        v = torch.randn_like(k)
        o = torch.empty_like(q)
        calls.append((q, k, v, lens, table, o))
    for q, k, v, lens, table, o in calls:
        flashjit.prepare_decode(q, k, v, lens, page_table=table, out=o, **opts)

    def one(i):
        q, k, v, lens, table, o = calls[i % sets]
        flashjit.decode(q, k, v, lens, page_table=table, out=o, **opts)

    return 1e3 * bench.time_graph(one, iters, warmup=3, calls=4 * sets)


def run(args):
    import torch
    import flashjit  # the build FLASHJIT_LIBRARY / PYTHONPATH name, imported before the bench helpers
    import attention_bench as bench  # time_graph: CUDA-graph replays after 50 ms of warm-up, medians
    rows = []
    for case in CASES:
        try:
            us = time_case(case, args.iters, flashjit, torch, bench)
            rows.append({"case": label(case), "us": us})
            print(f"{label(case):<40} {us:8.2f} us", flush=True)
        except Exception as e:  # noqa: BLE001  (a build without the option: recorded)
            rows.append({"case": label(case), "error": str(e).strip().splitlines()[0][:200]})
            print(f"{label(case):<40} error: {rows[-1]['error']}", flush=True)
            torch.cuda.synchronize()
        torch.cuda.empty_cache()
    stamp = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "flashjit": flashjit.version()}
    with open(args.out, "w") as f:
        json.dump({"stamp": stamp, "rows": rows}, f, indent=1)
    return 0


def compare(args):
    def medians(paths):
        per_case = {}
        for p in paths:
            for r in json.load(open(p))["rows"]:
                if "us" in r:
                    per_case.setdefault(r["case"], []).append(r["us"])
        return {c: statistics.median(v) for c, v in per_case.items()}
    base, head = medians(args.compare), medians(args.against)
    print(f"| case | base µs ({len(args.compare)} runs) | head µs ({len(args.against)} runs) | head / base |")
    print("|---|---|---|---|")
    for case in [label(c) for c in CASES]:
        b, h = base.get(case), head.get(case)
        cell = lambda x: f"{x:.2f}" if x is not None else "–"  # noqa: E731
        ratio = f"{h / b:.3f}" if b and h else "–"
        print(f"| {case} | {cell(b)} | {cell(h)} | {ratio} |")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out")
    parser.add_argument("--iters", type=int, default=30)
    parser.add_argument("--compare", nargs="+", help="the base runs' JSON files")
    parser.add_argument("--against", nargs="+", help="the head runs' JSON files")
    args = parser.parse_args()
    if args.compare:
        if not args.against:
            parser.error("--compare needs --against")
        return compare(args)
    if not args.out:
        parser.error("--out or --compare is needed")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
