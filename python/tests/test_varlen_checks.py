"""attention_varlen() without a GPU: each bad argument is a ValueError naming it, raised before the library (or
torch) is touched; the ctypes mirror of the new flashjit_attention_args fields lands where the library reads
them; and calls on fake pointers reach the library's own checks."""
import ctypes
import re

import pytest

import flashjit
from flashjit import _abi, _checks, _library
from fakes import FakeTensor

INT32 = "torch.int32"


def varlen_inputs(total_q=40, total_k=100, hq=8, hkv=2, d=64, batch=3, dtype="torch.bfloat16"):
    """q, k, v, cu_seqlens_q, cu_seqlens_k of a valid packed problem (fake tensors)."""
    return dict(q=FakeTensor((total_q, hq, d), dtype), k=FakeTensor((total_k, hkv, d), dtype),
                v=FakeTensor((total_k, hkv, d), dtype), cu_seqlens_q=FakeTensor((batch + 1,), INT32),
                cu_seqlens_k=FakeTensor((batch + 1,), INT32))


def call(max_seqlen_q=20, max_seqlen_k=60, **changes):
    tensors = varlen_inputs()
    out = changes.pop("out", FakeTensor(tensors["q"].shape))
    for name, change in changes.items():
        tensors[name] = change(tensors[name]) if callable(change) else change
    return flashjit.attention_varlen(tensors["q"], tensors["k"], tensors["v"], tensors["cu_seqlens_q"],
                                     tensors["cu_seqlens_k"], max_seqlen_q, max_seqlen_k, out=out, stream=0)


def like(t, **overrides):
    fields = dict(shape=t.shape, dtype=t.dtype, device=str(t.device), strides=t.stride(), ptr=t.data_ptr())
    fields.update(overrides)
    return FakeTensor(**fields)


CASES = {
    "q on the CPU": (dict(q=lambda t: like(t, device="cpu")), "q must be a CUDA tensor"),
    "cu_seqlens_q on the CPU": (dict(cu_seqlens_q=lambda t: like(t, device="cpu")), "cu_seqlens_q must be a CUDA"),
    "cu_seqlens_k on another GPU": (dict(cu_seqlens_k=lambda t: like(t, device="cuda:1")), "cu_seqlens_k is on cuda:1"),
    "k on another GPU": (dict(k=lambda t: like(t, device="cuda:1")), "k is on cuda:1"),
    "q float32": (dict(q=lambda t: like(t, dtype="torch.float32")), "q: dtype torch.float32"),
    "v fp16 with q bf16": (dict(v=lambda t: like(t, dtype="torch.float16")), "v: dtype torch.float16 differs"),
    "cu_seqlens_q int64": (dict(cu_seqlens_q=lambda t: like(t, dtype="torch.int64")),
                           "cu_seqlens_q: dtype torch.int64 must be torch.int32"),
    "cu_seqlens_k float": (dict(cu_seqlens_k=lambda t: like(t, dtype="torch.float32")), "cu_seqlens_k: dtype"),
    "q 4-D (not packed)": (dict(q=FakeTensor((2, 20, 8, 64))), "q must be 3-D [total_tokens, heads, head_dim]"),
    "k 2-D": (dict(k=FakeTensor((100, 128))), "k must be 3-D"),
    "q empty": (dict(q=FakeTensor((0, 8, 64))), "q is empty"),
    "v shape differs": (dict(v=FakeTensor((99, 2, 64))), "v: shape [99, 2, 64] differs"),
    "k head_dim differs": (dict(k=FakeTensor((100, 2, 128)), v=FakeTensor((100, 2, 128))), "k: head_dim 128"),
    "heads not divisible": (dict(k=FakeTensor((100, 3, 64)), v=FakeTensor((100, 3, 64))), "k: its 3 heads"),
    "head_dim 60": (dict(q=FakeTensor((40, 8, 60)), k=FakeTensor((100, 2, 60)), v=FakeTensor((100, 2, 60))),
                    "q: head_dim 60"),
    "cu_seqlens_q 2-D": (dict(cu_seqlens_q=FakeTensor((2, 2), INT32)), "cu_seqlens_q must have shape [batch + 1]"),
    "cu_seqlens_q of one entry": (dict(cu_seqlens_q=FakeTensor((1,), INT32), cu_seqlens_k=FakeTensor((1,), INT32)),
                                  "cu_seqlens_q must have shape [batch + 1] with batch >= 1"),
    "cu_seqlens_k longer": (dict(cu_seqlens_k=FakeTensor((5,), INT32)), "cu_seqlens_k: shape [5] differs"),
    "too many sequences": (dict(cu_seqlens_q=FakeTensor((65537,), INT32), cu_seqlens_k=FakeTensor((65537,), INT32)),
                           "at most 65535 sequences"),
    "cu_seqlens_q strided": (dict(cu_seqlens_q=lambda t: like(t, strides=(2,))), "cu_seqlens_q must be contiguous"),
    "cu_seqlens_k misaligned": (dict(cu_seqlens_k=lambda t: like(t, ptr=t.data_ptr() + 2)),
                                "cu_seqlens_k: data_ptr() "),
    "q last dim strided": (dict(q=lambda t: like(t, strides=(8 * 128, 128, 2))), "q: the last dimension"),
    "k sequence stride 12": (dict(k=lambda t: like(t, strides=(12, 1, 1))), "k: the sequence stride"),
    "v head stride 68": (dict(v=lambda t: like(t, strides=(2 * 68, 68, 1))), "v: the head stride"),
    "q misaligned": (dict(q=lambda t: like(t, ptr=t.data_ptr() + 2)), "q: data_ptr() "),
    "out shape": (dict(out=FakeTensor((2, 20, 8, 64))), "out: shape"),
    "out on the CPU": (dict(out=FakeTensor((40, 8, 64), device="cpu")), "out must be a CUDA tensor"),
    "out head stride": (dict(out=FakeTensor((40, 8, 64), strides=(8 * 68, 68, 1))), "out: the head stride"),
    "max_seqlen_q 0": (dict(max_seqlen_q=0), "max_seqlen_q must be in [1, "),
    "max_seqlen_k a float": (dict(max_seqlen_k=60.0), "max_seqlen_k must be an integer"),
    "max_seqlen_k a bool": (dict(max_seqlen_k=True), "max_seqlen_k must be an integer"),
    "max_seqlen_q a tensor-like": (dict(max_seqlen_q="20"), "max_seqlen_q must be an integer"),
}


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_varlen_argument_checks(case, library_untouched):
    changes, message = CASES[case]
    with pytest.raises(ValueError) as raised:
        call(**changes)
    assert message in str(raised.value)


@pytest.mark.parametrize("window", [(1,), (-2, 0), (True, 1), None])
def test_varlen_window_checks(window, library_untouched):
    t = varlen_inputs()
    with pytest.raises(ValueError, match="window_size must be"):
        flashjit.attention_varlen(*t.values(), 20, 60, window_size=window, out=FakeTensor(t["q"].shape), stream=0)


def test_varlen_scale_and_config_checks(library_untouched):
    t = varlen_inputs()
    with pytest.raises(ValueError, match="softmax_scale"):
        flashjit.attention_varlen(*t.values(), 20, 60, softmax_scale=-1.0, out=FakeTensor(t["q"].shape), stream=0)
    with pytest.raises(ValueError, match="config must be a dict"):
        flashjit.attention_varlen(*t.values(), 20, 60, config=3, out=FakeTensor(t["q"].shape), stream=0)


def test_varlen_problem_and_strides():
    t = varlen_inputs(total_q=40, total_k=100, hq=8, hkv=2, d=128, batch=3, dtype="torch.float16")
    problem = _checks.check_varlen_inputs(*t.values(), 20, 60)
    assert problem == _checks.VarlenProblem(batch=3, total_q=40, total_k=100, max_seqlen_q=20, max_seqlen_k=60,
                                            heads_q=8, heads_kv=2, head_dim=128, dtype=_abi.DTYPE_FP16)
    assert _checks.packed_strides(t["q"]) == (0, 8 * 128, 128)
    # Dimensions of size 1 may have any stride (never used): 0 = contiguous for the library.
    assert _checks.packed_strides(FakeTensor((1, 1, 64), strides=(5, 3, 1))) == (0, 0, 0)
    padded = FakeTensor((40, 8, 128), "torch.float16", strides=(8 * 128 + 64, 128, 1))
    assert _checks.packed_strides(padded) == (0, 8 * 128 + 64, 128)
    # A single token or sequence is fine; a loose max length too.
    one = varlen_inputs(total_q=1, total_k=1, batch=1)
    assert _checks.check_varlen_inputs(*one.values(), 4096, 4096).batch == 1


def test_attention_args_varlen_fields_are_appended():
    # Appended after config_json (then head_dim_v, check_seqlens, the variants, the snippets, the paged and the CSR
    # fields after them, then the block mask's, the bias's and the relative-logits table's), as the struct_size rules
    # of flashjit.h require.
    names = [name for name, _ in _abi.AttentionArgs._fields_]
    names = names[:len(names) - len(_abi.BLOCK_MASK_FIELDS) - 7]
    assert names[-25:] == ["config_json", "cu_seqlens_q", "cu_seqlens_k", "total_q", "total_k", "head_dim_v",
                           "check_seqlens", "softcap", "alibi_slopes", "alibi_slopes_batch_stride", "sinks",
                           "score_mod", "mask_mod", "aux_pointers", "aux_scalars", "aux_integers", "alignment",
                           "page_table", "seqused_k", "page_size", "num_pages", "max_pages_per_seq", "check_pages",
                           "page_indptr", "last_page_len"]
    assert _abi.AttentionArgs().total_q == 0 and _abi.AttentionArgs().cu_seqlens_q is None


@pytest.mark.parametrize("fields,message", [
    (dict(cu_seqlens_q=0x70000), "cu_seqlens_k is a null pointer but cu_seqlens_q is set"),
    (dict(cu_seqlens_k=0x70000, total_q=5, total_k=5), "cu_seqlens_q is a null pointer but cu_seqlens_k is set"),
    (dict(cu_seqlens_q=0x70000, cu_seqlens_k=0x70102, total_q=5, total_k=5), "cu_seqlens_k (0x70102) must be 4-byte"),
    (dict(cu_seqlens_q=0x70000, cu_seqlens_k=0x70100, total_q=5), "total_k (rows of the packed k and v) must be >= 1"),
    (dict(cu_seqlens_q=0x70000, cu_seqlens_k=0x70100, total_k=5), "total_q (rows of the packed q and o) must be >= 1"),
    (dict(total_k=9), "total_q and total_k (0 and 9) are for varlen problems"),
])
def test_attention_args_varlen_fields_reach_the_library(fields, message):
    # Each new field of the ctypes mirror lands where libflashjit reads it: the library's check names it.
    args = _abi.AttentionArgs(q=0x10000, k=0x20000, v=0x30000, o=0x40000, batch=2, seqlen_q=16, seqlen_k=16,
                              heads_q=8, heads_kv=2, head_dim=64, dtype=_abi.DTYPE_BF16, **fields)
    lib = _library.load()
    assert lib.flashjit_forward(flashjit._runtime.handle(), ctypes.byref(args)) == _abi.ERROR_INVALID_ARGUMENT
    assert message in lib.flashjit_last_error().decode()


def test_varlen_on_fake_pointers_raises_the_library_error():
    t = varlen_inputs()
    with pytest.raises(flashjit.FlashjitError) as raised:
        flashjit.attention_varlen(*t.values(), 20, 60, out=FakeTensor(t["q"].shape), stream=0)
    # No GPU: the driver is missing; with one: these are not device pointers.
    assert raised.value.status in (_abi.ERROR_NO_DEVICE, _abi.ERROR_INVALID_ARGUMENT)
    assert re.search(r"no CUDA driver|cuInit failed|not a CUDA device pointer", str(raised.value))


def test_varlen_batch_strides_are_rejected_by_the_library():
    args = _abi.AttentionArgs(q=0x10000, k=0x20000, v=0x30000, o=0x40000, batch=2, seqlen_q=16, seqlen_k=16,
                              heads_q=8, heads_kv=2, head_dim=64, dtype=_abi.DTYPE_BF16, cu_seqlens_q=0x70000,
                              cu_seqlens_k=0x70100, total_q=20, total_k=20, q_strides=_abi.Strides(1024, 0, 0))
    lib = _library.load()
    assert lib.flashjit_forward(flashjit._runtime.handle(), ctypes.byref(args)) == _abi.ERROR_INVALID_ARGUMENT
    assert "q_strides.batch must be 0 for a varlen problem" in lib.flashjit_last_error().decode()
