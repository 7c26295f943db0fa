"""seqused_k over contiguous keys on a GPU (flashjit.attention(seqused_k=) on a padded batch, attention_varlen and
flash_attn_varlen_func with seqused_k beside cu_seqlens_k) against torch SDPA with a boolean key-padding mask (on
clean copies of k and v: SDPA adds its mask to the scores, so a NaN key would reach it) and a float64 LSE: the keys
past each sequence's count hold NaN, inf and the dtype's largest values and must not reach O; counts 0, 1, odd and
seqlen_k; causal (bottom-right per sequence), a sliding window, top-left alignment; the dispatcher's kernel, FA2 and
the reference kernel; rows without keys get O = 0 and LSE = -inf.

Used by test_gpu.py under pytest, and runnable without pytest on a GPU machine:
    PYTHONPATH=python python3 python/tests/gpu_seqused_checks.py"""
import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import flashjit  # noqa: E402
from gpu_checks import BF16, FP16, TOLERANCE, cu_seqlens, main_of, named, rel_l2  # noqa: E402
from gpu_variant_checks import expect_lse  # noqa: E402


def poisoned(x, used):
    """x [B, Sk, H, D] with the rows past each sequence's count set to NaN, +inf, -inf and the dtype's largest
    finite value in turn (a clean copy is returned beside it, those rows zero)."""
    junk = torch.tensor([math.nan, math.inf, -math.inf, torch.finfo(x.dtype).max], device=x.device, dtype=x.dtype)
    rows = torch.arange(x.shape[1], device=x.device)
    padding = rows[None, :] >= used[:, None]  # [B, Sk]
    fill = junk[rows % 4][None, :, None, None].expand_as(x)
    return torch.where(padding[..., None, None], fill, x), torch.where(padding[..., None, None], 0, x)


def key_mask(used, sq, sk, causal=False, window_size=(-1, -1), top_left=False):
    """[B, 1, Sq, Sk] bool: key j < used[b], and the mask aligned to used[b] (query i at key i + used[b] - Sq, or i)."""
    i = torch.arange(sq, device=used.device)[None, :, None]
    j = torch.arange(sk, device=used.device)[None, None, :]
    a = i + (0 if top_left else used[:, None, None] - sq)
    left, right = window_size
    if causal:
        right = 0
    visible = j < used[:, None, None]
    if left >= 0:
        visible = visible & (j >= a - left)
    if right >= 0:
        visible = visible & (j <= a + right)
    return visible[:, None]


def sdpa_reference(q, k, v, mask):
    """float32 SDPA O [B, Sq, Hq, D] with the bool mask (rows it hides entirely: 0) and the float64 LSE [B, Hq, Sq]."""
    qt, kt, vt = (x.transpose(1, 2).float() for x in (q, k, v))
    o = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask, enable_gqa=True)
    o = torch.where(mask.any(-1, keepdim=True), o, 0).transpose(1, 2)
    group = q.shape[2] // k.shape[2]
    scores = torch.einsum("bhid,bhjd->bhij", qt.double(), kt.double().repeat_interleave(group, 1)) / math.sqrt(q.shape[3])
    lse = torch.logsumexp(scores.masked_fill(~mask, -math.inf), -1)
    return o, lse


def expect_matches(o, lse, ref_o, ref_lse, dtype, what):
    assert not torch.isnan(o).any(), f"{what}: NaN in O (a padding key leaked)"
    error = rel_l2(o, ref_o)
    assert error <= TOLERANCE[dtype], f"{what}: O relative L2 error {error:.3e} > {TOLERANCE[dtype]:.0e} against SDPA"
    expect_lse(lse, ref_lse, what)


def check_padded_batch_matches_sdpa_key_padding():
    """A padded batch [4, Sk 300] with counts 0, 1, 129, 300; none, causal, a window, top-left; d64 and d128, bf16 and
    fp16; the dispatcher's kernel, fa2 and the reference kernel."""
    for d, dtype in ((64, BF16), (128, FP16), (128, BF16)):
        used = torch.tensor([0, 1, 129, 300], device="cuda", dtype=torch.int32)
        q = torch.randn(4, 77, 8, d, device="cuda", dtype=dtype)
        k, k_clean = poisoned(torch.randn(4, 300, 2, d, device="cuda", dtype=dtype), used)
        v, v_clean = poisoned(torch.randn(4, 300, 2, d, device="cuda", dtype=dtype), used)
        for causal, window, alignment in ((False, (-1, -1), "bottom_right"), (True, (-1, -1), "bottom_right"),
                                          (False, (37, 5), "bottom_right"), (True, (-1, -1), "top_left")):
            mask = key_mask(used, 77, 300, causal, window, alignment == "top_left")
            ref_o, ref_lse = sdpa_reference(q, k_clean, v_clean, mask)
            for config in (None, {"algorithm": "fa2"}, {"algorithm": "naive"}):
                what = f"d{d} {dtype} causal {causal} window {window} {alignment} config {config}"
                o, lse = flashjit.attention(q, k, v, causal=causal, window_size=window, alignment=alignment,
                                            seqused_k=used, return_lse=True, config=config)
                expect_matches(o, lse, ref_o, ref_lse, dtype, what)
                assert (o[0] == 0).all() and torch.isneginf(lse[0]).all(), f"{what}: a sequence of 0 keys"


def check_varlen_uses_a_prefix_of_each_sequence():
    """attention_varlen and flash_attn_varlen_func with cu_seqlens_k and seqused_k: sequence b's first seqused_k[b] of
    its keys, the rest poisoned."""
    lens_q, lens_k, used = [77, 5, 300, 1], [300, 9, 129, 40], [129, 0, 129, 3]
    q = torch.randn(sum(lens_q), 8, 128, device="cuda", dtype=BF16)
    k = torch.randn(sum(lens_k), 2, 128, device="cuda", dtype=BF16)
    v = torch.randn_like(k)
    ref_o, ref_lse = torch.zeros(q.shape, device="cuda"), torch.full((8, sum(lens_q)), -math.inf, device="cuda",
                                                                       dtype=torch.float64)
    sq = sk = 0
    for lq, lk, u in zip(lens_q, lens_k, used):
        counts = torch.tensor([u], device="cuda", dtype=torch.int32)
        kb, kb_clean = poisoned(k[None, sk:sk + lk], counts)
        vb, vb_clean = poisoned(v[None, sk:sk + lk], counts)
        k[sk:sk + lk], v[sk:sk + lk] = kb[0], vb[0]
        ro, rl = sdpa_reference(q[None, sq:sq + lq], kb_clean, vb_clean, key_mask(counts, lq, lk, causal=True))
        ref_o[sq:sq + lq], ref_lse[:, sq:sq + lq] = ro[0], rl[0]
        sq, sk = sq + lq, sk + lk
    counts = torch.tensor(used, device="cuda", dtype=torch.int32)
    for config in (None, {"algorithm": "fa2"}, {"algorithm": "naive"}):
        o, lse = flashjit.attention_varlen(q, k, v, cu_seqlens(lens_q), cu_seqlens(lens_k), max(lens_q), max(lens_k),
                                           causal=True, seqused_k=counts, return_lse=True, config=config)
        expect_matches(o, lse, ref_o, ref_lse, BF16, f"varlen with seqused_k, config {config}")
    o = flashjit.flash_attn_varlen_func(q, k, v, cu_seqlens(lens_q), cu_seqlens(lens_k), max(lens_q), max(lens_k),
                                        causal=True, seqused_k=counts)
    assert rel_l2(o, ref_o) <= TOLERANCE[BF16], "flash_attn_varlen_func with seqused_k differs from SDPA"


CHECKS = [check_padded_batch_matches_sdpa_key_padding, check_varlen_uses_a_prefix_of_each_sequence]


def main():
    return main_of(lambda: named(CHECKS))


if __name__ == "__main__":
    sys.exit(main())
