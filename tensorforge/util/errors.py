"""Error types. Every error is one line: what went wrong, then what to do about it.

The CLI prints `str(err)` and exits non-zero; a traceback is shown only with --verbose.
"""


class TensorforgeError(Exception):
    """Base class: `message` says what is wrong, `hint` says what to do."""

    exit_code = 1

    def __init__(self, message: str, hint: str | None = None):
        self.message = " ".join(str(message).split())
        self.hint = " ".join(hint.split()) if hint else None
        super().__init__(self.message)

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class ModelError(TensorforgeError):
    """The model file is malformed, truncated or not ONNX."""


class UnsupportedOpError(TensorforgeError):
    """A node uses an op (or op version) that has no verified importer."""


class BuildError(TensorforgeError):
    """The builder could not turn the network into an engine."""


class ShapeError(TensorforgeError):
    """An input shape is outside the engine's optimization profiles, or shapes do not agree."""


class InputError(TensorforgeError):
    """A missing, extra or wrongly typed input at run time."""


class ExecutionError(TensorforgeError):
    """A layer failed while the engine ran; names the layer, its op and tactic, and the ONNX nodes it came from."""


class EngineFileError(TensorforgeError):
    """An engine file that is truncated, tampered, foreign or of another format version."""


class PluginError(TensorforgeError):
    """A plugin that is not registered, or whose descriptor or attributes are wrong."""


class UsageError(TensorforgeError):
    """A bad command-line flag or API argument."""

    exit_code = 2


class FileNotFound(TensorforgeError):
    """A path given by the user does not exist or cannot be read."""
