"""docs/operators.md is generated from the importer registry; this fails when it is stale."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _generator():
    spec = importlib.util.spec_from_file_location("gen_operators_doc", ROOT / "tools" / "gen_operators_doc.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_operators_doc_is_current():
    gen = _generator()
    expected = gen.render()
    current = (ROOT / "docs" / "operators.md").read_text()
    assert current == expected, "docs/operators.md is stale: run `.venv/bin/python tools/gen_operators_doc.py`"


def test_operators_doc_rows_match_registry():
    """Every registered (domain, op) has exactly one row, listing exactly its registered versions."""
    from tensorforge.parser.registry import all_importers

    rows = {}
    for line in _generator().render().splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 5 and cells[0] not in ("op", "---"):
            rows[(cells[1], cells[0])] = sorted(int(v) for v in cells[2].split(","))
    want: dict = {}
    for (domain, op, version) in all_importers():
        want.setdefault((domain or "ai.onnx", op), []).append(version)
    assert rows == {k: sorted(v) for k, v in want.items()}
