"""`tensorforge export-triton ENGINE -o model_repository/`: a Triton Inference Server model for an engine.

Entry point: `run(argv) -> exit code`. Writes <repo>/<name>/config.pbtxt, 1/model.py (Python backend) and
1/model.engine (serve/triton_export.py); Triton's Python environment must have tensorforge installed.
"""

import argparse

from ..util.errors import UsageError


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(f"export-triton: {message}", "see tensorforge export-triton --help")


def _parser() -> _Parser:
    p = _Parser(prog="tensorforge export-triton", description="Write a Triton model repository entry "
                "(config.pbtxt + Python-backend model.py + the engine) for an engine file.")
    p.add_argument("engine", metavar="ENGINE", help="engine file")
    p.add_argument("-o", "--output", required=True, help="model repository folder (created if missing)")
    p.add_argument("--name", default=None, help="model name (default: the engine file's stem)")
    p.add_argument("--max-batch-size", type=int, default=None, help="Triton max_batch_size (default: the engine's "
                   "profile maximum; 0 when the engine has no batch dimension)")
    p.add_argument("--instances-per-gpu", type=int, default=1, help="model instances per GPU (default 1)")
    p.add_argument("--kind", choices=["auto", "gpu", "cpu"], default="auto",
                   help="instance kind: KIND_GPU or KIND_CPU (default: the engine's build device)")
    p.add_argument("--verbose", "-v", action="store_true", help="show tracebacks on errors")
    return p


def run(argv) -> int:
    args = _parser().parse_args(argv)
    from ..serve.triton_export import export_repository
    target = export_repository(args.engine, args.output, name=args.name, max_batch_size=args.max_batch_size,
                               instances=args.instances_per_gpu, kind=args.kind)
    print(f"wrote {target} (config.pbtxt, 1/model.py, 1/model.engine)")
    return 0
