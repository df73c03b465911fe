"""`tensorforge inspect`: what is in an ONNX model, an engine file or a timing cache — text, or JSON for scripts.

Entry point: `run(argv) -> exit code`. The kind of file is read from its bytes (engine magic, JSON object, else
ONNX). ONNX model: inputs/outputs, opsets, op counts and the capability report — every node that cannot be
imported and why, found by running each node's importer without building (api/trt/capability.py). Engine:
inputs/outputs with profiles, every layer with the ONNX nodes it came from, its tactic and precision, plugins,
weights and build facts. Timing cache: its entries per device. Exit code 0, or 1 for an ONNX model with
unsupported nodes (so scripts can gate on it).
"""

import argparse
import json
from collections import Counter

from ..api.trt.capability import capability_report
from ..builder.graph_probe import capture_line
from ..builder.tf32_report import tf32_state
from ..builder.timing_cache import TimingCache
from ..engine import from_bytes
from ..engine.scales import format_scales, layer_scales, tensor_scales
from ..engine.serialize import MAGIC, read_header
from ..ir import dtype_name
from ..parser.onnx_model import _opsets, load_model_proto
from ..parser.tensors import torch_dtype
from ..util.errors import TensorforgeError, UsageError
from ..util.fileio import read_bytes


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(f"inspect: {message}", "see tensorforge inspect --help")


def _parser() -> _Parser:
    p = _Parser(prog="tensorforge inspect", add_help=False,
                description="Show an ONNX model (with what tensorforge cannot import, and why), an engine file "
                            "(layers, their ONNX origins, tactics, precisions, plugins) or a timing cache.",
                epilog="Exit code: 0, or 1 when an ONNX model has nodes that cannot be imported (listed with the reason).")
    p.add_argument("path", nargs="?", help="model.onnx, model.engine (.plan, .trt) or a timing cache .json")
    p.add_argument("--json", action="store_true", help="print one JSON document instead of text")
    for flag in ("--staticPlugins", "--plugins", "--dynamicPlugins"):
        p.add_argument(flag, dest="plugins", action="append", default=[], metavar="FILE",
                       help="load plugins from this Python file or module first (repeatable), as exec does" if
                       flag == "--staticPlugins" else "same as --staticPlugins")
    p.add_argument("--verbose", "-v", action="store_true", help="show tracebacks on errors")
    p.add_argument("-h", "--help", dest="help", action="store_true", help="show this help and exit")
    return p


def _dims(shape) -> str:
    return "?" if shape is None else "[" + ",".join(str(d) for d in shape) + "]"


# ---- ONNX ------------------------------------------------------------------------------------------
def _value_info(vi) -> dict:
    t = vi.type.tensor_type
    try:
        dt = dtype_name(torch_dtype(t.elem_type)) if t.elem_type else "?"
    except TensorforgeError:
        dt = f"elem_type {t.elem_type}"
    shape = [d.dim_value if d.HasField("dim_value") else (d.dim_param or -1) for d in t.shape.dim] \
        if t.HasField("shape") else None
    return {"name": vi.name, "dtype": dt, "shape": shape}


def inspect_onnx(path: str) -> dict:
    model, _ = load_model_proto(path)
    g = model.graph
    inits = {t.name for t in g.initializer}
    report = capability_report(path, g.name or None)
    return {"kind": "onnx", "path": path, "graph": g.name, "ir_version": model.ir_version,
            "producer": f"{model.producer_name} {model.producer_version}".strip(), "opsets": _opsets(model),
            "inputs": [_value_info(vi) for vi in g.input if vi.name not in inits],
            "outputs": [_value_info(vi) for vi in g.output], "initializers": len(inits),
            "op_counts": dict(sorted(Counter((f"{n.domain}::" if n.domain not in ("", "ai.onnx") else "") + n.op_type
                                             for n in g.node).items())),
            "capability": report.to_json()}


def _onnx_text(d: dict) -> list[str]:
    lines = [f"ONNX model {d['path']}: graph {d['graph']!r}, ir_version {d['ir_version']}, producer {d['producer'] or '?'}",
             "opsets: " + ", ".join(f"{k or 'ai.onnx'} {v}" for k, v in sorted(d["opsets"].items()))]
    lines += [f"input  {i['name']}: {i['dtype']}{_dims(i['shape'])}" for i in d["inputs"]]
    lines += [f"output {o['name']}: {o['dtype']}{_dims(o['shape'])}" for o in d["outputs"]]
    cap = d["capability"]
    lines.append(f"nodes: {cap['nodes']} (" + ", ".join(f"{k} {v}" for k, v in d["op_counts"].items()) + f"); "
                 f"initializers: {d['initializers']}")
    if cap["supported"]:
        lines.append(f"capability: all {cap['nodes']} nodes can be imported")
    else:
        lines.append(f"capability: {len(cap['problems'])} of {cap['nodes']} nodes cannot be imported:")
        for p in cap["problems"]:
            dom = f"{p['domain']}::" if p["domain"] else ""
            lines.append(f"  [{p['index']}] {p['name']} ({dom}{p['op_type']}): {p['status']}: {p['reason']}")
    return lines


# ---- engines ---------------------------------------------------------------------------------------
def inspect_engine(path: str, data: bytes) -> dict:
    version, _, _, _ = read_header(data, f"engine file {path}")
    e = from_bytes(data, f"engine file {path}")

    def io(t):
        return {"name": t.name, "dtype": dtype_name(t.dtype) if t.dtype is not None else "?",
                "shape": list(t.shape) if t.shape is not None else None}

    scales = tensor_scales(e)
    layers = [{"index": i, "name": layer.name, "op": layer.op, "origin": list(layer.origin), "tactic": layer.tactic,
               "precision": layer.precision, "placement": layer.placement,
               "scales": dict(zip(("inputs", "outputs"), layer_scales(e, layer, scales))),
               "outputs": [io(e.tensors[o]) for o in layer.outputs if o in e.tensors]}
              for i, layer in enumerate(e.layers)]
    return {"kind": "engine", "path": path, "name": e.name, "bytes": len(data), "format_version": version,
            "build": e.build_info, "inputs": [io(t) for t in e.inputs], "outputs": [io(t) for t in e.outputs],
            "profiles": [{k: [list(s) for s in v] for k, v in p.items()} for p in e.profiles], "layers": layers,
            "plugins": e.plugins, "weights": {"constants": len(e.constants), "bytes": e.weight_bytes()},
            "tf32": tf32_state(e),
            "generated_kernels": sorted({la.attrs["kernel"] for la in e.layers        # hashes; the source is
                                         if la.op == "PointwiseChain" and la.attrs.get("kernel")})}  # regenerated


def _engine_text(d: dict) -> list[str]:
    b = d["build"]
    lines = [f"engine {d['path']}: {d['name']!r}, {d['bytes']} bytes, format version {d['format_version']}, "
             f"tensorforge {b.get('tensorforge_version', '?')}",
             f"built on {b.get('device', '?')} in {b.get('build_seconds', '?')} s; flags: "
             f"{', '.join(b.get('flags', [])) or 'none'}; optimization level {b.get('optimization_level', '?')}"]
    lines.append(d["tf32"]["note"])
    lines.append(capture_line(b.get("graph_capture")))
    lines += [f"  layer {x.get('layer')} ({x.get('op')}, tactic {x.get('tactic')}): {x.get('reason')}"
              for x in (b.get("graph_capture") or {}).get("blockers", [])]
    lines += [f"input  {t['name']}: {t['dtype']}{_dims(t['shape'])}" for t in d["inputs"]]
    lines += [f"output {t['name']}: {t['dtype']}{_dims(t['shape'])}" for t in d["outputs"]]
    for i, prof in enumerate(d["profiles"]):
        lines.append(f"profile {i}: " + "; ".join(
            f"{n} min {'x'.join(map(str, s[0]))} opt {'x'.join(map(str, s[1]))} max {'x'.join(map(str, s[2]))}"
            for n, s in prof.items()))
    lines.append(f"layers: {len(d['layers'])}")
    for layer in d["layers"]:
        outs = ", ".join(f"{o['dtype']}{_dims(o['shape'])}" for o in layer["outputs"])
        where = " on host" if layer["placement"] == "host" else ""
        lines.append(f"  [{layer['index']}] {layer['name']}: {layer['op']} [{layer['precision']}{where}] "
                     f"{layer['tactic']} -> {outs}")
        lines.append(f"        origin (ONNX nodes or API layers): {', '.join(layer['origin'])}")
        quant = format_scales(layer["scales"]["inputs"], layer["scales"]["outputs"])
        if quant:
            lines.append(f"        {quant}")
    plugins = d["plugins"]
    lines.append("plugins: " + ("none" if not plugins else ", ".join(
        f"{p.get('id', '?')} v{p.get('version', '?')} ({len(p.get('layers', []))} layer(s))" for p in plugins)))
    lines.append(f"weights: {d['weights']['bytes']} bytes in {d['weights']['constants']} constants; "
                 f"generated kernels: {len(d['generated_kernels'])}")
    return lines


# ---- timing caches ---------------------------------------------------------------------------------
def inspect_cache(path: str, data: bytes) -> dict:
    cache = TimingCache.deserialize(data, f"timing cache {path}")
    devices = {}
    for dev, entries in sorted(cache.devices.items()):
        devices[dev] = [{"key": k, "op": v.get("op"), "best": v.get("best"), "times_ms": v.get("times_ms", {}),
                         "rejected": v.get("rejected", {})} for k, v in sorted(entries.items())]
    return {"kind": "timing_cache", "path": path, "entries": len(cache), "devices": devices}


def _cache_text(d: dict) -> list[str]:
    lines = [f"timing cache {d['path']}: {d['entries']} entries"]
    for dev, entries in d["devices"].items():
        lines.append(f"device {dev}: {len(entries)} entries")
        for e in entries:
            times = ", ".join(f"{k} {v:.4g} ms" for k, v in sorted(e["times_ms"].items(), key=lambda kv: kv[1]))
            lines.append(f"  {e['key']} {e['op']}: best {e['best']}" + (f" ({times})" if times else "")
                         + (f"; {len(e['rejected'])} rejected" if e["rejected"] else ""))
    return lines


ENGINE_SUFFIXES = (".engine", ".plan", ".trt")


def inspect_path(path: str) -> dict:
    data = read_bytes(path, "file to inspect")
    if data[:len(MAGIC)] == MAGIC:
        return inspect_engine(path, data)
    if data.lstrip()[:1] == b"{":
        return inspect_cache(path, data)
    if str(path).lower().endswith(ENGINE_SUFFIXES):
        from ..util.errors import EngineFileError
        raise EngineFileError(f"{path} is not a tensorforge engine (wrong magic bytes; a TensorRT plan, or another "
                              "file renamed?)", "rebuild it with tensorforge exec --onnx=model.onnx --saveEngine=...")
    return inspect_onnx(path)


def run(argv) -> int:
    args = _parser().parse_args(list(argv))
    if args.help:
        print(_parser().format_help())
        return 0
    if not args.path:
        raise UsageError("inspect: no file given", "usage: tensorforge inspect model.onnx|model.engine|cache.json [--json]")
    if args.plugins:
        from ..plugin import load as load_plugins
        for source in args.plugins:
            load_plugins(source)
    d = inspect_path(args.path)
    if args.json:
        print(json.dumps(d, indent=1, sort_keys=True, default=str))
    else:
        print("\n".join({"onnx": _onnx_text, "engine": _engine_text, "timing_cache": _cache_text}[d["kind"]](d)))
    return 1 if d["kind"] == "onnx" and not d["capability"]["supported"] else 0
