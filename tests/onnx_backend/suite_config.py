"""Configuration of the backend suite run: the exclusion list and the minimum pass count.

`exclusions.txt` holds one regular expression per line (matched with re.search against the test name,
e.g. `^test_image_decoder_`), then `#` and the one-line reason; a line without a reason is an error, so
nothing is left out silently. `known_failures.txt` has the same format for cases that should pass but do
not yet; they run as expected failures. MIN_PASSING is what CI asserts for a full run — any run that selects
the whole suite file, whatever the number of cases the installed onnx generates (see conftest.py).
"""

import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
KNOWN_FAILURES = HERE / "known_failures.txt"
MIN_PASSING = 1930       # issue 3 target; a full run below it fails (raise it as coverage grows)


def load_exclusions(path: Path = HERE / "exclusions.txt") -> list[tuple[str, str]]:
    """(regex, reason) pairs of a `regex  # reason` file (exclusions.txt, known_failures.txt)."""
    out = []
    for lineno, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        pattern, sep, reason = line.partition("#")
        pattern, reason = pattern.strip(), reason.strip()
        if not sep or not reason:
            raise ValueError(f"{path.name}:{lineno}: exclusion {pattern!r} has no reason (write `pattern  # why`)")
        re.compile(pattern)
        out.append((pattern, reason))
    return out


def is_full_run(selected: int, deselected: int, args, collect_only: bool = False) -> bool:
    """A run is held to MIN_PASSING when it selected the whole suite file: some suite case selected, none
    deselected (-k, -m), no node id inside the file named among pytest's `args`, and not --collect-only.
    The number of cases the installed onnx generates does not matter."""
    narrowed = any("test_backend_suite.py::" in str(a) for a in args)
    return selected > 0 and deselected == 0 and not narrowed and not collect_only
