"""The relative-logits table on a GPU (flashjit.attention / attention_varlen with rel_bias=, rel_bias_offset=) against
torch SDPA with an explicit float mask built from the table (entry rel_bias[h, clamp(a - j + offset, 0, extent - 1)]
for query i aligned to key a, -inf where the causal or window mask hides the pair) and its float64 LSE: extents 1,
short and longer than Sq + Sk, offsets negative and positive, one row for every head, causal / window / none,
top-left alignment, ALiBi beside it (folded into the reference mask too), GQA, the dispatcher's kernel, FA2 and the
reference kernel; varlen with distances within each sequence.

Used by test_gpu.py under pytest, and runnable without pytest on a GPU machine:
    PYTHONPATH=python python3 python/tests/gpu_rel_bias_checks.py"""
import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import flashjit  # noqa: E402
from gpu_checks import BF16, FP16, TOLERANCE, cu_seqlens, main_of, named, rel_l2, visible_mask  # noqa: E402
from gpu_variant_checks import expect_lse  # noqa: E402


def rel_mask(table, sq, sk, offset, visible, top_left=False, slopes=None):
    """[H, Sq, Sk] float32 (H: the table's rows): the table's entry of each pair, minus slope * |a - j| with ALiBi
    slopes [H], -inf where `visible` [Sq, Sk] hides it."""
    a = torch.arange(sq, device=table.device)[:, None] + (0 if top_left else sk - sq)
    j = torch.arange(sk, device=table.device)[None, :]
    mask = table[:, (a - j + offset).clamp(0, table.shape[1] - 1)]
    if slopes is not None:
        mask = mask - slopes[:, None, None] * (a - j).abs()[None]
    return mask.masked_fill(~visible[None], -math.inf)


def reference(q, k, v, mask):
    """float32 SDPA O [B, Sq, Hq, D] with the float mask [Hq, Sq, Sk] (rows it hides entirely: 0) and the float64
    LSE [B, Hq, Sq]."""
    qt, kt, vt = (x.transpose(1, 2).float() for x in (q, k, v))
    o = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask, enable_gqa=True)
    seen = torch.isfinite(mask).any(-1, keepdim=True)
    o = torch.where(seen, o, 0).transpose(1, 2)
    group = q.shape[2] // k.shape[2]
    scores = torch.einsum("bhid,bhjd->bhij", qt.double(), kt.double().repeat_interleave(group, 1)) / math.sqrt(q.shape[3])
    return o, torch.logsumexp(scores + mask.double(), -1)


def expect_matches(o, lse, ref_o, ref_lse, dtype, what, plain=None):
    assert not torch.isnan(o).any(), f"{what}: NaN in O"
    error = rel_l2(o, ref_o)
    assert error <= TOLERANCE[dtype], f"{what}: O relative L2 error {error:.3e} > {TOLERANCE[dtype]:.0e} against SDPA"
    expect_lse(lse, ref_lse, what)
    if plain is not None:
        assert rel_l2(plain, ref_o) > 4 * TOLERANCE[dtype], f"{what}: the table changed nothing"


def check_rel_bias_matches_sdpa_float_mask():
    """Tables of extents 1, 33 and 2000 (past Sq + Sk), offsets -4, 16 and 1000, [Hq, extent] and [1, extent], on
    causal, window and no mask, top-left once; d64 and d128, bf16 and fp16; the dispatcher, fa2, the reference."""
    for d, dtype in ((64, BF16), (128, FP16)):
        q = torch.randn(2, 300, 8, d, device="cuda", dtype=dtype)
        k = torch.randn(2, 777, 2, d, device="cuda", dtype=dtype)
        v = torch.randn_like(k)
        for extent, offset, heads in ((1, 0, 8), (33, 16, 8), (9, -4, 1), (2000, 1000, 8)):
            table = torch.rand(heads, extent, device="cuda") * 6 - 3
            for causal, window, alignment in ((False, (-1, -1), "bottom_right"), (True, (-1, -1), "bottom_right"),
                                              (False, (300, 20), "bottom_right"), (True, (-1, -1), "top_left")):
                if alignment == "top_left":
                    a = torch.arange(300, device="cuda")[:, None]
                    visible = torch.arange(777, device="cuda")[None, :] <= a
                else:
                    visible = visible_mask(300, 777, causal, window)
                mask = rel_mask(table, 300, 777, offset, visible, alignment == "top_left")
                if heads == 1:
                    mask = mask.expand(8, 300, 777)
                ref_o, ref_lse = reference(q, k, v, mask)
                for config in (None, {"algorithm": "fa2"}, {"algorithm": "naive"}):
                    what = f"d{d} {dtype} extent {extent} offset {offset} heads {heads} causal {causal} window " \
                           f"{window} {alignment} config {config}"
                    o, lse = flashjit.attention(q, k, v, causal=causal, window_size=window, alignment=alignment,
                                                rel_bias=table, rel_bias_offset=offset, return_lse=True, config=config)
                    plain = flashjit.attention(q, k, v, causal=causal, window_size=window, alignment=alignment,
                                               config=config) if extent > 1 else None
                    expect_matches(o, lse, ref_o, ref_lse, dtype, what, plain)


def check_rel_bias_with_alibi():
    """ALiBi slopes beside the table: both in the score, as the reference mask adds them."""
    q = torch.randn(1, 257, 8, 128, device="cuda", dtype=BF16)
    k = torch.randn(1, 513, 8, 128, device="cuda", dtype=BF16)
    v = torch.randn_like(k)
    slopes = torch.tensor([2 ** (-8 * (h + 1) / 8) for h in range(8)], device="cuda")
    table = torch.rand(8, 100, device="cuda") * 6 - 3
    mask = rel_mask(table, 257, 513, 50, visible_mask(257, 513, True), slopes=slopes)
    ref_o, ref_lse = reference(q, k, v, mask)
    for config in (None, {"algorithm": "fa2"}):
        o, lse = flashjit.attention(q, k, v, causal=True, alibi_slopes=slopes, rel_bias=table, rel_bias_offset=50,
                                    return_lse=True, config=config)
        expect_matches(o, lse, ref_o, ref_lse, BF16, f"rel_bias with ALiBi, config {config}")


def check_varlen_rel_bias_by_distances_within_each_sequence():
    """attention_varlen: sequence b's query i (aligned to key i + len_k - len_q) and key j read the table at their own
    distance."""
    lens_q, lens_k = [300, 17, 1, 129], [301, 1000, 5, 129]
    q = torch.randn(sum(lens_q), 8, 128, device="cuda", dtype=BF16)
    k = torch.randn(sum(lens_k), 2, 128, device="cuda", dtype=BF16)
    v = torch.randn_like(k)
    table = torch.rand(8, 700, device="cuda") * 6 - 3
    for config in (None, {"algorithm": "fa2"}, {"algorithm": "naive"}):
        o, lse = flashjit.attention_varlen(q, k, v, cu_seqlens(lens_q), cu_seqlens(lens_k), max(lens_q), max(lens_k),
                                           causal=True, rel_bias=table, rel_bias_offset=350, return_lse=True,
                                           config=config)
        sq = sk = 0
        for lq, lk in zip(lens_q, lens_k):
            mask = rel_mask(table, lq, lk, 350, visible_mask(lq, lk, True))
            ro, rl = reference(q[None, sq:sq + lq], k[None, sk:sk + lk], v[None, sk:sk + lk], mask)
            expect_matches(o[sq:sq + lq], lse[:, sq:sq + lq], ro[0], rl[0], BF16, f"varlen sequence at {sq}, {config}")
            sq, sk = sq + lq, sk + lk


CHECKS = [check_rel_bias_matches_sdpa_float_mask, check_rel_bias_with_alibi,
          check_varlen_rel_bias_by_distances_within_each_sequence]


def main():
    return main_of(lambda: named(CHECKS))


if __name__ == "__main__":
    sys.exit(main())
