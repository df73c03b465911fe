"""`tensorforge` entry point: dispatch to a subcommand and turn errors into one line.

Every TensorforgeError becomes `tensorforge: error: <what> (<what to do>)` on stderr with the error's exit
code; any other exception is reported the same way as an internal error. A traceback is printed only
when --verbose (or -v) is on the command line.
"""

import importlib
import sys
import traceback

from ..util.errors import TensorforgeError
from ..version import __version__

COMMANDS = {
    "exec": ("tensorforge.cli.exec_cmd", "build and benchmark engines with trtexec's flags"),
    "convert": ("tensorforge.cli.convert_cmd", "ONNX → engine with onnx2trt's flags"),
    "inspect": ("tensorforge.cli.inspect_cmd", "show an ONNX model, engine or timing cache"),
    "compare": ("tensorforge.cli.compare_cmd", "run several runners on the same inputs and compare outputs"),
    "debug": ("tensorforge.cli.debug_cmd", "debug precision: find layers to keep at higher precision"),
    "serve": ("tensorforge.cli.serve_cmd", "serve engines over KServe v2 HTTP/gRPC with Ray Serve"),
    "export-triton": ("tensorforge.cli.export_triton_cmd", "write a Triton model repository for an engine"),
}

# one line per subcommand above is all a new one needs; its module is imported only when it is run, so
# `tensorforge --help` loads no torch (each module: `run(argv) -> exit code`)
USAGE = f"usage: tensorforge {{{','.join(COMMANDS)}}} [options]   (tensorforge COMMAND --help for details)"


def _verbose(argv) -> bool:
    return any(a in ("--verbose", "-v") or a.startswith("--verbose=") for a in argv)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        for name, (_, doc) in COMMANDS.items():
            print(f"  {name:<8} {doc}")
        return 0 if argv else 2
    if argv[0] in ("--version", "-V"):
        print(f"tensorforge {__version__}")
        return 0
    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        print(f"tensorforge: error: unknown command {command!r} (choose one of: {', '.join(COMMANDS)})", file=sys.stderr)
        return 2
    try:
        module = importlib.import_module(COMMANDS[command][0])
        return int(module.run(rest) or 0)
    except TensorforgeError as e:
        if _verbose(argv):
            traceback.print_exc()
        print(f"tensorforge: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("tensorforge: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:     # `tensorforge inspect X | head`: the reader left; stop quietly, as cat does
        _silence_stdout()
        return 0
    except Exception as e:  # noqa: BLE001 - last line of defence: one line, traceback on request
        if _verbose(argv):
            traceback.print_exc()
        first = str(e).splitlines()[0] if str(e) else ""
        print(f"tensorforge: error: internal error: {type(e).__name__}: {first} "
              "(run with --verbose for the traceback and report it)", file=sys.stderr)
        return 1


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush does not raise BrokenPipeError again."""
    import os
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    sys.exit(main())
