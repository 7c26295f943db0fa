"""The snippets' arguments without a GPU or torch (score_mod, mask_mod, aux_tensors, aux_scalars, aux_integers and
alignment on attention, attention_varlen and decode; select, select_decode and precompile by shapes): bad ones are a
ValueError naming them before the library is touched, good ones reach the C structs (the aux tensors' addresses on
every call; the rest from the memo of checked calls, keyed by the snippets too), the snippet's text reaches the
kernel's config and name, and a compile error names the snippet's line."""
import ctypes

import pytest

import flashjit
from flashjit import _abi, _attention, _decode
from fakes import FakeTensor, qkv
from test_variant_checks import decode_tensors, recorded  # noqa: F401  (fixtures)

SCORE = ("__device__ float score_mod(float s, int b, int h, int q, int k, const flashjit::ModContext& ctx) {\n"
         "  return s - ctx.scalar(0) * (q > k ? q - k : k - q);\n"
         "}\n")
MASK = ("__device__ bool mask_mod(int b, int h, int q, int k, const flashjit::ModContext& ctx) {\n"
        "  return ctx.pointer<int>(0)[q] == ctx.pointer<int>(0)[k];\n"
        "}\n")
BROKEN = ("__device__ float score_mod(float s, int b, int h, int q, int k, const flashjit::ModContext& ctx) {\n"
          "  float unused = 0.f;\n"
          "  return s + undefined_name;\n"
          "}\n")

BAD = [
    (dict(score_mod=3), "score_mod must be CUDA C++ source text"),
    (dict(mask_mod=""), "mask_mod is empty"),
    (dict(score_mod="a\0b"), "score_mod holds a NUL"),
    (dict(aux_scalars=[1.0] * 9), "aux_scalars takes at most 8"),
    (dict(aux_scalars=[float("nan")]), "aux_scalars[0] must be a finite number"),
    (dict(aux_scalars=[True]), "aux_scalars[0] must be a finite number"),
    (dict(aux_integers=[1.5]), "aux_integers[0] must be an int"),
    (dict(aux_integers=[2**63]), "aux_integers[0] must be an int in int64's range"),
    (dict(aux_tensors=[object()]), "aux_tensors[0] must be a torch.Tensor"),
    (dict(aux_tensors=[FakeTensor((4,), device="cpu")]), "aux_tensors[0]"),
    (dict(aux_tensors=3), "aux_tensors must be a sequence"),
]


@pytest.mark.parametrize("kwargs,message", BAD, ids=[m for _, m in BAD])
def test_snippet_errors_name_the_argument(kwargs, message, library_untouched):
    q, k, v = qkv()
    cu = FakeTensor((3,), "torch.int32")
    calls = [lambda: flashjit.attention(q, k, v, **kwargs),
             lambda: flashjit.attention_varlen(FakeTensor((128, 8, 64)), FakeTensor((192, 2, 64)),
                                               FakeTensor((192, 2, 64)), cu, cu, 64, 96, **kwargs),
             lambda: flashjit.decode(*decode_tensors(), **kwargs)]
    for call in calls:
        with pytest.raises(ValueError) as raised:
            call()
        assert message in str(raised.value)


def test_alignment_errors(library_untouched):
    q, k, v = qkv()
    with pytest.raises(ValueError, match="alignment must be 'bottom_right' or 'top_left'"):
        flashjit.attention(q, k, v, causal=True, alignment="top-left")
    with pytest.raises(ValueError, match="alignment must be"):
        flashjit.select((1, 128, 8, 64), arch="sm_90a", alignment=1)


def test_attention_snippets_reach_the_struct(recorded):  # noqa: F811
    q, k, v = qkv()
    ids = FakeTensor((64,), "torch.int32")
    out = FakeTensor(q.shape)
    second = FakeTensor((64,), "torch.int32")
    for aux in (ids, second):  # the second call is a memo hit, with its own aux address
        with pytest.raises(flashjit.FlashjitError):
            flashjit.attention(q, k, v, out=out, causal=True, score_mod=SCORE, mask_mod=MASK, aux_tensors=[aux],
                               aux_scalars=[0.25, 2], aux_integers=[7, -1], alignment="top_left")
    assert len(recorded.calls) == 2 and len(_attention._calls) == 1
    for aux, (_, args) in zip((ids, second), recorded.calls):
        assert args.score_mod == SCORE.encode() and args.mask_mod == MASK.encode()
        assert list(args.aux_pointers)[:2] == [aux.data_ptr(), None]
        assert list(args.aux_scalars)[:3] == [0.25, 2.0, 0.0] and list(args.aux_integers)[:3] == [7, -1, 0]
        assert args.alignment == _abi.ALIGN_TOP_LEFT
    # Another scalar, integer, text, alignment or aux tensor layout is another key, its values in the struct.
    changes = (dict(aux_scalars=[0.5, 2]), dict(aux_integers=[8, -1]), dict(score_mod=SCORE + " "),
               dict(alignment="bottom_right"), dict(aux_tensors=[FakeTensor((32,), "torch.int32")]))
    for change in changes:
        call = dict(score_mod=SCORE, mask_mod=MASK, aux_tensors=[ids], aux_scalars=[0.25, 2], aux_integers=[7, -1],
                    alignment="top_left")
        call.update(change)
        with pytest.raises(flashjit.FlashjitError):
            flashjit.attention(q, k, v, out=out, causal=True, **call)
        args = recorded.calls[-1][1]
        assert (args.aux_scalars[0], args.aux_integers[0], args.score_mod) == (
            call["aux_scalars"][0], call["aux_integers"][0], call["score_mod"].encode())
        assert args.alignment == (_abi.ALIGN_TOP_LEFT if call["alignment"] == "top_left" else _abi.ALIGN_BOTTOM_RIGHT)
    assert len(_attention._calls) == 1 + len(changes)
    other = FakeTensor((64,), "torch.int32")
    with pytest.raises(flashjit.FlashjitError):
        flashjit.attention(q, k, v, out=out, mask_mod=MASK, aux_tensors=[other])
    last = recorded.calls[-1][1]
    assert last.aux_pointers[0] == other.data_ptr() and last.score_mod is None
    assert last.alignment == _abi.ALIGN_BOTTOM_RIGHT
    with pytest.raises(flashjit.FlashjitError):  # without snippets: none in the struct
        flashjit.attention(q, k, v, out=out)
    last = recorded.calls[-1][1]
    assert (last.score_mod, last.mask_mod, last.aux_pointers[0], last.aux_scalars[0]) == (None, None, None, 0.0)


def test_varlen_and_decode_snippets_reach_the_struct(recorded):  # noqa: F811
    cu = FakeTensor((3,), "torch.int32")
    with pytest.raises(flashjit.FlashjitError):
        flashjit.attention_varlen(FakeTensor((128, 8, 64)), FakeTensor((192, 2, 64)), FakeTensor((192, 2, 64)), cu,
                                  cu, 64, 96, out=FakeTensor((128, 8, 64)), score_mod=SCORE, aux_scalars=[0.5],
                                  alignment="top_left")
    args = recorded.calls[-1][1]
    assert args.score_mod == SCORE.encode() and args.aux_scalars[0] == 0.5 and args.alignment == _abi.ALIGN_TOP_LEFT
    ids = FakeTensor((256,), "torch.int32")
    with pytest.raises(flashjit.FlashjitError):
        flashjit.decode(*decode_tensors(), out=FakeTensor((2, 1, 8, 64)), mask_mod=MASK, aux_tensors=[ids],
                        aux_integers=[3])
    name, args = recorded.calls[-1]
    assert name == "flashjit_decode_workspace_bytes"  # the plan is asked with the snippets set
    assert args.mask_mod == MASK.encode() and args.aux_integers[0] == 3


def test_decode_has_no_alignment():
    with pytest.raises(TypeError):
        flashjit.decode(*decode_tensors(), alignment="top_left")


# ---- select, precompile by shapes (NVRTC, no GPU) -------------------------------------------------------------

def test_select_carries_the_snippets():
    plain = flashjit.select((1, 1024, 8, 64), causal=True, arch="sm_80")
    chosen = flashjit.select((1, 1024, 8, 64), causal=True, score_mod=SCORE, mask_mod=MASK, arch="sm_80")
    assert chosen["score_mod"] == SCORE and chosen["mask_mod"] == MASK
    assert {k: v for k, v in chosen.items() if k not in ("score_mod", "mask_mod")} == plain
    assert flashjit.select((1, 1024, 8, 64), causal=True, alignment="top_left", arch="sm_80") == plain
    decode = flashjit.select_decode((4, 1, 32, 128), (4, 4096, 8, 128), mask_mod=MASK, arch="sm_90a")
    assert decode["split"]["mask_mod"] == MASK and "score_mod" not in decode["split"]


def test_precompile_compiles_a_snippet_kernel():
    info = flashjit.precompile(flashjit.select((1, 1024, 8, 64), causal=True, score_mod=SCORE, arch="sm_80"))
    assert "_smod" in info["name"] and info["config"]["score_mod"] == SCORE


def test_a_broken_snippet_names_its_line():
    config = flashjit.select((1, 1024, 8, 64), score_mod=BROKEN, arch="sm_80")
    with pytest.raises(flashjit.FlashjitError) as raised:
        flashjit.precompile(config)
    assert "score_mod(3)" in str(raised.value) and "undefined_name" in str(raised.value)


def test_struct_size_covers_the_snippets():
    # The struct holds the snippets and the alignment; the paged fields follow them, from the end of the struct they
    # ended (the int plus tail padding), the CSR page-table fields follow those the same way, and the block mask's
    # follow them.
    assert _abi.AttentionArgs.page_table.offset == _abi.AttentionArgs.alignment.offset + 8
    assert _abi.AttentionArgs.page_indptr.offset == _abi.AttentionArgs.check_pages.offset + 4
    assert _abi.AttentionArgs.bm_kv_num_blocks.offset == _abi.AttentionArgs.last_page_len.offset + 8
    # The bias fields end the decode struct (test_bias_checks.py); the relative-logits table's follow them in the
    # attention struct.
    assert _abi.AttentionArgs.rel_bias.offset == _abi.AttentionArgs.bias_strides.offset + 32
    assert ctypes.sizeof(_abi.AttentionArgs) == _abi.AttentionArgs.rel_bias_offset.offset + 4  # no tail padding
    # The decode args' fused append follows the snippets' aux values, and the CSR page-table fields follow it.
    assert _abi.DecodeArgs.k_new.offset == _abi.DecodeArgs.aux_integers.offset + 8 * 8
    assert _abi.DecodeArgs.page_indptr.offset == _abi.DecodeArgs.seqlens_out.offset + 8
    assert ctypes.sizeof(_abi.DecodeArgs) == _abi.DecodeArgs.bias_strides.offset + 32
    assert _attention.AttentionArgs is _abi.AttentionArgs and _decode.DecodeArgs is _abi.DecodeArgs
