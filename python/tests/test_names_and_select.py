"""flash-attn's names and flashjit.select without a GPU or torch: the signatures are flash-attn's (order, names,
defaults; then FA4's learnable_sink as a keyword), what flashjit lacks is refused naming the argument before anything
runs, the arguments reach
attention / attention_varlen as flash-attn means them, and select / select_decode answer for an arch and SM count
through the library."""
import inspect
import subprocess
import sys

import pytest

import flashjit
from flashjit import _abi, _attention
from fakes import FakeTensor, qkv
from test_library import PYTHON_DIR, run_python

# flash-attn 2's signatures: (name, default) in order; inspect.Parameter.empty for the required ones.
EMPTY = inspect.Parameter.empty
FLASH_ATTN_SIGNATURES = {
    "flash_attn_func": [("q", EMPTY), ("k", EMPTY), ("v", EMPTY), ("dropout_p", 0.0), ("softmax_scale", None),
                        ("causal", False), ("window_size", (-1, -1)), ("softcap", 0.0), ("alibi_slopes", None),
                        ("deterministic", False), ("return_attn_probs", False)],
    "flash_attn_varlen_func": [("q", EMPTY), ("k", EMPTY), ("v", EMPTY), ("cu_seqlens_q", EMPTY),
                               ("cu_seqlens_k", EMPTY), ("max_seqlen_q", EMPTY), ("max_seqlen_k", EMPTY),
                               ("dropout_p", 0.0), ("softmax_scale", None), ("causal", False),
                               ("window_size", (-1, -1)), ("softcap", 0.0), ("alibi_slopes", None),
                               ("deterministic", False), ("return_attn_probs", False), ("block_table", None)],
    "flash_attn_with_kvcache": [("q", EMPTY), ("k_cache", EMPTY), ("v_cache", EMPTY), ("k", None), ("v", None),
                                ("rotary_cos", None), ("rotary_sin", None), ("cache_seqlens", None),
                                ("cache_batch_idx", None), ("cache_leftpad", None), ("block_table", None),
                                ("softmax_scale", None), ("causal", False), ("window_size", (-1, -1)),
                                ("softcap", 0.0), ("rotary_interleaved", True), ("alibi_slopes", None),
                                ("num_splits", 0), ("return_softmax_lse", False)],
}


@pytest.mark.parametrize("name", list(FLASH_ATTN_SIGNATURES))
def test_signatures_are_flash_attns(name):
    parameters = list(inspect.signature(getattr(flashjit, name)).parameters.values())
    positional = [p for p in parameters if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
    assert [(p.name, p.default) for p in positional] == FLASH_ATTN_SIGNATURES[name]
    # Past flash-attn 2's arguments, keywords only: FA3's seqused_k (paged varlen), FA4's name of the learnable sinks.
    keywords = [("seqused_k", None)] if name == "flash_attn_varlen_func" else []
    assert [(p.name, p.default, p.kind) for p in parameters[len(positional):]] == [
        (n, d, inspect.Parameter.KEYWORD_ONLY) for n, d in keywords + [("learnable_sink", None)]]
    assert name in flashjit.__all__


@pytest.fixture
def captured(monkeypatch):
    """The keyword arguments flash_attn_func / flash_attn_varlen_func hand to attention / attention_varlen."""
    calls = []
    from flashjit import _flash_attn
    monkeypatch.setattr(_flash_attn, "attention", lambda q, k, v, **kw: calls.append(kw) or "o")
    monkeypatch.setattr(_flash_attn, "attention_varlen", lambda *a, **kw: calls.append((len(a), kw)) or "o")
    return calls


def test_flash_attn_func_arguments_reach_attention(captured):
    q, k, v = qkv()
    assert flashjit.flash_attn_func(q, k, v, 0.0, 0.25, True, (64, 0)) == "o"
    flashjit.flash_attn_func(q, k, v, softmax_scale=None, window_size=(8, 8), deterministic=True)
    assert captured == [dict(causal=True, window_size=(64, 0), softmax_scale=0.25),
                        dict(causal=False, window_size=(8, 8), softmax_scale=None)]
    flashjit.flash_attn_varlen_func(q, k, v, "cu_q", "cu_k", 64, 96, 0.0, None, True)
    assert captured[-1] == (7, dict(causal=True, window_size=(-1, -1), softmax_scale=None, seqused_k=None))
    # FA3's seqused_k over packed keys (no block_table) is passed on too.
    used = FakeTensor((2,), "torch.int32")
    flashjit.flash_attn_varlen_func(q, k, v, "cu_q", "cu_k", 64, 96, seqused_k=used)
    assert captured[-1] == (7, dict(causal=False, window_size=(-1, -1), softmax_scale=None, seqused_k=used))


@pytest.mark.parametrize("function,kwargs,message", [
    ("flash_attn_func", {"dropout_p": 0.1}, "dropout_p=0.1 is not supported"),
    ("flash_attn_func", {"return_attn_probs": True}, "return_attn_probs=True is not supported"),
    ("flash_attn_varlen_func", {"dropout_p": 0.5, "softcap": 1.0}, "dropout_p=0.5"),
    ("flash_attn_with_kvcache", {"rotary_cos": object()}, "rotary_cos is not supported"),
    ("flash_attn_with_kvcache", {"cache_batch_idx": object()}, "cache_batch_idx is not supported"),
    ("flash_attn_with_kvcache", {"cache_leftpad": object()}, "cache_leftpad is not supported"),
])
def test_what_flashjit_lacks_is_refused(function, kwargs, message, monkeypatch):
    monkeypatch.setattr(_attention._library, "load", lambda: pytest.fail("the library was reached"))
    q, k, v = qkv()
    args = (q, k, v, FakeTensor((3,), "torch.int32"), FakeTensor((3,), "torch.int32"), 64, 96) \
        if function == "flash_attn_varlen_func" else (q, k, v)
    with pytest.raises(NotImplementedError) as raised:
        getattr(flashjit, function)(*args, **kwargs)
    assert f"flashjit.{function}: " in str(raised.value) and message in str(raised.value)


def test_flash_attn_varlen_block_table_reaches_attention_varlen(captured):
    """block_table is attention_varlen's page_table; FA3's seqused_k is passed on, and without it the key counts
    are FA2's: the differences of cu_seqlens_k (torch ops, so on real tensors only: here a stand-in with slicing
    and subtraction)."""
    q, k, v = qkv()
    table, used = FakeTensor((2, 8), "torch.int32"), FakeTensor((2,), "torch.int32")
    flashjit.flash_attn_varlen_func(q, k, v, "cu_q", "cu_k", 64, 96, causal=True, block_table=table, seqused_k=used)
    assert captured[-1] == (7, dict(causal=True, window_size=(-1, -1), softmax_scale=None, page_table=table,
                                    seqused_k=used))
    with pytest.raises(ValueError, match="block_table needs each sequence's key count"):
        flashjit.flash_attn_varlen_func(q, k, v, "cu_q", None, 64, 96, block_table=table)
    with pytest.raises(ValueError, match=r"cu_seqlens_k must have shape \[batch \+ 1\]"):
        flashjit.flash_attn_varlen_func(q, k, v, "cu_q", FakeTensor((1,), "torch.int32"), 64, 96, block_table=table)


def test_flash_attn_varlen_block_table_positions_cu_seqlens_k_is_none(monkeypatch):
    """With block_table and cu_seqlens_k, attention_varlen gets cu_seqlens_k None (positional argument 5) and the
    derived counts."""
    calls = []
    from flashjit import _flash_attn
    monkeypatch.setattr(_flash_attn, "attention_varlen", lambda *a, **kw: calls.append((a, kw)) or "o")
    monkeypatch.setattr(_flash_attn, "_key_counts", lambda cu, q: ("counts of", cu))
    q, k, v = qkv()
    table = FakeTensor((2, 8), "torch.int32")
    flashjit.flash_attn_varlen_func(q, k, v, "cu_q", "cu_k", 64, 96, block_table=table)
    (args, kwargs), = calls
    assert args[3:] == ("cu_q", None, 64, 96)
    assert kwargs["page_table"] is table and kwargs["seqused_k"] == ("counts of", "cu_k")


def test_select_answers_per_arch_without_a_gpu():
    llama = flashjit.select((1, 4096, 32, 128), (1, 4096, 8, 128), causal=True, arch="sm_90a")
    assert (llama["algorithm"], llama["block_m"], llama["scheduler"], llama["mask"]) == ("fa3", 128, "persistent",
                                                                                        "causal")
    small = flashjit.select((1, 128, 8, 128), arch="sm_90a", sms=132)
    assert (small["algorithm"], small["block_m"]) == ("fa3", 64)
    ampere = flashjit.select((2, 1000, 8, 64), dtype="fp16", window_size=(128, 0), arch="sm_80")
    assert (ampere["algorithm"], ampere["arch"], ampere["dtype"], ampere["mask"]) == ("fa2", "sm_80", "fp16",
                                                                                       "sliding_window")
    chunked = flashjit.select((1, 512, 8, 64), causal=True, chunk_size=128, varlen=True, arch="sm_90a")
    assert chunked["mask"] == "chunked_causal" and chunked["varlen"] is True
    assert flashjit.select((1, 512, 8, 64), arch="sm_90a", gpu="NVIDIA H200") == flashjit.select((1, 512, 8, 64),
                                                                                                arch="sm_90a")


def test_select_of_paged_problems():
    """page_size= asks for the paged kernel (dense or ragged queries); the config carries the page size."""
    hopper = flashjit.select((2, 512, 32, 128), (2, 8192, 8, 128), causal=True, page_size=16, arch="sm_90a")
    assert (hopper["algorithm"], hopper["page_size"], hopper["mask"], hopper["varlen"]) == ("fa3", 16, "causal", False)
    ampere = flashjit.select((4, 256, 8, 64), (4, 4096, 8, 64), page_size=256, varlen=True, arch="sm_80")
    assert (ampere["algorithm"], ampere["page_size"], ampere["varlen"]) == ("fa2", 256, True)
    assert "page_size" not in flashjit.select((2, 512, 32, 128), arch="sm_90a")
    for bad in (3, 512, -1, True, 1.5):
        with pytest.raises(ValueError, match="page_size"):
            flashjit.select((1, 64, 8, 64), page_size=bad, arch="sm_90a")


def test_select_of_relative_logits_and_key_counts():
    """rel_bias= and seqused_k= (over contiguous keys) ask for the kernels of calls with them; their configs say so."""
    plain = flashjit.select((2, 512, 32, 128), causal=True, arch="sm_90a")
    assert "rel_bias" not in plain and "seqused_k" not in plain
    rel = flashjit.select((2, 512, 32, 128), causal=True, rel_bias=True, arch="sm_90a")
    used = flashjit.select((2, 512, 32, 128), (2, 1024, 8, 128), seqused_k=True, varlen=True, arch="sm_90a")
    both = flashjit.select((2, 512, 8, 64), rel_bias=True, seqused_k=True, arch="sm_80")
    assert rel["rel_bias"] is True and rel["algorithm"] == "fa3"
    assert used["seqused_k"] is True and used["varlen"] is True
    assert (both["rel_bias"], both["seqused_k"], both["algorithm"]) == (True, True, "fa2")
    for name in ("rel_bias", "seqused_k"):
        with pytest.raises(ValueError, match=f"{name} must be True or False"):
            flashjit.select((1, 64, 8, 64), arch="sm_90a", **{name: 1})


def test_select_decode_answers_per_sm_count():
    many = flashjit.select_decode((1, 1, 32, 128), (1, 32768, 8, 128), arch="sm_90a")
    assert many["num_splits"] > 1 and many["combine"]["kernel"] == "combine" and many["workspace_bytes"] > 0
    assert many["split"]["kernel"] == "decode" and many["split"]["layout"] == "contiguous"
    assert many["num_splits"] * many["keys_per_split"] >= 32768
    few = flashjit.select_decode((1, 1, 32, 128), (1, 32768, 8, 128), arch="sm_90a", sms=8)
    assert (few["num_splits"], few["combine"], few["workspace_bytes"]) == (1, None, 0)
    paged = flashjit.select_decode((4, 4, 32, 128), (4096, 16, 8, 128), page_table_shape=(4, 1024),
                                   window_size=(256, 0), num_splits=2, arch="sm_80", sms=108)
    assert (paged["split"]["layout"], paged["split"]["page_size"], paged["split"]["mask"]) == ("paged", 16,
                                                                                               "sliding_window")
    assert paged["num_splits"] == 2 and paged["split"]["arch"] == "sm_80"
    assert flashjit.select_decode((1, 1, 8, 64), (1, 4096, 8, 64), chunk_size=512, arch="sm_90a")["split"]["mask"] \
        == "chunked_causal"


@pytest.mark.parametrize("call,error,message", [
    (lambda: flashjit.select((1, 128, 8, 64), arch="sm_9x"), flashjit.FlashjitError, 'target arch "sm_9x"'),
    (lambda: flashjit.select((1, 128, 8, 64), arch=90), ValueError, "arch must be a string"),
    (lambda: flashjit.select((1, 128, 8, 64), arch="sm_90a", sms=0), ValueError, "sms must be a positive integer"),
    (lambda: flashjit.select((1, 128, 8, 64), sms=132), ValueError, "pass arch too"),
    (lambda: flashjit.select((1, 128, 8), arch="sm_90a"), ValueError, "q_shape must be"),
    (lambda: flashjit.select((1, 128, 8, 64), dtype="fp32", arch="sm_90a"), ValueError, "dtype must be"),
    (lambda: flashjit.select((1, 128, 8, 60), arch="sm_90a"), flashjit.FlashjitError, "head_dim"),
    (lambda: flashjit.select_decode((1, 1, 8, 64), (1, 4096, 8, 64), window_size=(8, 8), arch="sm_90a"), ValueError,
     "the right size must be 0 or -1"),
    (lambda: flashjit.select_decode((1, 1, 8, 64), (2, 4096, 8, 64), arch="sm_90a"), ValueError,
     "k_cache: batch 2 differs from q's 1"),
    (lambda: flashjit.select_decode((1, 1, 8, 64), (1, 4096, 8, 64), split_merge="cluster", arch="sm_80"),
     flashjit.FlashjitError, "a sm_80 target with 132 SMs"),
])
def test_select_errors_name_what_is_wrong(call, error, message):
    with pytest.raises(error) as raised:
        call()
    assert message in str(raised.value)


def test_select_without_arch_and_the_c_structs():
    assert _abi.Target().struct_size == 8 + 8 + 8 + 8  # size_t, const char*, int (padded), const char*
    assert [name for name, _ in _abi.Target._fields_] == ["struct_size", "arch", "sms", "gpu_name"]
    done = run_python("import sys, flashjit; flashjit.select((1, 64, 8, 64), arch='sm_90a'); "
                      "print('torch' in sys.modules)")
    assert done.returncode == 0 and done.stdout.strip() == "False", done.stderr


def test_flash_attn_with_kvcache_checks_before_torch():
    """Refusals and argument errors come before torch is imported (a process without torch gets them too)."""
    code = ("import sys, flashjit\nfrom fakes import qkv\nq, k, v = qkv()\n"
            "try:\n    flashjit.flash_attn_with_kvcache(q, k, v, rotary_cos=q)\n"
            "except NotImplementedError as e:\n    print('refused', 'torch' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": f"{PYTHON_DIR}:{PYTHON_DIR}/tests", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0 and done.stdout.split() == ["refused", "False"], done.stdout + done.stderr
