"""Paged prefill on a GPU (attention() and attention_varlen() with page_table= and seqused_k=) against a float64
torch reference computed from a dense copy of each sequence's keys: dense and ragged queries, pages of 1, 2, 16, 64
and 256 tokens, shuffled pages (and tables padded with -1 or 0 past each sequence), causal, full and windowed,
GQA, both dtypes, head dims 64 / 80 / 128 / 256 and 192 / 128, through the dispatcher and with explicit fa2 and
reference (naive) configs. Then: rows without keys (O = 0, LSE = -inf), a page index outside the pool (its keys
read as zeros), vLLM's combined pool (k and v views of one [pages, 2, page, Hkv, D] tensor: a page stride),
flash-attn's names (block_table with FA2's cu_seqlens_k and FA3's seqused_k), CUDA-graph capture and replay with
new lengths and a new table, and torch.compile (fullgraph) of the paged calls. FlashInfer's CSR page tables
(page_indptr / flat page_table, key counts from seqused_k or last_page_len) with shuffled pages and mixed lengths,
bit for bit the dense table's output, compiled and captured.

Used by test_gpu.py under pytest, and runnable without pytest on a GPU machine:
    PYTHONPATH=python python3 python/tests/gpu_paged_checks.py"""
import math
import sys
import zlib
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import flashjit  # noqa: E402
from gpu_checks import (BF16, FP16, cu_seqlens, expect_close, main_of, masked_reference64, named,  # noqa: E402
                        visible_mask)


@dataclass(frozen=True)
class PagedCase:
    lens_q: tuple  # queries per sequence (dense queries: all equal)
    lens_k: tuple  # seqused_k: keys per sequence (0 allowed)
    page_size: int
    heads_q: int
    heads_kv: int
    head_dim: int
    dtype: torch.dtype
    causal: bool = False
    window: tuple = (-1, -1)
    ragged: bool = True  # attention_varlen with cu_seqlens_q; False: attention() with q [B, Sq, Hq, D]
    shuffle: bool = True  # pages in a random order over the pool (False: sequence b's pages in order)
    pad: int = -1  # the table's entries past each sequence's pages
    config: str = ""  # "": the dispatcher; "fa2", "naive": that algorithm
    head_dim_v: int = 0  # v's head dim when it differs
    hnd: bool = False  # FlashInfer's HND pools [num_pages, Hkv, page, D], passed as their transpose(1, 2) view
    csr: str = ""  # FlashInfer's CSR table (attention_varlen): "seqused" (counts from seqused_k) or "last" (last_page_len)

    def __str__(self):
        mask = ("causal" if self.causal else "full") + ("" if self.window == (-1, -1) else
                                                        f"-w{self.window[0]},{self.window[1]}")
        dims = f"D{self.head_dim}" + (f"-Dv{self.head_dim_v}" if self.head_dim_v else "")
        return (f"paged{self.page_size}-{'varlen' if self.ragged else 'dense'}-q{','.join(map(str, self.lens_q))}-"
                f"k{','.join(map(str, self.lens_k))}-H{self.heads_q}/{self.heads_kv}-{dims}-"
                f"{str(self.dtype).replace('torch.', '')}-{mask}{'' if self.shuffle else '-inorder'}-pad{self.pad}-"
                f"{self.config or 'auto'}{'-hnd' if self.hnd else ''}{'-csr-' + self.csr if self.csr else ''}")


# Chunked prefill and prefix caching: each sequence's queries are its last keys (lens_q <= lens_k), plus causal rows
# before the keys start (lens_q > lens_k) and sequences without keys; lengths on and off the page boundaries.
PAGED_CASES = [
    PagedCase((300, 1, 1000, 0, 7), (1000, 17, 4097, 5, 0), 16, 8, 2, 128, BF16, causal=True),
    PagedCase((300, 1, 1000, 7), (1000, 17, 4097, 3), 16, 8, 2, 128, FP16),
    PagedCase((1, 64, 200), (130, 64, 257), 1, 8, 2, 64, BF16, causal=True),
    PagedCase((1, 64, 200), (130, 64, 257), 1, 8, 8, 64, FP16, pad=0),
    PagedCase((512, 17, 300), (512, 1000, 256), 256, 16, 4, 128, FP16, causal=True),
    PagedCase((512, 17, 300), (513, 1000, 255), 256, 4, 1, 256, BF16, shuffle=False),
    PagedCase((128, 128, 128), (128, 700, 2000), 16, 32, 8, 128, BF16, causal=True, ragged=False),
    PagedCase((64, 64), (64, 300), 256, 8, 2, 256, FP16, ragged=False),
    PagedCase((100, 100, 100), (50, 100, 1000), 1, 8, 1, 64, BF16, causal=True, window=(64, 0), ragged=False),
    PagedCase((300, 7), (1000, 4097), 16, 8, 2, 64, BF16, window=(37, 5)),
    PagedCase((300, 7, 1), (1000, 40, 1), 16, 8, 2, 128, BF16, causal=True, config="fa2"),
    PagedCase((64, 7), (200, 40), 64, 8, 2, 64, FP16, causal=True, config="naive"),
    PagedCase((300, 100), (300, 900), 2, 8, 2, 80, BF16, causal=True),  # fa3 gathers pages under 16 tokens
    PagedCase((300, 1, 1000), (1000, 17, 4097), 16, 8, 2, 128, BF16, causal=True, hnd=True),
    PagedCase((1, 64, 200), (130, 64, 257), 4, 8, 2, 64, BF16, hnd=True),
    PagedCase((300, 7), (1000, 40), 128, 8, 2, 128, BF16, causal=True, config="fa2", hnd=True),
    PagedCase((256, 256), (600, 256), 64, 16, 16, 192, BF16, causal=True, ragged=False, head_dim_v=128),
    # FlashInfer's CSR tables: mixed lengths (last pages partly full, a sequence without pages), shuffled pages.
    PagedCase((1, 7, 300, 1000, 0), (1, 7, 300, 4097, 0), 16, 8, 2, 128, BF16, causal=True, csr="last"),
    PagedCase((1, 7, 300, 1000), (1, 7, 300, 4097), 16, 8, 2, 128, FP16, csr="seqused"),
    PagedCase((1, 7, 200), (1, 7, 300), 1, 8, 2, 64, BF16, causal=True, csr="last"),
    PagedCase((1, 7, 300, 512), (1, 7, 300, 4097), 256, 16, 4, 128, BF16, causal=True, window=(100, 0), csr="last"),
    PagedCase((64, 7, 1), (200, 40, 1), 64, 8, 2, 64, FP16, causal=True, config="fa2", csr="last"),
    PagedCase((64, 7, 1), (200, 40, 1), 16, 8, 2, 64, BF16, causal=True, config="naive", csr="seqused"),
]


def paged_pool(case, lens_k, extra_pages=3, generator=None):
    """(k_pool, v_pool [num_pages, page, Hkv, D] (case.hnd: views of [num_pages, Hkv, page, D] storage), table int32
    [B, max_pages] with case.pad past each sequence's pages): every page of the pool random (the unused ones too),
    so that a wrong page shows."""
    page = case.page_size
    needed = [-(-n // page) for n in lens_k]
    max_pages = max(max(needed), 1) + 1  # a column past every sequence
    num_pages = sum(needed) + extra_pages
    dv = case.head_dim_v or case.head_dim
    if case.hnd:
        k = torch.randn(num_pages, case.heads_kv, page, case.head_dim, device="cuda", dtype=case.dtype).transpose(1, 2)
        v = torch.randn(num_pages, case.heads_kv, page, dv, device="cuda", dtype=case.dtype).transpose(1, 2)
    else:
        k = torch.randn(num_pages, page, case.heads_kv, case.head_dim, device="cuda", dtype=case.dtype)
        v = torch.randn(num_pages, page, case.heads_kv, dv, device="cuda", dtype=case.dtype)
    order = torch.randperm(num_pages, generator=generator) if case.shuffle else torch.arange(num_pages)
    table = torch.full((len(lens_k), max_pages), case.pad, dtype=torch.int32)
    used = 0
    for b, n in enumerate(needed):
        table[b, :n] = order[used:used + n].to(torch.int32)
        used += n
    return k, v, table.cuda()


def csr_of(table, lens_k, page_size):
    """FlashInfer's CSR form of a dense table: (page_indptr [B + 1], the flat page indices of each sequence's used
    pages, last_page_len [B] (0 without pages)), int32 on the GPU."""
    needed = [-(-n // page_size) for n in lens_k]
    rows = [table[b, :n] for b, n in enumerate(needed)]
    indptr = torch.tensor([0] + [sum(needed[:b + 1]) for b in range(len(needed))], dtype=torch.int32, device="cuda")
    last = torch.tensor([n - (m - 1) * page_size if m else 0 for n, m in zip(lens_k, needed)], dtype=torch.int32,
                        device="cuda")
    return indptr, torch.cat(rows + [table.new_zeros(1)]).contiguous(), last  # one entry past the last page


def paged_kwargs(case, table, used, lens_k):
    """attention_varlen's page arguments of a case: the dense table with seqused_k, or its CSR form."""
    if not case.csr:
        return dict(page_table=table, seqused_k=used)
    indptr, indices, last = csr_of(table, lens_k, case.page_size)
    counts = dict(seqused_k=used) if case.csr == "seqused" else dict(last_page_len=last)
    return dict(page_table=indices, page_indptr=indptr, **counts)


def gather(pool, table_row, n):
    """The first n keys of a sequence, [n, Hkv, D], from its row of the table (pages outside the pool: zeros)."""
    pages = table_row[:-(-n // pool.shape[1])].long()
    inside = (pages >= 0) & (pages < pool.shape[0])
    dense = pool[pages.clamp(0, pool.shape[0] - 1)] * inside[:, None, None, None].to(pool.dtype)
    return dense.reshape(-1, *pool.shape[2:])[:n]


def paged_reference64(q_rows, k_pool, v_pool, table, lens_q, lens_k, causal, window, softmax_scale=None):
    """float64 O [rows, Hq, Dv] and LSE [Hq, rows] of the sequences' query rows (q_rows [sum(lens_q), Hq, D]), each
    against its keys gathered from the pages, masks bottom-right per sequence; rows without keys: O 0, LSE -inf."""
    hq, dv = q_rows.shape[1], v_pool.shape[-1]
    o = torch.zeros(q_rows.shape[0], hq, dv, device="cuda", dtype=torch.float64)
    lse = torch.full((hq, q_rows.shape[0]), -math.inf, device="cuda", dtype=torch.float64)
    start = 0
    for b, (lq, lk) in enumerate(zip(lens_q, lens_k)):
        if lq and lk:
            k, v = gather(k_pool, table[b], lk), gather(v_pool, table[b], lk)
            visible = visible_mask(lq, lk, causal, window)
            ref_o, ref_lse = masked_reference64(q_rows[None, start:start + lq], k[None], v[None], visible,
                                                softmax_scale)
            o[start:start + lq], lse[:, start:start + lq] = ref_o[0], ref_lse[0]
        start += lq
    return o, lse


def config_of(case):
    return {"algorithm": case.config} if case.config else None


def check_paged_case(case):
    torch.manual_seed(zlib.crc32(str(case).encode()))  # per case, the same in every process
    lens_q, lens_k = case.lens_q, case.lens_k
    k, v, table = paged_pool(case, lens_k)
    used = torch.tensor(lens_k, device="cuda", dtype=torch.int32)
    total_q = sum(lens_q)
    q = torch.randn(total_q, case.heads_q, case.head_dim, device="cuda", dtype=case.dtype)
    ref_o, ref_lse = paged_reference64(q, k, v, table, lens_q, lens_k, case.causal, case.window)
    if case.ragged:
        o, lse = flashjit.attention_varlen(q, k, v, cu_seqlens(lens_q), None, max(lens_q), max(lens_k),
                                           causal=case.causal, window_size=case.window, return_lse=True,
                                           config=config_of(case), **paged_kwargs(case, table, used, lens_k))
        assert o.shape == (total_q, case.heads_q, v.shape[-1]) and lse.shape == (case.heads_q, total_q)
        if case.csr:  # the same kernel over the same pages: the dense table's output, bit for bit
            dense_o = flashjit.attention_varlen(q, k, v, cu_seqlens(lens_q), None, max(lens_q), max(lens_k),
                                                causal=case.causal, window_size=case.window, page_table=table,
                                                seqused_k=used, config=config_of(case))
            assert torch.equal(o, dense_o), f"{case}: the CSR table's output differs from the dense table's"
    else:
        assert len(set(lens_q)) == 1, "dense queries: one length"
        b, sq = len(lens_q), lens_q[0]
        dense_q = q.view(b, sq, case.heads_q, case.head_dim)
        o, lse = flashjit.attention(dense_q, k, v, causal=case.causal, window_size=case.window, page_table=table,
                                    seqused_k=used, return_lse=True, config=config_of(case))
        assert o.shape == (b, sq, case.heads_q, v.shape[-1]) and lse.shape == (b, case.heads_q, sq)
        o = o.reshape(total_q, case.heads_q, -1)
        lse = lse.transpose(0, 1).reshape(case.heads_q, total_q)
    assert o.dtype == case.dtype and lse.dtype == torch.float32
    expect_close(o, lse, ref_o, ref_lse, case.dtype, str(case))
    empty = torch.isneginf(ref_lse).T
    assert (o[empty] == 0).all(), f"{case}: rows without keys are not 0"


# -- single checks ---------------------------------------------------------------------------------------------

def check_page_outside_the_pool_reads_as_zeros():
    """A table entry past the pool (or negative) inside a sequence's length is never dereferenced: those keys are
    zeros (a score of 0, a value of 0), as the reference gathers them."""
    case = PagedCase((200, 50), (300, 100), 16, 8, 2, 128, BF16, causal=True)
    k, v, table = paged_pool(case, case.lens_k)
    table[0, 3] = k.shape[0] + 1000
    table[1, 2] = -7
    used = torch.tensor(case.lens_k, device="cuda", dtype=torch.int32)
    q = torch.randn(sum(case.lens_q), 8, 128, device="cuda", dtype=BF16)
    o = flashjit.attention_varlen(q, k, v, cu_seqlens(case.lens_q), None, 200, 300, causal=True, page_table=table,
                                  seqused_k=used)
    ref_o, _ = paged_reference64(q, k, v, table, case.lens_q, case.lens_k, True, (-1, -1))
    expect_close(o, None, ref_o, None, BF16, "pages outside the pool")


def check_combined_kv_pool_and_out():
    """vLLM's layout: k and v are views of one [pages, 2, page, Hkv, D] pool (page stride 2 * page * Hkv * D), out= a
    NaN-filled tensor, a custom scale; dense and ragged queries."""
    pages, page, hkv, d = 90, 16, 4, 128
    pool = torch.randn(pages, 2, page, hkv, d, device="cuda", dtype=FP16)
    k, v = pool[:, 0], pool[:, 1]
    case = PagedCase((96, 96), (700, 96), page, 16, hkv, d, FP16, causal=True)
    _, _, table = paged_pool(case, case.lens_k, extra_pages=pages - (44 + 6))
    used = torch.tensor(case.lens_k, device="cuda", dtype=torch.int32)
    q = torch.randn(2, 96, 16, d, device="cuda", dtype=FP16)
    ref_o, _ = paged_reference64(q.reshape(-1, 16, d), k, v, table, case.lens_q, case.lens_k, True, (-1, -1), 0.07)
    out = torch.full_like(q, math.nan)
    assert flashjit.attention(q, k, v, causal=True, softmax_scale=0.07, page_table=table, seqused_k=used,
                              out=out) is out
    expect_close(out.reshape(-1, 16, d), None, ref_o, None, FP16, "combined pool, dense queries, out=")
    packed = q.reshape(-1, 16, d)
    o = flashjit.attention_varlen(packed, k, v, cu_seqlens(case.lens_q), None, 96, 700, causal=True,
                                  softmax_scale=0.07, page_table=table, seqused_k=used)
    expect_close(o, None, ref_o, None, FP16, "combined pool, ragged queries")


def check_flash_attn_names_with_block_table():
    """flash_attn_varlen_func(block_table=): FA2's key counts (the differences of cu_seqlens_k) and FA3's seqused_k
    give the same O, which is the reference's."""
    case = PagedCase((100, 1, 300), (400, 33, 300), 16, 8, 2, 64, BF16, causal=True)
    k, v, table = paged_pool(case, case.lens_k)
    q = torch.randn(sum(case.lens_q), 8, 64, device="cuda", dtype=BF16)
    cu_q, cu_k = cu_seqlens(case.lens_q), cu_seqlens(case.lens_k)
    fa2 = flashjit.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 300, 400, causal=True, block_table=table)
    used = torch.tensor(case.lens_k, device="cuda", dtype=torch.int32)
    fa3 = flashjit.flash_attn_varlen_func(q, k, v, cu_q, None, 300, 400, causal=True, block_table=table,
                                          seqused_k=used)
    ref_o, _ = paged_reference64(q, k, v, table, case.lens_q, case.lens_k, True, (-1, -1))
    expect_close(fa2, None, ref_o, None, BF16, "flash_attn_varlen_func block_table + cu_seqlens_k")
    assert torch.equal(fa2, fa3), "block_table with cu_seqlens_k and with seqused_k differ"


def check_paged_graph_capture_and_replay():
    """A warmed-up paged varlen call captured, then replayed after new lengths, new query offsets and a reshuffled
    table are written into the captured tensors: each replay matches the reference of what it read."""
    heads, hkv, d, page = 8, 2, 128, 16
    max_q, max_k, batch, max_pages = 256, 1024, 3, 1024 // 16
    k = torch.randn(batch * max_pages + 5, page, hkv, d, device="cuda", dtype=BF16)
    v = torch.randn_like(k)
    q = torch.randn(batch * max_q, heads, d, device="cuda", dtype=BF16)
    cu_q = torch.zeros(batch + 1, device="cuda", dtype=torch.int32)
    used = torch.zeros(batch, device="cuda", dtype=torch.int32)
    table = torch.zeros(batch, max_pages, device="cuda", dtype=torch.int32)
    out = torch.empty_like(q)

    def write(lens_q, lens_k, seed):
        g = torch.Generator().manual_seed(seed)
        cu_q.copy_(cu_seqlens(lens_q))
        used.copy_(torch.tensor(lens_k, dtype=torch.int32))
        table.copy_(torch.randperm(k.shape[0], generator=g)[:batch * max_pages].view(batch, max_pages).to(torch.int32))

    write((256, 1, 100), (1024, 1, 600), 1)
    flashjit.attention_varlen(q, k, v, cu_q, None, max_q, max_k, causal=True, page_table=table, seqused_k=used,
                              out=out)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        flashjit.attention_varlen(q, k, v, cu_q, None, max_q, max_k, causal=True, page_table=table, seqused_k=used,
                                  out=out)
    for seed, (lens_q, lens_k) in enumerate((((256, 1, 100), (1024, 1, 600)), ((7, 200, 0), (900, 200, 5)),
                                             ((100, 100, 100), (100, 333, 1000))), start=1):
        write(lens_q, lens_k, seed)
        out.fill_(math.nan)
        graph.replay()
        torch.cuda.synchronize()
        ref_o, _ = paged_reference64(q[:sum(lens_q)], k, v, table, lens_q, lens_k, True, (-1, -1))
        expect_close(out[:sum(lens_q)], None, ref_o, None, BF16, f"paged graph replay with {lens_q} / {lens_k}")


def check_paged_calls_compile_fullgraph():
    """torch.compile(fullgraph=True) of attention(page_table=) and of flash_attn_varlen_func(block_table=) with FA2's
    cu_seqlens_k (the key counts taken inside the graph): one graph, the eager results."""
    case = PagedCase((128, 128), (128, 500), 16, 8, 2, 64, BF16, causal=True)
    k, v, table = paged_pool(case, case.lens_k)
    used = torch.tensor(case.lens_k, device="cuda", dtype=torch.int32)
    q = torch.randn(2, 128, 8, 64, device="cuda", dtype=BF16)
    cu_q, cu_k = cu_seqlens(case.lens_q), cu_seqlens(case.lens_k)

    def step(q, k, v, table, used, cu_q, cu_k):
        dense = flashjit.attention(q, k, v, causal=True, page_table=table, seqused_k=used)
        packed = flashjit.flash_attn_varlen_func(q.reshape(-1, 8, 64), k, v, cu_q, cu_k, 128, 500, causal=True,
                                                 block_table=table)
        return dense, packed

    torch._dynamo.reset()
    explained = torch._dynamo.explain(step)(q, k, v, table, used, cu_q, cu_k)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons
    compiled = torch.compile(step, fullgraph=True)
    dense, packed = compiled(q, k, v, table, used, cu_q, cu_k)
    eager_dense, eager_packed = step(q, k, v, table, used, cu_q, cu_k)
    assert torch.equal(dense, eager_dense) and torch.equal(packed, eager_packed), "compiled paged calls differ"
    ref_o, _ = paged_reference64(q.reshape(-1, 8, 64), k, v, table, case.lens_q, case.lens_k, True, (-1, -1))
    expect_close(packed, None, ref_o, None, BF16, "compiled paged varlen")


def check_csr_table_compiles_and_captures():
    """torch.compile(fullgraph=True) of attention_varlen over a CSR table (one graph, the eager result), and a
    captured CSR call replayed after new offsets, counts and pages are written into its tensors."""
    case = PagedCase((100, 1, 300), (400, 33, 300), 16, 8, 2, 64, BF16, causal=True, csr="last")
    k, v, table = paged_pool(case, case.lens_k)
    q = torch.randn(sum(case.lens_q), 8, 64, device="cuda", dtype=BF16)
    cu_q = cu_seqlens(case.lens_q)
    indptr, indices, last = csr_of(table, case.lens_k, 16)

    def step(q, k, v, cu_q, indices, indptr, last):
        return flashjit.attention_varlen(q, k, v, cu_q, None, 300, 400, causal=True, page_table=indices,
                                         page_indptr=indptr, last_page_len=last)

    torch._dynamo.reset()
    explained = torch._dynamo.explain(step)(q, k, v, cu_q, indices, indptr, last)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons
    compiled = torch.compile(step, fullgraph=True)
    eager = step(q, k, v, cu_q, indices, indptr, last)
    assert torch.equal(compiled(q, k, v, cu_q, indices, indptr, last), eager), "compiled CSR call differs"
    ref_o, _ = paged_reference64(q, k, v, table, case.lens_q, case.lens_k, True, (-1, -1))
    expect_close(eager, None, ref_o, None, BF16, "CSR varlen")

    # Capture with room for the longest lengths, then replay with others written into the same tensors.
    flat = torch.zeros(k.shape[0], device="cuda", dtype=torch.int32)
    out = torch.empty_like(q)
    flat[:indices.shape[0]] = indices

    def captured():
        flashjit.attention_varlen(q, k, v, cu_q, None, 300, 400, causal=True, page_table=flat, page_indptr=indptr,
                                  last_page_len=last, out=out)
    captured()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured()
    for seed, lens_k in enumerate(((400, 33, 300), (17, 400, 1), (256, 0, 399)), start=1):
        g = torch.Generator().manual_seed(seed)
        table = torch.randint(0, k.shape[0], (3, 25), generator=g, dtype=torch.int32).cuda()  # 25 pages: 400 keys
        new_indptr, new_indices, new_last = csr_of(table, lens_k, 16)
        indptr.copy_(new_indptr), last.copy_(new_last)
        flat[:new_indices.shape[0]] = new_indices
        out.fill_(math.nan)
        graph.replay()
        torch.cuda.synchronize()
        ref_o, _ = paged_reference64(q, k, v, table, case.lens_q, lens_k, True, (-1, -1))
        expect_close(out, None, ref_o, None, BF16, f"CSR graph replay with keys {lens_k}")


def check_paged_kernel_names():
    """The selected kernels carry the page size (config and name: _paged<N>)."""
    for page in (1, 16, 256):
        config = flashjit.select((2, 512, 8, 128), (2, 4096, 2, 128), causal=True, page_size=page)
        assert config["page_size"] == page, config
        info = flashjit.precompile(config)
        assert f"_paged{page}" in info["name"], info["name"]
    assert "page_size" not in flashjit.select((2, 512, 8, 128), causal=True)


CHECKS = [check_page_outside_the_pool_reads_as_zeros, check_combined_kv_pool_and_out,
          check_flash_attn_names_with_block_table, check_paged_graph_capture_and_replay,
          check_paged_calls_compile_fullgraph, check_csr_table_compiles_and_captures, check_paged_kernel_names]


def main():
    return main_of(lambda: [(str(c), lambda c=c: check_paged_case(c)) for c in PAGED_CASES] + named(CHECKS))


if __name__ == "__main__":
    sys.exit(main())
