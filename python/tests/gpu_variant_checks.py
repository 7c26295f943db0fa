"""The variants on a GPU (softcap, ALiBi, learnable sinks) against a float64 torch reference: attention through the
dispatcher (FA3 on sm_90a, else FA2) and with explicit fa2 and reference (naive) configs, attention_varlen, decode
over contiguous and paged caches with planned and forced splits, flash-attn's names (learnable_sink), and rows that
see no key (O = 0; LSE = the sink's logit with sinks, -inf without). Each check also makes sure the variant changed
the output (it was not dropped on the way). Then the user snippets through Python (a document mask_mod over an aux
table, a score_mod ALiBi from aux slopes, decode's aux scalars) and top-left alignment against SDPA's is_causal.

Used by test_gpu.py under pytest, and runnable without pytest on a GPU machine:
    PYTHONPATH=python python3 python/tests/gpu_variant_checks.py
A forced cluster merge below sm_90 is skipped (pytest) or reported as skipped (main)."""
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import flashjit  # noqa: E402
from gpu_checks import (BF16, FP16, TOLERANCE, DecodeCase, cu_seqlens, decode_inputs, expect_close, rel_l2,  # noqa: E402
                        main_of, named, visible_mask)


class Skipped(Exception):
    """A check that cannot run on this GPU."""


def alibi_slopes(heads, batch=None, device="cuda"):
    """ALiBi's geometric slopes 2^(-8 (h + 1) / H), [H], or [B, H] scaled per sequence (so that a per-batch tensor
    is not the same slopes repeated)."""
    s = torch.tensor([2.0 ** (-8.0 * (h + 1) / heads) for h in range(heads)], device=device, dtype=torch.float32)
    if batch is None:
        return s
    return torch.stack([s * (1.0 + 0.5 * b) for b in range(batch)])


def sink_logits(heads, device="cuda"):
    """Sink logits large enough to matter against a few hundred keys: 4 + N(0, 1)."""
    return (torch.randn(heads, device=device) + 4.0).float()


def variant_reference64(q, k, v, visible, softmax_scale=None, softcap=0.0, slopes=None, sinks=None, bias=None):
    """float64 O [B, Sq, Hq, Dv] and LSE [B, Hq, Sq] of q [B, Sq, Hq, D] against k, v [B, Sk, Hkv, D] with a
    [Sq, Sk] mask of visible keys: x = scale q.k, softcap * tanh(x / softcap) when softcap > 0, minus
    slope[b, h] * |i + Sk - Sq - j| with slopes ([Hq] or [B, Hq]), plus bias (broadcasting to [B, Hq, Sq, Sk]; a bool
    one hides the pairs where it is False), masked; sinks [Hq] add exp(sink) to each row's denominator. A row that
    sees no key gets O = 0 and LSE = sink (-inf without sinks)."""
    b, sq, hq, d = q.shape
    sk, hkv = k.shape[1], k.shape[2]
    scale = 1 / math.sqrt(d) if softmax_scale is None else softmax_scale
    qd = q.double().transpose(1, 2)
    kd = k.double().repeat_interleave(hq // hkv, dim=2).transpose(1, 2)
    vd = v.double().repeat_interleave(hq // hkv, dim=2).transpose(1, 2)
    x = torch.matmul(qd, kd.transpose(-1, -2)) * scale
    if softcap > 0:
        x = softcap * torch.tanh(x / softcap)
    if slopes is not None:
        s = slopes.double()
        s = s[None, :] if s.dim() == 1 else s
        i = torch.arange(sq, device=q.device, dtype=torch.float64)[:, None] + (sk - sq)
        j = torch.arange(sk, device=q.device, dtype=torch.float64)[None, :]
        x = x - s[:, :, None, None] * (i - j).abs()
    if bias is not None and bias.dtype == torch.bool:
        visible = visible & bias
    elif bias is not None:
        x = x + bias.double()
    x = x.masked_fill(~visible, -math.inf)
    if sinks is not None:
        sink = sinks.double()[None, :, None, None].expand(b, hq, sq, 1)
        lse = torch.logsumexp(torch.cat([x, sink], dim=-1), dim=-1)
    else:
        lse = torch.logsumexp(x, dim=-1)
    p = torch.where(visible, torch.exp(x - lse[..., None]), torch.zeros((), dtype=torch.float64, device=q.device))
    p = torch.nan_to_num(p, nan=0.0)  # rows without keys and without sinks: lse -inf
    return torch.matmul(p, vd).transpose(1, 2), lse


def expect_lse(lse, ref, what, tolerance=2e-2):
    """LSE within `tolerance` where the reference is finite; -inf exactly where it is."""
    finite = torch.isfinite(ref)
    assert torch.equal(torch.isneginf(lse), ~finite), f"{what}: LSE -inf where the reference is not (or not where it is)"
    if finite.any():
        err = (lse[finite].double() - ref[finite]).abs().max().item()
        assert err <= tolerance, f"{what}: LSE error {err:.3e} > {tolerance}"


def expect_changed(o, ref, plain, dtype, what):
    """Where the variant moves the reference O well past the rounding tolerance (plain: the reference without it),
    it moved the kernel's too: it was compiled in and given its values."""
    if rel_l2(ref, plain) > 8 * TOLERANCE[dtype]:
        assert rel_l2(o, plain) > 4 * TOLERANCE[dtype], f"{what}: O is the same as without the variant"


# -- prefill ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class VariantCase:
    batch: int
    seqlen_q: int
    seqlen_k: int
    heads_q: int
    heads_kv: int
    head_dim: int
    dtype: torch.dtype
    causal: bool = False
    window: tuple = (-1, -1)
    softcap: float = 0.0
    alibi: str = ""  # "", "heads" ([Hq]) or "batch" ([B, Hq])
    sinks: bool = False
    config: str = ""  # "": the dispatcher; "fa2", "naive": that algorithm

    def __str__(self):
        mask = ("causal" if self.causal else "full") + ("" if self.window == (-1, -1) else
                                                        f"-w{self.window[0]},{self.window[1]}")
        variants = ((f"-softcap{self.softcap:g}" if self.softcap else "") + (f"-alibi_{self.alibi}" if self.alibi else "")
                    + ("-sinks" if self.sinks else ""))
        return (f"B{self.batch}-Sq{self.seqlen_q}-Sk{self.seqlen_k}-H{self.heads_q}/{self.heads_kv}-D{self.head_dim}-"
                f"{str(self.dtype).replace('torch.', '')}-{mask}{variants}-{self.config or 'auto'}")


# Each variant alone and together, bottom-right alignment (Sq != Sk, causal rows before the keys start with and
# without sinks), GQA, both dtypes, head dims 64 / 128 / 256, the gpt-oss shape (d64, H64/8, window 128, sinks),
# Gemma 2's softcap 50 with scores scaled up to reach it; through the dispatcher, fa2 and the reference kernel.
VARIANT_CASES = [
    VariantCase(1, 1000, 1000, 32, 8, 128, BF16, causal=True, softcap=2.0),
    VariantCase(2, 300, 300, 8, 8, 256, FP16, softcap=1.5),
    VariantCase(1, 17, 1000, 8, 2, 64, FP16, causal=True, alibi="heads"),
    VariantCase(3, 300, 500, 8, 2, 128, BF16, window=(64, 64), alibi="batch"),
    VariantCase(1, 1000, 1000, 64, 8, 64, BF16, causal=True, window=(128, 0), sinks=True),  # gpt-oss
    VariantCase(2, 500, 300, 8, 1, 128, BF16, causal=True, sinks=True),  # 200 leading rows see no key
    VariantCase(2, 500, 300, 8, 1, 128, FP16, causal=True, softcap=3.0, alibi="batch", sinks=True),
    VariantCase(1, 1000, 1000, 16, 4, 256, BF16, causal=True, softcap=2.5, alibi="heads", sinks=True),
]
VARIANT_CASES += [VariantCase(**{**c.__dict__, "config": algorithm}) for algorithm in ("fa2", "naive")
                  for c in VARIANT_CASES[:1] + VARIANT_CASES[3:4] + VARIANT_CASES[5:7]]


def variant_arguments(case, batch, heads_q, device="cuda"):
    """attention()'s and decode()'s variant keywords of a case."""
    kwargs = {}
    if case.softcap:
        kwargs["softcap"] = case.softcap
    if case.alibi:
        kwargs["alibi_slopes"] = alibi_slopes(heads_q, batch if case.alibi == "batch" else None, device)
    if case.sinks:
        kwargs["sinks"] = sink_logits(heads_q, device)
    return kwargs


def check_variant_case(case):
    scale_up = 4.0 if case.softcap else 1.0  # scores of several units, so that the cap bends them
    q = torch.randn(case.batch, case.seqlen_q, case.heads_q, case.head_dim, device="cuda", dtype=case.dtype) * scale_up
    q = q.to(case.dtype)
    k = torch.randn(case.batch, case.seqlen_k, case.heads_kv, case.head_dim, device="cuda", dtype=case.dtype)
    v = torch.randn_like(k)
    kwargs = variant_arguments(case, case.batch, case.heads_q)
    config = {"algorithm": case.config} if case.config else None
    o, lse = flashjit.attention(q, k, v, causal=case.causal, window_size=case.window, return_lse=True, config=config,
                                **kwargs)
    assert o.shape == q.shape and lse.shape == (case.batch, case.heads_q, case.seqlen_q)
    visible = visible_mask(case.seqlen_q, case.seqlen_k, case.causal, case.window)
    ref_o, ref_lse = variant_reference64(q, k, v, visible, softcap=case.softcap, slopes=kwargs.get("alibi_slopes"),
                                         sinks=kwargs.get("sinks"))
    expect_close(o, None, ref_o, None, case.dtype, str(case))
    expect_lse(lse, ref_lse, str(case))
    plain, _ = variant_reference64(q, k, v, visible)
    expect_changed(o, ref_o, plain, case.dtype, str(case))
    empty = ~visible.any(dim=-1)
    if empty.any():
        assert (o[:, empty] == 0).all(), f"{case}: rows without keys are not 0"
        if case.sinks:  # their LSE is the sink's logit
            expected = kwargs["sinks"][None, :, None].expand(case.batch, -1, int(empty.sum()))
            assert torch.allclose(lse[:, :, empty], expected, atol=1e-5), f"{case}: LSE of rows without keys"


def check_variant_kernel_names():
    """select names the variant kernel for this device; precompile compiles it under that name."""
    cap = torch.cuda.get_device_capability()
    arch = f"sm_{cap[0]}{cap[1]}" + ("a" if cap[0] >= 9 else "")
    config = flashjit.select((1, 1024, 8, 128), softcap=50.0, sinks=True)
    assert config["softcap"] is True and config["sinks"] is True and config["arch"] == arch, config
    info = flashjit.precompile(q_shape=(1, 1024, 8, 128), dtype="bf16", softcap=True, sinks=True)
    assert "_softcap_sinks_" in info["name"], info["name"]


def check_flash_attn_names_with_variants():
    """flash_attn_func's softcap / alibi_slopes and FA4's learnable_sink reach the kernel."""
    q = torch.randn(2, 300, 8, 128, device="cuda", dtype=BF16) * 4
    q = q.to(BF16)
    k = torch.randn(2, 300, 2, 128, device="cuda", dtype=BF16)
    v = torch.randn_like(k)
    slopes, sinks = alibi_slopes(8, 2), sink_logits(8)
    o = flashjit.flash_attn_func(q, k, v, 0.0, None, True, (-1, -1), 2.0, slopes, learnable_sink=sinks)
    ref, _ = variant_reference64(q, k, v, visible_mask(300, 300, True), softcap=2.0, slopes=slopes, sinks=sinks)
    expect_close(o, None, ref, None, BF16, "flash_attn_func softcap + alibi + learnable_sink")


def check_variants_under_graph_capture():
    """A variant kernel warmed up, then captured and replayed with new slopes and sinks in the same tensors."""
    q = torch.randn(1, 512, 8, 64, device="cuda", dtype=BF16)
    k, v = torch.randn_like(q), torch.randn_like(q)
    slopes, sinks = alibi_slopes(8), sink_logits(8)
    out = torch.empty_like(q)
    flashjit.attention(q, k, v, causal=True, alibi_slopes=slopes, sinks=sinks, out=out)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        flashjit.attention(q, k, v, causal=True, alibi_slopes=slopes, sinks=sinks, out=out)
    slopes.mul_(2.0)
    sinks.add_(1.0)
    graph.replay()
    torch.cuda.synchronize()
    ref, _ = variant_reference64(q, k, v, visible_mask(512, 512, True), slopes=slopes, sinks=sinks)
    expect_close(out, None, ref, None, BF16, "replayed variant graph with new slopes and sinks")


# -- varlen ----------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class VarlenVariantCase:
    lens_q: tuple
    lens_k: tuple  # 0: that sequence's rows see no key
    heads_q: int
    heads_kv: int
    head_dim: int
    dtype: torch.dtype
    causal: bool = False
    window: tuple = (-1, -1)
    softcap: float = 0.0
    alibi: str = ""
    sinks: bool = False
    config: str = ""

    def __str__(self):
        variants = ((f"-softcap{self.softcap:g}" if self.softcap else "") + (f"-alibi_{self.alibi}" if self.alibi else "")
                    + ("-sinks" if self.sinks else ""))
        return (f"varlen-q{','.join(map(str, self.lens_q))}-k{','.join(map(str, self.lens_k))}-H{self.heads_q}/"
                f"{self.heads_kv}-D{self.head_dim}-{str(self.dtype).replace('torch.', '')}-"
                f"{'causal' if self.causal else 'full'}{variants}-{self.config or 'auto'}")


VARLEN_VARIANT_CASES = [
    VarlenVariantCase((7, 300, 1000), (300, 300, 1000), 8, 2, 128, BF16, causal=True, softcap=2.0),
    VarlenVariantCase((300, 1, 77), (1000, 7, 77), 8, 8, 64, FP16, alibi="batch"),
    VarlenVariantCase((300, 5, 400), (300, 0, 200), 16, 2, 64, BF16, causal=True, sinks=True),  # empty rows
    VarlenVariantCase((300, 5, 400), (300, 0, 200), 16, 2, 64, BF16, causal=True, window=(64, 0), softcap=3.0,
                      alibi="heads", sinks=True),
    VarlenVariantCase((300, 5, 400), (300, 0, 200), 16, 2, 64, BF16, causal=True, alibi="batch", sinks=True,
                      config="fa2"),
]


def check_varlen_variant_case(case):
    tq, tk = sum(case.lens_q), sum(case.lens_k)
    scale_up = 4.0 if case.softcap else 1.0
    q = (torch.randn(tq, case.heads_q, case.head_dim, device="cuda") * scale_up).to(case.dtype)
    k = torch.randn(tk, case.heads_kv, case.head_dim, device="cuda", dtype=case.dtype)
    v = torch.randn_like(k)
    batch = len(case.lens_q)
    kwargs = variant_arguments(case, batch, case.heads_q)
    config = {"algorithm": case.config} if case.config else None
    o, lse = flashjit.attention_varlen(q, k, v, cu_seqlens(case.lens_q), cu_seqlens(case.lens_k), max(case.lens_q),
                                       max(case.lens_k), causal=case.causal, window_size=case.window, return_lse=True,
                                       config=config, **kwargs)
    assert o.shape == q.shape and lse.shape == (case.heads_q, tq)
    ref_o = torch.zeros(q.shape, device="cuda", dtype=torch.float64)
    ref_lse = torch.full((case.heads_q, tq), -math.inf, device="cuda", dtype=torch.float64)
    plain = torch.zeros_like(ref_o)
    sq = sk = 0
    for b, (lq, lk) in enumerate(zip(case.lens_q, case.lens_k)):
        if lq > 0:
            slopes = kwargs.get("alibi_slopes")
            if slopes is not None and slopes.dim() == 2:
                slopes = slopes[b]
            visible = visible_mask(lq, lk, case.causal, case.window)
            qs, ks, vs = q[None, sq:sq + lq], k[None, sk:sk + lk], v[None, sk:sk + lk]
            ro, rl = variant_reference64(qs, ks, vs, visible, softcap=case.softcap, slopes=slopes,
                                         sinks=kwargs.get("sinks"))
            ref_o[sq:sq + lq], ref_lse[:, sq:sq + lq] = ro[0], rl[0]
            plain[sq:sq + lq] = variant_reference64(qs, ks, vs, visible)[0][0]
        sq, sk = sq + lq, sk + lk
    expect_close(o, None, ref_o, None, case.dtype, str(case))
    expect_lse(lse, ref_lse, str(case))
    expect_changed(o, ref_o, plain, case.dtype, str(case))


# -- decode ----------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class DecodeVariantCase:
    base: DecodeCase
    softcap: float = 0.0
    alibi: str = ""
    sinks: bool = False

    def __str__(self):
        variants = ((f"-softcap{self.softcap:g}" if self.softcap else "") + (f"-alibi_{self.alibi}" if self.alibi else "")
                    + ("-sinks" if self.sinks else ""))
        return f"{self.base}{variants}"


DECODE_VARIANT_CASES = [
    DecodeVariantCase(DecodeCase((1, 300, 1000), 1, 32, 8, 128, BF16), softcap=2.0),
    DecodeVariantCase(DecodeCase((4, 77, 513), 4, 8, 1, 64, FP16), alibi="batch"),
    DecodeVariantCase(DecodeCase((32768,), 1, 64, 8, 64, BF16), sinks=True),  # gpt-oss, planned splits
    DecodeVariantCase(DecodeCase((8000, 130), 1, 64, 8, 64, BF16, window_left=128), sinks=True),
    DecodeVariantCase(DecodeCase((5, 1000, 4097, 16), 1, 32, 8, 128, BF16, page_size=16), alibi="heads", sinks=True),
    DecodeVariantCase(DecodeCase((1000, 999), 2, 32, 8, 128, BF16, num_splits=7), softcap=3.0, sinks=True),
    DecodeVariantCase(DecodeCase((3000, 5, 700), 1, 32, 8, 128, BF16, page_size=16, num_splits=2,
                                 split_merge="combine"), softcap=2.0, alibi="batch", sinks=True),
    DecodeVariantCase(DecodeCase((1000, 999), 2, 32, 8, 128, FP16, num_splits=4, split_merge="cluster"),
                      alibi="heads", sinks=True),
]


def check_decode_variant_case(case):
    c = case.base
    if c.split_merge == "cluster" and torch.cuda.get_device_capability()[0] < 9:
        raise Skipped("a cluster merge needs sm_90")
    q, k, v, lens, table, per_seq = decode_inputs(c)
    if case.softcap:
        q = (q.float() * 4).to(c.dtype)
    kwargs = variant_arguments(case, q.shape[0], c.heads_q)
    o, lse = flashjit.decode(q, k, v, lens, page_table=table, window_size=(c.window_left, 0), return_lse=True,
                             num_splits=c.num_splits, split_merge=c.split_merge, **kwargs)
    assert o.shape == q.shape and lse.shape == (q.shape[0], c.heads_q, c.q_len)
    expect_decode(q, o, lse, per_seq, c.window_left, case.softcap, kwargs, c.dtype, str(case))


def expect_decode(q, o, lse, per_seq, window_left, softcap, kwargs, dtype, what):
    """o, lse against the float64 reference sequence by sequence: token t of sequence b at key position
    len_b - q_len + t sees the keys up to it (and window_left before it)."""
    q_len = q.shape[1]
    ref_o, ref_lse, plain = [], [], []
    for b, (kb, vb) in enumerate(per_seq):
        slopes = kwargs.get("alibi_slopes")
        if slopes is not None and slopes.dim() == 2:
            slopes = slopes[b]
        visible = visible_mask(q_len, kb.shape[0], causal=True, window_size=(window_left, -1))
        ro, rl = variant_reference64(q[b:b + 1], kb[None], vb[None], visible, softcap=softcap, slopes=slopes,
                                     sinks=kwargs.get("sinks"))
        ref_o.append(ro)
        ref_lse.append(rl)
        plain.append(variant_reference64(q[b:b + 1], kb[None], vb[None], visible)[0])
    ref_o = torch.cat(ref_o)
    expect_close(o, None, ref_o, None, dtype, what)
    expect_lse(lse, torch.cat(ref_lse), what)
    expect_changed(o, ref_o, torch.cat(plain), dtype, what)


def check_decode_sinks_rows_without_keys():
    """A sequence shorter than q_len: its first new tokens sit before the first key and see none (O = 0, LSE = the
    sink's logit); the others as usual; with a forced split too."""
    for num_splits in (0, 3):
        c = DecodeCase((2, 700), 4, 16, 2, 128, BF16, num_splits=num_splits)
        q, k, v, lens, table, per_seq = decode_inputs(c)
        sinks = sink_logits(16)
        o, lse = flashjit.decode(q, k, v, lens, sinks=sinks, return_lse=True, num_splits=num_splits)
        assert (o[0, :2] == 0).all(), "decode: tokens before the first key are not 0"
        assert torch.allclose(lse[0, :, :2], sinks[:, None].expand(-1, 2), atol=1e-5), "decode: their LSE is not the sink"
        expect_decode(q, o, lse, per_seq, -1, 0.0, {"sinks": sinks}, BF16, f"decode rows without keys, splits {num_splits}")


def check_flash_attn_with_kvcache_sinks():
    """flash_attn_with_kvcache's learnable_sink and softcap reach decode."""
    c = DecodeCase((500, 1000), 1, 64, 8, 64, BF16)
    q, k, v, lens, table, per_seq = decode_inputs(c)
    sinks = sink_logits(64)
    o = flashjit.flash_attn_with_kvcache(q, k, v, cache_seqlens=lens, softcap=2.0, learnable_sink=sinks)
    ref = [variant_reference64(q[b:b + 1], kb[None], vb[None], visible_mask(1, kb.shape[0], True), softcap=2.0,
                               sinks=sinks)[0] for b, (kb, vb) in enumerate(per_seq)]
    expect_close(o, None, torch.cat(ref), None, BF16, "flash_attn_with_kvcache softcap + learnable_sink")


# -- user snippets through Python (score_mod, mask_mod, aux_*) and top-left alignment ---------------------------

DOC_MASK = ("__device__ bool mask_mod(int b, int h, int q, int k, const flashjit::ModContext& ctx) {\n"
            "  const int* doc = ctx.pointer<int>(0);\n"
            "  return doc[q + ctx.seqlen_k - ctx.seqlen_q] == doc[k];\n"
            "}\n")
ALIBI_SCORE = ("__device__ float score_mod(float s, int b, int h, int q, int k, const flashjit::ModContext& ctx) {\n"
               "  const float* slope = ctx.pointer<float>(0);\n"
               "  const int d = q + ctx.seqlen_k - ctx.seqlen_q - k;\n"
               "  return s - slope[h] * (d < 0 ? -d : d);\n"
               "}\n")
TEMPERATURE = ("__device__ float score_mod(float s, int b, int h, int q, int k, const flashjit::ModContext& ctx) {\n"
               "  return s * ctx.scalar(0) + (float)ctx.integer(0);\n"
               "}\n")


def check_document_mask_mod():
    """Document masking by a mask_mod over an aux int32 table (5 documents in 1000 tokens, causal within each):
    attention against float64 and against attention_varlen over the same documents."""
    lengths = [300, 17, 400, 183, 100]
    s = sum(lengths)
    doc = torch.cat([torch.full((n,), i, dtype=torch.int32) for i, n in enumerate(lengths)]).cuda()
    q = torch.randn(1, s, 8, 64, device="cuda", dtype=BF16)
    k = torch.randn(1, s, 2, 64, device="cuda", dtype=BF16)
    v = torch.randn_like(k)
    o, lse = flashjit.attention(q, k, v, causal=True, mask_mod=DOC_MASK, aux_tensors=[doc], return_lse=True)
    visible = visible_mask(s, s, causal=True) & (doc[:, None] == doc[None, :])
    ref_o, ref_lse = variant_reference64(q, k, v, visible)
    expect_close(o, None, ref_o, None, BF16, "mask_mod document masking")
    expect_lse(lse, ref_lse, "mask_mod document masking")
    cu = cu_seqlens(lengths)
    packed = flashjit.attention_varlen(q[0], k[0], v[0], cu, cu, max(lengths), max(lengths), causal=True)
    assert rel_l2(o[0], packed) <= TOLERANCE[BF16], "mask_mod documents differ from attention_varlen's"


def check_score_mod_alibi_from_aux():
    """A score_mod restating ALiBi from an aux float32 [Hq] table, fixed-length (Sq < Sk) and varlen, matches the
    built-in alibi_slopes."""
    q = torch.randn(2, 300, 8, 128, device="cuda", dtype=BF16) * 2
    k = torch.randn(2, 700, 2, 128, device="cuda", dtype=BF16)
    v = torch.randn_like(k)
    slopes = alibi_slopes(8)
    mine = flashjit.attention(q, k, v, causal=True, score_mod=ALIBI_SCORE, aux_tensors=[slopes])
    builtin = flashjit.attention(q, k, v, causal=True, alibi_slopes=slopes)
    ref = variant_reference64(q, k, v, visible_mask(300, 700, causal=True), slopes=slopes)[0]
    expect_close(mine, None, ref, None, BF16, "score_mod ALiBi")
    assert rel_l2(mine, builtin) <= TOLERANCE[BF16], "score_mod ALiBi differs from the built-in"
    cu_q, cu_k = cu_seqlens([300, 300]), cu_seqlens([700, 700])
    packed = flashjit.attention_varlen(q.flatten(0, 1), k.flatten(0, 1), v.flatten(0, 1), cu_q, cu_k, 300, 700,
                                       causal=True, score_mod=ALIBI_SCORE, aux_tensors=[slopes])
    assert rel_l2(packed.view_as(mine), builtin) <= TOLERANCE[BF16], "varlen score_mod ALiBi differs"


def check_top_left_alignment_matches_sdpa():
    """alignment="top_left" with causal is torch SDPA's is_causal (query i sees keys j <= i), Sq < Sk and Sq > Sk."""
    for sq, sk in ((300, 1000), (1000, 300)):
        q = torch.randn(1, sq, 8, 64, device="cuda", dtype=BF16)
        k = torch.randn(1, sk, 8, 64, device="cuda", dtype=BF16)
        v = torch.randn_like(k)
        o = flashjit.attention(q, k, v, causal=True, alignment="top_left")
        i = torch.arange(sq, device="cuda")[:, None]
        j = torch.arange(sk, device="cuda")[None, :]
        ref = variant_reference64(q, k, v, j <= i)[0]
        expect_close(o, None, ref, None, BF16, f"top-left causal Sq {sq} Sk {sk}")
        sdpa = torch.nn.functional.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                                                v.transpose(1, 2), is_causal=True).transpose(1, 2)
        assert rel_l2(o, sdpa) <= TOLERANCE[BF16], f"top-left causal differs from SDPA's is_causal (Sq {sq} Sk {sk})"


def check_decode_score_mod_scalars():
    """decode with a score_mod reading aux_scalars and aux_integers (a temperature and an offset, which softmax
    ignores): the same as a softmax_scale of scale * temperature."""
    c = DecodeCase((500, 1000, 37), 1, 32, 8, 128, BF16)
    q, k, v, lens, table, per_seq = decode_inputs(c)
    o = flashjit.decode(q, k, v, lens, score_mod=TEMPERATURE, aux_scalars=[0.5], aux_integers=[3])
    scaled = flashjit.decode(q, k, v, lens, softmax_scale=0.5 / math.sqrt(128))
    assert rel_l2(o, scaled) <= TOLERANCE[BF16], "decode score_mod with aux scalars differs from the scaled decode"


CHECKS = [check_variant_kernel_names, check_flash_attn_names_with_variants, check_variants_under_graph_capture,
          check_document_mask_mod, check_score_mod_alibi_from_aux, check_top_left_alignment_matches_sdpa]
DECODE_CHECKS = [check_decode_sinks_rows_without_keys, check_flash_attn_with_kvcache_sinks, check_decode_score_mod_scalars]


def main():
    def runs():
        out = [(str(c), lambda c=c: check_variant_case(c)) for c in VARIANT_CASES]
        out += [(str(c), lambda c=c: check_varlen_variant_case(c)) for c in VARLEN_VARIANT_CASES]
        out += [(str(c), lambda c=c: check_decode_variant_case(c)) for c in DECODE_VARIANT_CASES]
        return out + named(CHECKS + DECODE_CHECKS)
    return main_of(runs, skipped_as=Skipped)


if __name__ == "__main__":
    sys.exit(main())
