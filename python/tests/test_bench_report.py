"""The pure helpers of tools/bench/attention_bench.py: sweeps, FLOP counts, timing-method choice, tables."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "bench"))
import attention_report as report  # noqa: E402


def brute_force_pairs(sq, sk, causal, window):
    left, right = window
    if causal:
        right = 0
    return sum(1 for i in range(sq) for j in range(sk)
               if (left < 0 or j >= i + sk - sq - left) and (right < 0 or j <= i + sk - sq + right))


@pytest.mark.parametrize("sq,sk,causal,window", [
    (17, 17, False, (-1, -1)), (17, 17, True, (-1, -1)), (5, 40, True, (-1, -1)), (40, 5, True, (-1, -1)),
    (33, 33, False, (4, 2)), (33, 50, True, (7, -1)), (50, 33, False, (-1, 3)), (1, 1000, True, (-1, -1)),
])
def test_visible_pairs(sq, sk, causal, window):
    assert report.visible_pairs(sq, sk, causal, window) == brute_force_pairs(sq, sk, causal, window)


def test_attention_flops():
    s = report.shape(1, 16384, 16384, 32, 8, 128, causal=False)
    assert report.attention_flops(s) == 4 * 32 * 16384**2 * 128  # 4.40 TFLOP, as in bench/NOTES.md
    causal = dict(s, causal=True)
    assert report.attention_flops(causal) == 4 * 32 * (16384 * 16385 // 2) * 128


def test_sweeps():
    llama = report.llama3_sweep()
    assert len(llama) == 2 * 11
    assert {(s["heads_q"], s["heads_kv"], s["head_dim"], s["batch"], s["dtype"]) for s in llama} == {(32, 8, 128, 1, "bf16")}
    assert [s["seqlen_q"] for s in llama if not s["causal"]] == report.LLAMA3_SEQLENS
    grid = report.fa3_grid()
    assert {(s["head_dim"], s["heads_q"]) for s in grid} == {(64, 32), (128, 16), (256, 8)}
    assert all(s["seqlen_q"] == 16384 and s["heads_q"] * s["head_dim"] == 2048 for s in grid)


def test_variant_sweep():
    shapes = report.variant_sweep()
    variants = [s for s in shapes if report.has_variant(s)]
    plain = [s for s in shapes if not report.has_variant(s)]
    # every variant case runs next to the same shape without it, in the same process
    strip = lambda s: {k: v for k, v in s.items() if k not in ("softcap", "alibi", "sinks", "bias")}  # noqa: E731
    assert all(strip(s) in plain for s in variants)
    assert {report.label(s) for s in variants} >= {"B1 S8192 H32/8 D128 causal softcap 50",
                                                   "B1 S8192 H64/8 D64 window 128 sinks",
                                                   "B1 S8192 H32/8 D128 causal alibi",
                                                   "B1 S4096 H32/8 D128 causal bias bf16 [1, H, S, S]",
                                                   "B1 S4096 H32/8 D128 full bias bf16 [1, H, S, S]"}
    # a variant costs no extra FLOPs in the count
    assert all(report.attention_flops(s) == report.attention_flops(strip(s)) for s in variants)
    assert "softcap" not in report.shape(1, 8, 8, 1, 1, 64, False) and report.shape(1, 8, 8, 1, 1, 64, False,
                                                                                   sinks=True)["sinks"]


def test_timing_method_and_rotation():
    small = report.shape(1, 128, 128, 32, 8, 128, causal=False)
    method, calls = report.timing_method(report.attention_flops(small))
    assert method == "graph" and 1 < calls <= report.GRAPH_MAX_CALLS
    big = report.shape(1, 8192, 8192, 32, 8, 128, causal=False)
    assert report.timing_method(report.attention_flops(big)) == ("events", 1)
    assert report.rotation_sets(small) == report.MAX_SETS
    assert report.rotation_sets(report.shape(1, 4096, 4096, 32, 8, 128, causal=False)) == 3  # 84 MB a set
    assert report.rotation_sets(report.shape(1, 16384, 16384, 32, 8, 128, causal=False)) == 1
    assert report.io_bytes(small) == 2 * (2 * 128 * 32 * 128 + 2 * 128 * 8 * 128)


def rows():
    def result(tflops):
        return {"ms": 1.0, "tflops": tflops, "method": "events", "fraction_of_matmul": tflops / 800,
                "fraction_of_copy": 0.004}
    return [
        {"shape": report.shape(1, 4096, 4096, 32, 8, 128, causal=False), "method": "events",
         "flashjit_config": "fa3_bf16_d128", "check": {"against": "cudnn", "rel_l2": 3.1e-3, "ok": True},
         "results": {"flashjit": result(640.0), "cudnn": result(530.0), "torch_flash": result(320.0),
                     "torch_efficient": {"error": "No available kernel. Aborting execution."}}},
        {"shape": report.shape(1, 4096, 4096, 32, 8, 128, causal=True), "method": "events",
         "flashjit_config": "fa3_bf16_d128_causal", "check": {"against": "cudnn", "rel_l2": 0.5, "ok": False},
         "results": {"flashjit": result(520.0), "cudnn": result(400.0), "flex": result(300.0)}},
    ]


def test_markdown_table():
    text = report.markdown_table("llama3", rows(), {"matmul_tflops": 800.0, "copy_tb_s": 4.2},
                                 {"date": "2026-11-29", "gpu": "NVIDIA H200", "torch": "2.11"})
    lines = text.splitlines()
    assert lines[0] == "# llama3"
    assert "bf16 matmul 8192³ 800 TFLOP/s" in text and "4.20 TB/s" in text
    table = [line for line in lines if line.startswith("| B1")]
    assert len(table) == 2
    first = [cell.strip() for cell in table[0].strip("|").split("|")]
    # FA4 (not in these rows: not installed) has its column and ratio beside cuDNN's.
    assert first[:11] == ["B1 S4096 H32/8 D128 full", "fa3_bf16_d128", "events", "640", "–", "530", "320", "–", "–",
                          "–", "1.21"]
    assert first[11:] == ["2.00", "80", "0.4", "3.1e-03"]
    assert table[1].rstrip(" |").endswith("✗")
    assert "- B1 S4096 H32/8 D128 full, torch efficient: No available kernel" in text


def test_plot(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "llama3.png"
    report.plot("llama3", rows(), {"matmul_tflops": 800.0}, str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# -- decode sweep ---------------------------------------------------------------------------------------------


def test_decode_sweep():
    shapes = report.decode_sweep()
    assert len(shapes) == 3 + 6 * 7 + 2 * 3
    assert {(s["heads_q"], s["heads_kv"], s["head_dim"], s["q_len"], s["dtype"]) for s in shapes} == {(32, 8, 128, 1, "bf16")}
    assert [(s["batch"], s["seqlen_k"]) for s in shapes[:3]] == [(1, 32768), (64, 16384), (16, 8192)]
    grid = [(s["batch"], s["seqlen_k"]) for s in shapes if not s["page_size"]]
    assert len(grid) == len(set(grid)) == 45
    assert {(b, sk) for b in (4, 16, 32, 64, 128, 256) for sk in (32, 64, 128, 256, 512, 1024, 2048)} <= set(grid)
    paged = [(s["batch"], s["seqlen_k"], s["page_size"]) for s in shapes if s["page_size"]]
    assert paged == [(b, sk, ps) for ps in (16, 64) for b, sk in [(1, 32768), (64, 16384), (16, 8192)]]
    assert "decode" in report.SWEEPS


def test_decode_batch_sweep():
    shapes = report.SWEEPS["decode-batches"]()
    assert {s["seqlen_k"] for s in shapes} == {8192}
    assert [s["batch"] for s in shapes if not s["page_size"]] == [8, 9, 10, 12, 16, 20, 24, 32, 40, 48, 56, 64]
    assert [(s["batch"], s["page_size"]) for s in shapes if s["page_size"]] == [(10, 16), (20, 16), (24, 16), (40, 16)]


def test_decode_short_sweep():
    shapes = report.SWEEPS["decode-short"]()
    assert len(shapes) == 3 * 5 * 5
    assert {(s["head_dim"], s["page_size"]) for s in shapes} == {(128, 16), (128, 1), (64, 0)}
    assert {s["seqlen_k"] for s in shapes} == {32, 64, 128, 256, 512}
    assert {s["batch"] for s in shapes} == {4, 16, 32, 64, 128}
    assert all(s["kind"] == "decode" and s["heads_q"] == 32 and s["heads_kv"] == 8 for s in shapes)


def test_decode_small_sweep(tmp_path):
    shapes = report.SWEEPS["decode-small"]()
    assert [(s["batch"], s["seqlen_k"]) for s in shapes if not s["page_size"]] == [
        (b, sk) for b in (1, 2, 6, 8) for sk in (512, 1024, 2048, 4096, 8192, 16384)]
    assert {s["page_size"] for s in shapes} == {0, 16} and len(shapes) == 48
    pytest.importorskip("matplotlib")
    rows = [{"shape": s, "method": "graph", "check": {"against": "cudnn", "rel_l2": 2e-3, "ok": True},
             "results": {"flashjit": {"ms": 0.01, "gb_s": 900.0}, "cudnn": {"ms": 0.01, "gb_s": 800.0}}}
            for s in shapes]
    path = tmp_path / "decode-small.png"
    report.plot_decode(rows, {"matmul_tflops": 800.0, "copy_tb_s": 4.2}, str(path), "decode-small")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = report.decode_markdown_table(rows, {"copy_tb_s": 4.2}, {"date": "d", "gpu": "g"}, "decode-small")
    assert "| B1 Sk512 H32/8 D128 |" in table and "| B2 Sk16384 H32/8 D128 paged 16 |" in table


def test_decode_short_plot(tmp_path):
    pytest.importorskip("matplotlib")
    rows = [{"shape": s, "method": "graph", "check": {"against": "cudnn", "rel_l2": 2e-3, "ok": True},
             "results": {"flashjit": {"ms": 0.004, "gb_s": 100.0 + s["batch"]}, "cudnn": {"ms": 0.004, "gb_s": 100.0}}}
            for s in report.SWEEPS["decode-short"]()]
    path = tmp_path / "decode-short.png"
    report.plot_decode(rows, {"matmul_tflops": 800.0, "copy_tb_s": 4.2}, str(path), "decode-short")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = report.decode_markdown_table(rows, {"copy_tb_s": 4.2}, {"date": "d", "gpu": "g"}, "decode-short")
    assert "| B4 Sk32 H32/8 D64 |" in table and "| B128 Sk512 H32/8 D128 paged 1 |" in table


def test_decode_bytes_and_timing():
    s = report.decode_shape(64, 16384)
    assert report.kv_bytes(s) == 2 * 64 * 16384 * 8 * 128 * 2  # 4.3 GB: one set, one call per replay
    assert report.decode_timing(s) == (1, 1)
    small = report.decode_shape(4, 32)
    sets, calls = report.decode_timing(small)
    assert sets * report.decode_set_bytes(small) >= report.ROTATION_BYTES
    assert calls == report.DECODE_MAX_CALLS and sets <= calls
    mid = report.decode_shape(1, 32768)  # 134 MB of K/V
    sets, calls = report.decode_timing(mid)
    assert sets == 2 and calls % sets == 0 and calls * report.kv_bytes(mid) >= report.DECODE_GRAPH_TARGET_BYTES
    assert report.label(report.decode_shape(16, 8192, page_size=64)) == "B16 Sk8192 H32/8 D128 paged 64"
    assert report.label(report.decode_shape(1, 100, q_len=4)) == "B1 Sk100 q4 H32/8 D128"


def decode_rows():
    def result(gb_s, gqa=None):
        r = {"ms": 0.5, "gb_s": gb_s, "method": "graph", "fraction_of_copy": gb_s / 4200}
        return dict(r, gqa=gqa) if gqa else r
    return [
        {"shape": report.decode_shape(1, 32768), "method": "graph", "check": {"against": "cudnn", "rel_l2": 2e-3, "ok": True},
         "results": {"flashjit": result(3000.0), "cudnn": result(2000.0, "enable_gqa"),
                     "torch_flash": result(1500.0, "enable_gqa")}},
        {"shape": report.decode_shape(4, 32), "method": "graph",
         "check": {"against": "torch_flash", "rel_l2": 0.3, "ok": False},
         "results": {"flashjit": result(100.0), "cudnn": {"error": "No available kernel. Aborting execution."},
                     "torch_flash": result(50.0, "enable_gqa")}},
        {"shape": report.decode_shape(4, 64), "method": "graph", "check": {"against": "cudnn", "rel_l2": 1e-3, "ok": True},
         "results": {"flashjit": result(200.0), "cudnn": result(100.0, "enable_gqa"), "torch_flash": result(80.0, "enable_gqa")}},
        {"shape": report.decode_shape(1, 32768, page_size=16), "method": "graph",
         "check": {"against": "cudnn", "rel_l2": 2e-3, "ok": True},
         "results": {"flashjit": result(2800.0), "cudnn": result(2000.0, "enable_gqa"),
                     "torch_flash": result(1500.0, "enable_gqa")}},
    ]


def test_decode_markdown_table():
    text = report.decode_markdown_table(decode_rows(), {"matmul_tflops": 800.0, "copy_tb_s": 4.2},
                                        {"date": "2026-11-29", "gpu": "NVIDIA H200", "torch": "2.11"})
    lines = text.splitlines()
    assert lines[0] == "# decode"
    assert "4.20 TB/s" in text and "2·B·Sk·Hkv·D·2" in text
    assert "GQA in the peers: cuDNN: enable_gqa; torch flash (FA2): enable_gqa." in text
    table = [line for line in lines if line.startswith("| B")]
    assert len(table) == 4
    first = [cell.strip() for cell in table[0].strip("|").split("|")]
    assert first == ["B1 Sk32768 H32/8 D128", "graph", "500.0", "3000", "2000", "1500", "1.50", "2.00", "71.4", "2.0e-03"]
    second = [cell.strip() for cell in table[1].strip("|").split("|")]
    assert second[3:8] == ["100", "–", "50", "–", "2.00"]
    assert second[-1] == "3.0e-01 ✗ (vs torch flash (FA2))"
    assert table[3].startswith("| B1 Sk32768 H32/8 D128 paged 16 |")
    assert "- B4 Sk32 H32/8 D128, cuDNN: No available kernel" in text
    rows = decode_rows()
    rows[2]["check"] = {"against": None, "ok": False, "error": "invalid decode problem"}
    text = report.decode_markdown_table(rows, {"copy_tb_s": 4.2}, {})
    assert "| B4 Sk64 H32/8 D128 | graph |" in text and "✗ (failed, below) |" in text
    assert "- B4 Sk64 H32/8 D128, check: invalid decode problem" in text


def test_decode_plot(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "decode.png"
    report.plot_decode(decode_rows(), {"matmul_tflops": 800.0, "copy_tb_s": 4.2}, str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_decode_batch_plot(tmp_path):
    pytest.importorskip("matplotlib")
    rows = []
    for b, ps in ((8, 0), (9, 0), (10, 0), (10, 16)):
        rows.append({"shape": report.decode_shape(b, 8192, page_size=ps), "method": "graph",
                     "check": {"against": "cudnn", "rel_l2": 2e-3, "ok": True},
                     "results": {"flashjit": {"ms": 1.0, "gb_s": 4000.0 + b}, "cudnn": {"ms": 1.0, "gb_s": 3900.0}}})
    path = tmp_path / "decode-batches.png"
    report.plot_decode(rows, {"matmul_tflops": 800.0, "copy_tb_s": 4.2}, str(path), "decode-batches")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
