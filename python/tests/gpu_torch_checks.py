"""GPU checks of flashjit in torch's machinery and under flash-attn's names:

- torch.compile(fullgraph=True) of a small block calling flashjit.attention and flashjit.decode (and one calling
  attention_varlen and merge, and one with a bias, a block mask, snippets and aux arguments) runs, matches eager,
  and is one graph without a break (torch._dynamo.explain and a counting backend); torch.export of the block runs
  and matches eager too; inputs that require grad are refused.
- flash_attn_func, flash_attn_varlen_func and flash_attn_with_kvcache, called as flash-attn is (positionally and by
  keyword), against a float64 reference; flash_attn_with_kvcache also appends k and v into the cache.
- flashjit.select / select_decode for the device's arch and SM count (no device used) agree with the device's.

Used by test_gpu.py under pytest, and by gpu_checks.py's main without it."""
import itertools
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import flashjit  # noqa: E402
from gpu_checks import TOLERANCE, lse_error, masked_reference64, rel_l2, visible_mask  # noqa: E402

BF16 = torch.bfloat16


def reference64(q, k, v, causal=False, window_size=(-1, -1), softmax_scale=None):
    """float64 O and LSE of flash_attn_func's problem."""
    visible = visible_mask(q.shape[1], k.shape[1], causal, window_size, q.device)
    return masked_reference64(q, k, v, visible, softmax_scale)


def _inputs(b=2, sq=256, sk=256, hq=8, hkv=2, d=128, cache=1024):
    q = torch.randn(b, sq, hq, d, device="cuda", dtype=BF16)
    k = torch.randn(b, sk, hkv, d, device="cuda", dtype=BF16)
    v = torch.randn_like(k)
    k_cache = torch.randn(b, cache, hkv, d, device="cuda", dtype=BF16)
    v_cache = torch.randn_like(k_cache)
    lens = torch.tensor([cache // 2 + 3, cache - 5], device="cuda", dtype=torch.int32)[:b]
    return q, k, v, k_cache, v_cache, lens


def block(q, k, v, k_cache, v_cache, lens):
    """A small transformer-like step: prefill attention, then a decode of the last token, with torch ops around."""
    o = flashjit.attention(q * 0.5, k, v, causal=True)
    window = flashjit.attention(q, k, v, window_size=(64, 0), softmax_scale=0.1)
    d, lse = flashjit.decode(q[:, -1:].contiguous(), k_cache, v_cache, lens, return_lse=True)
    return (o + window).float().mean(dim=1) + d.float()[:, 0] * torch.sigmoid(lse.mean())


def _explain(fn, *args):
    torch._dynamo.reset()
    explained = torch._dynamo.explain(fn)(*args)
    reasons = [getattr(r, "reason", str(r)) for r in explained.break_reasons]
    assert explained.graph_break_count == 0 and explained.graph_count == 1, (
        f"{explained.graph_count} graphs, {explained.graph_break_count} graph breaks: {reasons}")
    ops = [str(node.target) for graph in explained.graphs for node in graph.graph.nodes]
    return ops


def _counted_compile(fn, *args):
    """fn compiled with fullgraph=True by a counting backend that hands the graph to inductor: (result, frames)."""
    from torch._dynamo.testing import CompileCounterWithBackend
    torch._dynamo.reset()
    counter = CompileCounterWithBackend("inductor")
    result = torch.compile(fn, fullgraph=True, backend=counter)(*args)
    return result, counter.frame_count


def check_compile_block_matches_eager_without_graph_breaks():
    torch.manual_seed(1)
    args = _inputs()
    with torch.no_grad():
        eager = block(*args)
        ops = _explain(block, *args)
        _strided_q_block(args)
        assert sum("flashjit" in op for op in ops) >= 3, ops  # the custom ops are in the graph
        compiled, frames = _counted_compile(block, *args)
        assert frames == 1, f"{frames} frames compiled (a graph break makes more)"
        error = rel_l2(compiled, eager)
        assert error <= 1e-2, f"compiled vs eager: relative L2 error {error:.3e}"
        again = torch.compile(block, fullgraph=True)(*_inputs(sq=128, sk=320))  # new shapes, no break either
        assert torch.isfinite(again).all()


DOCS = ("__device__ bool mask_mod(int b, int h, int q, int k, const flashjit::ModContext& ctx) {\n"
        "  const int* d = ctx.pointer<int>(0);\n  return d[q] == d[k];\n}\n")
SCALE = ("__device__ float score_mod(float s, int b, int h, int q, int k, const flashjit::ModContext& ctx) {\n"
         "  return s * ctx.scalar(0) + 0.01f * ctx.integer(0);\n}\n")


def variant_block(q, k, v, k_cache, v_cache, lens, bias, mask, ids, table):
    """The bias with a relative-logits table, a block mask with its mask_mod, a score_mod with scalars and top-left
    alignment, varlen with a bias and decode with a bias and a score_mod: each its custom op in the compiled graph."""
    o = flashjit.attention(q, k, v, causal=True, bias=bias, rel_bias=table, rel_bias_offset=q.shape[1] - 1)
    m = flashjit.attention(q, k, v, causal=True, block_mask=mask, mask_mod=DOCS, aux_tensors=[ids])
    s = flashjit.attention(q, k, v, score_mod=SCALE, aux_scalars=[0.5], aux_integers=[3], alignment="top_left")
    packed = q.reshape(-1, *q.shape[2:])
    cu = torch.arange(0, q.shape[0] + 1, device=q.device, dtype=torch.int32) * q.shape[1]
    pv = flashjit.attention_varlen(packed, k.reshape(-1, *k.shape[2:]), v.reshape(-1, *v.shape[2:]), cu, cu,
                                   q.shape[1], k.shape[1], bias=bias, mask_mod=DOCS, aux_tensors=[ids])
    d = flashjit.decode(q[:, -1:].contiguous(), k_cache, v_cache, lens, bias=bias[:, :, :1, :1], score_mod=SCALE,
                        aux_scalars=[2.0], aux_integers=[1])
    return o, m, s, pv.reshape(q.shape), d


def check_compile_bias_block_masks_and_snippets_match_eager():
    torch.manual_seed(5)
    q, k, v, k_cache, v_cache, lens = _inputs()
    sq = q.shape[1]
    bias = torch.randn(q.shape[0], q.shape[2], sq, k.shape[1], device="cuda", dtype=BF16)
    ids = (torch.arange(sq, device="cuda", dtype=torch.int32) // 100).contiguous()
    mask = flashjit.block_mask(DOCS, 1, 1, sq, k.shape[1], causal=True, aux_tensors=[ids])
    table = torch.randn(q.shape[2], 2 * sq - 1, device="cuda", dtype=torch.float32)
    args = (q, k, v, k_cache, v_cache, lens, bias, mask, ids, table)
    with torch.no_grad():
        eager = variant_block(*args)
        ops = _explain(variant_block, *args)
        assert sum("flashjit" in op for op in ops) >= 5, ops
        torch._dynamo.reset()
        compiled = torch.compile(variant_block, fullgraph=True)(*args)
    names = ("bias + rel_bias", "block mask + mask_mod", "score_mod", "varlen", "decode")
    for name, a, b in zip(names, compiled, eager):
        assert torch.equal(a, b), f"{name}: compiled differs from eager ({rel_l2(a, b):.3e})"


def _strided_q_block(args):
    """A block over a q that is a view of a wider tensor (strides not contiguous): compiled and eager agree, so the
    op's real output has the strides its fake implementation promised."""
    q, k, v = args[:3]
    wide = torch.randn(q.shape[0], q.shape[1], q.shape[2] * 2, q.shape[3], device="cuda", dtype=q.dtype)

    def f(wide, k, v):
        o = flashjit.attention(wide[:, :, ::2], k, v, causal=True)
        return o.transpose(1, 2).reshape(o.shape[0], o.shape[2], -1) * 2

    eager = f(wide, k, v)
    torch._dynamo.reset()
    compiled = torch.compile(f, fullgraph=True)(wide, k, v)
    assert torch.equal(compiled, eager), f"strided q: compiled differs from eager ({rel_l2(compiled, eager):.3e})"
    return compiled


def check_compile_varlen_and_merge():
    torch.manual_seed(2)
    lens_q, lens_k = [5, 130, 64], [70, 130, 300]
    cu_q = torch.tensor([0, *itertools.accumulate(lens_q)], device="cuda", dtype=torch.int32)
    cu_k = torch.tensor([0, *itertools.accumulate(lens_k)], device="cuda", dtype=torch.int32)
    q = torch.randn(sum(lens_q), 8, 64, device="cuda", dtype=BF16)
    k = torch.randn(sum(lens_k), 2, 64, device="cuda", dtype=BF16)
    v = torch.randn_like(k)

    def packed(q, k, v, cu_q, cu_k):
        o, lse = flashjit.attention_varlen(q, k, v, cu_q, cu_k, max(lens_q), max(lens_k), causal=True, return_lse=True)
        return o.float().sum(dim=-1), lse

    def merged(o1, l1, o2, l2):
        return flashjit.merge([o1, o2], [l1, l2], return_lse=True)

    with torch.no_grad():
        eager = packed(q, k, v, cu_q, cu_k)
        _explain(packed, q, k, v, cu_q, cu_k)
        compiled = torch.compile(packed, fullgraph=True)(q, k, v, cu_q, cu_k)
        assert rel_l2(compiled[0], eager[0]) <= 1e-3 and lse_error(compiled[1], eager[1]) <= 1e-3
        qd, kd, vd = (torch.randn(2, 3, 8, 64, device="cuda", dtype=BF16) for _ in range(3))
        o1, l1 = flashjit.attention(qd, kd, vd, return_lse=True)
        o2, l2 = flashjit.attention(qd, vd, kd, return_lse=True)
        _explain(merged, o1, l1, o2, l2)
        a, b = merged(o1, l1, o2, l2), torch.compile(merged, fullgraph=True)(o1, l1, o2, l2)
        assert rel_l2(b[0], a[0]) <= 1e-3 and lse_error(b[1], a[1]) <= 1e-3


def check_export_matches_eager():
    torch.manual_seed(3)
    args = _inputs()

    class Block(torch.nn.Module):
        def forward(self, *a):
            return block(*a)

    with torch.no_grad():
        exported = torch.export.export(Block(), args)
        targets = {str(n.target) for n in exported.graph.nodes}
        assert {"flashjit.attention.default", "flashjit.decode.default"} <= targets, targets
        error = rel_l2(exported.module()(*args), block(*args))
        assert error <= 1e-3, f"exported vs eager: relative L2 error {error:.3e}"


def check_inputs_that_require_grad_are_refused():
    q, k, v, k_cache, v_cache, lens = _inputs(b=1, sq=64, sk=64)
    q.requires_grad_(True)
    for call in (lambda: flashjit.attention(q, k, v), lambda: flashjit.flash_attn_func(q, k, v),
                 lambda: flashjit.decode(q[:, -1:].detach().requires_grad_(True), k_cache, v_cache, lens)):
        try:
            call()
        except RuntimeError as e:
            assert "forward only" in str(e) and "require grad" in str(e), str(e)
        else:
            raise AssertionError("an input that requires grad was accepted")
    with torch.no_grad():
        flashjit.attention(q, k, v)
    with torch.inference_mode():
        flashjit.attention(q.detach(), k, v)
    # The op itself, called directly: its backward says it is forward only.
    o, _ = torch.ops.flashjit.attention(q, k, v, False, -1, -1, 0, None, False, None)
    try:
        o.float().sum().backward()
    except RuntimeError as e:
        assert "forward only" in str(e), str(e)
    else:
        raise AssertionError("a backward through flashjit::attention ran")


def _expect64(o, ref, what, lse=None, ref_lse=None):
    error = rel_l2(o, ref)
    assert error <= TOLERANCE[o.dtype], f"{what}: O relative L2 error {error:.3e} against float64"
    if lse is not None:
        assert lse_error(lse, ref_lse) <= 2e-2, f"{what}: LSE error {lse_error(lse, ref_lse):.3e}"


def check_flash_attn_func_against_float64():
    from flashjit import flash_attn_func
    torch.manual_seed(4)
    q = torch.randn(2, 200, 8, 128, device="cuda", dtype=BF16)
    k = torch.randn(2, 333, 2, 128, device="cuda", dtype=BF16)
    v = torch.randn_like(k)
    calls = {
        "positional causal": (lambda: flash_attn_func(q, k, v, 0.0, None, True), dict(causal=True)),
        "positional window and scale": (lambda: flash_attn_func(q, k, v, 0.0, 0.05, False, (64, 32)),
                                        dict(window_size=(64, 32), softmax_scale=0.05)),
        "keywords": (lambda: flash_attn_func(q, k, v, causal=True, window_size=(100, 0), softmax_scale=0.1,
                                             deterministic=True), dict(causal=True, window_size=(100, 0),
                                                                       softmax_scale=0.1)),
        "defaults": (lambda: flash_attn_func(q, k, v), {}),
    }
    for what, (call, options) in calls.items():
        ref, _ = reference64(q, k, v, **options)
        _expect64(call(), ref, f"flash_attn_func {what}")


def check_flash_attn_varlen_func_against_float64():
    from flashjit import flash_attn_varlen_func
    torch.manual_seed(5)
    lens_q, lens_k = [1, 77, 200], [50, 77, 260]
    cu_q = torch.tensor([0, 1, 78, 278], device="cuda", dtype=torch.int32)
    cu_k = torch.tensor([0, 50, 127, 387], device="cuda", dtype=torch.int32)
    q = torch.randn(278, 8, 64, device="cuda", dtype=BF16)
    k = torch.randn(387, 4, 64, device="cuda", dtype=BF16)
    v = torch.randn_like(k)
    for what, call, options in [
            ("positional", lambda: flash_attn_varlen_func(q, k, v, cu_q, cu_k, 200, 260, 0.0, None, True),
             dict(causal=True)),
            ("keywords", lambda: flash_attn_varlen_func(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=200,
                                                        max_seqlen_k=260, window_size=(32, 8), softmax_scale=0.2),
             dict(window_size=(32, 8), softmax_scale=0.2))]:
        o = call()
        for b in range(3):
            qb = q[cu_q[b]:cu_q[b + 1]][None]
            kb, vb = k[cu_k[b]:cu_k[b + 1]][None], v[cu_k[b]:cu_k[b + 1]][None]
            ref, _ = reference64(qb, kb, vb, **options)
            _expect64(o[cu_q[b]:cu_q[b + 1]][None], ref, f"flash_attn_varlen_func {what}, sequence {b}")


def _kvcache_reference(q, k_cache, v_cache, lens, causal, window_size, table=None, softmax_scale=None):
    """float64 O and LSE of flash_attn_with_kvcache's problem over the first lens[b] keys of each sequence."""
    outs, lses = [], []
    for b in range(q.shape[0]):
        n = int(lens[b])
        if table is None:
            kb, vb = k_cache[b, :n], v_cache[b, :n]
        else:
            page = k_cache.shape[1]
            pages = table[b, :(n + page - 1) // page].long()
            kb = k_cache[pages].reshape(-1, *k_cache.shape[2:])[:n]
            vb = v_cache[pages].reshape(-1, *v_cache.shape[2:])[:n]
        o, lse = reference64(q[b:b + 1], kb[None], vb[None], causal, window_size, softmax_scale)
        outs.append(o)
        lses.append(lse)
    return torch.cat(outs), torch.cat(lses)


def check_flash_attn_with_kvcache_against_float64():
    from flashjit import flash_attn_with_kvcache
    torch.manual_seed(6)
    b, hq, hkv, d, cap = 2, 16, 4, 128, 700
    lens = torch.tensor([300, 611], device="cuda", dtype=torch.int32)
    q1 = torch.randn(b, 1, hq, d, device="cuda", dtype=BF16)
    q4 = torch.randn(b, 4, hq, d, device="cuda", dtype=BF16)
    k_cache = torch.randn(b, cap, hkv, d, device="cuda", dtype=BF16)
    v_cache = torch.randn_like(k_cache)
    # No new keys: positional (q, k_cache, v_cache, k, v, rotary_cos, rotary_sin, cache_seqlens) and keywords.
    o = flash_attn_with_kvcache(q1, k_cache, v_cache, None, None, None, None, lens)
    _expect64(o, _kvcache_reference(q1, k_cache, v_cache, lens, False, (-1, -1))[0], "kvcache positional")
    o, lse = flash_attn_with_kvcache(q4, k_cache, v_cache, cache_seqlens=lens, causal=True, window_size=(128, 0),
                                     return_softmax_lse=True, num_splits=3)
    ref, ref_lse = _kvcache_reference(q4, k_cache, v_cache, lens, True, (128, 0))
    _expect64(o, ref, "kvcache keywords, window", lse, ref_lse)
    o = flash_attn_with_kvcache(q1, k_cache, v_cache, cache_seqlens=650, softmax_scale=0.07)
    full = torch.full((b,), 650, device="cuda", dtype=torch.int32)
    ref, _ = _kvcache_reference(q1, k_cache, v_cache, full, False, (-1, -1), softmax_scale=0.07)
    _expect64(o, ref, "kvcache int cache_seqlens and scale")
    # New keys appended at cache_seqlens, then attended to (contiguous cache).
    k_new = torch.randn(b, 4, hkv, d, device="cuda", dtype=BF16)
    v_new = torch.randn_like(k_new)
    before = k_cache.clone()
    o = flash_attn_with_kvcache(q4, k_cache, v_cache, k_new, v_new, cache_seqlens=lens, causal=True)
    for i in range(b):
        n = int(lens[i])
        assert torch.equal(k_cache[i, n:n + 4], k_new[i]) and torch.equal(v_cache[i, n:n + 4], v_new[i])
        assert torch.equal(k_cache[i, :n], before[i, :n]) and torch.equal(k_cache[i, n + 4:], before[i, n + 4:])
    _expect64(o, _kvcache_reference(q4, k_cache, v_cache, lens + 4, True, (-1, -1))[0], "kvcache append")
    # Paged: block_table, appended through the table.
    page, max_pages = 16, 48
    pages = torch.randn(b * max_pages + 5, page, hkv, d, device="cuda", dtype=BF16)
    v_pages = torch.randn_like(pages)
    table = torch.randperm(b * max_pages + 5, device="cuda")[:b * max_pages].reshape(b, max_pages).to(torch.int32)
    o, lse = flash_attn_with_kvcache(q4, pages, v_pages, k_new, v_new, cache_seqlens=lens, block_table=table,
                                     causal=True, return_softmax_lse=True)
    ref, ref_lse = _kvcache_reference(q4, pages, v_pages, lens + 4, True, (-1, -1), table)
    _expect64(o, ref, "kvcache paged append", lse, ref_lse)


def check_select_for_the_device_arch_matches_the_device():
    arch = flashjit.select((1, 128, 8, 64))["arch"]  # the device's, as the dispatcher names it (sm_90a on an H200)
    sms, gpu = torch.cuda.get_device_properties(0).multi_processor_count, torch.cuda.get_device_name()
    for shapes, options in [(((1, 4096, 32, 128), (1, 4096, 8, 128)), dict(causal=True)),
                            (((1, 128, 8, 64), None), dict(window_size=(32, 0))),
                            (((2, 333, 8, 256), (2, 500, 8, 256)), dict(chunk_size=64, varlen=True))]:
        on_device = flashjit.select(*shapes, **options)
        assert flashjit.select(*shapes, **options, arch=arch, sms=sms, gpu=gpu) == on_device, (shapes, options)
    for q_shape, cache, extra in [((1, 1, 32, 128), (1, 32768, 8, 128), {}),
                                  ((16, 4, 32, 128), (4096, 16, 8, 128), dict(page_table_shape=(16, 256))),
                                  ((8, 1, 8, 64), (8, 2048, 8, 64), dict(window_size=(256, 0)))]:
        on_device = flashjit.select_decode(q_shape, cache, **extra)
        assert flashjit.select_decode(q_shape, cache, **extra, arch=arch, sms=sms, gpu=gpu) == on_device, q_shape
        if on_device["combine"] is not None:
            assert on_device["num_splits"] > 1 and on_device["workspace_bytes"] > 0


CHECKS = [check_compile_block_matches_eager_without_graph_breaks,
          check_compile_bias_block_masks_and_snippets_match_eager, check_compile_varlen_and_merge,
          check_export_matches_eager, check_inputs_that_require_grad_are_refused,
          check_flash_attn_func_against_float64, check_flash_attn_varlen_func_against_float64,
          check_flash_attn_with_kvcache_against_float64, check_select_for_the_device_arch_matches_the_device]
