"""`tensorforge convert`: onnx2trt's command line — ONNX → engine file, text dumps, layer and pass lists.

Entry point: `run(argv) -> exit code`. Flow: parse the ONNX model → run the `-O` passes (if any) → shape
inference (the builder's, at probe sizes for dynamic input dimensions, which then read -1) → `-t`/`-T` text dump
(ir/printer.py: one line per layer with shapes and dtypes; the same model always gives the same bytes) →
build (`-o`, `-l`) with `-d`/`-w` → atomic save. onnx2trt flags with no meaning here (-b, -m, -F, -g) are
refused with the reason. Output files are written atomically; `-` as a dump path means stdout.
"""

import argparse
import sys

from ..builder import BuilderConfig, OptimizationProfile, build_engine
from ..builder.builder import _infer
from ..engine import to_bytes
from ..ir.printer import format_network
from ..parser import parse_model
from ..passes.pipeline import PASSES
from ..util.errors import UsageError
from ..util.fileio import atomic_write
from ..util.log import Severity, get_logger
from ..version import __version__
from .shapes_arg import parse_shapes

PROBES = (16, 24)     # sizes tried for dynamic input dimensions; a dimension that differs between them prints -1

REFUSED = {
    "-b": "implicit-batch engines do not exist here; batch is an ordinary (dynamic) dimension of the inputs",
    "-m": "writing a rewritten ONNX model is not supported; -t/-T dump the parsed network instead",
    "-F": "ONNX-level fp16 conversion is not supported; use -d 16 to build a half-precision engine",
    "-g": "graph-level debug output is not supported; use -t/-T and -l",
}


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(f"convert: {message}", "see tensorforge convert --help")


def _parser() -> _Parser:
    p = _Parser(prog="tensorforge convert", add_help=False,
                description="Convert an ONNX model to a tensorforge engine (onnx2trt's flags).",
                epilog="Refused onnx2trt flags: " + "; ".join(f"{k} ({v})" for k, v in REFUSED.items()))
    p.add_argument("model", nargs="?", help="the ONNX model file")
    p.add_argument("-o", dest="engine", metavar="ENGINE", help="write the built engine to this file")
    p.add_argument("-t", dest="text", metavar="TXT", help="write the parsed network as text, without weights ('-' = stdout)")
    p.add_argument("-T", dest="text_weights", metavar="TXT", help="write the parsed network as text, with weights ('-' = stdout)")
    p.add_argument("-d", dest="bits", type=int, choices=(16, 32), default=32,
                   help="model data type bit depth: 32 = float32 (default), 16 = float16")
    p.add_argument("-w", dest="workspace", type=int, metavar="BYTES", help="workspace memory limit in bytes")
    p.add_argument("-O", dest="passes", metavar="PASSES",
                   help="semicolon-separated passes (see -p) run on the parsed network before dumping and building; "
                        "the builder then runs its usual pipeline")
    p.add_argument("-p", dest="list_passes", action="store_true", help="list the available passes and exit")
    p.add_argument("-l", dest="list_layers", action="store_true", help="build, then list the engine's layers and shapes")
    p.add_argument("-v", dest="verbose", action="count", default=0, help="more output (repeat for more)")
    p.add_argument("-q", dest="quiet", action="count", default=0, help="less output")
    p.add_argument("-V", dest="version", action="store_true", help="print the version and exit")
    p.add_argument("-h", "--help", dest="help", action="store_true", help="show this help and exit")
    for flag, what in (("min", "minimum"), ("opt", "optimum"), ("max", "maximum")):
        p.add_argument(f"--{flag}Shapes", dest=f"{flag}_shapes", metavar="SPEC", default=None,
                       help=f"profile {what} shapes, trtexec's syntax (name:1x3x224x224,...); --optShapes alone "
                            "fixes the shapes")
    p.add_argument("--device", default=None, help="build device: cpu, cuda or a GPU index (default: CUDA when present)")
    return p


def _profile(args, net) -> OptimizationProfile | None:
    """--minShapes/--optShapes/--maxShapes → one profile (trtexec's rule: only --optShapes, or all three)."""
    given = [args.min_shapes, args.opt_shapes, args.max_shapes]
    if not any(given):
        return None
    if given[1] is None or (given[0] is None) != (given[2] is None):
        raise UsageError("convert: give only --optShapes, or all of --minShapes, --optShapes and --maxShapes",
                         "e.g. --minShapes=x:1x3x224x224 --optShapes=x:8x3x224x224 --maxShapes=x:32x3x224x224")
    opt = parse_shapes(args.opt_shapes, "--optShapes")
    mins = parse_shapes(args.min_shapes, "--minShapes") if args.min_shapes else opt
    maxs = parse_shapes(args.max_shapes, "--maxShapes") if args.max_shapes else opt
    for name in set(opt) | set(mins) | set(maxs):
        if not (name in opt and name in mins and name in maxs):
            raise UsageError(f"convert: input {name!r} is not in all of --minShapes/--optShapes/--maxShapes",
                             "give every dynamic input in all three")
        if name not in net.inputs:
            raise UsageError(f"convert: {name!r} is not an input of the model", f"its inputs are: {', '.join(net.inputs)}")
    prof = OptimizationProfile()
    for name in opt:
        prof.set_shape(name, mins[name], opt[name], maxs[name])
    return prof


def _profile_points(net, prof: OptimizationProfile) -> list[dict]:
    """The dump's shape points: the profile's min, opt and max (static inputs at their own shape)."""
    points = []
    for k in range(3):
        point = {}
        for name in net.inputs:
            if name in prof.shapes:
                point[name] = tuple(prof.shapes[name][k])
            else:
                shape = net.tensors[name].shape
                if shape is None or any(not isinstance(d, int) or d < 0 for d in shape):
                    raise UsageError(f"convert: input {name!r} is dynamic and not in --optShapes",
                                     f"add {name}:<dims> to the shape flags")
                point[name] = tuple(shape)
        if point not in points:
            points.append(point)
    return points


def _probe_points(net) -> list[dict]:
    dynamic = any(not isinstance(d, int) or d < 0 for n in net.inputs for d in net.tensors[n].shape or ())
    points = []
    for probe in (PROBES if dynamic else PROBES[:1]):
        point = {}
        for name in net.inputs:
            shape = net.tensors[name].shape
            if shape is None:
                raise UsageError(f"input {name!r} has unknown rank, so its shapes cannot be inferred",
                                 "export the model with input shapes")
            point[name] = tuple(d if isinstance(d, int) and d >= 0 else probe for d in shape)
        points.append(point)
    return points


def _run_passes(net, spec: str, points) -> dict:
    by_name = {}
    for name, _, fn in PASSES:
        by_name.setdefault(name, fn)
    done = {}
    for name in [s.strip() for s in spec.split(";") if s.strip()]:
        if name not in by_name:
            raise UsageError(f"convert: unknown pass {name!r}", f"available passes: {', '.join(by_name)} (see -p)")
        done[name] = done.get(name, 0) + by_name[name](net, shape_points=points)
    return done


def _dump(net, points, weights: bool) -> str:
    infos, _ = _infer(net, points, 1 << 24)
    for name, info in infos.items():
        if name not in net.inputs and name in net.tensors:
            net.tensors[name] = info
    return format_network(net, weights=weights)


def _write(path: str, text: str) -> None:
    if path == "-":
        sys.stdout.write(text)
    else:
        atomic_write(path, text)


def _layer_lines(engine) -> list[str]:
    from ..engine.scales import format_scales, layer_scales, tensor_scales
    lines = [f"engine {engine.name}: {len(engine.layers)} layers"]
    scales = tensor_scales(engine)
    for i, layer in enumerate(engine.layers):
        outs = ", ".join(f"{o}: {engine.tensors[o].describe()}" for o in layer.outputs if o in engine.tensors)
        quant = format_scales(*layer_scales(engine, layer, scales))
        lines.append(f"[{i}] {layer.name}: {layer.op} [{layer.precision}] {layer.tactic} -> {outs}"
                     f"  (from {', '.join(layer.origin)})" + (f"  {quant}" if quant else ""))
    return lines


def run(argv) -> int:
    args = _parser().parse_args(_refuse(list(argv)))
    if args.help:
        print(_parser().format_help())
        return 0
    if args.version:
        print(f"tensorforge convert {__version__} (onnx2trt-compatible)")
        return 0
    if args.list_passes:
        seen = set()
        for name, level, _ in PASSES:
            if name not in seen:
                seen.add(name)
                print(f"{name}  (builder optimization level >= {level})")
        return 0
    if not args.model:
        raise UsageError("convert: no ONNX model given", "usage: tensorforge convert model.onnx [-o model.engine] [-t model.txt]")
    if args.workspace is not None and args.workspace < 0:
        raise UsageError(f"convert: -w {args.workspace}: the workspace size cannot be negative", "give a size in bytes")
    log = get_logger()
    old = log.min_severity
    log.min_severity = Severity(max(Severity.ERROR, min(Severity.VERBOSE, Severity.WARNING + args.verbose - args.quiet)))
    try:
        return _convert(args)
    finally:
        log.min_severity = old


def _refuse(argv: list[str]) -> list[str]:
    for a in argv:
        flag = a[:2] if a.startswith("-") and not a.startswith("--") else None
        if flag in REFUSED:
            raise UsageError(f"convert: {flag} is not supported: {REFUSED[flag]}", "see tensorforge convert --help")
    return argv


def _convert(args) -> int:
    log = get_logger()
    net = parse_model(args.model)
    log.info(f"parsed {args.model}: {len(net.layers)} layers, inputs {net.inputs}, outputs {net.outputs}")
    profile = _profile(args, net)
    if args.passes or args.text or args.text_weights:
        points = _profile_points(net, profile) if profile is not None else _probe_points(net)
    else:
        points = None
    if args.passes:
        for name, changes in _run_passes(net, args.passes, points).items():
            log.info(f"pass {name}: {changes} change(s)")
    if args.text or args.text_weights:
        dumped = net.copy()
        if args.text:
            _write(args.text, _dump(dumped, points, weights=False))
        if args.text_weights:
            _write(args.text_weights, _dump(dumped, points, weights=True))
    if args.engine or args.list_layers:
        config = BuilderConfig(fp16=args.bits == 16, workspace_bytes=args.workspace, device=args.device,
                               profiles=[profile] if profile is not None else [])
        engine = build_engine(net, config)
        if args.engine:
            atomic_write(args.engine, to_bytes(engine))
            log.info(f"wrote {args.engine}")
        if args.list_layers:
            print("\n".join(_layer_lines(engine)))
    if not (args.engine or args.list_layers or args.text or args.text_weights):
        ins = ", ".join(f"{n}: {net.tensors[n].describe()}" for n in net.inputs)
        print(f"parsed {args.model}: {len(net.layers)} layers; inputs {ins}; outputs {', '.join(net.outputs)} "
              f"(nothing written: give -o, -t, -T or -l)")
    return 0
