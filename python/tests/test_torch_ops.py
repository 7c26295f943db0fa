"""The custom ops without a GPU (skipped without torch): torch.compile(fullgraph=True) and torch.export trace
flashjit's functions as flashjit::attention, attention_varlen, decode and merge on meta and fake CUDA tensors, in one
graph; the fake implementations run the checks and give the outputs' shapes; inputs that require grad are
refused; flash_attn_with_kvcache's append of new keys (torch indexing, on CPU tensors here)."""
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import flashjit  # noqa: E402
from flashjit import _flash_attn  # noqa: E402

PYTHON_DIR = Path(__file__).resolve().parents[1]
META = "meta"
BF16 = torch.bfloat16


def tensors(device=META, b=2, s=64, hq=8, hkv=2, d=64, cache=256):
    def t(*shape, dtype=BF16):
        return torch.empty(*shape, dtype=dtype, device=device)
    return (t(b, s, hq, d), t(b, s, hkv, d), t(b, s, hkv, d), t(b, cache, hkv, d), t(b, cache, hkv, d),
            t(b, dtype=torch.int32))


def block(q, k, v, k_cache, v_cache, lens):
    o = flashjit.attention(q, k, v, causal=True, window_size=(16, 0), config={"algorithm": "fa2"})
    chunked = torch.empty_like(q)
    flashjit.attention(q, k, v, out=chunked, chunk_size=32)
    d, lse = flashjit.decode(q[:, -1:], k_cache, v_cache, lens, window_size=(64, 0), return_lse=True)
    m = flashjit.merge([d, d], [lse, lse])
    f = flashjit.flash_attn_func(q, k, v, 0.0, None, True)
    g = flashjit.flash_attn_with_kvcache(q[:, -2:], k_cache, v_cache, k[:, -2:], v[:, -2:], cache_seqlens=lens,
                                         causal=True)
    packed = q.reshape(-1, *q.shape[2:])
    cu = torch.zeros(q.shape[0] + 1, dtype=torch.int32, device=q.device)
    pv = flashjit.flash_attn_varlen_func(packed, k.reshape(-1, *k.shape[2:]), v.reshape(-1, *v.shape[2:]), cu, cu,
                                         q.shape[1], k.shape[1], causal=True)
    return o.sum() + chunked.sum() + m.sum() + f.sum() + g.sum() + pv.sum()


OPS = ["flashjit.attention.default", "flashjit.decode.default", "flashjit.merge.default",
       "flashjit.attention_varlen.default"]


def test_the_ops_are_registered():
    """At flashjit's import when torch was imported first, else when the ops module is first imported (here)."""
    from flashjit import _ops  # noqa: F401
    for name in ("attention", "attention_varlen", "decode", "merge"):
        assert hasattr(torch.ops.flashjit, name)


def test_explain_finds_one_graph_without_breaks():
    torch._dynamo.reset()
    explained = torch._dynamo.explain(block)(*tensors())
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons
    targets = {str(n.target) for g in explained.graphs for n in g.graph.nodes}
    assert {op.removesuffix(".default") for op in OPS} <= targets


@pytest.mark.parametrize("dynamic", [False, True])
def test_compile_fullgraph_runs_on_meta_tensors(dynamic):
    torch._dynamo.reset()
    out = torch.compile(block, fullgraph=True, backend="eager", dynamic=dynamic)(*tensors())
    assert out.device.type == META and out.shape == ()


def test_export_holds_the_ops_and_dynamic_shapes():
    class Block(torch.nn.Module):
        def forward(self, *a):
            return block(*a)

    exported = torch.export.export(Block(), tensors())
    assert set(OPS) <= {str(n.target) for n in exported.graph.nodes}
    seq = torch.export.Dim("seq", min=2, max=4096)

    class Attention(torch.nn.Module):
        def forward(self, q, k, v):
            return flashjit.attention(q, k, v, causal=True, return_lse=True)

    q, k, v = tensors()[:3]
    dynamic = torch.export.export(Attention(), (q, k, v), dynamic_shapes=({1: seq}, {1: seq}, {1: seq}))
    o, lse = dynamic.module()(*tensors(s=300)[:3])
    assert o.shape == (2, 300, 8, 64) and lse.shape == (2, 8, 300)


def test_fake_cuda_tensors_get_the_outputs_shapes_and_the_checks():
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        q, k, v, k_cache, v_cache, lens = tensors("cuda")
        o, lse = flashjit.attention(q, k, v, return_lse=True)
        assert o.shape == q.shape and o.dtype == q.dtype and lse.shape == (2, 8, 64) and lse.dtype == torch.float32
        assert o.device.type == "cuda"
        o, lse = flashjit.decode(q[:, :3], k_cache, v_cache, lens, return_lse=True)
        assert o.shape == (2, 3, 8, 64) and lse.shape == (2, 8, 3)
        cu = torch.zeros(3, dtype=torch.int32, device="cuda")
        o, lse = flashjit.attention_varlen(q[0], k[0], v[0], cu, cu, 64, 64, return_lse=True)
        assert o.shape == (64, 8, 64) and lse.shape == (8, 64)
        with pytest.raises(ValueError, match="k: head_dim 32 differs from q's 64"):
            flashjit.attention(q, k[..., :32], v[..., :32])
        with pytest.raises(ValueError, match="seqlens_k: dtype torch.int64 must be torch.int32"):
            flashjit.decode(q[:, :1], k_cache, v_cache, lens.long())
        with pytest.raises(ValueError, match="window_size must be"):
            flashjit.attention(q, k, v, window_size=(-5, 0))


def test_meta_tensors_in_eager_go_through_the_fake_implementations():
    q, k, v, k_cache, v_cache, lens = tensors()
    o, lse = flashjit.attention(q, k, v, return_lse=True)
    assert o.device.type == META and lse.shape == (2, 8, 64)
    out = torch.empty_like(q)
    assert flashjit.attention(q, k, v, out=out) is out
    with pytest.raises(ValueError, match="flashjit.attention\\(stream=...\\) cannot be traced"):
        flashjit.attention(q, k, v, stream=0)


def test_cpu_tensors_are_refused_by_the_eager_checks():
    q, k, v = tensors("cpu")[:3]
    with pytest.raises(ValueError, match="q must be a CUDA tensor, got one on cpu"):
        flashjit.attention(q, k, v)


def test_inputs_that_require_grad_are_refused():
    q, k, v, k_cache, v_cache, lens = tensors()
    k.requires_grad_(True)
    with pytest.raises(RuntimeError, match="flashjit.attention is forward only .*: k require grad; call it under "
                                           "torch.no_grad"):
        flashjit.attention(q, k, v)
    with pytest.raises(RuntimeError, match="forward only"):
        flashjit.flash_attn_func(q, k, v)
    with pytest.raises(RuntimeError, match="flashjit.decode is forward only"):
        flashjit.decode(q[:, :1], k_cache.requires_grad_(True), v_cache, lens)
    with torch.no_grad():
        assert flashjit.attention(q, k, v).shape == q.shape
    torch._dynamo.reset()
    with pytest.raises(Exception, match="forward only"):
        torch.compile(lambda q, k, v: flashjit.attention(q, k, v), backend="eager")(q, k, v)


def test_the_old_window_keywords_warn_under_the_new_name():
    q, k, v, k_cache, v_cache, lens = tensors()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        flashjit.attention(q, k, v, window=(8, 8))
        flashjit.decode(q[:, :1], k_cache, v_cache, lens, window_left=8)
    messages = [str(w.message) for w in caught if w.category is DeprecationWarning]
    assert any("attention(window=...) is deprecated: pass window_size" in m for m in messages), messages
    assert any("decode(window_left=...) is deprecated" in m for m in messages), messages


def test_ops_registered_when_flashjit_is_imported_before_torch():
    """The first traced call imports the ops module itself; the registration is not part of the trace."""
    code = ("import flashjit, sys; assert 'torch' not in sys.modules; import torch\n"
            "q = torch.empty(1, 8, 2, 64, dtype=torch.bfloat16, device='meta')\n"
            "e = torch._dynamo.explain(lambda q: flashjit.attention(q, q, q, out=torch.empty_like(q)))(q)\n"
            "print(e.graph_count, e.graph_break_count)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(PYTHON_DIR), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "0"], done.stdout + done.stderr


@pytest.mark.parametrize("paged", [False, True])
def test_kvcache_append_writes_the_new_keys_at_the_lengths(paged):
    b, new, hkv, d = 2, 3, 2, 8
    lens = torch.tensor([5, 17], dtype=torch.int32)
    k, v = torch.randn(b, new, hkv, d), torch.randn(b, new, hkv, d)
    if paged:
        page = 4
        table = torch.tensor([[7, 1, 3, 0, 2, 9], [4, 8, 6, 5, 10, 11]], dtype=torch.int32)
        k_cache, v_cache = torch.zeros(12, page, hkv, d), torch.zeros(12, page, hkv, d)
        _flash_attn._append(k_cache, v_cache, k, v, lens, table)
        for i in range(b):
            for s in range(new):
                pos = int(lens[i]) + s
                assert torch.equal(k_cache[table[i, pos // page], pos % page], k[i, s])
                assert torch.equal(v_cache[table[i, pos // page], pos % page], v[i, s])
        assert int((k_cache != 0).any(dim=(2, 3)).sum()) == b * new
    else:
        k_cache, v_cache = torch.zeros(b, 24, hkv, d), torch.zeros(b, 24, hkv, d)
        _flash_attn._append(k_cache, v_cache, k, v, lens, None)
        for i in range(b):
            n = int(lens[i])
            assert torch.equal(k_cache[i, n:n + new], k[i]) and torch.equal(v_cache[i, n:n + new], v[i])
        assert int((k_cache != 0).any(dim=(2, 3)).sum()) == b * new


def test_kvcache_needs_causal_for_several_queries():
    q, k, v, k_cache, v_cache, lens = tensors()
    with pytest.raises(NotImplementedError, match="causal among the new queries; pass causal=True"):
        flashjit.flash_attn_with_kvcache(q[:, :4], k_cache, v_cache, cache_seqlens=lens)
    with pytest.raises(ValueError, match="pass k and v together"):
        flashjit.flash_attn_with_kvcache(q[:, :1], k_cache, v_cache, k[:, :1], cache_seqlens=lens)
    with pytest.raises(ValueError, match="pass cache_seqlens"):
        flashjit.flash_attn_with_kvcache(q[:, :1], k_cache, v_cache, k[:, :1], v[:, :1])
    o = flashjit.flash_attn_with_kvcache(q[:, :1], k_cache, v_cache, cache_seqlens=7)
    assert o.shape == (2, 1, 8, 64)
    traced = flashjit._attention._traced_tensors
    assert traced("f", ("q",), q)  # meta
    assert not traced("f", ("q", "out"), torch.empty(1), None)
    with pytest.raises(RuntimeError, match="flashjit.f is forward only .*: lses\\[1\\] require grad"):
        traced("f", lambda: ("outs[0]", "lses[1]"), torch.empty(1), torch.empty(1, requires_grad=True), grads=2)
    assert not traced("f", ("q", "k", "v", "out"), *(torch.empty(1),) * 3, torch.empty(1, requires_grad=True))


def test_op_schemas_take_the_variants_with_defaults():
    from flashjit import _ops
    ops = _ops.ops()
    for name in ("attention", "attention_varlen", "decode"):
        schema = str(getattr(ops, name).default._schema)
        assert "float softcap=0." in schema and "Tensor? alibi_slopes=None" in schema and "Tensor? sinks=None" in schema, \
            schema
    q, k, v = tensors()[:3]
    # An op call without the variant arguments (a graph exported before them) takes the defaults.
    o, lse = ops.attention(q, k, v, False, -1, -1, 0, None, True, None)
    assert o.shape == q.shape and lse.shape == (2, 8, 64)


def variant_tensors(device=META, b=2, hq=8):
    return (torch.empty(hq, dtype=torch.float32, device=device), torch.empty(b, hq, dtype=torch.float32, device=device))


def variant_block(q, k, v, k_cache, v_cache, lens, heads, per_batch):
    o = flashjit.attention(q, k, v, causal=True, softcap=30.0, alibi_slopes=per_batch, sinks=heads)
    f = flashjit.flash_attn_func(q, k, v, 0.0, None, True, (-1, -1), 50.0, heads, learnable_sink=heads)
    packed = q.reshape(-1, *q.shape[2:])
    cu = torch.zeros(q.shape[0] + 1, dtype=torch.int32, device=q.device)
    pv = flashjit.attention_varlen(packed, k.reshape(-1, *k.shape[2:]), v.reshape(-1, *v.shape[2:]), cu, cu,
                                   q.shape[1], k.shape[1], alibi_slopes=per_batch, sinks=heads)
    d, lse = flashjit.decode(q[:, -1:], k_cache, v_cache, lens, softcap=20.0, sinks=heads, return_lse=True)
    return o.sum() + f.sum() + pv.sum() + d.sum() + lse.sum()


def test_variants_trace_into_one_graph():
    torch._dynamo.reset()
    args = (*tensors(), *variant_tensors())
    explained = torch._dynamo.explain(variant_block)(*args)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons
    out = torch.compile(variant_block, fullgraph=True, backend="eager")(*args)
    assert out.device.type == META

    class Block(torch.nn.Module):
        def forward(self, *a):
            return variant_block(*a)

    exported = torch.export.export(Block(), args)
    nodes = [n for n in exported.graph.nodes if str(n.target) == "flashjit.attention.default"]
    assert nodes and any(isinstance(a, float) and a == 30.0 for a in nodes[0].args), nodes[0].args


def test_fake_implementations_check_the_variants():
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        q, k, v, k_cache, v_cache, lens = tensors("cuda")
        heads, per_batch = variant_tensors("cuda")
        o, lse = flashjit.attention(q, k, v, softcap=30.0, alibi_slopes=per_batch, sinks=heads, return_lse=True)
        assert o.shape == q.shape and lse.shape == (2, 8, 64)  # sinks change no shape
        with pytest.raises(ValueError, match="sinks: dtype torch.bfloat16 must be torch.float32"):
            flashjit.attention(q, k, v, sinks=heads.bfloat16())
        with pytest.raises(ValueError, match="alibi_slopes must have shape \\[8\\] \\(heads_q\\) or \\[2, 8\\]"):
            flashjit.attention(q, k, v, alibi_slopes=per_batch[:, :4])
        with pytest.raises(ValueError, match="softcap must be >= 0"):
            flashjit.decode(q[:, :1], k_cache, v_cache, lens, softcap=-1.0)
        with pytest.raises(ValueError, match="sinks must have shape \\[8\\]"):
            cu = torch.zeros(3, dtype=torch.int32, device="cuda")
            flashjit.attention_varlen(q[0], k[0], v[0], cu, cu, 64, 64, sinks=per_batch)
    q, k, v = tensors()[:3]
    with pytest.raises(ValueError, match="alibi_slopes must be a CUDA tensor"):
        flashjit.attention(q, k, v, alibi_slopes=torch.zeros(8))  # meta q, CPU slopes


def paged_tensors(device=META, b=2, s=64, hq=8, hkv=2, d=64, pages=20, page=16, max_pages=8):
    """q [b, s, hq, d], packed q [b * s, hq, d], pools [pages, page, hkv, d], table [b, max_pages], seqused_k [b],
    cu_seqlens_q [b + 1]."""
    def t(*shape, dtype=BF16):
        return torch.empty(*shape, dtype=dtype, device=device)
    return (t(b, s, hq, d), t(b * s, hq, d), t(pages, page, hkv, d), t(pages, page, hkv, d),
            t(b, max_pages, dtype=torch.int32), t(b, dtype=torch.int32), t(b + 1, dtype=torch.int32))


def paged_block(q, packed, k_pages, v_pages, table, used, cu_q):
    o = flashjit.attention(q, k_pages, v_pages, causal=True, page_table=table, seqused_k=used)
    pv, lse = flashjit.attention_varlen(packed, k_pages, v_pages, cu_q, None, q.shape[1], 128, page_table=table,
                                        seqused_k=used, return_lse=True)
    # flash-attn 2's paged varlen: key counts from cu_seqlens_k, derived with torch ops inside the graph.
    fa = flashjit.flash_attn_varlen_func(packed, k_pages, v_pages, cu_q, cu_q, q.shape[1], 128, causal=True,
                                         block_table=table)
    return o.sum() + pv.sum() + lse.sum() + fa.sum()


def test_paged_calls_trace_into_one_graph():
    torch._dynamo.reset()
    args = paged_tensors()
    explained = torch._dynamo.explain(paged_block)(*args)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons
    for dynamic in (False, True):
        torch._dynamo.reset()
        out = torch.compile(paged_block, fullgraph=True, backend="eager", dynamic=dynamic)(*args)
        assert out.device.type == META

    class Block(torch.nn.Module):
        def forward(self, *a):
            return paged_block(*a)

    exported = torch.export.export(Block(), args)
    targets = [str(n.target) for n in exported.graph.nodes]
    assert "flashjit.attention.default" in targets and targets.count("flashjit.attention_varlen.default") == 2


def test_paged_fake_implementations_give_shapes_and_checks():
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        q, packed, k_pages, v_pages, table, used, cu_q = paged_tensors("cuda")
        v_narrow = v_pages[..., :32].contiguous()
        o, lse = flashjit.attention(q, k_pages, v_narrow, page_table=table, seqused_k=used, return_lse=True)
        assert o.shape == (2, 64, 8, 32) and lse.shape == (2, 8, 64)
        o, lse = flashjit.attention_varlen(packed, k_pages, v_narrow, cu_q, None, 64, 100, page_table=table,
                                           seqused_k=used, return_lse=True)
        assert o.shape == (128, 8, 32) and lse.shape == (8, 128)
        with pytest.raises(ValueError, match="page_table: dtype torch.int64 must be torch.int32"):
            flashjit.attention(q, k_pages, v_pages, page_table=table.long(), seqused_k=used)
        with pytest.raises(ValueError, match="page_table needs seqused_k"):
            flashjit.attention(q, k_pages, v_pages, page_table=table)
        with pytest.raises(ValueError, match="cu_seqlens_k must be None with page_table"):
            flashjit.attention_varlen(packed, k_pages, v_pages, cu_q, cu_q, 64, 100, page_table=table, seqused_k=used)
        with pytest.raises(ValueError, match="page_table: the last dimension must be contiguous"):
            flashjit.attention(q, k_pages, v_pages, page_table=table.t().contiguous().t(), seqused_k=used)
        with pytest.raises(ValueError, match="max_seqlen_k 129 exceeds"):
            flashjit.attention_varlen(packed, k_pages, v_pages, cu_q, None, 64, 129, page_table=table, seqused_k=used)


def test_op_schemas_take_the_pages_with_defaults():
    from flashjit import _ops
    ops = _ops.ops()
    for name in ("attention", "attention_varlen"):
        schema = str(getattr(ops, name).default._schema)
        assert "Tensor? page_table=None" in schema and "Tensor? seqused_k=None" in schema, schema
    assert "Tensor? cu_seqlens_k" in str(ops.attention_varlen.default._schema)


def test_flash_attn_key_counts_are_the_offsets_differences():
    cu, q = torch.tensor([0, 5, 5, 17], dtype=torch.int32), torch.empty(17, 8, 64, dtype=BF16)
    counts = _flash_attn._key_counts(cu, q)
    assert counts.dtype == torch.int32 and counts.tolist() == [5, 0, 12] and counts.is_contiguous()
    # Offsets that give no valid counts are named as cu_seqlens_k (the caller never passed a seqused_k).
    with pytest.raises(ValueError, match="cu_seqlens_k: dtype torch.int64 must be torch.int32"):
        _flash_attn._key_counts(cu.long(), q)
    with pytest.raises(ValueError, match="cu_seqlens_k is on cpu but q is on meta"):
        _flash_attn._key_counts(cu, q.to(META))


DOCS = "__device__ bool mask_mod(int b, int h, int q, int k, const flashjit::ModContext& ctx) {\n" \
       "  const int* d = ctx.pointer<int>(0);\n  return d[q] == d[k];\n}\n"
SCALE = "__device__ float score_mod(float s, int b, int h, int q, int k, const flashjit::ModContext& ctx) {\n" \
        "  return s * ctx.scalar(0) + ctx.integer(0);\n}\n"


def mod_tensors(device=META, b=2, s=64, hq=8, nq=1, nk=1):
    """A bias [b, hq, s, s] (bf16), a flashjit.BlockMask of int32 lists [1, hq, nq(, nk)], document ids int32 [s], a
    relative-logits table float32 [hq, 2s - 1]."""
    def t(*shape, dtype=torch.int32):
        return torch.empty(*shape, dtype=dtype, device=device)
    mask = flashjit.BlockMask(t(1, hq, nq), t(1, hq, nq, nk), t(1, hq, nq), t(1, hq, nq, nk), (128, 128), (s, s))
    return t(b, hq, s, s, dtype=BF16), mask, t(s), t(hq, 2 * s - 1, dtype=torch.float32)


def mod_block(q, k, v, k_cache, v_cache, lens, bias, mask, ids, table):
    o = flashjit.attention(q, k, v, causal=True, bias=bias, rel_bias=table, rel_bias_offset=q.shape[1] - 1)
    m = flashjit.attention(q, k, v, causal=True, block_mask=mask, mask_mod=DOCS, aux_tensors=[ids])
    s = flashjit.attention(q, k, v, score_mod=SCALE, aux_scalars=[0.5], aux_integers=[1], alignment="top_left")
    packed = q.reshape(-1, *q.shape[2:])
    cu = torch.zeros(q.shape[0] + 1, dtype=torch.int32, device=q.device)
    pv = flashjit.attention_varlen(packed, k.reshape(-1, *k.shape[2:]), v.reshape(-1, *v.shape[2:]), cu, cu,
                                   q.shape[1], k.shape[1], bias=bias, mask_mod=DOCS, aux_tensors=[ids], rel_bias=table)
    d = flashjit.decode(q[:, -1:], k_cache, v_cache, lens, bias=bias[:, :, :1, :1], score_mod=SCALE,
                        aux_scalars=[2.0], aux_integers=[0])
    return o.sum() + m.sum() + s.sum() + pv.sum() + d.sum()


def test_bias_block_masks_and_snippets_trace_into_one_graph():
    torch._dynamo.reset()
    args = (*tensors(), *mod_tensors())
    explained = torch._dynamo.explain(mod_block)(*args)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons
    for dynamic in (False, True):
        torch._dynamo.reset()
        assert torch.compile(mod_block, fullgraph=True, backend="eager", dynamic=dynamic)(*args).device.type == META

    class Block(torch.nn.Module):
        def forward(self, *a):
            return mod_block(*a)

    exported = torch.export.export(Block(), args)
    calls = [n for n in exported.graph.nodes if str(n.target).startswith("flashjit.")]

    def named(n):  # the call's arguments by name (export passes them positionally)
        return {**{a.name: x for a, x in zip(n.target._schema.arguments, n.args)}, **n.kwargs}
    kwargs = [named(n) for n in calls]
    assert [str(n.target) for n in calls] == ["flashjit.attention.default"] * 3 + ["flashjit.attention_varlen.default",
                                                                                   "flashjit.decode.default"]
    assert kwargs[0].get("bias") is not None and kwargs[0].get("bm_kv_indices") is None
    assert kwargs[0]["rel_bias"] is not None and kwargs[0]["rel_bias_offset"] == 63 and kwargs[1]["rel_bias"] is None
    assert kwargs[1]["bm_kv_indices"] is not None and kwargs[1]["bm_q_block"] == 128
    assert kwargs[1]["mask_mod"] == DOCS and kwargs[1]["aux0"] is not None and kwargs[1].get("aux1") is None
    assert (kwargs[2]["score_mod"], list(kwargs[2]["aux_scalars"]), list(kwargs[2]["aux_integers"]),
            kwargs[2]["alignment"]) == (SCALE, [0.5], [1], "top_left")
    assert kwargs[3]["bias"] is not None and kwargs[3]["mask_mod"] == DOCS and kwargs[3]["rel_bias"] is not None
    assert "alignment" not in kwargs[4] and list(kwargs[4]["aux_scalars"]) == [2.0] and kwargs[4]["bias"] is not None


def test_fake_implementations_check_bias_block_masks_and_snippets():
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        q, k, v, k_cache, v_cache, lens = tensors("cuda")
        bias, mask, ids, table = mod_tensors("cuda")
        o, lse = flashjit.attention(q, k, v, bias=bias[:1, :, :, :], block_mask=mask, mask_mod=DOCS,
                                    aux_tensors=[ids], return_lse=True)
        assert o.shape == q.shape and lse.shape == (2, 8, 64)
        with pytest.raises(ValueError, match="bias: shape \\[2, 8, 64, 32\\] does not broadcast"):
            flashjit.attention(q, k, v, bias=bias[..., :32])
        with pytest.raises(ValueError, match="bias: dtype torch.int32 must be"):
            flashjit.attention(q, k, v, bias=ids)
        wide = flashjit.BlockMask(mask.kv_num_blocks[:, :4], mask.kv_indices[:, :4], None, None, (128, 128), (64, 64))
        with pytest.raises(ValueError, match="block_mask is for 4 heads, the call has 8 query heads"):
            flashjit.attention(q, k, v, block_mask=wide)
        with pytest.raises(ValueError, match="block_mask must be a flashjit.BlockMask"):
            flashjit.attention(q, k, v, block_mask=object())
        with pytest.raises(ValueError, match="aux_scalars\\[0\\] must be a finite number"):
            flashjit.attention(q, k, v, score_mod=SCALE, aux_scalars=[float("inf")])
        with pytest.raises(ValueError, match="aux_tensors\\[0\\] must be a CUDA tensor, got one on cpu"):
            flashjit.attention(q, k, v, mask_mod=DOCS, aux_tensors=[torch.empty(4, device="cpu")])
        with pytest.raises(ValueError, match="bias: shape"):
            flashjit.decode(q[:, -1:], k_cache, v_cache, lens, bias=bias)
        o = flashjit.attention(q, k, v, rel_bias=table[:1], rel_bias_offset=-5)
        assert o.shape == q.shape
        with pytest.raises(ValueError, match="rel_bias: dtype torch.bfloat16 must be torch.float32"):
            flashjit.attention(q, k, v, rel_bias=table.bfloat16())
        with pytest.raises(ValueError, match="rel_bias_offset \\(3\\) is set but rel_bias is None"):
            flashjit.attention(q, k, v, rel_bias_offset=3)
        with pytest.raises(ValueError, match="rel_bias_offset must be"):
            flashjit.attention(q, k, v, rel_bias=table, rel_bias_offset=1.5)


def test_op_schemas_take_bias_block_masks_and_snippets_with_defaults():
    from flashjit import _ops
    ops = _ops.ops()
    for name in ("attention", "attention_varlen", "decode"):
        schema = str(getattr(ops, name).default._schema)
        for part in ("Tensor? bias=None", "str? score_mod=None", "str? mask_mod=None", "float[]? aux_scalars=None",
                     "Tensor? aux0=None", "Tensor? aux7=None"):
            assert part in schema, (name, part, schema)
        assert ("Tensor? rel_bias=None" in schema) == (name != "decode"), schema
    assert "SymInt bm_q_block=0" in str(ops.attention.default._schema)
    assert 'str alignment="bottom_right"' in str(ops.attention_varlen.default._schema)
