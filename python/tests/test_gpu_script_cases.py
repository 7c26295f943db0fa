"""The GPU scripts that name test cases (tools/soak/sanitize.sh) name cases that exist: a renamed test case would
otherwise leave the sanitizer run with a filter that matches nothing, found only on the GPU machine."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def gpu_test_case_names():
    names = set()
    for source in (ROOT / "tests" / "gpu").glob("*.cpp"):
        for literals in re.findall(r'TEST_CASE\(\s*((?:"(?:[^"\\]|\\.)*"\s*)+)', source.read_text()):
            names.add("".join(re.findall(r'"((?:[^"\\]|\\.)*)"', literals)).replace('\\"', '"'))
    return names


def sanitize_cases():
    text = (ROOT / "tools" / "soak" / "sanitize.sh").read_text()
    block = re.search(r"^cases=\(\n(.*?)^\)", text, re.S | re.M).group(1)
    return re.findall(r'^\s*"([^"]+)"', block, re.M)


def test_sanitize_cases_exist():
    names = gpu_test_case_names()
    assert len(names) > 50
    cases = sanitize_cases()
    assert len(cases) >= 9
    missing = [c for c in cases if c not in names]
    assert not missing, missing
