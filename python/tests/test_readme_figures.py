"""README.md's headline table is the one tools/readme_table.py makes from the full table the README links."""
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_headline_table_matches_the_linked_table():
    spec = importlib.util.spec_from_file_location("readme_table", ROOT / "tools" / "readme_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text = (ROOT / "README.md").read_text()
    start, end = module.current(text)
    assert text[start:end] == module.table(text), "run: python3 tools/readme_table.py --write"
