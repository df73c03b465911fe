"""Counts the backend suite's passing CPU cases, prints the number, and enforces MIN_PASSING on full runs."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from suite_config import MIN_PASSING, TOTAL_CPU_CASES

_counts = {"passed": 0, "failed": 0, "skipped": 0, "xfailed": 0, "selected": 0}


def _is_suite(nodeid: str) -> bool:
    return "onnx_backend/test_backend_suite.py" in nodeid and nodeid.endswith("_cpu")


def pytest_collection_finish(session):
    _counts["selected"] = sum(1 for it in session.items if _is_suite(it.nodeid))


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
    terminalreporter.write_line(
        f"ONNX backend suite: {_counts['passed']} of {TOTAL_CPU_CASES} CPU cases pass "
        f"({_counts['failed']} failed, {_counts['xfailed']} known failures, {_counts['skipped']} excluded, "
        f"{_counts['selected']} selected); "
        f"minimum for a full run: {MIN_PASSING}")


def pytest_sessionfinish(session, exitstatus):
    """A run that selected every CPU case must pass at least MIN_PASSING of them (an empty or all-skipped run
    fails); runs narrowed with -k or a node id are not held to it."""
    full = _counts["selected"] >= TOTAL_CPU_CASES and not session.config.option.collectonly
    if full and _counts["passed"] < MIN_PASSING:
        session.exitstatus = 1


def pytest_configure(config):
    # onnx's test-case generators divide by zero on purpose while building expected outputs
    config.addinivalue_line("filterwarnings", "ignore::RuntimeWarning:onnx.backend.test.case.node")
