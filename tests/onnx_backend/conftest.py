"""Counts the backend suite's passing CPU cases, prints the number, and enforces MIN_PASSING on full runs.

A run is full when it selected the whole suite file: no suite case deselected (-k, -m) and no node id inside
the file named on the command line — whatever the number of cases the installed onnx generates. A full run
passing fewer than MIN_PASSING fails. With TENSORFORGE_BACKEND_RESULTS=path (scripts/backend_suite.sh) a full
run also writes its counts there as JSON (tests/onnx_backend/results.json, read by tools/gen_readme_status.py).
"""

import datetime
import json
import os
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import spec_overrides  # noqa: E402
from suite_config import MIN_PASSING, is_full_run as _full  # noqa: E402

SUITE_FILE = "onnx_backend/test_backend_suite.py"
_counts = {"passed": 0, "failed": 0, "skipped": 0, "xfailed": 0, "selected": 0, "deselected": 0}
_start = [time.monotonic()]


def pytest_sessionstart(session):
    _start[0] = time.monotonic()


def _is_suite(nodeid: str) -> bool:
    return SUITE_FILE in nodeid and nodeid.endswith("_cpu")


def pytest_deselected(items):
    _counts["deselected"] += sum(1 for it in items if _is_suite(it.nodeid))


def pytest_collection_finish(session):
    _counts["selected"] = sum(1 for it in session.items if _is_suite(it.nodeid))


def is_full_run(config) -> bool:
    """The whole suite file was selected (suite_config.is_full_run)."""
    return _full(_counts["selected"], _counts["deselected"], config.args, config.option.collectonly)


def pytest_runtest_logreport(report):
    if not _is_suite(report.nodeid):
        return
    if report.when == "call" and report.passed:
        _counts["passed"] += 1
    elif report.failed:
        _counts["failed"] += 1
    elif report.skipped and hasattr(report, "wasxfail"):
        _counts["xfailed"] += 1
    elif report.skipped and report.when in ("setup", "call"):
        _counts["skipped"] += 1


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not _counts["selected"] or config.option.collectonly:
        return
    full = is_full_run(config)
    terminalreporter.write_line(
        f"ONNX backend suite: {_counts['passed']} of {_counts['selected']} selected CPU cases pass "
        f"({_counts['failed']} failed, {_counts['xfailed']} known failures, {_counts['skipped']} excluded); "
        + (f"full run, minimum {MIN_PASSING}" if full else f"partial run, the minimum ({MIN_PASSING}) not applied"))
    if spec_overrides.OVERRIDDEN:
        terminalreporter.write_line(f"  {len(spec_overrides.OVERRIDDEN)} cases' expected outputs replaced: "
                                    f"{spec_overrides.REASON}")


def _git(*args: str) -> str | None:
    try:
        return subprocess.run(["git", *args], capture_output=True, text=True, cwd=Path(__file__).parent,
                              timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def write_results(path: Path) -> None:
    """The full run's counts as JSON (written whole: a temporary file renamed over the old one)."""
    data = {"passed": _counts["passed"], "failed": _counts["failed"], "known_failures": _counts["xfailed"],
            "excluded": _counts["skipped"], "cases": _counts["selected"], "min_passing": MIN_PASSING,
            "expected_outputs_replaced_by_spec": sorted(spec_overrides.OVERRIDDEN),
            "onnx": metadata.version("onnx"), "ml_dtypes": metadata.version("ml_dtypes"),
            "commit": _git("rev-parse", "--short", "HEAD") or "",
            "uncommitted_changes": bool(_git("status", "--porcelain", "--untracked-files=no")),
            "date": datetime.date.today().isoformat(), "device": "cpu",
            "seconds": round(time.monotonic() - _start[0], 1)}
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    tmp.replace(path)


def pytest_sessionfinish(session, exitstatus):
    """A full run must pass at least MIN_PASSING cases (an empty or all-skipped run fails); runs narrowed with
    -k, -m or a node id are not held to it."""
    if not is_full_run(session.config):
        return
    if _counts["passed"] < MIN_PASSING:
        session.exitstatus = 1
    out = os.environ.get("TENSORFORGE_BACKEND_RESULTS")
    if out:
        write_results(Path(out))


def pytest_configure(config):
    # onnx's test-case generators divide by zero on purpose while building expected outputs
    config.addinivalue_line("filterwarnings", "ignore::RuntimeWarning:onnx.backend.test.case.node")
