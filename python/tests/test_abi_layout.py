"""_abi.py against include/flashjit/flashjit.h: every ctypes struct has the C struct's fields, in its order, at its
offsets, with its size, as a C compiler lays them out (skipped without one). A field the header appends and the
mirror lacks, or one at another offset, fails here rather than as a wrong value in the library."""
import ctypes
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from flashjit import _abi

SOURCE_DIR = Path(__file__).resolve().parents[2]

STRUCTS = {
    "flashjit_runtime_options": _abi.RuntimeOptions,
    "flashjit_strides": _abi.Strides,
    "flashjit_bias_strides": _abi.BiasStrides,
    "flashjit_attention_args": _abi.AttentionArgs,
    "flashjit_decode_args": _abi.DecodeArgs,
    "flashjit_append_args": _abi.AppendArgs,
    "flashjit_block_mask_args": _abi.BlockMaskArgs,
    "flashjit_merge_args": _abi.MergeArgs,
    "flashjit_target": _abi.Target,
}


BIAS = ["bias", "bias_type", "bias_strides"]
REL_BIAS = ["rel_bias", "rel_bias_head_stride", "rel_bias_extent", "rel_bias_offset"]  # flashjit_attention_args only


def c_compiler():
    for variable in ("FLASHJIT_CC", "CC"):
        if os.environ.get(variable):
            return os.environ[variable].split()
    found = next((shutil.which(c) for c in ("cc", "gcc", "clang") if shutil.which(c)), None)
    return None if found is None else [found]


def header_fields():
    """{struct: [(field, offset, size), ...] in the header's order, plus ("sizeof", size, 0)} from the C compiler:
    the fields' names are the header's, read by the compiler from a list of every name the header declares."""
    cc = c_compiler()
    if cc is None:
        pytest.skip("no C compiler: set FLASHJIT_CC")
    header = (SOURCE_DIR / "include" / "flashjit" / "flashjit.h").read_text()
    lines = ["#include <stdio.h>", "#include <stddef.h>", "#include \"flashjit/flashjit.h\"", "int main(void) {"]
    for struct in STRUCTS:
        body = header.split(f"typedef struct {struct} {{", 1)[1].split(f"}} {struct};", 1)[0]
        for name in declared_names(body):
            lines.append(f'  printf("{struct} {name} %zu %zu\\n", offsetof({struct}, {name}), '
                         f"sizeof((({struct}*)0)->{name}));")
        lines.append(f'  printf("{struct} sizeof %zu 0\\n", sizeof({struct}));')
    lines += ["  return 0;", "}"]
    return run_c("\n".join(lines), cc)


def declared_names(body):
    """The member names of a struct body: the last identifier before each ';' outside comments (an array's
    extent dropped)."""
    import re
    text = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    names = []
    for declaration in text.split(";"):
        declaration = re.sub(r"\[[^\]]*\]", "", declaration).strip()
        if not declaration:
            continue
        match = re.search(r"\(\s*\*\s*(\w+)\s*\)\s*\(", declaration)  # a function pointer: (*name)(...)
        names.append(match.group(1) if match else re.findall(r"\w+", declaration)[-1])
    return names


def run_c(source, cc):
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / "layout"
        built = subprocess.run([*cc, "-x", "c", "-std=c99", f"-I{SOURCE_DIR / 'include'}", "-o", str(exe), "-"],
                               input=source, capture_output=True, text=True, timeout=120)
        assert built.returncode == 0, built.stderr
        out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60, check=True).stdout
    fields = {}
    for line in out.splitlines():
        struct, name, offset, size = line.split()
        fields.setdefault(struct, []).append((name, int(offset), int(size)))
    return fields


@pytest.fixture(scope="module")
def layout():
    return header_fields()


@pytest.mark.parametrize("struct", list(STRUCTS))
def test_ctypes_struct_is_the_c_struct(struct, layout):
    mirror = STRUCTS[struct]
    expected = layout[struct]
    c_fields = [(name, offset, size) for name, offset, size in expected if name != "sizeof"]
    ours = [(name, getattr(mirror, name).offset, getattr(mirror, name).size) for name, _ in mirror._fields_]
    assert ours == c_fields, f"_abi.{mirror.__name__} differs from {struct} in flashjit.h"
    assert ctypes.sizeof(mirror) == dict((n, o) for n, o, _ in expected)["sizeof"]


def test_struct_size_defaults_are_the_full_size():
    for mirror in (_abi.RuntimeOptions, _abi.AttentionArgs, _abi.DecodeArgs, _abi.AppendArgs, _abi.MergeArgs,
                   _abi.Target):
        assert mirror().struct_size == ctypes.sizeof(mirror)


def test_variant_fields_default_off():
    for mirror in (_abi.AttentionArgs, _abi.DecodeArgs):
        args = mirror()
        assert (args.softcap, args.alibi_slopes, args.alibi_slopes_batch_stride, args.sinks) == (0.0, None, 0, None)
        assert (args.score_mod, args.mask_mod) == (None, None)
        assert list(args.aux_pointers) == [None] * 8 and list(args.aux_scalars) == [0.0] * 8
        assert list(args.aux_integers) == [0] * 8
    assert _abi.AttentionArgs().alignment == _abi.ALIGN_BOTTOM_RIGHT


def test_paged_fields_default_off(layout):
    """The paged fields of flashjit_attention_args are its last ones, start where the struct before them ended (its
    sizeof, so that a caller of the older header covers none of them), and default to contiguous keys."""
    fields = [name for name, _, _ in layout["flashjit_attention_args"] if name != "sizeof"]
    paged = ["page_table", "seqused_k", "page_size", "num_pages", "max_pages_per_seq", "check_pages"]
    csr = ["page_indptr", "last_page_len"]
    block_mask = [name for name, _ in _abi.BLOCK_MASK_FIELDS]
    tail = len(BIAS) + len(REL_BIAS)
    assert fields[-len(paged) - len(csr) - len(block_mask) - tail - 1:-tail] == ["alignment"] + paged + csr + block_mask
    offsets = {name: offset for name, offset, _ in layout["flashjit_attention_args"]}
    alignment_end = offsets["alignment"] + ctypes.sizeof(ctypes.c_int)
    pointer = ctypes.sizeof(ctypes.c_void_p)
    assert offsets["page_table"] == -(-alignment_end // pointer) * pointer  # the older struct's tail padding
    args = _abi.AttentionArgs()
    assert [getattr(args, name) for name in paged + csr] == [None, None, 0, 0, 0, 0, None, None]
    # The CSR fields start where the struct ended before them (after check_pages, rounded to a pointer).
    check_pages_end = offsets["check_pages"] + ctypes.sizeof(ctypes.c_int)
    assert offsets["page_indptr"] == -(-check_pages_end // pointer) * pointer


def test_block_mask_fields_default_off(layout):
    """The block mask's fields end flashjit_attention_args, start where the struct ended before them (after
    last_page_len) and default to no block mask."""
    offsets = {name: offset for name, offset, _ in layout["flashjit_attention_args"]}
    assert offsets["bm_kv_num_blocks"] == offsets["last_page_len"] + ctypes.sizeof(ctypes.c_void_p)
    args = _abi.AttentionArgs()
    assert (args.bm_kv_num_blocks, args.bm_kv_indices, args.bm_full_kv_num_blocks, args.bm_full_kv_indices) == \
        (None, None, None, None)
    assert (args.bm_q_block, args.bm_kv_block, args.bm_batch_stride, args.bm_head_stride) == (0, 0, 0, 0)


def test_decode_csr_fields_default_off(layout):
    """The CSR page-table fields end flashjit_decode_args, after the fused append's seqlens_out, start where the
    struct ended before them (so that a caller of the older header covers none of them) and default to the dense
    table."""
    fields = [name for name, _, _ in layout["flashjit_decode_args"] if name != "sizeof"]
    assert fields[-3 - len(BIAS):-len(BIAS)] == ["seqlens_out", "page_indptr", "last_page_len"]
    offsets = {name: offset for name, offset, _ in layout["flashjit_decode_args"]}
    pointer = ctypes.sizeof(ctypes.c_void_p)
    assert offsets["page_indptr"] == offsets["seqlens_out"] + pointer
    args = _abi.DecodeArgs()
    assert (args.page_indptr, args.last_page_len) == (None, None)


def test_append_csr_fields_default_off(layout):
    """The CSR page-table fields end flashjit_append_args, after the stream, start where the struct ended before them
    (so that a caller of the older header covers none of them) and default to the dense table."""
    fields = [name for name, _, _ in layout["flashjit_append_args"] if name != "sizeof"]
    assert fields[-3:] == ["stream", "page_indptr", "last_page_len"]
    offsets = {name: offset for name, offset, _ in layout["flashjit_append_args"]}
    pointer = ctypes.sizeof(ctypes.c_void_p)
    assert offsets["page_indptr"] == offsets["stream"] + pointer
    args = _abi.AppendArgs()
    assert (args.page_indptr, args.last_page_len) == (None, None)


@pytest.mark.parametrize("struct, before, after", [("flashjit_attention_args", "bm_head_stride", REL_BIAS),
                                                   ("flashjit_decode_args", "last_page_len", [])])
def test_bias_fields_end_the_structs(struct, before, after, layout):
    """The bias fields follow the block mask's bm_head_stride (attention; the relative-logits table's fields after
    them end the struct) or end the struct after the CSR table's last_page_len (decode), start where the struct
    ended before them (so that a caller of the older header covers none of them) and default to no bias."""
    fields = [name for name, _, _ in layout[struct] if name != "sizeof"]
    assert fields[-len(BIAS) - len(after) - 1:] == [before] + BIAS + after
    offsets = {name: offset for name, offset, _ in layout[struct]}
    assert offsets["bias"] == offsets[before] + 8
    args = STRUCTS[struct]()
    assert (args.bias, args.bias_type) == (None, 0)
    assert (args.bias_strides.batch, args.bias_strides.head, args.bias_strides.q, args.bias_strides.k) == (0, 0, 0, 0)


def test_rel_bias_fields_end_the_attention_struct(layout):
    """The relative-logits table's fields end flashjit_attention_args, start where the struct ended before them (after
    the bias strides: no caller of the older header covers them) and default to no table."""
    fields = [name for name, _, _ in layout["flashjit_attention_args"] if name != "sizeof"]
    assert fields[-len(REL_BIAS) - 1:] == ["bias_strides"] + REL_BIAS
    offsets = {name: offset for name, offset, _ in layout["flashjit_attention_args"]}
    assert offsets["rel_bias"] == offsets["bias_strides"] + ctypes.sizeof(_abi.BiasStrides)
    args = _abi.AttentionArgs()
    assert (args.rel_bias, args.rel_bias_head_stride, args.rel_bias_extent, args.rel_bias_offset) == (None, 0, 0, 0)
