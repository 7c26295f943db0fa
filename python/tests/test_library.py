"""The package over libflashjit.so without a GPU: loading, version, emit, compile into the session's cache,
cache info, and the library's errors surfacing as FlashjitError."""
import ctypes
import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import flashjit
from flashjit import _abi, _library
from fakes import FakeTensor, qkv

PYTHON_DIR = str(Path(__file__).resolve().parents[1])
FA2 = {"algorithm": "fa2", "arch": "sm_80", "head_dim": 64}


def run_python(code, **env):
    """Runs code in a fresh interpreter (the library and the runtime are per process)."""
    environment = {**os.environ, "PYTHONPATH": PYTHON_DIR, **env}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environment, timeout=120)


def test_version():
    assert re.fullmatch(r"\d+\.\d+\.\d+", flashjit.version())


def test_emit_from_dict_and_json():
    source = flashjit.emit(FA2)
    assert 'extern "C"' in source
    assert flashjit.emit(json.dumps(FA2)) == source


def test_emit_invalid_config_raises_with_the_library_message():
    with pytest.raises(flashjit.FlashjitError) as raised:
        flashjit.emit({"algorithm": "fa2", "head_dim": 60})
    assert raised.value.status == _abi.ERROR_INVALID_CONFIG
    assert raised.value.status_name == "invalid config"
    assert "head_dim" in str(raised.value)
    assert isinstance(raised.value, RuntimeError)


def test_emit_and_precompile_every_kernel_kind():
    decode = flashjit.emit({"kernel": "decode", "head_dim": 64, "layout": "paged", "page_size": 16})
    assert "flashjit::decode::SplitKernel<" in decode and "/*page_size=*/16" in decode
    assert "flashjit::decode::CombineKernel<" in flashjit.emit({"kernel": "combine", "head_dim": 128})
    # Fields left out take the dispatcher's choice: fa3 at d64 runs three consumer warpgroups.
    assert "/*consumer_warpgroups=*/3" in flashjit.emit({"algorithm": "fa3", "head_dim": 64})
    info = flashjit.precompile({"kernel": "combine", "head_dim": 64, "arch": "sm_80"})
    assert info["name"] == "combine_f32_bf16_d64_w4_sm80"
    assert info["config"]["kernel"] == "combine"
    with pytest.raises(flashjit.FlashjitError, match="fa3 kernels have no warps"):
        flashjit.emit({"algorithm": "fa3", "warps": 2})


def test_emit_malformed_json():
    with pytest.raises(flashjit.FlashjitError, match="not valid JSON"):
        flashjit.emit("{algorithm")


def test_precompile_a_config_into_the_cache():
    info = flashjit.precompile(FA2)
    assert info["name"].startswith("fa2_bf16_d64_")
    assert info["config"]["arch"] == "sm_80"
    assert info["registers"] > 0 and info["spill_stores"] >= 0 and info["compile_ms"] > 0
    cache = flashjit.cache_info()
    assert cache["dir"] == os.environ["FLASHJIT_CACHE_DIR"]
    assert cache["writable"] is True
    assert cache["entries"] >= 1 and cache["bytes"] > 0


def test_precompile_in_a_fresh_process_is_a_disk_hit():
    # Both in fresh processes: one that imported torch first may run torch's NVRTC, a different cache key.
    code = "import flashjit, json; print(json.dumps(flashjit.precompile(%r)))" % (FA2,)
    first, second = run_python(code), run_python(code)
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert json.loads(second.stdout)["cache_hit"] is True


def test_forward_on_fake_pointers_raises_the_library_error():
    q, k, v = qkv()
    with pytest.raises(flashjit.FlashjitError) as raised:
        flashjit.attention(q, k, v, out=FakeTensor(q.shape), stream=0)
    # No GPU: the driver is missing; with one: these are not device pointers.
    assert raised.value.status in (_abi.ERROR_NO_DEVICE, _abi.ERROR_INVALID_ARGUMENT)
    assert re.search(r"no CUDA driver|cuInit failed|not a CUDA device pointer", str(raised.value))


def test_forward_error_from_the_library_checks():
    # Python's checks pass (strides are multiples of 8), the library's own check rejects the batch count.
    q, k, v = qkv(b=70000, sq=1, sk=1, hq=1, hkv=1, d=8)
    with pytest.raises(flashjit.FlashjitError) as raised:
        flashjit.attention(q, k, v, out=FakeTensor(q.shape), stream=0)
    assert raised.value.status == _abi.ERROR_INVALID_ARGUMENT
    assert "batch and heads_q must be <= 65535" in str(raised.value)


def test_runtime_is_created_once_across_threads():
    results, errors = [], []

    def query():
        try:
            results.append(flashjit.cache_info()["dir"])
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=query) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(set(results)) == 1


def test_lookup_order(monkeypatch):
    monkeypatch.delenv("FLASHJIT_LIBRARY", raising=False)
    (first, inside), (second, build) = _library.candidates()
    assert inside.parent == Path(flashjit.__file__).resolve().parent
    assert build == Path(PYTHON_DIR).parent / "build" / "libflashjit.so"
    monkeypatch.setenv("FLASHJIT_LIBRARY", "/elsewhere/libflashjit.so")
    assert _library.candidates() == [("$FLASHJIT_LIBRARY", Path("/elsewhere/libflashjit.so"))]


def test_missing_library_names_the_places_tried(tmp_path):
    missing = tmp_path / "libflashjit.so"
    done = run_python("import flashjit; flashjit.version()", FLASHJIT_LIBRARY=str(missing))
    assert done.returncode != 0
    assert "cannot load libflashjit.so" in done.stderr and str(missing) in done.stderr
    assert "FlashjitError" in done.stderr


def test_library_that_is_not_a_shared_object(tmp_path):
    bogus = tmp_path / "libflashjit.so"
    bogus.write_text("not an ELF file")
    done = run_python("import flashjit; flashjit.version()", FLASHJIT_LIBRARY=str(bogus))
    assert done.returncode != 0 and str(bogus) in done.stderr


def test_import_and_cpu_use_do_not_import_torch():
    done = run_python("import sys, flashjit; flashjit.emit(%r); flashjit.cache_info(); print('torch' in sys.modules)" % (FA2,))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def fake_decode_inputs(q_len=1, paged=False):
    b, hq, hkv, d = 2, 8, 2, 64
    q = FakeTensor((b, q_len, hq, d))
    cache = (40, 16, hkv, d) if paged else (b, 96, hkv, d)
    extra = {"page_table": FakeTensor((b, 6), "torch.int32")} if paged else {}
    return (q, FakeTensor(cache), FakeTensor(cache), FakeTensor((b,), "torch.int32")), dict(extra, out=FakeTensor(q.shape))


@pytest.mark.parametrize("paged", [False, True], ids=["contiguous", "paged"])
def test_decode_on_fake_pointers_raises_the_library_error(paged):
    tensors, kwargs = fake_decode_inputs(paged=paged)
    with pytest.raises(flashjit.FlashjitError) as raised:
        flashjit.decode(*tensors, stream=0, **kwargs)
    assert raised.value.status in (_abi.ERROR_NO_DEVICE, _abi.ERROR_INVALID_ARGUMENT)
    assert re.search(r"no CUDA driver|cuInit failed|not a CUDA device pointer", str(raised.value))


def test_decode_error_from_the_library_checks():
    # Python's checks pass, the library's limit on new tokens per sequence rejects q_len 17.
    tensors, kwargs = fake_decode_inputs(q_len=17)
    with pytest.raises(flashjit.FlashjitError) as raised:
        flashjit.decode(*tensors, stream=0, **kwargs)
    assert raised.value.status == _abi.ERROR_INVALID_ARGUMENT
    assert "q_len must be in [1, 16]" in str(raised.value)


def test_merge_on_fake_pointers_raises_the_library_error():
    outs = [FakeTensor((2, 3, 8, 64)) for _ in range(2)]
    lses = [FakeTensor((2, 8, 3), "torch.float32") for _ in range(2)]
    with pytest.raises(flashjit.FlashjitError) as raised:
        flashjit.merge(outs, lses, out=FakeTensor((2, 3, 8, 64)), stream=0)
    assert raised.value.status in (_abi.ERROR_NO_DEVICE, _abi.ERROR_INVALID_ARGUMENT)


@pytest.mark.parametrize("field,value,message", [
    ("layout", 7, "layout 7 is not a flashjit_kv_layout"),
    ("cache_seqlen", 10, "exceeds the contiguous cache's cache_seqlen (10)"),
    ("k_strides", _abi.Strides(0, 0, 12), "k_cache head stride must be a positive multiple of 8"),
    ("v_strides", _abi.Strides(0, 20, 0), "v_cache sequence stride must be a positive multiple of 8"),
    ("window_left", -3, "window_left must be >= 0 or -1"),
    ("softmax_scale", -2.0, "softmax_scale must be positive"),
    ("num_splits", 99, "num_splits must be 0 (planned) or in [1, "),
    ("split_merge", 5, "split_merge must be automatic (0), combine_kernel (1) or cluster (2), got 5"),
    ("workspace_bytes", 64, "workspace is NULL but workspace_bytes is 64"),
    ("chunk_size", -1, "chunk_size must be > 0 or 0 (no chunks), got -1"),
])
def test_decode_args_struct_matches_the_header(field, value, message):
    # Each optional field of the ctypes mirror lands where libflashjit reads it: a bad value is named.
    args = _abi.DecodeArgs(q=0x10000, o=0x20000, k_cache=0x30000, v_cache=0x40000, seqlens_k=0x50000, batch=2,
                           q_len=1, heads_q=8, heads_kv=2, head_dim=64, dtype=_abi.DTYPE_BF16, max_seqlen_k=96)
    setattr(args, field, value)
    lib = _library.load()
    assert lib.flashjit_decode(flashjit._runtime.handle(), ctypes.byref(args)) == _abi.ERROR_INVALID_ARGUMENT
    assert message in lib.flashjit_last_error().decode()


def test_merge_args_struct_matches_the_header():
    o_in = (ctypes.c_void_p * 2)(0x10000, 0x20000)
    lse_in = (ctypes.c_void_p * 2)(0x30000, 0x40000)
    args = _abi.MergeArgs(dtype=_abi.DTYPE_FP16, batch=1, seqlen=3, heads=4, head_dim=64, num_states=2, o_in=o_in,
                          lse_in=lse_in, o=0x50000, lse=0x60002)
    lib = _library.load()
    assert lib.flashjit_merge(flashjit._runtime.handle(), ctypes.byref(args)) == _abi.ERROR_INVALID_ARGUMENT
    assert "lse must be 4-byte aligned" in lib.flashjit_last_error().decode()
    args.lse, args.o_strides = None, _abi.Strides(-5, 0, 0)
    assert lib.flashjit_merge(flashjit._runtime.handle(), ctypes.byref(args)) == _abi.ERROR_INVALID_ARGUMENT
    assert "o_strides batch stride must be positive" in lib.flashjit_last_error().decode()


def test_runtime_options_struct_matches_the_header(tmp_path):
    # The ctypes mirror's last fields land where libflashjit reads them: the tuned table list, the log callback
    # with its user pointer, and pdl / check_pages (a bad value is named).
    lib = _library.load()
    seen = []
    callback = _abi.LogCallback(lambda level, message, user: seen.append((level, message.decode(), user)))
    missing = tmp_path / "missing.json"
    options = _abi.RuntimeOptions(cache_dir=str(tmp_path / "cache").encode(), log_level=_abi.LOG_DEBUG,
                                  tuned_tables=f"{missing}::".encode(), pdl=-1, check_pages=1,
                                  log_callback=callback, log_user=1234)
    created = ctypes.c_void_p()
    assert lib.flashjit_runtime_create(ctypes.byref(options), ctypes.byref(created)) == _abi.OK
    lib.flashjit_runtime_destroy(created)
    assert any(level == _abi.LOG_WARN and "ignoring tuned table" in text and str(missing) in text and user == 1234
               for level, text, user in seen)
    options.pdl = 2
    assert lib.flashjit_runtime_create(ctypes.byref(options), ctypes.byref(created)) == _abi.ERROR_INVALID_ARGUMENT
    assert "pdl is 2" in lib.flashjit_last_error().decode()
