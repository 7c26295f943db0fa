"""The block_mask argument of attention() without a GPU or torch: each bad one (flashjit's or FlexAttention's
BlockMask) is a ValueError naming it before the library is touched; a good one reaches the C struct with its lists'
addresses, block sizes, row length and strides (0 where one mask serves every batch entry or head), on every call,
and its metadata is part of the call's memo key (a call with another mask of the same shapes reuses the checks)."""
import pytest

import flashjit
from flashjit import _attention, _block_mask
from fakes import FakeTensor, qkv
from test_variant_checks import recorded  # noqa: F401  (a fixture)

I32 = "torch.int32"


def mask(b=1, h=1, nq=1, nk=1, full=True, block=(128, 128), **kw):
    """A BlockMask of int32 fake tensors [b, h, nq] / [b, h, nq, nk]; kw replaces one of them."""
    parts = dict(kv_num_blocks=FakeTensor((b, h, nq), I32), kv_indices=FakeTensor((b, h, nq, nk), I32),
                 full_kv_num_blocks=FakeTensor((b, h, nq), I32) if full else None,
                 full_kv_indices=FakeTensor((b, h, nq, nk), I32) if full else None)
    parts.update(kw)
    return flashjit.BlockMask(parts["kv_num_blocks"], parts["kv_indices"], parts["full_kv_num_blocks"],
                              parts["full_kv_indices"], block, (64, 96))


class FlexLike:
    """FlexAttention's BlockMask, as far as flashjit reads it."""

    def __init__(self, m):
        self.kv_num_blocks, self.kv_indices = m.kv_num_blocks, m.kv_indices
        self.full_kv_num_blocks, self.full_kv_indices = m.full_kv_num_blocks, m.full_kv_indices
        self.BLOCK_SIZE = m.BLOCK_SIZE


# q [2, 64, 8, 64], k [2, 96, 2, 64]: one 128-block of queries and of keys.
BAD = [
    (object(), "block_mask must be a flashjit.BlockMask or FlexAttention's BlockMask"),
    (mask(kv_num_blocks=FakeTensor((1, 1, 1), I32, device="cpu")), "block_mask.kv_num_blocks must be a CUDA tensor"),
    (mask(kv_indices=FakeTensor((1, 1, 1, 1), I32, device="cuda:1")), "block_mask.kv_indices is on cuda:1"),
    (mask(kv_num_blocks=FakeTensor((1, 1, 1), "torch.int64")), "dtype torch.int64 must be torch.int32"),
    (mask(kv_indices=FakeTensor((1, 1, 1), I32)), "block_mask.kv_indices must have 4 dimensions"),
    (mask(nk=2, kv_indices=FakeTensor((1, 1, 1, 2), I32, strides=(4, 4, 4, 2))), "must be contiguous"),
    (mask(full_kv_indices=None), "go together"),
    (mask(nk=2, full_kv_indices=FakeTensor((1, 1, 1, 3), I32)), "must have the shapes of kv_num_blocks"),
    (mask(b=3), "block_mask is for 3 batch entries, the call has 2"),
    (mask(h=4), "block_mask is for 4 heads, the call has 8 query heads"),
    (mask(nq=1, block=(32, 128)), "too few for seqlen_q 64 and seqlen_k 96"),
    (mask(block=(24, 128)), "q_block must be a multiple of 16"),
]


def odd_block_size():
    m = FlexLike(mask())
    m.BLOCK_SIZE = 128.0
    return m


BAD.append((odd_block_size(), "block_size must be an int or a (q_block, kv_block) pair"))


@pytest.mark.parametrize("bad,message", BAD, ids=[m for _, m in BAD])
def test_block_mask_errors_name_the_argument(bad, message, library_untouched):
    q, k, v = qkv()
    with pytest.raises(ValueError) as raised:
        flashjit.attention(q, k, v, block_mask=bad)
    assert message in str(raised.value)


def test_block_mask_refuses_pages(library_untouched):
    q, k, v = qkv()
    with pytest.raises(ValueError) as raised:
        flashjit.attention(q, FakeTensor((8, 16, 2, 64)), FakeTensor((8, 16, 2, 64)), block_mask=mask(),
                           page_table=FakeTensor((2, 6), I32), seqused_k=FakeTensor((2,), I32))
    assert "block_mask takes dense keys" in str(raised.value)


def test_block_mask_reaches_the_struct_on_every_call(recorded):  # noqa: F811
    q, k, v = qkv()
    out = FakeTensor(q.shape)
    for m in (mask(b=2, h=8), FlexLike(mask(b=2, h=8)), mask(full=False), mask(b=1, h=8, nk=3, block=(64, 32))):
        with pytest.raises(flashjit.FlashjitError):
            flashjit.attention(q, k, v, out=out, block_mask=m)
        args = recorded.calls[-1][1]
        b, h, nq = m.kv_num_blocks.shape
        assert args.bm_kv_num_blocks == m.kv_num_blocks.data_ptr()
        assert args.bm_kv_indices == m.kv_indices.data_ptr()
        assert args.bm_full_kv_num_blocks == (None if m.full_kv_num_blocks is None else m.full_kv_num_blocks.data_ptr())
        assert (args.bm_q_block, args.bm_kv_block) == tuple(m.BLOCK_SIZE)
        assert (args.bm_num_q_blocks, args.bm_num_kv_blocks) == (nq, m.kv_indices.shape[3])
        assert args.bm_head_stride == (nq if h > 1 else 0)
        assert args.bm_batch_stride == (h * nq if b > 1 else 0)
    with pytest.raises(flashjit.FlashjitError):
        flashjit.attention(q, k, v, out=out)
    assert recorded.calls[-1][1].bm_kv_num_blocks is None


def test_block_mask_calls_are_memoized_by_the_masks_metadata(recorded, monkeypatch):  # noqa: F811
    q, k, v = qkv()
    out = FakeTensor(q.shape)
    checks = []
    real = _attention.block_mask_fields
    monkeypatch.setattr(_attention, "block_mask_fields", lambda *a: checks.append(1) or real(*a))

    def call(m):
        with pytest.raises(flashjit.FlashjitError):
            flashjit.attention(q, k, v, out=out, block_mask=m)
        return recorded.calls[-1][1]

    first, second = mask(b=2, h=8), mask(b=2, h=8)
    assert first.kv_indices.data_ptr() != second.kv_indices.data_ptr()
    a, b = call(first), call(second)
    assert len(checks) == 1 and len(_attention._calls) == 1  # the second call is a hit ...
    for m, args in ((first, a), (second, b)):  # ... with its own lists' addresses
        assert (args.bm_kv_num_blocks, args.bm_kv_indices, args.bm_full_kv_num_blocks, args.bm_full_kv_indices) == \
            tuple(getattr(m, n).data_ptr() for n in _block_mask._LISTS)
    assert (b.bm_head_stride, b.bm_batch_stride) == (a.bm_head_stride, a.bm_batch_stride) == (1, 8)
    # Other shapes, block sizes, or no full lists are other keys (their fields checked and set anew).
    for m in (mask(b=1, h=8), mask(b=2, h=8, block=(64, 128)), mask(b=2, h=8, full=False)):
        args = call(m)
        assert args.bm_full_kv_num_blocks == (None if m.full_kv_num_blocks is None else m.full_kv_num_blocks.data_ptr())
        assert (args.bm_q_block, args.bm_batch_stride) == (m.BLOCK_SIZE[0], 8 if m.kv_num_blocks.shape[0] > 1 else 0)
    assert len(checks) == 4 and len(_attention._calls) == 4
    # A block mask that is not one is never keyed: its checks run and say what is wrong.
    assert _block_mask.block_mask_key(object()) is None and _block_mask.block_mask_key(odd_block_size()) is None
    assert _block_mask.block_mask_key(None) == ()


def test_block_mask_making_checks_its_arguments():
    for kwargs, message in ((dict(B=0), "B must be"), (dict(Q_LEN=0), "Q_LEN must be"),
                            (dict(block_size=24), "multiple of 16"), (dict(mask_mod=None), "needs a mask_mod or a mask")):
        args = dict(mask_mod="__device__ bool mask_mod(int, int, int, int, const flashjit::ModContext&) { return 1; }",
                    B=1, H=1, Q_LEN=64, KV_LEN=64)
        args.update(kwargs)
        with pytest.raises(ValueError) as raised:
            flashjit.block_mask(args.pop("mask_mod"), **args)
        assert message in str(raised.value)


def test_contiguous_ignores_single_element_dimensions():
    assert _block_mask._contiguous((2, 1, 3), (3, 7, 1))
    assert not _block_mask._contiguous((2, 3), (1, 2))
