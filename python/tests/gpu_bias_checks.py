"""The bias tensor on a GPU (flashjit.attention / attention_varlen / decode with bias=) against torch SDPA's attn_mask
(float masks of q's dtype, bool masks) and a float64 reference (every bias dtype): dense and broadcast shapes
(SDPA's [Sq, Sk], key padding [B, 1, 1, Sk], expand()ed views, a slice with odd row strides), the causal and sliding
masks, softcap and sinks on top, FA2 and the reference kernel by config, rows a bool bias hides entirely (O = 0, LSE
-inf or the sink's logit), varlen by positions within each sequence, decode over contiguous and paged caches.

Used by test_gpu.py under pytest, and runnable without pytest on a GPU machine:
    PYTHONPATH=python python3 python/tests/gpu_bias_checks.py"""
import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import flashjit  # noqa: E402
from gpu_checks import (BF16, FP16, TOLERANCE, DecodeCase, cu_seqlens, decode_inputs, expect_close, main_of,  # noqa: E402
                        named, rel_l2, visible_mask)
from gpu_variant_checks import expect_lse, sink_logits, variant_reference64  # noqa: E402

F32 = torch.float32


def random_bias(shape, dtype, device="cuda"):
    """Entries N(0, 2) of a float dtype, or bools True with probability 0.8."""
    if dtype == torch.bool:
        return torch.rand(shape, device=device) < 0.8
    return (torch.randn(shape, device=device) * 2).to(dtype)


def inputs(batch, sq, sk, hq, hkv, d, dtype):
    q = torch.randn(batch, sq, hq, d, device="cuda", dtype=dtype)
    k = torch.randn(batch, sk, hkv, d, device="cuda", dtype=dtype)
    return q, k, torch.randn_like(k)


def sdpa(q, k, v, mask, causal_visible=None):
    """torch SDPA with attn_mask (the visible-key mask, when given, folded into it): O [B, Sq, Hq, D]."""
    if causal_visible is not None:
        mask = (mask & causal_visible) if mask.dtype == torch.bool else mask.masked_fill(~causal_visible, -math.inf)
    return torch.nn.functional.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                            attn_mask=mask, enable_gqa=True).transpose(1, 2)


def check_bias_matches_sdpa_attn_mask():
    """A dense [B, Hq, Sq, Sk] mask of q's dtype and a bool one, causal and not, against SDPA's attn_mask (and float64),
    through the dispatcher, fa2 and the reference kernel."""
    for dtype in (BF16, FP16):
        q, k, v = inputs(2, 300, 777, 8, 2, 128, dtype)
        for mask_dtype in (dtype, torch.bool):
            mask = random_bias((2, 8, 300, 777), mask_dtype)
            for causal in (False, True):
                visible = visible_mask(300, 777, causal)
                for config in (None, {"algorithm": "fa2"}, {"algorithm": "naive"}):
                    what = f"{dtype} q, {mask_dtype} bias, causal {causal}, config {config}"
                    o = flashjit.attention(q, k, v, causal=causal, bias=mask, config=config)
                    ref, _ = variant_reference64(q, k, v, visible, bias=mask)
                    expect_close(o, None, ref, None, dtype, what)
                    theirs = sdpa(q, k, v, mask, visible if causal else None)
                    assert rel_l2(o, theirs) <= TOLERANCE[dtype], f"{what}: differs from SDPA's attn_mask"
                    plain = flashjit.attention(q, k, v, causal=causal, config=config)
                    assert rel_l2(plain, ref) > 4 * TOLERANCE[dtype], f"{what}: the bias changed nothing"


def check_bias_of_every_dtype_matches_float64():
    """fp32, bf16, fp16 and bool biases on bf16 and fp16 inputs, d64 / d128 / d256, a sliding window, odd lengths."""
    for d in (64, 128, 256):
        for dtype in (BF16, FP16):
            q, k, v = inputs(1, 1000, 777, 16, 4, d, dtype)
            visible = visible_mask(1000, 777, window_size=(300, 20))
            for bias_dtype in (F32, BF16, FP16, torch.bool):
                bias = random_bias((1, 16, 1000, 777), bias_dtype)
                o, lse = flashjit.attention(q, k, v, window_size=(300, 20), bias=bias, return_lse=True)
                ref_o, ref_lse = variant_reference64(q, k, v, visible, bias=bias)
                what = f"d{d} {dtype} q, {bias_dtype} bias, window (300, 20)"
                expect_close(o, None, ref_o, None, dtype, what)
                expect_lse(lse, ref_lse, what)


def check_bias_broadcasts():
    """SDPA's 2-D [Sq, Sk] mask, a key padding mask [B, 1, 1, Sk], a per-query mask [B, 1, Sq, 1], an expand()ed
    [1, Hq, Sq, Sk] view, and a slice of a wider tensor (rows of odd stride, read one entry at a time)."""
    q, k, v = inputs(2, 257, 513, 8, 8, 64, BF16)
    visible = visible_mask(257, 513, causal=True)
    wide = random_bias((2, 8, 257, 515), F32)
    masks = {
        "[Sq, Sk]": random_bias((257, 513), BF16),
        "key padding [B, 1, 1, Sk]": torch.arange(513, device="cuda")[None, None, None, :] < torch.tensor(
            [400, 513], device="cuda")[:, None, None, None],
        "per query [B, 1, Sq, 1]": random_bias((2, 1, 257, 1), torch.bool),
        "expanded [1, Hq, Sq, Sk]": random_bias((1, 8, 257, 513), FP16).expand(2, 8, 257, 513),
        "slice [..., :Sk] of a wider tensor": wide[..., 1:514],
    }
    for name, mask in masks.items():
        o = flashjit.attention(q, k, v, causal=True, bias=mask)
        ref, _ = variant_reference64(q, k, v, visible, bias=mask)
        expect_close(o, None, ref, None, BF16, f"bias {name}")


def check_bias_hides_whole_rows():
    """A bool bias False on every key of some rows: O = 0 there, LSE -inf, or the sink's logit with sinks; softcap on
    top; FA3 (by the dispatcher) and FA2."""
    q, k, v = inputs(2, 300, 301, 8, 2, 128, FP16)
    mask = random_bias((2, 8, 300, 301), torch.bool)
    mask[:, :, ::7] = False
    for sinks in (None, sink_logits(8)):
        for config in (None, {"algorithm": "fa2"}):
            o, lse = flashjit.attention(q, k, v, causal=True, softcap=30.0, sinks=sinks, bias=mask, return_lse=True,
                                        config=config)
            ref_o, ref_lse = variant_reference64(q, k, v, visible_mask(300, 301, True), softcap=30.0, sinks=sinks,
                                                 bias=mask)
            what = f"rows hidden by the bias, sinks {sinks is not None}, config {config}"
            expect_close(o, None, ref_o, None, FP16, what)
            expect_lse(lse, ref_lse, what)
            assert (o[:, ::7] == 0).all(), f"{what}: hidden rows are not 0"
            expected = torch.full_like(lse[:, :, ::7], -math.inf) if sinks is None else \
                sinks[None, :, None].expand_as(lse[:, :, ::7])
            assert torch.equal(lse[:, :, ::7], expected), f"{what}: LSE of hidden rows"


def check_varlen_bias_by_positions_within_each_sequence():
    """attention_varlen with a bias [B, Hq, max_q, max_k]: sequence b's query i and key j read bias[b, :, i, j]."""
    lens_q, lens_k = [300, 17, 0, 129], [301, 1000, 5, 129]
    q = torch.randn(sum(lens_q), 8, 128, device="cuda", dtype=BF16)
    k = torch.randn(sum(lens_k), 2, 128, device="cuda", dtype=BF16)
    v = torch.randn_like(k)
    bias = random_bias((4, 8, max(lens_q), max(lens_k)), BF16)
    o = flashjit.attention_varlen(q, k, v, cu_seqlens(lens_q), cu_seqlens(lens_k), max(lens_q), max(lens_k),
                                  causal=True, bias=bias)
    ref = torch.zeros(q.shape, device="cuda", dtype=torch.float64)
    sq = sk = 0
    for b, (lq, lk) in enumerate(zip(lens_q, lens_k)):
        if lq > 0:
            ro, _ = variant_reference64(q[None, sq:sq + lq], k[None, sk:sk + lk], v[None, sk:sk + lk],
                                        visible_mask(lq, lk, True), bias=bias[b:b + 1, :, :lq, :lk])
            ref[sq:sq + lq] = ro[0]
        sq, sk = sq + lq, sk + lk
    expect_close(o, None, ref, None, BF16, "varlen bias")


def check_decode_bias():
    """decode with a bias [B, Hq, q_len, capacity] over contiguous and paged caches, one split and several: token t
    of sequence b reads bias[b, :, t, j] for its keys j."""
    for case in (DecodeCase((1000, 77, 4097), 1, 32, 8, 128, BF16), DecodeCase((700, 33), 4, 16, 2, 128, FP16,
                                                                              num_splits=3),
                 DecodeCase((5, 1000, 300), 1, 32, 8, 128, BF16, page_size=16)):
        q, k_cache, v_cache, lens, table, per_seq = decode_inputs(case)
        capacity = k_cache.shape[1] if table is None else table.shape[1] * case.page_size
        for bias_dtype in (F32, torch.bool):
            bias = random_bias((len(case.seqlens), case.heads_q, case.q_len, capacity), bias_dtype)
            o, lse = flashjit.decode(q, k_cache, v_cache, lens, page_table=table, num_splits=case.num_splits, bias=bias,
                                     return_lse=True)
            ref_o, ref_lse = [], []
            for b, (kb, vb) in enumerate(per_seq):
                visible = visible_mask(case.q_len, kb.shape[0], causal=True)
                ro, rl = variant_reference64(q[b:b + 1], kb[None], vb[None], visible,
                                             bias=bias[b:b + 1, :, :, :kb.shape[0]])
                ref_o.append(ro)
                ref_lse.append(rl)
            what = f"decode {case} with a {bias_dtype} bias"
            expect_close(o, None, torch.cat(ref_o), None, case.dtype, what)
            expect_lse(lse, torch.cat(ref_lse), what)


CHECKS = [check_bias_matches_sdpa_attn_mask, check_bias_of_every_dtype_matches_float64, check_bias_broadcasts,
          check_bias_hides_whole_rows, check_varlen_bias_by_positions_within_each_sequence, check_decode_bias]


def main():
    return main_of(lambda: named(CHECKS))


if __name__ == "__main__":
    sys.exit(main())
