#!/usr/bin/env python3
"""Helper of tools/sass_diff.sh (python3 standard library only).

  sass_dump.py sweeps CONFIG_DIR
      Print the sweep files of CONFIG_DIR (*.json with a "problems" list; tuned tables and sub-folders skipped).
  sass_dump.py tuned OUT_DIR TABLE... [--fields best,runner_up,heuristic]
      Write each distinct config of the tuned tables' entries (field "best" by default) to OUT_DIR/tuned_NNN.json
      and print the paths.
  sass_dump.py coverage-sweep OUT_FILE
      Write a sweep that reaches past the shipped ones: bf16 and fp16, every mask, head dims 40 (the reference
      kernel) to 256, MHA and GQA; decode over contiguous and paged caches (1-, 16-, 64-token pages), q_len 1 and 4,
      with and without a sliding window.
  sass_dump.py varlen OUT_DIR --cache DIR
      For every prefill kernel in the cache, write its config with "varlen": true to OUT_DIR/varlen_NNN.json.
  sass_dump.py extract --cache DIR --side SIDE_DIR [--cuobjdump PATH] [-j N] [--reuse OTHER_SIDE_DIR]
      Read every entry of a flashjit disk cache (DIR/v1/<xx>/<key>.fjk), check it, write its cubin to
      SIDE_DIR/cubin/NAME.cubin and its normalized SASS to SIDE_DIR/sass/NAME.sass, keyed by the kernel's
      readable name (meta "name"), plus SIDE_DIR/manifest.json. With --reuse, a cubin byte-identical to one
      of OTHER_SIDE_DIR (same SHA-256; made with the same cuobjdump) takes that dump instead of disassembling.
  sass_dump.py diff BASE_SIDE HEAD_SIDE OUT_DIR [--allow-missing]
      Compare the two sides' dumps kernel by kernel; write OUT_DIR/diff/NAME.diff, OUT_DIR/summary.txt and
      OUT_DIR/result.json; exit 0 when every kernel is on both sides and identical (missing ones allowed with
      --allow-missing), 1 otherwise.

Cache entry format (src/cache/entry_format.hpp): line 1 "flashjit-kernel-cache 1", line 2 a JSON header with key,
meta, cubin_bytes, source_bytes and SHA-256 checksums, then the cubin bytes, then the generated source.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import difflib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

MAGIC = b"flashjit-kernel-cache 1"
DUMP_FORMAT = 2  # bump when the normalization changes: dumps of another format are not compared


def die(msg: str, code: int = 2) -> None:
    print(f"sass_dump: {msg}", file=sys.stderr)
    sys.exit(code)


# ---------------------------------------------------------------------------------------------- sweeps / tuned

def is_sweep(doc) -> bool:
    return (isinstance(doc, dict) and isinstance(doc.get("problems"), list) and bool(doc["problems"])
            and doc.get("format") != "flashjit-tuned-table")


def cmd_sweeps(args) -> int:
    for p in sorted(Path(args.config_dir).glob("*.json")):
        if not p.is_file():
            continue
        try:
            doc = json.loads(p.read_text())
        except (OSError, ValueError) as e:
            print(f"sass_dump: skipping {p}: not JSON ({e})", file=sys.stderr)
            continue
        if is_sweep(doc):
            print(p)
        else:
            print(f"sass_dump: skipping {p}: not a sweep file", file=sys.stderr)
    return 0


def cmd_tuned(args) -> int:
    fields = [f for f in args.fields.split(",") if f]
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    seen: dict[str, Path] = {}
    for table in args.tables:
        doc = json.loads(Path(table).read_text())
        if doc.get("format") != "flashjit-tuned-table":
            die(f"{table} is not a flashjit tuned table")
        for i, entry in enumerate(doc.get("entries", [])):
            for f in fields:
                cfg = entry.get(f)
                if not isinstance(cfg, dict):
                    continue
                text = json.dumps(cfg, sort_keys=True)
                if text in seen:
                    continue
                path = out / f"tuned_{len(seen):03d}.json"
                path.write_text(json.dumps(cfg) + "\n")
                seen[text] = path
    for p in seen.values():
        print(p)
    return 0


COVERAGE_SWEEP = {
    "name": "sass_diff_coverage",
    "description": "tools/sass_diff.sh --coverage: dtypes, masks, head dims, GQA groups and decode layouts past the "
                   "shipped sweeps",
    "problems": [
        {"dtype": ["bf16", "fp16"], "batch": 2, "heads_q": 32, "heads_kv": [8, 32], "head_dim": [40, 64, 96, 128, 256],
         "seqlen": [128, 4096], "mask": ["none", "causal", "sliding_window", "chunked", "chunked_causal"],
         "window_left": 256, "window_right": 0, "chunk_size": 1024},
        {"kind": "decode", "dtype": ["bf16", "fp16"], "batch": [1, 16], "q_len": [1, 4], "heads_q": 32,
         "heads_kv": [8, 32], "head_dim": [64, 128], "seqlen_k": [64, 512, 8192], "layout": ["contiguous", "paged"],
         "page_size": [1, 16, 64], "window_left": [-1, 256]},
    ],
}


def cmd_coverage_sweep(args) -> int:
    Path(args.out_file).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out_file).write_text(json.dumps(COVERAGE_SWEEP, indent=1) + "\n")
    print(args.out_file)
    return 0


def cmd_varlen(args) -> int:
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    configs = set()
    for path in sorted((Path(args.cache) / "v1").glob("*/*.fjk")):
        header, _ = read_entry(path)
        cfg = header.get("meta", {}).get("config")
        if isinstance(cfg, dict) and cfg.get("varlen") is False:  # prefill configs only have the field
            configs.add(json.dumps(dict(cfg, varlen=True), sort_keys=True))
    for i, text in enumerate(sorted(configs)):
        path = out / f"varlen_{i:03d}.json"
        path.write_text(text + "\n")
        print(path)
    return 0


# ---------------------------------------------------------------------------------------------------- extract

def read_entry(path: Path) -> tuple[dict, bytes]:
    data = path.read_bytes()
    n1 = data.find(b"\n")
    n2 = data.find(b"\n", n1 + 1) if n1 >= 0 else -1
    if n2 < 0 or data[:n1] != MAGIC:
        raise ValueError("not a flashjit cache entry (bad magic line or truncated header)")
    header = json.loads(data[n1 + 1:n2])
    payload = data[n2 + 1:]
    cb, sb = header["cubin_bytes"], header["source_bytes"]
    if cb + sb != len(payload):
        raise ValueError(f"size mismatch: header says {cb} + {sb} bytes, file has {len(payload)}")
    cubin = payload[:cb]
    if hashlib.sha256(cubin).hexdigest() != header["cubin_sha256"]:
        raise ValueError("cubin checksum mismatch")
    if header.get("key") != path.stem:
        raise ValueError(f"header is for key {header.get('key')}")
    return header, cubin


SAFE = re.compile(r"[^A-Za-z0-9_.+-]")
ENCODING_ONLY = re.compile(r"^/\*\s*0x[0-9a-f]+\s*\*/$")
# Header lines of cuobjdump that name the container rather than the code (present for fatbins or several files).
DROP_PREFIXES = ("Fatbin ", "arch =", "code version =", "host =", "compile_size =", "identifier =", "producer =",
                 "has debug info", "ptxasOptions =", "member ")
SYMBOL_INDEX = re.compile(r"\(0x[0-9a-f]+\)")


def normalize_sass(text: str) -> list[str]:
    """SASS lines, one per instruction with its encoding words joined onto it, whitespace collapsed."""
    out: list[str] = []
    for raw in text.splitlines():
        line = " ".join(raw.split())
        if not line or line.startswith(DROP_PREFIXES) or line.endswith(".cubin:") or line.endswith(".fjk:"):
            continue
        if ENCODING_ONLY.match(line) and out:
            out[-1] += " " + line
            continue
        out.append(line)
    return out


def normalize_res_usage(text: str) -> list[str]:
    out = []
    for raw in text.splitlines():
        line = " ".join(raw.split())
        if not line or line.startswith(DROP_PREFIXES) or line.endswith(".cubin:"):
            continue
        out.append(line)
    return out


def nv_info(elf_text: str) -> list[str]:
    """The .nv.info* and .nv.compat attributes of `cuobjdump -elf` (register counts, launch bounds, param layout,
    barriers, exit offsets, ...), one line per attribute, with symbol-table indices removed (they move when
    unrelated symbols do)."""
    out: list[str] = []
    keep = False
    attr = None
    for raw in elf_text.splitlines():
        if raw and not raw[0].isspace():  # a section title (or the ELF summary)
            keep = raw.startswith(".nv.info") or raw.startswith(".nv.compat")
            attr = None
            if keep:
                out.append("section " + raw.strip())
            continue
        if not keep:
            continue
        line = " ".join(raw.split())
        if not line or re.fullmatch(r"<0x[0-9a-f]+>", line):
            continue
        if line.startswith("Attribute:"):
            attr = line.split(":", 1)[1].strip()
            out.append(attr)
            continue
        line = SYMBOL_INDEX.sub("", line)
        if attr == "EIATTR_PARAM_CBANK" and line.startswith("Value:"):
            parts = line.split()
            line = " ".join(parts[:1] + parts[2:])  # drop the symbol index of the constant bank
        if attr is None:
            out.append(line)
        else:
            out[-1] += " " + line.replace("Format: ", "").replace("Value: ", "= ")
    return out


def run_tool(argv: list[str]) -> str:
    p = subprocess.run(argv, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {p.returncode}: {p.stderr.strip()}")
    return p.stdout


def dump_one(cuobjdump: str, name: str, cubin_path: Path) -> str:
    res = normalize_res_usage(run_tool([cuobjdump, "-res-usage", str(cubin_path)]))
    info = nv_info(run_tool([cuobjdump, "-elf", str(cubin_path)]))
    sass = normalize_sass(run_tool([cuobjdump, "-sass", str(cubin_path)]))
    if not any(l.startswith("Function :") for l in sass):
        raise RuntimeError(f"no function in the SASS of {cubin_path}")
    lines = [f"# kernel {name}", "# resource usage (cuobjdump -res-usage)"] + res
    lines += ["# attributes (cuobjdump -elf: .nv.info*, .nv.compat)"] + info
    lines += ["# sass (cuobjdump -sass)"] + sass
    return "\n".join(lines) + "\n"


def cmd_extract(args) -> int:
    cache = Path(args.cache)
    side = Path(args.side)
    entries = sorted((cache / "v1").glob("*/*.fjk"))
    if not entries:
        die(f"no cache entries under {cache}/v1")
    for sub in ("cubin", "sass"):
        shutil.rmtree(side / sub, ignore_errors=True)
        (side / sub).mkdir(parents=True)
    manifest: dict[str, dict] = {}
    errors = []
    by_name: dict[str, list[tuple[dict, bytes, Path]]] = {}
    for path in entries:
        try:
            header, cubin = read_entry(path)
        except (OSError, ValueError, KeyError) as e:
            errors.append(f"{path}: {e}")
            continue
        meta = header.get("meta", {})
        name = meta.get("name") or meta.get("entry") or header["key"]
        by_name.setdefault(name, []).append((header, cubin, path))
    reuse: dict[str, Path] = {}
    if args.reuse:
        try:
            other = json.loads((Path(args.reuse) / "manifest.json").read_text())
            if other.get("format") == DUMP_FORMAT:
                for k in other["kernels"].values():
                    if k.get("sass_sha256"):
                        reuse[k["cubin_sha256"]] = Path(args.reuse) / "sass" / f"{k['file']}.sass"
        except (OSError, ValueError, KeyError) as e:
            print(f"sass_dump: not reusing {args.reuse}: {e}", file=sys.stderr)
    jobs = []
    reused = 0
    for name, items in sorted(by_name.items()):
        # Two entries with one readable name (configs differing in a field the name leaves out): keep both,
        # ordered by their config JSON so both sides number them alike, and say so.
        items.sort(key=lambda it: json.dumps(it[0].get("meta", {}).get("config"), sort_keys=True))
        if len(items) > 1:
            print(f"sass_dump: warning: {len(items)} cache entries are named {name}; numbered ~1..~{len(items)} "
                  "by config JSON", file=sys.stderr)
        for n, (header, cubin, path) in enumerate(items, 1):
            label = name if len(items) == 1 else f"{name}~{n}"
            fname = SAFE.sub("_", label)
            cpath = side / "cubin" / f"{fname}.cubin"
            cpath.write_bytes(cubin)
            meta = header.get("meta", {})
            manifest[label] = {
                "file": fname,
                "key": header["key"],
                "entry_file": str(path),
                "cubin_sha256": header["cubin_sha256"],
                "cubin_bytes": header["cubin_bytes"],
                "config": meta.get("config"),
                "entry": meta.get("entry"),
                "options": meta.get("options"),
                "ptxas": meta.get("ptxas"),
                "templates": meta.get("templates"),
                "flashjit": meta.get("flashjit"),
                "nvrtc": meta.get("nvrtc"),
            }
            src = reuse.get(header["cubin_sha256"])
            if src is not None and src.is_file():
                lines = src.read_text().split("\n", 1)
                text = f"# kernel {label}\n" + lines[1]
                (side / "sass" / f"{fname}.sass").write_text(text)
                manifest[label]["sass_sha256"] = hashlib.sha256(text.encode()).hexdigest()
                manifest[label]["sass_lines"] = text.count("\n")
                manifest[label]["sass_reused_from"] = str(src)
                reused += 1
                continue
            jobs.append((label, fname, cpath))
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {pool.submit(dump_one, args.cuobjdump, label, cpath): (label, fname) for label, fname, cpath in jobs}
        for fut in concurrent.futures.as_completed(futures):
            label, fname = futures[fut]
            try:
                text = fut.result()
            except Exception as e:  # noqa: BLE001 - reported with the kernel's name
                errors.append(f"{label}: {e}")
                manifest.pop(label, None)
                continue
            (side / "sass" / f"{fname}.sass").write_text(text)
            manifest[label]["sass_sha256"] = hashlib.sha256(text.encode()).hexdigest()
            manifest[label]["sass_lines"] = text.count("\n")
    (side / "manifest.json").write_text(json.dumps({"format": DUMP_FORMAT, "kernels": manifest}, indent=1,
                                                   sort_keys=True) + "\n")
    for e in errors:
        print(f"sass_dump: error: {e}", file=sys.stderr)
    print(f"sass_dump: {len(manifest)} kernels dumped from {len(entries)} cache entries into {side}/sass "
          f"({len(jobs)} disassembled, {reused} byte-identical cubins' dumps taken from {args.reuse})"
          if args.reuse else
          f"sass_dump: {len(manifest)} kernels dumped from {len(entries)} cache entries into {side}/sass",
          file=sys.stderr)
    return 1 if errors else 0


# ------------------------------------------------------------------------------------------------------- diff

def load_side(side: Path) -> dict[str, dict]:
    mpath = side / "manifest.json"
    if not mpath.is_file():
        die(f"{side}: no manifest.json (not a complete dump)")
    doc = json.loads(mpath.read_text())
    if doc.get("format") != DUMP_FORMAT:
        die(f"{side}: dump format {doc.get('format')}, this script writes {DUMP_FORMAT}: regenerate it (--fresh)")
    return doc["kernels"]


def side_info(side: Path) -> dict:
    try:
        return json.loads((side / "info.json").read_text())
    except (OSError, ValueError):
        return {}


def inputs_notes(base_dir: Path, head_dir: Path) -> list[str]:
    """How the sides' staged inputs (DIR/inputs/sweeps, DIR/inputs/tuned) compare; differences are notes only:
    their effect on the kernels is what the comparison itself shows."""
    def load(side: Path, sub: str) -> dict:
        out = {}
        for p in sorted((side / "inputs" / sub).glob("*.json")):
            try:
                out[p.name] = json.loads(p.read_text())
            except (OSError, ValueError):
                out[p.name] = None
        return out
    notes = []
    bs, hs = load(base_dir, "sweeps"), load(head_dir, "sweeps")
    diff_sweeps = sorted(n for n in set(bs) | set(hs) if bs.get(n) != hs.get(n))
    bt, ht = load(base_dir, "tuned"), load(head_dir, "tuned")
    diff_tuned = sorted(n for n in set(bt) | set(ht) if bt.get(n) != ht.get(n))
    if not diff_sweeps and not diff_tuned:
        return [f"inputs: the same {len(bs)} sweep file(s) and {len(bt)} tuned table(s) on both sides"]
    if diff_sweeps:
        notes.append("note: sweep files differ between the sides: " + ", ".join(diff_sweeps))
    for n in diff_tuned:
        problems = [[e.get("problem") for e in (t.get(n) or {}).get("entries", [])] for t in (bt, ht)]
        notes.append(f"note: tuned table {n} differs between the sides ("
                     + ("same problems, entries as each side's CLI reads them" if problems[0] == problems[1]
                        else "different problems") + ")")
    return notes


def cmd_diff(args) -> int:
    base_dir, head_dir, out = Path(args.base), Path(args.head), Path(args.out)
    base, head = load_side(base_dir), load_side(head_dir)
    shutil.rmtree(out / "diff", ignore_errors=True)
    (out / "diff").mkdir(parents=True)
    both = sorted(set(base) & set(head))
    only_base = sorted(set(base) - set(head))
    only_head = sorted(set(head) - set(base))
    identical, differing, cubin_same = [], [], 0
    for name in both:
        b, h = base[name], head[name]
        if b["cubin_sha256"] == h["cubin_sha256"]:
            cubin_same += 1
        if b.get("sass_sha256") == h.get("sass_sha256"):
            identical.append(name)
            continue
        bl = (base_dir / "sass" / f"{b['file']}.sass").read_text().splitlines(keepends=True)
        hl = (head_dir / "sass" / f"{h['file']}.sass").read_text().splitlines(keepends=True)
        diff = list(difflib.unified_diff(bl, hl, f"base/{name}", f"head/{name}", n=3))
        (out / "diff" / f"{b['file']}.diff").write_text("".join(diff))
        changed = sum(1 for l in diff if l[:1] in "+-" and not l.startswith(("+++", "---")))
        differing.append((name, changed, b.get("key"), h.get("key")))
    key_changed = sum(1 for n in both if base[n]["key"] != head[n]["key"])

    bi, hi = side_info(base_dir), side_info(head_dir)
    lines = [
        f"base: {bi.get('label', base_dir)}  ({base_dir})",
        f"head: {hi.get('label', head_dir)}  ({head_dir})",
        f"kernels: base {len(base)}, head {len(head)}; compared (on both sides) {len(both)}",
        f"identical SASS: {len(identical)}  (byte-identical cubins: {cubin_same}; cache keys changed: {key_changed})",
        f"differing SASS: {len(differing)}",
    ]
    lines[2:2] = inputs_notes(base_dir, head_dir)
    for name, changed, _, _ in differing:
        lines.append(f"  DIFF  {name}  ({changed} lines +/-, diff/{base[name]['file']}.diff)")
    lines.append(f"only in base: {len(only_base)}")
    lines += [f"  BASE-ONLY  {n}" for n in only_base]
    lines.append(f"only in head: {len(only_head)}")
    lines += [f"  HEAD-ONLY  {n}" for n in only_head]
    for label, info in (("base", bi), ("head", hi)):
        for f in info.get("failures", []):
            lines.append(f"  {label} compile step failed: {f}")
    failures = bool(bi.get("failures") or hi.get("failures"))
    missing = bool(only_base or only_head)
    ok = not differing and not (missing and not args.allow_missing) and not failures and len(both) > 0
    verdict = "PASS: every kernel's machine code is unchanged" if ok else "FAIL"
    if not ok:
        why = []
        if differing:
            why.append(f"{len(differing)} kernel(s) differ")
        if missing and not args.allow_missing:
            why.append(f"{len(only_base) + len(only_head)} kernel(s) on one side only (--allow-missing relaxes this)")
        if failures:
            why.append("a compile step failed")
        if not both:
            why.append("no kernel to compare")
        verdict += ": " + "; ".join(why)
    elif missing:
        verdict += f" ({len(only_base) + len(only_head)} kernel(s) on one side only, allowed)"
    lines.append(verdict)
    text = "\n".join(lines) + "\n"
    (out / "summary.txt").write_text(text)
    (out / "result.json").write_text(json.dumps({
        "ok": ok, "compared": len(both), "identical": len(identical), "cubin_identical": cubin_same,
        "differing": [d[0] for d in differing], "only_base": only_base, "only_head": only_head,
        "base": str(base_dir), "head": str(head_dir)}, indent=1) + "\n")
    sys.stdout.write(text)
    return 0 if ok else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sweeps")
    s.add_argument("config_dir")
    s.set_defaults(fn=cmd_sweeps)
    s = sub.add_parser("tuned")
    s.add_argument("out_dir")
    s.add_argument("tables", nargs="*")
    s.add_argument("--fields", default="best")
    s.set_defaults(fn=cmd_tuned)
    s = sub.add_parser("coverage-sweep")
    s.add_argument("out_file")
    s.set_defaults(fn=cmd_coverage_sweep)
    s = sub.add_parser("varlen")
    s.add_argument("out_dir")
    s.add_argument("--cache", required=True)
    s.set_defaults(fn=cmd_varlen)
    s = sub.add_parser("extract")
    s.add_argument("--cache", required=True)
    s.add_argument("--side", required=True)
    s.add_argument("--cuobjdump", default=os.environ.get("CUOBJDUMP", "cuobjdump"))
    s.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 2)
    s.add_argument("--reuse", default="")
    s.set_defaults(fn=cmd_extract)
    s = sub.add_parser("diff")
    s.add_argument("base")
    s.add_argument("head")
    s.add_argument("out")
    s.add_argument("--allow-missing", action="store_true")
    s.set_defaults(fn=cmd_diff)
    args = ap.parse_args()
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
