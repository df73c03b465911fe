"""Logging with TensorRT's severities: INTERNAL_ERROR < ERROR < WARNING < INFO < VERBOSE.

One logger per process (`get_logger()`); the CLI sets its severity from --verbose. Messages
go to stderr with a `[TF] [W]`-style prefix so they read like trtexec's log.
"""

import sys
from enum import IntEnum


class Severity(IntEnum):
    INTERNAL_ERROR = 0
    ERROR = 1
    WARNING = 2
    INFO = 3
    VERBOSE = 4


_TAGS = {Severity.INTERNAL_ERROR: "F", Severity.ERROR: "E", Severity.WARNING: "W",
         Severity.INFO: "I", Severity.VERBOSE: "V"}


class Logger:
    """Writes messages at or above `min_severity` (lower value = more severe) to `stream`."""

    Severity = Severity
    INTERNAL_ERROR, ERROR, WARNING, INFO, VERBOSE = (Severity.INTERNAL_ERROR, Severity.ERROR,
                                                     Severity.WARNING, Severity.INFO, Severity.VERBOSE)

    def __init__(self, min_severity: Severity = Severity.WARNING, stream=None):
        self.min_severity = Severity(min_severity)
        self.stream = stream

    def log(self, severity: Severity, msg: str) -> None:
        if severity <= self.min_severity:
            out = self.stream or sys.stderr
            print(f"[TF] [{_TAGS[Severity(severity)]}] {msg}", file=out)

    def error(self, msg): self.log(Severity.ERROR, msg)
    def warning(self, msg): self.log(Severity.WARNING, msg)
    def info(self, msg): self.log(Severity.INFO, msg)
    def verbose(self, msg): self.log(Severity.VERBOSE, msg)

    @property
    def is_verbose(self) -> bool:
        return self.min_severity >= Severity.VERBOSE


_DEFAULT = Logger()


def get_logger() -> Logger:
    return _DEFAULT


def set_severity(severity: Severity) -> None:
    _DEFAULT.min_severity = Severity(severity)
