"""`tensorforge debug precision`: find a small set of layers to keep at higher precision so a reduced-precision
engine meets a tolerance against fp32 onnxruntime (Polygraphy's `debug precision`, done end to end).

    tensorforge debug precision model.onnx --int8 --calibData=calib/ --cosine=0.999 [--inputs=x.npz]

Entry point: `run(argv) -> exit code`. Candidates are the model's layers in topological order (INT8/FP8: the
layers that get quantized; FP16: every float layer), kept at `--keep=fp32` (or fp16 for INT8/FP8). Search:
1. every candidate kept must pass (else the tolerance is out of reach: exit 1) and none kept must fail (else
   there is nothing to do: exit 0, empty spec);
2. bisection finds the shortest prefix of candidates that passes (each probe builds and runs one engine); with
   `--direction=reverse` the shortest suffix (Polygraphy's option of the same name): where the error comes from
   layers near the outputs, or where the early layers are the costly ones to keep, that set is smaller or cheaper;
3. each layer of that prefix (suffix) is then dropped in turn when the rest still passes (up to --max-refine probes).
Calibration runs once: its cache (--calib, or a temporary file) serves every probe. Prints the --layerPrecisions
spec, the exec command that reproduces it, the median latency of the plain and the found engine, and the engine
layers (with their ONNX nodes) that run at higher precision. Exit 0 when a spec is found, 1 when none is.
"""

import argparse
import os
import statistics
import tempfile
import time

import numpy as np
import torch

from ..builder import BuilderConfig, OptimizationProfile, build_engine
from ..builder.calibration import CalibrationSource, cache_file_hooks
from ..builder.calibration.qdq_insert import QUANTIZED_OPS
from ..compare.data import input_specs, load_feeds, make_feeds
from ..compare.runners import OnnxRuntimeRunner
from ..ir.interpret import propagate
from ..parser import parse_model
from ..parser.onnx_model import load_model_proto
from ..runtime import ExecutionContext
from ..util.device import resolve_device
from ..util.errors import UsageError
from ..util.log import Severity, get_logger


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(f"debug precision: {message}", "see tensorforge debug precision --help")


def _parser() -> _Parser:
    p = _Parser(prog="tensorforge debug precision", add_help=False,
                description="Find layers to keep at higher precision so outputs meet a tolerance against fp32 "
                            "onnxruntime; prints the --layerPrecisions spec that reproduces it.")
    p.add_argument("model", nargs="?", help="model.onnx")
    mode = p.add_mutually_exclusive_group()
    for m in ("int8", "fp8", "fp16"):
        mode.add_argument(f"--{m}", dest="mode", action="store_const", const=m, help=f"reduced precision: {m}")
    p.add_argument("--calib", help="calibration cache: read when it exists, else written after calibrating")
    p.add_argument("--calibData", help="calibration inputs: a folder of .npz/.npy files, or files separated by commas")
    p.add_argument("--calibAlgo", default="entropy2", choices=("entropy2", "entropy", "minmax", "percentile", "legacy"))
    p.add_argument("--atol", type=float, help="absolute tolerance (an element fails only if it exceeds atol and rtol)")
    p.add_argument("--rtol", type=float, help="relative tolerance")
    p.add_argument("--cosine", type=float, help="minimum cosine similarity of every output to fp32 onnxruntime")
    p.add_argument("--inputs", help="inputs.npz or name:file.npy[,name:file.npy] (default: uniform [0, 1), seed 1)")
    p.add_argument("--keep", choices=("fp32", "fp16"), default="fp32", help="precision of the kept layers")
    p.add_argument("--direction", choices=("forward", "reverse"), default="forward",
                   help="search the shortest prefix of the layers in topological order (forward) or suffix (reverse)")
    p.add_argument("--max-refine", type=int, default=24, help="at most this many probes to shrink the found prefix")
    p.add_argument("--runs", type=int, default=20, help="runs of each engine whose median latency is printed")
    p.add_argument("--device", default=None, help="cpu, cuda or cuda:N (default: cuda when present)")
    p.add_argument("--verbose", "-v", action="store_true", help="log every probe and build; tracebacks on errors")
    p.add_argument("-h", "--help", dest="help", action="store_true", help="show this help and exit")
    return p


def _meets(got: dict, ref: dict, args) -> tuple[bool, str]:
    worst = []
    for name, want in ref.items():
        g, w = np.asarray(got[name], np.float64).ravel(), np.asarray(want, np.float64).ravel()
        if args.cosine is not None:
            cos = float(g @ w / (np.linalg.norm(g) * np.linalg.norm(w) + 1e-30))
            worst.append((cos >= args.cosine, f"{name}: cosine {cos:.6f}"))
        if args.atol is not None or args.rtol is not None:
            atol, rtol = args.atol or 0.0, args.rtol or 0.0
            bad = np.abs(g - w) > atol + rtol * np.abs(w)
            worst.append((not bad.any(), f"{name}: {int(bad.sum())} of {bad.size} elements outside atol/rtol"))
    return all(ok for ok, _ in worst), "; ".join(text for _, text in worst)


class _Prober:
    def __init__(self, args, network, feeds, ref, device):
        self.args, self.network, self.feeds, self.ref, self.device = args, network, feeds, ref, device
        self.builds = 0
        self.tmp = None
        cache = args.calib
        if args.mode in ("int8", "fp8") and not cache:
            self.tmp = tempfile.TemporaryDirectory()
            cache = os.path.join(self.tmp.name, "calibration.cache")
        self.cache = cache

    def config(self, keep: list[str]) -> BuilderConfig:
        a = self.args
        cfg = BuilderConfig(device=str(self.device), fp16=a.mode == "fp16" or a.keep == "fp16" and a.mode != "fp16",
                            int8=a.mode == "int8", fp8=a.mode == "fp8",
                            layer_precisions=[(n, a.keep) for n in keep], precision_constraints="obey")
        profile = OptimizationProfile()             # built for the shapes it is judged on (a dynamic batch included)
        for name, v in self.feeds.items():
            profile.set_shape(name, v.shape, v.shape, v.shape)
        cfg.add_optimization_profile(profile)
        if a.mode in ("int8", "fp8"):
            read, write = cache_file_hooks(self.cache)
            data = a.calibData.split(",") if a.calibData else None
            if len(data or []) == 1:
                data = data[0]
            cfg.calibration = CalibrationSource(data, a.calibAlgo, read, write)
        return cfg

    def build(self, keep: list[str]):
        self.builds += 1
        return build_engine(self.network, self.config(keep))

    def outputs(self, engine) -> dict:
        ctx = ExecutionContext(engine, self.device)
        out = ctx.run({k: torch.from_numpy(v) for k, v in self.feeds.items()})
        return {k: v.detach().float().cpu().numpy() for k, v in out.items()}

    def passes(self, keep: list[str]) -> tuple[bool, str]:
        t0 = time.perf_counter()
        ok, text = _meets(self.outputs(self.build(keep)), self.ref, self.args)
        get_logger().verbose(f"probe {len(keep)} kept [{', '.join(keep)}]: {'pass' if ok else 'fail'} ({text}; "
                             f"{time.perf_counter() - t0:.1f} s)")
        return ok, text

    def latency_ms(self, engine) -> float:
        runs = max(1, self.args.runs)
        ctx = ExecutionContext(engine, self.device)
        feed = {k: torch.from_numpy(v).to(self.device) for k, v in self.feeds.items()}
        ctx.run(feed)
        times = []
        for _ in range(runs):
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            t0 = time.perf_counter()
            ctx.run(feed)
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            times.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(times)


def _candidates(network, mode: str, feeds: dict) -> list[str]:
    env = propagate(network, {n: tuple(v.shape) for n, v in feeds.items()}) if mode == "fp16" else {}
    out = []
    for layer in network.layers:
        if mode in ("int8", "fp8"):
            if layer.op in QUANTIZED_OPS and (layer.op in ("Conv", "ConvTranspose") or
                                              any(i in network.constants for i in layer.inputs[:2])):
                out.append(layer.name)
        elif any(o in env and env[o].dtype == torch.float32 for o in layer.outputs if o):
            out.append(layer.name)
    return out


def search(prober: _Prober, cands: list[str]) -> list[str] | None:
    """The kept layers (a subset of `cands`), [] when none is needed, None when even all of them fail."""
    if not prober.passes(cands)[0]:
        return None
    if prober.passes([])[0]:
        return []
    lo, hi = 1, len(cands)                   # shortest passing prefix: hi passes, lo-1 fails
    while lo < hi:
        mid = (lo + hi) // 2
        if prober.passes(cands[:mid])[0]:
            hi = mid
        else:
            lo = mid + 1
    keep = list(cands[:hi])
    for name in list(keep)[:-1][:prober.args.max_refine]:     # the last one is needed: its prefix-1 failed
        trial = [n for n in keep if n != name]
        if trial and prober.passes(trial)[0]:
            keep = trial
    return keep


def _precision(argv) -> int:
    args = _parser().parse_args(argv)
    if args.help:
        print(_parser().format_help())
        return 0
    if not args.model:
        raise UsageError("debug precision: no model given", "usage: tensorforge debug precision model.onnx --int8 ...")
    if args.mode is None:
        raise UsageError("debug precision: give the reduced precision to debug", "add --int8, --fp8 or --fp16")
    if args.cosine is None and args.atol is None and args.rtol is None:
        raise UsageError("debug precision: no tolerance given", "add --cosine=0.999 or --atol/--rtol")
    if args.mode == "fp16" and args.keep == "fp16":
        raise UsageError("debug precision: --keep=fp16 with --fp16 changes nothing", "keep layers at fp32")
    if args.mode in ("int8", "fp8") and not (args.calibData or (args.calib and os.path.exists(args.calib))):
        get_logger().warning("no --calibData or existing --calib: INT8/FP8 ranges are placeholders")
    log = get_logger()
    old = log.min_severity
    log.min_severity = Severity.VERBOSE if args.verbose else Severity.WARNING
    try:
        return _search_and_report(args)
    finally:
        log.min_severity = old


def _search_and_report(args) -> int:
    device = resolve_device(args.device)
    proto, _ = load_model_proto(args.model)
    specs = input_specs(proto)
    feeds = load_feeds(args.inputs) if args.inputs else make_feeds(specs)
    ref = OnnxRuntimeRunner(proto.SerializeToString()).run(feeds)
    network = parse_model(args.model)
    cands = _candidates(network, args.mode, feeds)
    if not cands:
        raise UsageError(f"debug precision: the model has no layer that --{args.mode} changes", "nothing to debug")
    prober = _Prober(args, network, feeds, ref, device)
    keep = search(prober, cands if args.direction == "forward" else cands[::-1])
    keep = None if keep is None else sorted(keep, key=cands.index)          # printed in topological order
    if keep is None:
        _, text = prober.passes(cands)
        print(f"no spec found: even with all {len(cands)} candidate layers at {args.keep} the outputs miss ({text})")
        return 1
    spec = ",".join(f"{n}:{args.keep}" for n in keep)
    plain, found = prober.build([]), prober.build(keep)
    _, text = _meets(prober.outputs(found), ref, args)
    calib = []
    if args.mode in ("int8", "fp8"):
        calib = [f"--calibData={args.calibData}"] if args.calibData else []
        calib += [f"--calib={args.calib}"] if args.calib else []
        calib += [f"--calibAlgo={args.calibAlgo}"] if args.calibAlgo != "entropy2" else []
    print(f"candidates: {len(cands)} layers; probes: {prober.builds} builds")
    if not keep:
        print(f"plain --{args.mode} already meets the tolerance ({text}); no layer needs higher precision")
        return 0
    print(f"found: {len(keep)} layer(s) at {args.keep}: {text}")
    print(f"--layerPrecisions={spec}")
    extra = " --fp16" if args.keep == "fp16" and args.mode != "fp16" else ""
    print(f"reproduce: tensorforge exec --onnx={args.model} --{args.mode}{extra} {' '.join(calib)} "
          f"--layerPrecisions={spec} --precisionConstraints=obey".replace("  ", " "))
    print(f"latency: plain --{args.mode} {prober.latency_ms(plain):.4g} ms, with the spec "
          f"{prober.latency_ms(found):.4g} ms (median of {max(1, args.runs)} runs on {device})")
    for layer in found.layers:
        if any(n in layer.origin or n == layer.name for n in keep) and layer.op not in ("Cast",):
            print(f"  engine layer {layer.name} ({layer.op}, {layer.precision}) from ONNX nodes "
                  f"{', '.join(layer.origin)}")
    return 0


def run(argv) -> int:
    argv = list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: tensorforge debug precision model.onnx --int8|--fp8|--fp16 [calibration options] "
              "--cosine=C | --atol=A --rtol=R [--inputs=...]")
        return 0 if argv else 2
    if argv[0] != "precision":
        raise UsageError(f"debug: unknown tool {argv[0]!r}", "the tool is: tensorforge debug precision")
    return _precision(argv[1:])
