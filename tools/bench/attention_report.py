"""Pure helpers of attention_bench.py (no torch): the sweeps, FLOP and byte counts, timing-method choice,
and the JSON rows turned into markdown tables and plots."""
import math

L2_BYTES = 60 * 1024 * 1024  # H200
ROTATION_BYTES = 4 * L2_BYTES  # input sets rotated until they exceed the L2 this many times over
MAX_SETS = 8
GRAPH_TARGET_FLOPS = 2e11  # a replayed graph runs at least this much work (≈ 0.3 ms on an H200)
GRAPH_MAX_CALLS = 100
GRAPH_BELOW_FLOPS = 1e11  # below this (≈ 0.15 ms), one launch per event pair would time the launch latency

IMPLS = ["flashjit", "fa4", "cudnn", "torch_flash", "torch_efficient", "flex"]
LABELS = {"flashjit": "flashjit", "fa4": "FA4", "cudnn": "cuDNN", "torch_flash": "torch flash (FA2)",
          "torch_efficient": "torch efficient", "flex": "FlexAttention"}


def shape(batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, causal, dtype="bf16", head_dim_v=None,
          window=None, lengths=None, softcap=0.0, alibi=False, sinks=False, bias=None):
    """One prefill case. Optional: head_dim_v (V's and O's head dim when it differs), window (left, right) of a
    sliding window, lengths (a ragged batch: the query = key length of each sequence, packed back to back);
    variants: softcap (the cap), alibi (one slope per query head), sinks (one logit per query head), bias (the
    dtype of an additive bias [1, Hq, Sq, Sk]: "bf16", ...)."""
    s = {"batch": batch, "seqlen_q": seqlen_q, "seqlen_k": seqlen_k, "heads_q": heads_q, "heads_kv": heads_kv,
         "head_dim": head_dim, "causal": causal, "dtype": dtype}
    if head_dim_v is not None and head_dim_v != head_dim:
        s["head_dim_v"] = head_dim_v
    if window is not None:
        s["window"] = list(window)
    if lengths is not None:
        s.update(lengths=list(lengths), batch=len(lengths), seqlen_q=max(lengths), seqlen_k=max(lengths))
    if softcap:
        s["softcap"] = float(softcap)
    if alibi:
        s["alibi"] = True
    if sinks:
        s["sinks"] = True
    if bias:
        s["bias"] = bias
    return s


def has_variant(s):
    return bool(s.get("softcap") or s.get("alibi") or s.get("sinks") or s.get("bias"))


def head_dim_v(s):
    return s.get("head_dim_v", s["head_dim"])


LLAMA3_SEQLENS = [32, 64, 128, 256, 512, 1024, 1536, 2048, 4096, 8192, 16384]


def llama3_sweep(seqlens=LLAMA3_SEQLENS):
    """bf16, D 128, 32 query heads, 8 KV heads, batch 1; each length non-causal and causal."""
    return [shape(1, s, s, 32, 8, 128, causal) for causal in (False, True) for s in seqlens]


def fa3_grid():
    """The FA3 paper's grid: 16k tokens, hidden 2048 (heads = 2048 / d), here batch 1 at seqlen 16384."""
    return [shape(1, 16384, 16384, 2048 // d, 2048 // d, d, causal) for causal in (False, True) for d in (64, 128, 256)]


HEAD_DIMS = [64, 72, 80, 96, 112, 128, 160, 192, 256]


def head_dim_sweep():
    """MHA at every head dim of HEAD_DIMS with H = round(2048 / D), S 4096 and 16384, then DeepSeek's 192 / 128
    (D 192 for Q and K, 128 for V and O)."""
    shapes = [shape(1, s, s, round(2048 / d), round(2048 / d), d, causal) for causal in (False, True)
              for d in HEAD_DIMS for s in (4096, 16384)]
    shapes += [shape(1, s, s, 16, 16, 192, causal, head_dim_v=128) for causal in (False, True) for s in (4096, 16384)]
    return shapes


def window_sweep():
    """Causal sliding windows (query i sees keys i - w .. i): gpt-oss's 128 at d64 H64/8 S 8192, 512 at d128
    H32/8 S 8192, 4096 at d128 H32/8 S 16384."""
    return [shape(1, 8192, 8192, 64, 8, 64, False, window=(128, 0)),
            shape(1, 8192, 8192, 32, 8, 128, False, window=(512, 0)),
            shape(1, 16384, 16384, 32, 8, 128, False, window=(4096, 0))]


def variant_sweep():
    """Variants, each next to the same shape without it: softcap 50 on llama3 (GQA 32/8 d128 S 8192, causal and
    not) and on Gemma 2's d256 H16/8; gpt-oss's learnable sinks (d64 H64/8 S 8192, causal and window 128);
    ALiBi on llama3 causal; a bf16 bias [1, Hq, S, S] on llama3 at S 4096, causal and not (FlexAttention reads the
    same tensor in a score_mod)."""
    llama3 = dict(batch=1, seqlen_q=8192, seqlen_k=8192, heads_q=32, heads_kv=8, head_dim=128)
    llama3_4k = dict(llama3, seqlen_q=4096, seqlen_k=4096)
    gemma2 = dict(batch=1, seqlen_q=8192, seqlen_k=8192, heads_q=16, heads_kv=8, head_dim=256)
    gpt_oss = dict(batch=1, seqlen_q=8192, seqlen_k=8192, heads_q=64, heads_kv=8, head_dim=64)
    shapes = []
    for base, variant in ((dict(llama3, causal=True), dict(softcap=50.0)),
                          (dict(llama3, causal=False), dict(softcap=50.0)),
                          (dict(gemma2, causal=True), dict(softcap=50.0)),
                          (dict(gpt_oss, causal=True), dict(sinks=True)),
                          (dict(gpt_oss, causal=False, window=(128, 0)), dict(sinks=True)),
                          (dict(llama3, causal=True), dict(alibi=True)),
                          (dict(llama3_4k, causal=False), dict(bias="bf16")),
                          (dict(llama3_4k, causal=True), dict(bias="bf16"))):
        plain = shape(**base)
        if plain not in shapes:
            shapes.append(plain)
        shapes.append(shape(**base, **variant))
    return shapes


def bias_sweep():
    """The variant sweep's bias cases alone: a bf16 bias [1, Hq, S, S] on llama3 at S 4096, causal and not, beside
    the plain shapes (FlexAttention reads the same tensor in a score_mod)."""
    return [s for s in variant_sweep() if s["seqlen_q"] == 4096]


RAGGED_MIXED = [17, 8000, 523, 3100, 64, 1999, 4700, 250]  # 8 sequences of 17-8000 tokens


def ragged_sweep():
    """Ragged batches, GQA 32/8 d128: 8 sequences of 17-8000 tokens, 8 x 2048, 64 x 128; non-causal and causal."""
    return [shape(0, 0, 0, 32, 8, 128, causal, lengths=lengths) for causal in (False, True)
            for lengths in (RAGGED_MIXED, [2048] * 8, [128] * 64)]


def decode_shape(batch, seqlen_k, heads_q=32, heads_kv=8, head_dim=128, q_len=1, page_size=0, dtype="bf16"):
    """One decode step: q [B, q_len, Hq, D] over a full KV cache of seqlen_k keys per sequence (page_size 0:
    contiguous [B, Sk, Hkv, D]; else pages of that many tokens behind a shuffled page table)."""
    return {"kind": "decode", "batch": batch, "seqlen_k": seqlen_k, "heads_q": heads_q, "heads_kv": heads_kv,
            "head_dim": head_dim, "q_len": q_len, "page_size": page_size, "dtype": dtype}


DECODE_HEADLINE = [(1, 32768), (64, 16384), (16, 8192)]  # (batch, seqlen_k)
DECODE_BATCHES = [4, 16, 32, 64, 128, 256]
DECODE_SEQLENS = [32, 64, 128, 256, 512, 1024, 2048]
DECODE_PAGE_SIZES = [16, 64]
# Batch sizes between the grid's, at one length: where B·Hkv CTAs fill the SMs unevenly (8 KV heads, 132 SMs).
DECODE_BATCH_SWEEP = [8, 9, 10, 12, 16, 20, 24, 32, 40, 48, 56, 64]
DECODE_BATCH_SWEEP_PAGED = [10, 20, 24, 40]
# Short caches on the other layouts the planner treats apart (16- and 1-token pages at d128, contiguous d64).
DECODE_SHORT_LAYOUTS = [(128, 16), (128, 1), (64, 0)]  # (head_dim, page_size)
DECODE_SHORT_BATCHES = [4, 16, 32, 64, 128]
DECODE_SHORT_SEQLENS = [32, 64, 128, 256, 512]
# Small batches (8 to 64 CTAs for 8 KV heads) over medium caches: latency-bound, how many splits pays (B6, B8:
# two splits, where clusters of two fit the H200; the combine kernel merges them).
DECODE_SMALL_BATCHES = [1, 2, 6, 8]
DECODE_SMALL_SEQLENS = [512, 1024, 2048, 4096, 8192, 16384]


def decode_sweep():
    """H32 KV8 D128 bf16, one new token: the headline shapes, the batch x length grid, then the headline shapes
    with paged caches."""
    shapes = [decode_shape(b, sk) for b, sk in DECODE_HEADLINE]
    shapes += [decode_shape(b, sk) for b in DECODE_BATCHES for sk in DECODE_SEQLENS if (b, sk) not in DECODE_HEADLINE]
    shapes += [decode_shape(b, sk, page_size=ps) for ps in DECODE_PAGE_SIZES for b, sk in DECODE_HEADLINE]
    return shapes


def decode_batch_sweep(seqlen_k=8192):
    """H32 KV8 D128 bf16, one new token, Sk 8k: every batch of DECODE_BATCH_SWEEP contiguous, then the paged
    (16-token pages) batches."""
    return ([decode_shape(b, seqlen_k) for b in DECODE_BATCH_SWEEP] +
            [decode_shape(b, seqlen_k, page_size=16) for b in DECODE_BATCH_SWEEP_PAGED])


def decode_short_sweep():
    """H32 KV8 bf16, one new token, 32-512 keys: every batch x length of DECODE_SHORT_BATCHES x
    DECODE_SHORT_SEQLENS for each (head dim, page size) of DECODE_SHORT_LAYOUTS."""
    return [decode_shape(b, sk, head_dim=d, page_size=ps) for d, ps in DECODE_SHORT_LAYOUTS
            for b in DECODE_SHORT_BATCHES for sk in DECODE_SHORT_SEQLENS]


def decode_small_sweep():
    """H32 KV8 D128 bf16, one new token: every batch x length of DECODE_SMALL_BATCHES x DECODE_SMALL_SEQLENS,
    contiguous, then on 16-token pages."""
    return [decode_shape(b, sk, page_size=ps) for ps in (0, 16) for b in DECODE_SMALL_BATCHES
            for sk in DECODE_SMALL_SEQLENS]


SWEEPS = {"llama3": llama3_sweep, "fa3": fa3_grid, "headdims": head_dim_sweep, "windows": window_sweep,
          "ragged": ragged_sweep, "variants": variant_sweep, "bias": bias_sweep, "decode": decode_sweep, "decode-batches": decode_batch_sweep,
          "decode-short": decode_short_sweep, "decode-small": decode_small_sweep}


def visible_pairs(seqlen_q, seqlen_k, causal, window=(-1, -1)):
    """(query, key) pairs a mask lets through, bottom-right aligned (query i sits at key i + Sk - Sq)."""
    left, right = window
    if causal:
        right = 0
    offset = seqlen_k - seqlen_q
    total = 0
    for i in range(seqlen_q):
        a = i + offset
        lo = 0 if left < 0 else max(0, a - left)
        hi = seqlen_k if right < 0 else min(seqlen_k, a + right + 1)
        total += max(0, hi - lo)
    return total


def attention_flops(s, window=None):
    """2·B·Hq·(visible pairs)·(D + Dv): two matmuls of 2 FLOPs per multiply-add, masked pairs not counted (the
    shape's own window unless one is given; ragged batches summed per sequence)."""
    window = tuple(window or s.get("window", (-1, -1)))
    if "lengths" in s:
        pairs = sum(visible_pairs(n, n, s["causal"], window) for n in s["lengths"])
        return 2.0 * s["heads_q"] * pairs * (s["head_dim"] + head_dim_v(s))
    pairs = visible_pairs(s["seqlen_q"], s["seqlen_k"], s["causal"], window)
    return 2.0 * s["batch"] * s["heads_q"] * pairs * (s["head_dim"] + head_dim_v(s))


def io_bytes(s, element_bytes=2):
    """Bytes a kernel must move at least: read Q, K, V and write O once."""
    rows_q = sum(s["lengths"]) if "lengths" in s else s["batch"] * s["seqlen_q"]
    rows_k = sum(s["lengths"]) if "lengths" in s else s["batch"] * s["seqlen_k"]
    d, dv = s["head_dim"], head_dim_v(s)
    return element_bytes * (rows_q * s["heads_q"] * (d + dv) + rows_k * s["heads_kv"] * (d + dv))


def rotation_sets(s):
    """Input sets to rotate through so that the L2 never holds the next call's inputs."""
    return max(1, min(MAX_SETS, math.ceil(ROTATION_BYTES / io_bytes(s))))


def timing_method(flops):
    """('graph', calls per replay) for short kernels, ('events', 1): one launch between two CUDA events."""
    if flops < GRAPH_BELOW_FLOPS:
        return "graph", max(1, min(GRAPH_MAX_CALLS, math.ceil(GRAPH_TARGET_FLOPS / flops)))
    return "events", 1


def kv_bytes(s, element_bytes=2):
    """The K and V bytes a decode must read at least: 2·B·Sk·Hkv·D elements."""
    return 2 * s["batch"] * s["seqlen_k"] * s["heads_kv"] * s["head_dim"] * element_bytes


def decode_set_bytes(s, element_bytes=2):
    """Device bytes of one decode input set: K and V, plus q and o (the paged copy of K and V not counted)."""
    q = s["batch"] * s["q_len"] * s["heads_q"] * s["head_dim"] * element_bytes
    return kv_bytes(s, element_bytes) + 2 * q


DECODE_MAX_CALLS = 512  # calls captured in one CUDA graph (and input sets rotated through)
DECODE_GRAPH_TARGET_BYTES = 2e9  # a replay reads at least this much K/V (≈ 0.5 ms at 4 TB/s) when calls allow


def decode_timing(s):
    """(input sets, calls per graph replay) for a decode shape: enough sets that ROTATION_BYTES of other inputs
    pass between two calls on the same set (so no call finds its K/V left in the L2), and enough calls that a
    replay reads DECODE_GRAPH_TARGET_BYTES; calls a multiple of the sets, both at most DECODE_MAX_CALLS."""
    per_set = decode_set_bytes(s)
    sets = max(1, min(DECODE_MAX_CALLS, math.ceil(ROTATION_BYTES / per_set)))
    calls = max(sets, min(DECODE_MAX_CALLS, math.ceil(DECODE_GRAPH_TARGET_BYTES / kv_bytes(s))))
    calls = min(DECODE_MAX_CALLS, sets * math.ceil(calls / sets))
    return sets, calls


def decode_label(s):
    layout = f" paged {s['page_size']}" if s.get("page_size") else ""
    q_len = f" q{s['q_len']}" if s.get("q_len", 1) != 1 else ""
    return f"B{s['batch']} Sk{s['seqlen_k']}{q_len} H{s['heads_q']}/{s['heads_kv']} D{s['head_dim']}{layout}"


def variant_label(s):
    return ((f" softcap {s['softcap']:g}" if s.get("softcap") else "") + (" alibi" if s.get("alibi") else "")
            + (" sinks" if s.get("sinks") else "") + (f" bias {s['bias']} [1, H, S, S]" if s.get("bias") else ""))


def label(s):
    if s.get("kind") == "decode":
        return decode_label(s)
    dims = f"D{s['head_dim']}" + (f"/{s['head_dim_v']}" if "head_dim_v" in s else "")
    mask = "causal" if s["causal"] else "full"
    if "window" in s:
        mask = f"window {s['window'][0]}" + (f"/{s['window'][1]}" if s["window"][1] != 0 else "")
    if "lengths" in s:
        n = s["lengths"]
        seqs = f"{len(n)}x{n[0]}" if len(set(n)) == 1 else f"{len(n)} seqs {min(n)}-{max(n)}"
        return f"ragged {seqs} H{s['heads_q']}/{s['heads_kv']} {dims} {mask}" + variant_label(s)
    return (f"B{s['batch']} S{s['seqlen_q']}" + (f"/{s['seqlen_k']}" if s["seqlen_k"] != s["seqlen_q"] else "") +
            f" H{s['heads_q']}/{s['heads_kv']} {dims} {mask}" + variant_label(s))


def tflops_of(result):
    return result.get("tflops") if isinstance(result, dict) else None


def ratio(a, b):
    return f"{a / b:.2f}" if a and b else "–"


def number(value, digits=0):
    return f"{value:.{digits}f}" if value is not None else "–"


METHOD_NOTE = {
    "graph": "CUDA-graph replay of many back-to-back calls, time per call, after 50 ms of replays",
    "back_to_back": "many back-to-back launches between two events (graph capture failed), time per call, "
                    "after 50 ms of such launches",
    "events": "one launch between two CUDA events",
}


def markdown_table(sweep, rows, ceilings, stamp):
    """One sweep's markdown: a header with the run's facts and ceilings, then one line per case."""
    lines = [f"# {sweep}", "",
             f"{stamp.get('date', '')} — {stamp.get('gpu', '')}, torch {stamp.get('torch', '')} "
             f"(CUDA {stamp.get('cuda', '')}, cuDNN {stamp.get('cudnn', '')}).", "",
             f"Ceilings measured in this run: bf16 matmul 8192³ {ceilings['matmul_tflops']:.0f} TFLOP/s, "
             f"device copy of 2 GiB {ceilings['copy_tb_s']:.2f} TB/s (read + write).", "",
             "TFLOP/s = 2·B·Hq·(visible pairs)·(D + Dv) / median time; every implementation on the same tensors in one "
             "process, inputs rotated past the L2. Timing: " +
             "; ".join(f"**{k}** = {v}" for k, v in METHOD_NOTE.items()) + ". "
             "flashjit's output is checked against cuDNN's (rel. L2 ≤ 2e-2) before timing; ✗ marks a failed check.", "",
             "| case | flashjit config | timing | flashjit | FA4 | cuDNN | torch flash (FA2) | torch efficient | "
             "FlexAttention | × FA4 | × cuDNN | × FA2 | % matmul | % copy BW | check |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        r = row["results"]
        fj = tflops_of(r.get("flashjit"))
        check = row.get("check", {})
        mark = "–" if "rel_l2" not in check else (f"{check['rel_l2']:.1e}" + ("" if check["ok"] else " ✗"))
        if check.get("against") not in (None, "cudnn"):
            mark += f" (vs {LABELS.get(check['against'], check['against'])})"
        fraction = r.get("flashjit", {})
        lines.append(
            f"| {label(row['shape'])} | {row.get('flashjit_config', '–')} | {row['method']} | {number(fj)} | "
            f"{number(tflops_of(r.get('fa4')))} | {number(tflops_of(r.get('cudnn')))} | "
            f"{number(tflops_of(r.get('torch_flash')))} | {number(tflops_of(r.get('torch_efficient')))} | "
            f"{number(tflops_of(r.get('flex')))} | {ratio(fj, tflops_of(r.get('fa4')))} | "
            f"{ratio(fj, tflops_of(r.get('cudnn')))} | {ratio(fj, tflops_of(r.get('torch_flash')))} | "
            f"{number(percent(fraction.get('fraction_of_matmul')))} | {number(percent(fraction.get('fraction_of_copy')), 1)} | "
            f"{mark} |")
    errors = [(label(row["shape"]), name, res["error"]) for row in rows for name, res in row["results"].items()
              if isinstance(res, dict) and "error" in res]
    if errors:
        lines += ["", "Not measured:", ""] + [f"- {case}, {LABELS.get(name, name)}: {why}" for case, name, why in errors]
    return "\n".join(lines) + "\n"


DECODE_IMPLS = ["flashjit", "cudnn", "torch_flash"]


def gbs_of(result):
    return result.get("gb_s") if isinstance(result, dict) else None


def decode_markdown_table(rows, ceilings, stamp, sweep="decode"):
    """The decode sweep's markdown: GB/s of the K/V bytes each kernel must read, ratios to cuDNN and torch
    flash, time per call, the check against the peer, and how each peer got GQA."""
    gqa = sorted({f"{LABELS.get(name, name)}: {res['gqa']}" for row in rows for name, res in row["results"].items()
                  if isinstance(res, dict) and res.get("gqa")})
    lines = [f"# {sweep}", "",
             f"{stamp.get('date', '')} — {stamp.get('gpu', '')}, torch {stamp.get('torch', '')} "
             f"(CUDA {stamp.get('cuda', '')}, cuDNN {stamp.get('cudnn', '')}).", "",
             f"Ceiling measured in this run: device copy of 2 GiB {ceilings['copy_tb_s']:.2f} TB/s (read + write).", "",
             "One decode step (one new token per sequence, every sequence holding Sk keys), bf16. GB/s = the K/V "
             "bytes a kernel must read, 2·B·Sk·Hkv·D·2, over the median time per call; every kernel on the same "
             "data in one process: flashjit.decode on the KV cache [B, Sk, Hkv, D] (paged rows: the same values in "
             "pages behind a shuffled page table), torch SDPA on q [B, Hq, 1, D] and k, v [B, Hkv, Sk, D] (views of "
             "the cache). Timing: CUDA-graph replays of many back-to-back calls rotating through input sets that "
             "exceed the L2 (where 512 calls suffice), time per call. flashjit's output is checked against cuDNN's "
             "(rel. L2 ≤ 2e-2) before timing; ✗ marks a failed check." +
             (" GQA in the peers: " + "; ".join(gqa) + "." if gqa else ""), "",
             "| case | timing | flashjit µs | flashjit GB/s | cuDNN GB/s | torch flash GB/s | × cuDNN | × flash | "
             "% copy BW | check |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        r = row["results"]
        fj = gbs_of(r.get("flashjit"))
        check = row.get("check", {})
        mark = "–" if "rel_l2" not in check else (f"{check['rel_l2']:.1e}" + ("" if check["ok"] else " ✗"))
        if check.get("against") not in (None, "cudnn"):
            mark += f" (vs {LABELS.get(check['against'], check['against'])})"
        if "error" in check:
            mark = "✗ (failed, below)"
        fj_result = r.get("flashjit", {})
        us = fj_result.get("ms") * 1e3 if "ms" in fj_result else None
        fraction = fj_result.get("fraction_of_copy")
        lines.append(
            f"| {decode_label(row['shape'])} | {row['method']} | {number(us, 1)} | {number(fj)} | "
            f"{number(gbs_of(r.get('cudnn')))} | {number(gbs_of(r.get('torch_flash')))} | "
            f"{ratio(fj, gbs_of(r.get('cudnn')))} | {ratio(fj, gbs_of(r.get('torch_flash')))} | "
            f"{number(percent(fraction), 1)} | {mark} |")
    errors = [(decode_label(row["shape"]), "check", row["check"]["error"]) for row in rows
              if "error" in row.get("check", {})]
    errors += [(decode_label(row["shape"]), name, res["error"]) for row in rows for name, res in row["results"].items()
               if isinstance(res, dict) and "error" in res]
    if errors:
        lines += ["", "Not measured:", ""] + [f"- {case}, {LABELS.get(name, name)}: {why}" for case, name, why in errors]
    return "\n".join(lines) + "\n"


def _plot_batch_sweep(ax, rows, colors):
    """GB/s against the batch: flashjit per page size (solid), cuDNN (dashed)."""
    page_sizes = sorted({row["shape"].get("page_size", 0) for row in rows})
    for n, (impl, ps) in enumerate([("flashjit", ps) for ps in page_sizes] + [("cudnn", 0)]):
        points = sorted((row["shape"]["batch"], gbs_of(row["results"].get(impl))) for row in rows
                        if row["shape"].get("page_size", 0) == ps)
        points = [(x, y) for x, y in points if y]
        if points:
            ax.plot(*zip(*points), "--" if impl == "cudnn" else "-", marker="o", markersize=3,
                    color=colors[n % len(colors)], label=LABELS[impl] + (f" paged {ps}" if ps else ""))


def _plot_length_grid(ax, rows, colors):
    """GB/s against Sk for each batch of the contiguous rows (flashjit solid, cuDNN dashed)."""
    contiguous = [row for row in rows if not row["shape"].get("page_size")]
    for n, batch in enumerate(sorted({row["shape"]["batch"] for row in contiguous})):
        subset = sorted((row for row in contiguous if row["shape"]["batch"] == batch),
                        key=lambda r: r["shape"]["seqlen_k"])
        if len(subset) < 2:
            continue
        for impl, style in (("flashjit", "-"), ("cudnn", "--")):
            points = [(row["shape"]["seqlen_k"], gbs_of(row["results"].get(impl))) for row in subset]
            points = [(x, y) for x, y in points if y]
            if points:
                ax.plot(*zip(*points), style, marker="o", markersize=3, color=colors[n % len(colors)],
                        label=f"B{batch} {LABELS[impl]}")


def _plot_short_ratios(rows, path, sweep):
    """One panel per (head dim, page size): flashjit's GB/s over cuDNN's against Sk, a line per batch."""
    import matplotlib.pyplot as plt

    layouts = sorted({(row["shape"]["head_dim"], row["shape"].get("page_size", 0)) for row in rows})
    fig, axes = plt.subplots(1, len(layouts), figsize=(5 * len(layouts), 4.5), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, (d, ps) in zip(axes[0], layouts):
        subset = [row for row in rows if (row["shape"]["head_dim"], row["shape"].get("page_size", 0)) == (d, ps)]
        for n, batch in enumerate(sorted({row["shape"]["batch"] for row in subset})):
            points = sorted((row["shape"]["seqlen_k"], gbs_of(row["results"].get("flashjit")),
                             gbs_of(row["results"].get("cudnn"))) for row in subset if row["shape"]["batch"] == batch)
            points = [(x, a / b) for x, a, b in points if a and b]
            if points:
                ax.plot(*zip(*points), marker="o", markersize=3, color=colors[n % len(colors)], label=f"B{batch}")
        ax.axhline(1.0, linestyle=":", color="gray")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("keys per sequence (Sk)")
        ax.set_ylabel("x cuDNN (contiguous cache)")
        ax.set_title(f"{sweep}: D{d} " + (f"paged {ps}" if ps else "contiguous"))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_decode(rows, ceilings, path, sweep="decode"):
    """Left: GB/s against Sk for each batch of the contiguous grid, or against B for a batch sweep (one Sk;
    flashjit solid, cuDNN dashed); right: the headline shapes, each kernel and layout as a bar. The copy ceiling
    dashed in both. The short-cache sweep: flashjit over cuDNN against Sk, a panel per layout. PNG at `path`."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if sweep == "decode-short":
        _plot_short_ratios(rows, path, sweep)
        return

    fig, (grid_ax, bar_ax) = plt.subplots(1, 2, figsize=(14, 5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    copy_gbs = ceilings["copy_tb_s"] * 1e3  # the DRAM traffic of a device copy (read + write) per second
    if len({row["shape"]["seqlen_k"] for row in rows}) == 1:  # a batch sweep: GB/s against B
        _plot_batch_sweep(grid_ax, rows, colors)
        grid_ax.set_xlabel("batch (B)")
        grid_ax.set_title(f"{sweep}: Sk {rows[0]['shape']['seqlen_k']} (H32/8 D128 bf16)")
    else:
        _plot_length_grid(grid_ax, rows, colors)
        grid_ax.set_xscale("log", base=2)
        grid_ax.set_xlabel("keys per sequence (Sk)")
        grid_ax.set_title(f"{sweep}: batch x length grid (H32/8 D128 bf16)")
    grid_ax.axhline(copy_gbs, linestyle=":", color="gray", label="copy BW")
    grid_ax.set_ylabel("GB/s of K/V read")
    grid_ax.set_ylim(bottom=0)
    grid_ax.grid(alpha=0.3)
    grid_ax.legend(fontsize=6, ncol=2)

    # The headline shapes: those with paged variants, in sweep order (else the first three).
    paged_keys = {(row["shape"]["batch"], row["shape"]["seqlen_k"]) for row in rows if row["shape"].get("page_size")}
    headline = []
    for row in rows:
        key = (row["shape"]["batch"], row["shape"]["seqlen_k"])
        if key not in headline and (key in paged_keys or not paged_keys):
            headline.append(key)
    headline = headline if paged_keys else headline[:3]
    page_sizes = sorted({row["shape"].get("page_size", 0) for row in rows} - {0})
    series = [("flashjit", 0)] + [("flashjit", ps) for ps in page_sizes] + [("cudnn", 0), ("torch_flash", 0)]
    width = 0.8 / len(series)
    for n, (impl, ps) in enumerate(series):
        values = []
        for key in headline:
            match = [row for row in rows if (row["shape"]["batch"], row["shape"]["seqlen_k"]) == key and
                     row["shape"].get("page_size", 0) == ps]
            values.append((gbs_of(match[0]["results"].get(impl)) or 0) if match else 0)
        name = LABELS[impl] + (f" paged {ps}" if ps else "")
        bar_ax.bar([i + n * width for i in range(len(headline))], values, width, label=name)
    bar_ax.axhline(copy_gbs, linestyle=":", color="gray")
    bar_ax.set_xticks([i + 0.4 - width / 2 for i in range(len(headline))])
    bar_ax.set_xticklabels([f"B{b} Sk{sk}" for b, sk in headline])
    bar_ax.set_ylabel("GB/s of K/V read")
    bar_ax.set_title(f"{sweep}: headline shapes")
    bar_ax.grid(alpha=0.3, axis="y")
    bar_ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def percent(fraction):
    return None if fraction is None else 100.0 * fraction


def plot(sweep, rows, ceilings, path):
    """TFLOP/s per implementation, one panel per mask, the matmul ceiling dashed; PNG at `path`."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    if sweep in ("headdims", "windows", "ragged", "variants"):
        return plot_bars(sweep, rows, path)
    by_x = "seqlen_q" if len({row["shape"]["seqlen_q"] for row in rows}) > 1 else "head_dim"
    panels = [("full", False), ("causal", True)]
    fig, axes = plt.subplots(1, len(panels), figsize=(12, 4.5), sharey=True)
    for ax, (title, causal) in zip(axes, panels):
        subset = [row for row in rows if row["shape"]["causal"] == causal]
        xs = [row["shape"][by_x] for row in subset]
        for impl in IMPLS:
            points = [(x, tflops_of(row["results"].get(impl))) for x, row in zip(xs, subset)]
            points = [(x, y) for x, y in points if y]
            if points:
                ax.plot(*zip(*points), marker="o", label=LABELS[impl])
        ax.axhline(ceilings["matmul_tflops"], linestyle="--", color="gray", label="bf16 matmul ceiling")
        if by_x == "seqlen_q":
            ax.set_xscale("log", base=2)
            ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        ax.set_xticks(xs)
        ax.set_xticklabels([str(x) for x in xs], rotation=45)
        ax.set_xlabel("sequence length" if by_x == "seqlen_q" else "head dim")
        ax.set_ylim(bottom=0)
        ax.set_title(f"{sweep}, {title}")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("TFLOP/s")
    axes[-1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_bars(sweep, rows, path):
    """Cases side by side (grouped bars of TFLOP/s per implementation): sweeps whose cases are not a series."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    impls = [impl for impl in IMPLS if any(tflops_of(row["results"].get(impl)) for row in rows)]
    width = 0.8 / max(1, len(impls))
    fig, ax = plt.subplots(figsize=(max(8, 0.6 * len(rows) * max(1, len(impls)) / 2), 5))
    for i, impl in enumerate(impls):
        ys = [tflops_of(row["results"].get(impl)) or 0 for row in rows]
        ax.bar([x + i * width for x in range(len(rows))], ys, width, label=LABELS[impl])
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(rows))])
    ax.set_xticklabels([label(row["shape"]) for row in rows], rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("TFLOP/s")
    ax.set_title(sweep)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
