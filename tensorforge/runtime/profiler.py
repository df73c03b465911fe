"""Per-layer profiling and layer information, in trtexec's shapes.

Entry points: `profile_layers(ctx, feed, iterations)` → LayerProfile (`--dumpProfile`, `--exportProfile`,
`--separateProfileRun`), `layer_info(engine)` / `format_layer_info(engine)` (`--dumpLayerInfo`, `--exportLayerInfo`).
Profiling runs the engine uncaptured with a CUDA event before and after every layer (on CPU: the wall clock around
each kernel), so it perturbs end-to-end timing; trtexec's --separateProfileRun runs it apart from the timed runs.

    exportProfile:   [{"count": N}, {"name": layer, "timeMs": Σ, "averageMs": Σ/N, "medianMs": m, "percentage": %}, ...]
    exportLayerInfo: {"Layers": [{"Name", "LayerType", "Inputs", "Outputs", "TacticName", "Precision", "Origin",
                                  "Metadata": "[ONNX Layer: a, b]", ...}], "Bindings": [input and output names]}
"""

import json
import time
from dataclasses import dataclass
from statistics import median

import torch

from ..engine import Engine
from ..engine.scales import format_scales, layer_scales, tensor_scales
from ..util.fileio import atomic_write


@dataclass
class LayerProfile:
    names: list[str]
    times_ms: list[list[float]]          # per layer, one entry per iteration

    @property
    def iterations(self) -> int:
        return len(self.times_ms[0]) if self.times_ms else 0

    def rows(self) -> list[dict]:
        total = sum(sum(t) for t in self.times_ms) or 1.0
        return [{"name": n, "timeMs": sum(t), "averageMs": sum(t) / len(t), "medianMs": median(t),
                 "percentage": 100.0 * sum(t) / total} for n, t in zip(self.names, self.times_ms) if t]

    def to_json(self) -> list[dict]:
        return [{"count": self.iterations}, *self.rows()]

    def write(self, path) -> None:
        atomic_write(path, json.dumps(self.to_json(), indent=2))

    def format_table(self) -> str:
        """The text block trtexec prints for --dumpProfile, with a total line."""
        rows = self.rows()
        lines = [f"=== Profile ({self.iterations} iterations ) ===",
                 f"{'Time(ms)':>12} {'Avg.(ms)':>12} {'Median(ms)':>12} {'Time(%)':>9}   Layer"]
        for r in rows:
            lines.append(f"{r['timeMs']:12.2f} {r['averageMs']:12.4f} {r['medianMs']:12.4f} {r['percentage']:9.1f}   {r['name']}")
        total = sum(r["timeMs"] for r in rows)
        n = max(self.iterations, 1)
        lines.append(f"{total:12.2f} {total / n:12.4f} {sum(r['medianMs'] for r in rows):12.4f} {100.0:9.1f}   Total")
        return "\n".join(lines)


def profile_layers(ctx, feed: dict[str, torch.Tensor], iterations: int = 10, warmup: int = 1) -> LayerProfile:
    """Time every layer of `ctx`'s engine over `iterations` uncaptured runs of `feed` (after `warmup` runs)."""
    ctx.check_inputs(feed)
    dev_feed = {k: v.to(ctx.device) for k, v in feed.items()}
    for _ in range(warmup):
        ctx.execute(dev_feed)
    n = len(ctx.engine.layers)
    times: list[list[float]] = [[] for _ in range(n)]
    cuda = ctx.device.type == "cuda"
    for _ in range(iterations):
        if cuda:
            marks = [[torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)] for _ in range(n)]
            ctx.execute(dev_feed, hook=lambda i, phase: marks[i][phase == "end"].record())
            torch.cuda.synchronize(ctx.device)
            for i, (s, e) in enumerate(marks):
                times[i].append(s.elapsed_time(e))
        else:
            clock = [[0.0, 0.0] for _ in range(n)]

            def hook(i, phase, clock=clock):
                clock[i][phase == "end"] = time.perf_counter()
            ctx.execute(dev_feed, hook=hook)
            for i, (s, e) in enumerate(clock):
                times[i].append((e - s) * 1e3)
    return LayerProfile([layer.name for layer in ctx.engine.layers], times)


# ---- layer information ----------------------------------------------------------------------------
def _tensor_json(engine: Engine, name: str, where: str, scales: dict | None = None) -> dict:
    info = engine.tensors.get(name)
    dtype = str(info.dtype).replace("torch.", "") if info is not None and info.dtype is not None else "?"
    dims = list(info.shape) if info is not None and info.shape is not None else None
    out = {"Name": name, "Location": where, "Dimensions": dims, "Format/Datatype": f"Row major linear {dtype}"}
    if scales and name in scales:
        out["Scale"] = scales[name]          # quantization scale (INT8: amax/127, FP8: amax/448)
    return out


def layer_info(engine: Engine) -> dict:
    layers = []
    scales = tensor_scales(engine)
    for layer in engine.layers:
        where = "Host" if layer.placement == "host" else "Device"
        consts = [i for i in layer.inputs if i in engine.constants]
        layers.append({
            "Name": layer.name, "LayerType": layer.op,
            "Inputs": [_tensor_json(engine, i, where, scales) for i in layer.inputs if i and i not in engine.constants],
            "Outputs": [_tensor_json(engine, o, where, scales) for o in layer.outputs if o],
            "Weights": [{"Name": c, "Count": int(engine.constants[c].numel())} for c in consts],
            "TacticName": layer.tactic, "Precision": layer.precision, "Placement": layer.placement,
            "Origin": list(layer.origin), "Metadata": f"[ONNX Layer: {', '.join(layer.origin)}]",
            **({"PointTactics": dict(layer.point_tactics)} if layer.point_tactics else {}),
        })
    return {"Layers": layers, "Bindings": engine.input_names + engine.output_names}


def format_layer_info(engine: Engine) -> str:
    """One line per layer: name, op, tactic, precision, placement and the ONNX nodes it came from."""
    lines = [f"=== Layer Information ({len(engine.layers)} layers) ==="]
    scales = tensor_scales(engine)
    for i, layer in enumerate(engine.layers):
        quant = format_scales(*layer_scales(engine, layer, scales))
        ins = ", ".join(i for i in layer.inputs if i)
        lines.append(f"[{i}] {layer.name}: {layer.op} ({ins}) -> ({', '.join(o for o in layer.outputs if o)}) "
                     f"tactic={layer.tactic}" + "".join(f" {k}:tactic={v}" for k, v in (layer.point_tactics or {}).items())
                     + f" precision={layer.precision} placement={layer.placement} "
                     f"onnx=[{', '.join(layer.origin)}]" + (f" {quant}" if quant else ""))
    return "\n".join(lines)


def write_layer_info(engine: Engine, path) -> None:
    atomic_write(path, json.dumps(layer_info(engine), indent=2))
