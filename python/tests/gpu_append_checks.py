"""Appending to a KV cache on a GPU: flashjit.append_kv against torch indexing (the whole cache compared exactly,
untouched slots included), contiguous and paged caches with shuffled pages of 1, 16 and 256 tokens, NHD and HND
pools, dense and ragged new rows, chunks starting mid-page, a page outside the pool and positions past the capacity
skipped, seqlens_out; FlashInfer's CSR page tables (page_indptr, with cache_seqlens or last_page_len);
flash_attn_with_kvcache(k=, v=) (the library's fused append + decode) against the append done with torch indexing
followed by decode, and captured in a CUDA graph; the fused append + decode over a CSR table.

Used by test_gpu.py under pytest, and runnable without pytest on a GPU machine:
    PYTHONPATH=python python3 python/tests/gpu_append_checks.py"""
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import flashjit  # noqa: E402
from gpu_checks import BF16, FP16, expect_close, main_of, named  # noqa: E402


@dataclass(frozen=True)
class AppendCase:
    cached: tuple  # keys already cached per sequence
    counts: tuple  # new tokens per sequence (dense: all equal)
    page_size: int  # 0: contiguous
    dtype: torch.dtype = BF16
    heads_kv: int = 4
    head_dim: int = 128
    hnd: bool = False
    ragged: bool = False

    def __str__(self):
        layout = f"paged{self.page_size}{'_hnd' if self.hnd else ''}" if self.page_size else "contiguous"
        return (f"{layout}_{'ragged' if self.ragged else 'dense'}_{str(self.dtype)[6:]}_h{self.heads_kv}_d"
                f"{self.head_dim}_cached{'-'.join(map(str, self.cached))}_new{'-'.join(map(str, self.counts))}")


APPEND_CASES = [
    AppendCase((1, 7, 300, 4097), (7, 7, 7, 7), 0),
    AppendCase((1, 7, 300, 4097), (7, 7, 7, 7), 1),
    AppendCase((1, 7, 300, 4097), (300, 300, 300, 300), 16),
    AppendCase((1, 7, 300, 4097), (300, 300, 300, 300), 16, hnd=True),
    AppendCase((4097, 1, 300, 7), (4097, 1, 7, 0), 256, ragged=True),
    AppendCase((5, 0), (33, 1), 0, ragged=True, dtype=FP16, head_dim=64),
    AppendCase((3, 17), (1, 1), 16, dtype=FP16, heads_kv=8, head_dim=256),
]


def make_cache(case, capacity):
    """(k_cache, v_cache, page_table or None): random contents; pools of shuffled pages with spare ones."""
    b, h, d, ps = len(case.cached), case.heads_kv, case.head_dim, case.page_size
    if not ps:
        return (*(torch.randn(b, capacity, h, d, device="cuda", dtype=case.dtype) for _ in range(2)), None)
    per_row = (capacity + ps - 1) // ps
    pages = b * per_row + 5
    table = torch.randperm(pages, device="cuda", dtype=torch.int32)[: b * per_row].view(b, per_row).contiguous()
    if case.hnd:
        pools = [torch.randn(pages, h, ps, d, device="cuda", dtype=case.dtype).transpose(1, 2) for _ in range(2)]
    else:
        pools = [torch.randn(pages, ps, h, d, device="cuda", dtype=case.dtype) for _ in range(2)]
    return (*pools, table)


def torch_append(k_cache, v_cache, rows_k, rows_v, cached, table, ps, capacity):
    """The expected cache: each sequence's rows (lists of [n, H, D]) at cached[b] + s, those below capacity."""
    for b, (rk, rv) in enumerate(zip(rows_k, rows_v)):
        pos = cached[b] + torch.arange(rk.shape[0], device="cuda")
        keep = pos < capacity
        pos, rk, rv = pos[keep], rk[keep], rv[keep]
        if table is None:
            k_cache[b, pos], v_cache[b, pos] = rk, rv
        else:
            pages = table[b].long()[pos // ps]
            k_cache[pages, pos % ps], v_cache[pages, pos % ps] = rk, rv


def check_append_case(case):
    b, h, d = len(case.cached), case.heads_kv, case.head_dim
    capacity = max(c + n for c, n in zip(case.cached, case.counts)) + 3
    k_cache, v_cache, table = make_cache(case, capacity)
    capacity = capacity if table is None else table.shape[1] * case.page_size
    if case.ragged:
        k = torch.randn(sum(case.counts), h, d, device="cuda", dtype=case.dtype)
        v = torch.randn_like(k)
        offsets = [0]
        for n in case.counts:
            offsets.append(offsets[-1] + n)
        cu = torch.tensor(offsets, device="cuda", dtype=torch.int32)
        rows_k = [k[offsets[i]:offsets[i + 1]] for i in range(b)]
        rows_v = [v[offsets[i]:offsets[i + 1]] for i in range(b)]
    else:
        k = torch.randn(b, case.counts[0], h, d, device="cuda", dtype=case.dtype)
        v = torch.randn_like(k)
        cu = None
        rows_k, rows_v = list(k), list(v)
    cached = torch.tensor(case.cached, device="cuda", dtype=torch.int32)
    expected_k, expected_v = k_cache.clone(), v_cache.clone()
    torch_append(expected_k, expected_v, rows_k, rows_v, case.cached, table, case.page_size, capacity)
    out = torch.full((b,), -1, device="cuda", dtype=torch.int32)
    flashjit.append_kv(k_cache, v_cache, k, v, cached, page_table=table, cu_seqlens=cu, seqlens_out=out,
                       max_new_len=max(case.counts) if case.ragged else None)
    assert torch.equal(k_cache, expected_k), f"{case}: k_cache differs"
    assert torch.equal(v_cache, expected_v), f"{case}: v_cache differs"
    assert out.tolist() == [c + n for c, n in zip(case.cached, case.counts)], out.tolist()


def check_skips_outside_pool_and_capacity():
    """A page index outside the pool and positions past the capacity are not written; check_pages refuses both."""
    case = AppendCase((0, 14), (4, 4), 8)
    k_cache, v_cache, table = make_cache(case, 16)  # two pages per sequence: capacity 16
    table[0, 0] = -1
    k = torch.randn(2, 4, 4, 128, device="cuda", dtype=BF16)
    v = torch.randn_like(k)
    cached = torch.tensor([0, 14], device="cuda", dtype=torch.int32)
    expected_k, expected_v = k_cache.clone(), v_cache.clone()
    pages = table[1].long()
    expected_k[pages[1], 6:8], expected_v[pages[1], 6:8] = k[1, :2], v[1, :2]  # positions 14, 15; 16, 17 skipped
    try:
        flashjit.append_kv(k_cache, v_cache, k, v, cached, page_table=table, check_pages=True)
        raise AssertionError("check_pages let a page outside the pool through")
    except flashjit.FlashjitError as e:
        assert "page_table[0][0] = -1" in str(e), str(e)
    flashjit.append_kv(k_cache, v_cache, k, v, cached, page_table=table)
    assert torch.equal(k_cache, expected_k) and torch.equal(v_cache, expected_v)


def check_bad_arguments_raise_before_launch():
    """ValueError naming what is wrong, and nothing written."""
    k_cache = torch.zeros(2, 64, 4, 128, device="cuda", dtype=BF16)
    v_cache = torch.zeros_like(k_cache)
    k = torch.ones(2, 3, 4, 128, device="cuda", dtype=BF16)
    v = torch.ones_like(k)
    lens = torch.zeros(2, device="cuda", dtype=torch.int32)
    calls = [(lambda: flashjit.append_kv(k_cache, v_cache, k.float(), v.float(), lens), "dtype"),
             (lambda: flashjit.append_kv(k_cache, v_cache, k[:, :, :2], v[:, :, :2], lens), "heads_kv"),
             (lambda: flashjit.append_kv(k_cache, v_cache, k, v, lens.long()), "torch.int32"),
             (lambda: flashjit.append_kv(k_cache, v_cache, k, v, lens, seqlens_out=lens), "seqlens_out is cache_seqlens"),
             (lambda: flashjit.append_kv(k_cache, v_cache, k, v[:, :2], lens), "differs")]
    for call, message in calls:
        try:
            call()
            raise AssertionError(f"no error for {message}")
        except ValueError as e:
            assert message in str(e), str(e)
    assert not k_cache.any() and not v_cache.any(), "a refused call wrote the cache"


def csr_table(after, page_size, pages_in_pool, extra):
    """(page_indptr, flat page indices) of shuffled pages, on the GPU: sequence b owns ceil(after[b] / page_size)
    pages, and one more when extra(b)."""
    counts = [(n + page_size - 1) // page_size + (1 if extra(b) else 0) for b, n in enumerate(after)]
    indptr = [0]
    for n in counts:
        indptr.append(indptr[-1] + n)
    assert indptr[-1] <= pages_in_pool
    indices = torch.randperm(pages_in_pool, device="cuda", dtype=torch.int32)[: indptr[-1]].contiguous()
    return torch.tensor(indptr, device="cuda", dtype=torch.int32), indices


def check_append_over_csr_tables():
    """append_kv over FlashInfer's CSR tables equals torch indexing, the whole pool compared exactly: pages of 1, 16
    and 64 tokens, NHD and HND, dense and ragged rows, chunks starting mid-page, a sequence without keys; the lengths
    before the append (cache_seqlens; odd sequences own a spare page) or after it (last_page_len, FlashInfer's
    append_paged_kv_cache convention); seqlens_out the lengths after the append."""
    h, d = 4, 128
    for page_size in (1, 16, 64):
        for hnd in (False, True):
            for from_last in (False, True):
                for ragged in (False, True):
                    cached = [1, 7, 300, 4097, 0, 64]
                    counts = [7, 1, 300, 0, 5, 64] if ragged else [7] * 6
                    after = [c + n for c, n in zip(cached, counts)]
                    pool = sum((n + page_size - 1) // page_size + 1 for n in after) + 5
                    indptr, indices = csr_table(after, page_size, pool, lambda b: not from_last and b % 2 == 1)
                    shape = (pool, h, page_size, d) if hnd else (pool, page_size, h, d)
                    k_cache, v_cache = (torch.randn(shape, device="cuda", dtype=BF16) for _ in range(2))
                    if hnd:
                        k_cache, v_cache = k_cache.transpose(1, 2), v_cache.transpose(1, 2)
                    if ragged:
                        k = torch.randn(sum(counts), h, d, device="cuda", dtype=BF16)
                        offsets = [0]
                        for n in counts:
                            offsets.append(offsets[-1] + n)
                        cu = torch.tensor(offsets, device="cuda", dtype=torch.int32)
                        rows = [slice(offsets[b], offsets[b + 1]) for b in range(len(counts))]
                    else:
                        k = torch.randn(len(counts), counts[0], h, d, device="cuda", dtype=BF16)
                        cu, rows = None, list(range(len(counts)))
                    v = torch.randn_like(k)
                    expected_k, expected_v = k_cache.clone(), v_cache.clone()
                    bounds = indptr.tolist()
                    for b in range(len(counts)):
                        pos = cached[b] + torch.arange(counts[b], device="cuda")
                        pages = indices[bounds[b]:bounds[b + 1]].long()[pos // page_size]
                        expected_k[pages, pos % page_size] = k[rows[b]]
                        expected_v[pages, pos % page_size] = v[rows[b]]
                    lens = torch.tensor(cached, device="cuda", dtype=torch.int32)
                    last = torch.tensor([n - (n - 1) // page_size * page_size if n else 0 for n in after],
                                        device="cuda", dtype=torch.int32)
                    out = torch.full((len(counts),), -1, device="cuda", dtype=torch.int32)
                    flashjit.append_kv(k_cache, v_cache, k, v, None if from_last else lens, page_table=indices,
                                       page_indptr=indptr, last_page_len=last if from_last else None, cu_seqlens=cu,
                                       max_new_len=max(counts) if ragged else None, seqlens_out=out,
                                       check_pages=hnd)
                    what = (f"page {page_size}{' HND' if hnd else ''} {'last_page_len' if from_last else 'cache_seqlens'}"
                            f"{' ragged' if ragged else ''}")
                    assert torch.equal(k_cache, expected_k), f"{what}: k_cache differs"
                    assert torch.equal(v_cache, expected_v), f"{what}: v_cache differs"
                    assert out.tolist() == after, f"{what}: seqlens_out {out.tolist()}"


def check_fused_decode_over_csr_tables():
    """The library's fused append + decode over a CSR table (the path flash_attn_with_kvcache takes for a dense one):
    seqlens_k the lengths before the new rows, or last_page_len after them; the cache and O equal torch's append
    followed by decode over the table."""
    from flashjit import _decode
    torch.manual_seed(2)
    hq, hkv, d, page_size = 16, 4, 128, 16
    for new in (1, 3):
        for from_last in (False, True):
            cached = [0, 700, 33]
            after = [c + new for c in cached]
            pool = sum((n + page_size - 1) // page_size + 1 for n in after) + 5
            indptr, indices = csr_table(after, page_size, pool, lambda b: b == 1 and not from_last)
            k_cache, v_cache = (torch.randn(pool, page_size, hkv, d, device="cuda", dtype=BF16) for _ in range(2))
            q = torch.randn(len(cached), new, hq, d, device="cuda", dtype=BF16)
            k = torch.randn(len(cached), new, hkv, d, device="cuda", dtype=BF16)
            v = torch.randn_like(k)
            ref_k, ref_v = k_cache.clone(), v_cache.clone()
            bounds = indptr.tolist()
            for b in range(len(cached)):
                pos = cached[b] + torch.arange(new, device="cuda")
                pages = indices[bounds[b]:bounds[b + 1]].long()[pos // page_size]
                ref_k[pages, pos % page_size], ref_v[pages, pos % page_size] = k[b], v[b]
            after_lens = torch.tensor(after, device="cuda", dtype=torch.int32)
            ref_o = flashjit.decode(q, ref_k, ref_v, after_lens, page_table=indices, page_indptr=indptr,
                                    max_seqlen_k=max(after))
            lens = torch.tensor(cached, device="cuda", dtype=torch.int32)
            last = torch.tensor([n - (n - 1) // page_size * page_size for n in after], device="cuda",
                                dtype=torch.int32)
            o, _ = _decode.decode_eager(q, k_cache, v_cache, None if from_last else lens, indices, -1, None, False,
                                        None, 0, "auto", max(after), None, 0, new_kv=(k, v), page_indptr=indptr,
                                        last_page_len=last if from_last else None)
            what = f"new {new} {'last_page_len' if from_last else 'seqlens_k'}"
            assert torch.equal(k_cache, ref_k) and torch.equal(v_cache, ref_v), f"{what}: cache differs"
            expect_close(o.float(), None, ref_o.float(), None, BF16, f"fused over CSR, {what}")


def decode_inputs(page_size, new):
    torch.manual_seed(1)
    b, hq, hkv, d, cache = 3, 16, 4, 128, 1024
    q = torch.randn(b, new, hq, d, device="cuda", dtype=BF16)
    k = torch.randn(b, new, hkv, d, device="cuda", dtype=BF16)
    v = torch.randn_like(k)
    lens = torch.tensor([0, 700, 1024 - new], device="cuda", dtype=torch.int32)
    case = AppendCase((0, 0, 0), (new,) * 3, page_size, heads_kv=hkv)
    k_cache, v_cache, table = make_cache(case, cache)
    return q, k, v, lens, k_cache, v_cache, table


def check_flash_attn_with_kvcache_fused():
    """The fused call's O and cache equal torch's append followed by decode over the new lengths."""
    for page_size in (0, 16):
        for new in (1, 3):
            q, k, v, lens, k_cache, v_cache, table = decode_inputs(page_size, new)
            ref_k, ref_v = k_cache.clone(), v_cache.clone()
            capacity = k_cache.shape[1] if table is None else table.shape[1] * page_size
            torch_append(ref_k, ref_v, list(k), list(v), lens.tolist(), table, page_size, capacity)
            ref_o = flashjit.decode(q, ref_k, ref_v, lens + new, page_table=table)
            o = flashjit.flash_attn_with_kvcache(q, k_cache, v_cache, k=k, v=v, cache_seqlens=lens,
                                                 block_table=table, causal=True)
            assert torch.equal(k_cache, ref_k) and torch.equal(v_cache, ref_v), f"page {page_size}: cache differs"
            expect_close(o.float(), None, ref_o.float(), None, BF16, f"fused page {page_size} new {new}")


def check_fused_graph_capture_and_replay():
    """flash_attn_with_kvcache(k=, v=) captured in a CUDA graph, replayed with new lengths and rows."""
    q, k, v, lens, k_cache, v_cache, table = decode_inputs(16, 1)
    call = lambda: flashjit.flash_attn_with_kvcache(q, k_cache, v_cache, k=k, v=v, cache_seqlens=lens,  # noqa: E731
                                                    block_table=table, causal=True)
    call()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        o = call()
    lens.copy_(torch.tensor([5, 100, 1000], device="cuda", dtype=torch.int32))
    k.normal_(), v.normal_(), q.normal_()
    ref_k, ref_v = k_cache.clone(), v_cache.clone()
    torch_append(ref_k, ref_v, list(k), list(v), lens.tolist(), table, 16, table.shape[1] * 16)
    ref_o = flashjit.decode(q, ref_k, ref_v, lens + 1, page_table=table)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(k_cache, ref_k) and torch.equal(v_cache, ref_v), "replayed append differs"
    expect_close(o.float(), None, ref_o.float(), None, BF16, "replayed fused call")


CHECKS = [check_skips_outside_pool_and_capacity, check_bad_arguments_raise_before_launch,
          check_flash_attn_with_kvcache_fused, check_fused_graph_capture_and_replay, check_append_over_csr_tables,
          check_fused_decode_over_csr_tables]


def main():
    return main_of(lambda: [(str(c), lambda c=c: check_append_case(c)) for c in APPEND_CASES] + named(CHECKS))


if __name__ == "__main__":
    sys.exit(main())
