"""Configuration of the backend suite run: the exclusion list and the minimum pass count.

`exclusions.txt` holds one regular expression per line (matched with re.search against the test name,
e.g. `test_tfidfvectorizer_`), then `#` and the one-line reason; a line without a reason is an error, so
nothing is left out silently. MIN_PASSING is what CI asserts for a full run (see conftest.py).
"""

import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
MIN_PASSING = 0          # raised as coverage lands; a full run below it fails
TOTAL_CPU_CASES = 2033   # node + real (light) + simple + pytorch-converted + pytorch-operator in onnx 1.23


def load_exclusions(path: Path = HERE / "exclusions.txt") -> list[tuple[str, str]]:
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
