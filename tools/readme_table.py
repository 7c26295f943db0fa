#!/usr/bin/env python3
"""The README's headline table (llama3, flashjit against cuDNN and torch's FA2), made from the full table it
links (bench/results/<run>/llama3.md), so the two cannot disagree.

    python3 tools/readme_table.py           # print the table the README should hold
    python3 tools/readme_table.py --write   # put it into README.md in place of the current one

python/tests/test_readme_figures.py checks that README.md holds what this prints.
"""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
LENGTHS = (1024, 2048, 4096, 8192, 16384)
HEADER = "| llama3 (B1, H32, KV8, D128) | flashjit (FA3) | cuDNN | torch flash (FA2) | × cuDNN | × FA2 |"


def linked_table(readme_text):
    """The llama3.md the README's performance section links."""
    m = re.search(r"\[llama3\]\((bench/results/[^)]+/llama3\.md)\)", readme_text)
    if not m:
        raise SystemExit("README.md links no bench/results/.../llama3.md")
    return ROOT / m.group(1)


def rows_of(table_md):
    """{(seqlen, mask): row} of the full table (mask: full or causal), by its column names."""
    lines = [l for l in table_md.read_text().splitlines() if l.startswith("| ")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = {}
    for line in lines[2:]:
        cells = dict(zip(header, (c.strip() for c in line.strip("|").split("|"))))
        m = re.fullmatch(r"B1 S(\d+) H32/8 D128 (full|causal)", cells.get("case", ""))
        if m:
            rows[(int(m.group(1)), m.group(2))] = cells
    return rows


def table(readme_text):
    rows = rows_of(linked_table(readme_text))
    out = [HEADER, "|---|---|---|---|---|---|"]
    for i, s in enumerate(LENGTHS):
        full, causal = rows[(s, "full")], rows[(s, "causal")]
        pair = lambda col: f"{full[col]} / {causal[col]}"
        label = f"S {s} non-causal / causal" if i == 0 else f"S {s}"
        out.append(f"| {label} | {pair('flashjit')} | {pair('cuDNN')} | {pair('torch flash (FA2)')} | "
                   f"{pair('× cuDNN')} | {pair('× FA2')} |")
    return "\n".join(out)


def current(readme_text):
    """(start, end) offsets of the README's headline table."""
    start = readme_text.index(HEADER)
    end = readme_text.find("\n\n", start)
    return start, end


def main():
    text = README.read_text()
    new = table(text)
    if "--write" in sys.argv[1:]:
        start, end = current(text)
        README.write_text(text[:start] + new + text[end:])
    else:
        print(new)


if __name__ == "__main__":
    main()
