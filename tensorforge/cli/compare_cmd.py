"""`tensorforge compare`: Polygraphy-style comparison of several runners on the same inputs.

Entry point: `run(argv) -> exit code` — 0 when every runner matches the reference (the first runner) within
--atol/--rtol (an element fails only if it exceeds both), 1 otherwise. The report (per-output max/mean/median
absolute and relative error, an error histogram, and with --per-layer the first node whose output diverges) goes
to stdout; --save-report writes it as HTML with the histograms drawn, --json as JSON. The work is compare/.
"""

import argparse
import json

from ..compare.data import load_feeds, parse_shapes, save_feeds
from ..compare.report_html import write_html
from ..compare.session import compare_model
from ..util.errors import UsageError
from ..util.fileio import atomic_write
from ..util.log import Severity, get_logger

RUNNERS = ("tensorforge, tensorforge-notf32, tensorforge-fp16, tensorforge-bf16, tensorforge-int8, tensorforge-fp8, tensorforge-best "
           "(calibrated on the compared inputs), onnxruntime, onnx-reference, engine")


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(f"compare: {message}", "see tensorforge compare --help")


def _floats(text: str) -> tuple[float, float]:
    try:
        lo, hi = (float(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected LOW,HIGH, got {text!r}") from None
    if not lo <= hi:
        raise argparse.ArgumentTypeError(f"LOW must not exceed HIGH in {text!r}")
    return lo, hi


def _tolerance(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"a tolerance cannot be negative ({text})")
    return v


def _parser() -> _Parser:
    p = _Parser(prog="tensorforge compare", add_help=False,
                description="Run several runners on the same inputs and compare every output with the first "
                            "runner's (the reference). Exit code 0 when all match, 1 otherwise.")
    p.add_argument("model", nargs="?", help="the ONNX model")
    p.add_argument("--runners", default=None,
                   help=f"comma-separated, reference first (default: onnxruntime,tensorforge); from: {RUNNERS}")
    p.add_argument("--engine", help="a built engine file; adds the 'engine' runner")
    p.add_argument("--atol", type=_tolerance, default=1e-5, help="absolute tolerance (default 1e-5)")
    p.add_argument("--rtol", type=_tolerance, default=1e-5, help="relative tolerance (default 1e-5)")
    p.add_argument("--seed", type=int, default=1, help="seed of the random inputs (default 1)")
    p.add_argument("--val-range", type=_floats, default=(0.0, 1.0), metavar="LOW,HIGH",
                   help="range of random input values (default 0,1; integers inclusive; "
                        "write --val-range=-1,1 when LOW is negative)")
    p.add_argument("--input-shapes", default=None, metavar="NAME:DxDx..,...",
                   help="shapes for inputs with dynamic dimensions (default: each dynamic dimension 1)")
    p.add_argument("--load-inputs", metavar="FILE", help="inputs from an .npz, or name:file.npy,... instead of random")
    p.add_argument("--save-inputs", metavar="FILE", help="write the inputs used to an .npz (for --load-inputs)")
    p.add_argument("--per-layer", action="store_true",
                   help="also compare every intermediate tensor and report the first node that diverges")
    p.add_argument("--save-report", metavar="HTML", help="write the report with error histograms as HTML")
    p.add_argument("--json", metavar="FILE", help="write the report as JSON")
    p.add_argument("--device", default=None, help="device for the tensorforge runners: cpu, cuda or an index")
    p.add_argument("--builder-optimization-level", type=int, choices=range(6), default=3, metavar="0-5",
                   help="optimization level of the tensorforge builds (default 3)")
    p.add_argument("--verbose", "-v", action="store_true", help="log builds and show tracebacks on errors")
    p.add_argument("-h", "--help", dest="help", action="store_true", help="show this help and exit")
    return p


def run(argv) -> int:
    args = _parser().parse_args(list(argv))
    if args.help:
        print(_parser().format_help())
        return 0
    if not args.model:
        raise UsageError("compare: no ONNX model given", "usage: tensorforge compare model.onnx [--runners a,b]")
    runners = [r.strip() for r in (args.runners or "onnxruntime,tensorforge").split(",") if r.strip()]
    if args.engine and "engine" not in runners:
        runners.append("engine")
    if "engine" in runners and not args.engine:
        raise UsageError("compare: the engine runner needs --engine FILE", "give --engine model.engine")
    if args.load_inputs and args.input_shapes:
        raise UsageError("compare: --input-shapes and --load-inputs conflict", "loaded inputs carry their shapes")
    feeds = load_feeds(args.load_inputs) if args.load_inputs else None
    log = get_logger()
    old = log.min_severity
    if args.verbose:
        log.min_severity = Severity.VERBOSE
    try:
        report = compare_model(args.model, runners, args.atol, args.rtol, args.seed, feeds,
                               parse_shapes(args.input_shapes), args.val_range, args.per_layer, args.device,
                               args.engine, args.builder_optimization_level)
    finally:
        log.min_severity = old
    print(report.text(), end="")
    if args.save_inputs:
        save_feeds(args.save_inputs, report.feeds)
    if args.save_report:
        write_html(report, args.save_report)
    if args.json:
        atomic_write(args.json, json.dumps(report.to_json(), indent=1, sort_keys=True, default=str))
    return 0 if report.passed else 1
