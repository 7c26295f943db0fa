#!/usr/bin/env python3
"""Extracts the cubins of cached kernels whose name matches a pattern and summarizes their SASS with
cuobjdump: HGMMA / HMMA / MUFU.EX2 counts, local memory (LDL/STL), and how HGMMA and MUFU.EX2 interleave.

usage: sass_check.py CACHE_DIR PATTERN [--dump OUT.sass]
"""
import argparse
import collections
import glob
import json
import os
import re
import subprocess
import tempfile


def entries(cache_dir):
    for path in glob.glob(os.path.join(cache_dir, "v1", "*", "*.fjk")):
        with open(path, "rb") as f:
            f.readline()  # magic
            header = json.loads(f.readline())
            cubin = f.read(header["cubin_bytes"])
        yield header.get("meta", {}).get("name", os.path.basename(path)), cubin


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cache_dir")
    ap.add_argument("pattern")
    ap.add_argument("--dump")
    args = ap.parse_args()
    for name, cubin in entries(args.cache_dir):
        if not re.search(args.pattern, name):
            continue
        with tempfile.NamedTemporaryFile(suffix=".cubin") as t:
            t.write(cubin)
            t.flush()
            sass = subprocess.run(["cuobjdump", "-sass", t.name], capture_output=True, text=True).stdout
        ops = re.findall(r"\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)", sass)
        count = collections.Counter(o.split(".")[0] for o in ops)
        seq = [o for o in ops if o.startswith("HGMMA") or o.startswith("MUFU.EX2")]
        switches = sum(1 for a, b in zip(seq, seq[1:]) if a[:4] != b[:4])
        print(f"{name}: HGMMA {count['HGMMA']}, HMMA {count['HMMA']}, MUFU {count['MUFU']}, "
              f"LDL {count['LDL']}, STL {count['STL']}, HGMMA<->MUFU.EX2 switches in program order {switches}")
        if args.dump:
            open(args.dump, "w").write(sass)


if __name__ == "__main__":
    main()
