"""Block sparsity on a GPU (flashjit.block_mask, attention(block_mask=)): the lists flashjit.block_mask makes against
FlexAttention's create_block_mask for the same mask (blocks of the mask_mod and the built-in mask together, where Flex
calls a causal diagonal block partial and flashjit full), attention with flashjit's block mask and with Flex's own
BlockMask against SDPA with the dense bool mask, broadcast and per-head masks, and the argument checks that need
real tensors (a mask of another batch size, a mask on the CPU).

Used by test_gpu.py under pytest, and runnable without pytest on a GPU machine:
    PYTHONPATH=python python3 python/tests/gpu_block_mask_checks.py"""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import flashjit  # noqa: E402
from gpu_checks import BF16, FP16, expect_close, main_of, named, visible_mask  # noqa: E402

# Documents: ctx.pointer<int>(0) holds each position's document; odd heads (ctx.integer(0) set) lose every third key
# but their own (so that no row is empty).
DOCUMENTS = """
__device__ bool mask_mod(int b, int h, int q_idx, int kv_idx, const flashjit::ModContext& ctx) {
  const int* doc = ctx.pointer<int>(0) + b * ctx.seqlen_q;
  return doc[q_idx] == doc[kv_idx] && (ctx.integer(0) == 0 || (h & 1) == 0 || kv_idx % 3 != 1 || kv_idx == q_idx);
}
"""


def documents(batch, s, count, seed):
    g = torch.Generator().manual_seed(seed)
    rows = []
    for _ in range(batch):
        cuts = torch.sort(torch.randperm(s - 1, generator=g)[: count - 1] + 1).values
        lengths = torch.diff(torch.cat([torch.tensor([0]), cuts, torch.tensor([s])]))
        rows.append(torch.repeat_interleave(torch.arange(count, dtype=torch.int32), lengths))
    return torch.stack(rows).cuda()


def dense_mask(doc, heads, causal, head_rule):
    """[B, H, S, S] bool: the documents' pairs (and the causal ones, and the odd heads' rule)."""
    b, s = doc.shape
    m = doc[:, None, :, None] == doc[:, None, None, :]
    m = m.expand(b, heads, s, s).clone()
    if causal:
        m &= visible_mask(s, s, causal=True)
    if head_rule:
        odd = torch.arange(heads, device=doc.device) % 2 == 1
        lost = (torch.arange(s, device=doc.device) % 3 == 1)[None, :] & ~torch.eye(s, dtype=torch.bool, device=doc.device)
        m[:, odd] &= ~lost
    return m


def sdpa(q, k, v, mask):
    return torch.nn.functional.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                            attn_mask=mask, enable_gqa=True).transpose(1, 2)


def check_block_mask_lists_the_blocks_flex_does():
    """For a causal document mask the listed blocks are Flex's (partial and full together, ascending), and the full
    ones are Flex's full blocks plus the diagonal blocks inside one document (full for flashjit: the attention
    applies the causal mask itself)."""
    from torch.nn.attention.flex_attention import create_block_mask
    s = 2048
    doc = documents(1, s, 5, seed=1)
    ours = flashjit.block_mask(DOCUMENTS, 1, 1, s, s, causal=True, aux_tensors=[doc], aux_integers=[0])
    d = doc[0]

    def document_causal(b, h, q_idx, kv_idx):
        return (d[q_idx] == d[kv_idx]) & (q_idx >= kv_idx)
    theirs = create_block_mask(document_causal, 1, 1, s, s, device="cuda")
    nq = s // 128
    for m in range(nq):
        def listed(counts, indices):
            n = int(counts[0, 0, m])
            return sorted(int(x) for x in indices[0, 0, m, :n])
        ours_all = sorted(listed(ours.kv_num_blocks, ours.kv_indices) + listed(ours.full_kv_num_blocks, ours.full_kv_indices))
        theirs_all = sorted(listed(theirs.kv_num_blocks, theirs.kv_indices) +
                            listed(theirs.full_kv_num_blocks, theirs.full_kv_indices))
        assert ours_all == theirs_all, f"query block {m}: blocks {ours_all}, Flex lists {theirs_all}"
        ours_full = set(listed(ours.full_kv_num_blocks, ours.full_kv_indices))
        assert set(listed(theirs.full_kv_num_blocks, theirs.full_kv_indices)) <= ours_full, f"query block {m}"
        for j in ours_full:  # full: one document across the block's rows and columns
            rows, cols = d[m * 128:(m + 1) * 128], d[j * 128:(j + 1) * 128]
            assert bool((rows[:, None] == cols[None, :]).all()), f"query block {m}: block {j} is not one document"


def check_block_sparse_attention_matches_sdpa():
    """attention(block_mask=) with the document mask_mod against SDPA with the dense bool mask: per-head masks (B2, H4,
    odd heads their own rule), a broadcast one (B1 H1 over B1), causal and not, bf16 and fp16, 64 x 128 blocks,
    odd lengths."""
    for dtype, causal, (b, s, hq, hkv, d), block in ((BF16, True, (2, 1000, 4, 2, 128), 128),
                                                     (FP16, False, (1, 777, 8, 8, 64), (64, 128))):
        q = torch.randn(b, s, hq, d, device="cuda", dtype=dtype)
        k = torch.randn(b, s, hkv, d, device="cuda", dtype=dtype)
        v = torch.randn_like(k)
        doc = documents(b, s, 4, seed=2)
        for per_head in (True, False):
            mb, mh = (b, hq) if per_head else (1, 1)
            if not per_head and b > 1:
                continue
            rule = 1 if per_head else 0
            bm = flashjit.block_mask(DOCUMENTS, mb, mh, s, s, causal=causal, aux_tensors=[doc], aux_integers=[rule],
                                     block_size=block)
            o = flashjit.attention(q, k, v, causal=causal, mask_mod=DOCUMENTS, aux_tensors=[doc], aux_integers=[rule],
                                   block_mask=bm)
            ref = sdpa(q, k, v, dense_mask(doc, hq, causal, per_head))
            expect_close(o, None, ref, None, dtype, f"{dtype} causal {causal} per-head {per_head} blocks {block}")


def check_flex_block_mask_is_taken():
    """Flex's own BlockMask (create_block_mask) given to flashjit.attention: the same output as SDPA's."""
    from torch.nn.attention.flex_attention import create_block_mask
    s = 1024
    q = torch.randn(1, s, 8, 128, device="cuda", dtype=BF16)
    k = torch.randn(1, s, 2, 128, device="cuda", dtype=BF16)
    v = torch.randn_like(k)
    doc = documents(1, s, 3, seed=3)
    d = doc[0]

    def document_causal(b, h, q_idx, kv_idx):
        return (d[q_idx] == d[kv_idx]) & (q_idx >= kv_idx)
    bm = create_block_mask(document_causal, 1, 1, s, s, device="cuda")
    o = flashjit.attention(q, k, v, causal=True, mask_mod=DOCUMENTS, aux_tensors=[doc], aux_integers=[0], block_mask=bm)
    expect_close(o, None, sdpa(q, k, v, dense_mask(doc, 8, True, False)), None, BF16, "Flex's BlockMask")


def check_block_mask_arguments_are_checked():
    """A mask of another batch size, one on the CPU, a BlockMask without its lists: ValueError before anything runs."""
    s = 256
    q = torch.randn(2, s, 4, 64, device="cuda", dtype=BF16)
    k = torch.randn(2, s, 4, 64, device="cuda", dtype=BF16)
    doc = documents(3, s, 2, seed=4)
    three = flashjit.block_mask(DOCUMENTS, 3, 1, s, s, aux_tensors=[doc], aux_integers=[0])
    for bad, words in ((three, "batch entries"),
                       (flashjit.BlockMask(three.kv_num_blocks.cpu(), three.kv_indices.cpu(), None, None, (128, 128),
                                           (s, s)), "CUDA"),
                       (object(), "flashjit.BlockMask")):
        try:
            flashjit.attention(q, k, k, block_mask=bad)
        except ValueError as e:
            assert words in str(e), f"{words!r} not in {e}"
        else:
            raise AssertionError(f"no ValueError for {words}")


CHECKS = [check_block_mask_lists_the_blocks_flex_does, check_block_sparse_attention_matches_sdpa,
          check_flex_block_mask_is_taken, check_block_mask_arguments_are_checked]


def main():
    return main_of(lambda: named(CHECKS))


if __name__ == "__main__":
    sys.exit(main())
