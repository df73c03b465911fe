"""compare_model: run several runners on the same feeds and compare each with the first (the reference).

    report = compare_model("model.onnx", ["onnxruntime", "tensorforge", "tensorforge-fp16"], atol=1e-5, rtol=1e-5)
    report.passed; print(report.text()); report.to_json()

Runners may be names (runners.make_runner) or Runner objects (e.g. TorchRunner(module)). With `per_layer=True`
every intermediate ONNX tensor is compared too, in graph order, and the first node whose output exceeds the
tolerance is reported as the first divergence: later mismatches usually inherit its error.
"""

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx

from ..util.errors import ModelError, UsageError
from ..util.fileio import read_bytes
from .comparator import OutputComparison, compare_arrays, compare_outputs
from .data import check_feeds, input_specs, make_feeds
from ..builder.tf32_report import tf32_state
from .runners import Runner, TensorforgeRunner, TorchRunner, make_runner, node_outputs


@dataclass
class LayerRow:
    tensor: str
    node: str
    op_type: str
    comparison: OutputComparison
    how: str = ""              # how the runner computed it (tensorforge: layer, tactic, precision)


@dataclass
class PerLayer:
    runner: str
    reference: str
    rows: list[LayerRow] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)     # ONNX tensors the runner does not return (folded, aliased)

    @property
    def first(self) -> LayerRow | None:
        return next((r for r in self.rows if not r.comparison.passed), None)


@dataclass
class PairResult:
    runner: str
    reference: str
    outputs: list[OutputComparison]

    @property
    def passed(self) -> bool:
        return all(o.passed for o in self.outputs)


@dataclass
class ComparisonReport:
    model: str
    atol: float
    rtol: float
    seed: int
    inputs: dict[str, str]
    runners: list[str]
    seconds: dict[str, float]
    pairs: list[PairResult]
    per_layer: list[PerLayer] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    feeds: dict = field(default_factory=dict, repr=False)       # the inputs every runner got

    @property
    def passed(self) -> bool:
        return all(p.passed for p in self.pairs) and all(p.first is None for p in self.per_layer)

    def text(self) -> str:
        ref = self.runners[0]
        lines = [f"[I] comparing {self.model}: reference {ref}, against {', '.join(self.runners[1:])}; "
                 f"atol={self.atol:g} rtol={self.rtol:g} (an element fails only if it exceeds both)",
                 "[I] inputs: " + ", ".join(f"{k} {v}" for k, v in self.inputs.items()),
                 "[I] run time: " + ", ".join(f"{k} {1000 * v:.1f} ms" for k, v in self.seconds.items())]
        lines += [f"[W] {n}" for n in self.notes]
        for pair in self.pairs:
            lines.append(f"[I] {pair.runner} vs {pair.reference}: {'PASSED' if pair.passed else 'FAILED'}")
            for out in pair.outputs:
                lines.extend("    " + line for line in out.lines())
        for pl in self.per_layer:
            failing = sum(not r.comparison.passed for r in pl.rows)
            lines.append(f"[I] per-layer {pl.runner} vs {pl.reference}: {len(pl.rows)} tensors compared, {failing} "
                         f"exceed the tolerance, {len(pl.missing)} not returned by {pl.runner} (folded or aliased)")
            first = pl.first
            if first is None:
                lines.append("    no layer diverges")
            else:
                c = first.comparison
                lines.append(f"[E] first divergence: node {first.node!r} ({first.op_type}), output {first.tensor!r}: "
                             f"{c.reason}; max abs {c.max_abs:.4g}, max rel {c.max_rel:.4g}")
                if first.how:
                    lines.append(f"    {pl.runner} computed it in {first.how}")
        lines.append("PASSED" if self.passed else "FAILED")
        return "\n".join(lines) + "\n"

    def to_json(self) -> dict:
        return {
            "model": self.model, "atol": self.atol, "rtol": self.rtol, "seed": self.seed, "inputs": self.inputs,
            "runners": self.runners, "seconds": self.seconds, "passed": self.passed, "notes": self.notes,
            "pairs": [{"runner": p.runner, "reference": p.reference, "passed": p.passed,
                       "outputs": [o.to_json() for o in p.outputs]} for p in self.pairs],
            "per_layer": [{"runner": pl.runner, "reference": pl.reference, "missing": pl.missing,
                           "first_divergence": None if pl.first is None else
                           {"tensor": pl.first.tensor, "node": pl.first.node, "op_type": pl.first.op_type,
                            "how": pl.first.how},
                           "rows": [{"tensor": r.tensor, "node": r.node, "op_type": r.op_type, "how": r.how,
                                     "comparison": r.comparison.to_json()} for r in pl.rows]}
                          for pl in self.per_layer],
        }


def _load(model) -> tuple[onnx.ModelProto, str]:
    if isinstance(model, onnx.ModelProto):
        return model, model.graph.name or "model"
    if isinstance(model, (bytes, bytearray)):
        data, label, base = bytes(model), "model", None
    else:
        data, label, base = read_bytes(model, "ONNX model"), str(model), str(Path(model).resolve().parent)
    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(data)
    except Exception:  # noqa: BLE001 - protobuf raises several types for garbage
        raise ModelError(f"cannot read {label}: not a valid ONNX protobuf", "re-export the model") from None
    if not proto.HasField("graph"):
        raise ModelError(f"{label} has no graph", "the file is truncated or not an ONNX model; re-export it")
    if base is not None:
        onnx.load_external_data_for_model(proto, base)
    return proto, label


def compare_model(model, runners=("onnxruntime", "tensorforge"), atol: float = 1e-5, rtol: float = 1e-5,
                  seed: int = 1, feeds: dict | None = None, shapes: dict | None = None,
                  val_range: tuple[float, float] = (0.0, 1.0), per_layer: bool = False, device=None,
                  engine_path=None, optimization_level: int = 3) -> ComparisonReport:
    proto, label = _load(model)
    if len(runners) < 2:
        raise UsageError("a comparison needs at least two runners", "e.g. --runners onnxruntime,tensorforge")
    specs = input_specs(proto)
    if feeds is None:
        feeds = make_feeds(specs, seed, val_range, shapes)
    else:
        check_feeds(specs, feeds)
    graph_outputs = [o.name for o in proto.graph.output]
    objs: list[Runner] = []
    for spec in runners:
        if isinstance(spec, Runner):
            if isinstance(spec, TorchRunner):
                spec.input_names = spec.input_names or [s.name for s in specs]
                spec.output_names = spec.output_names or graph_outputs
            objs.append(spec)
        else:
            objs.append(make_runner(spec, proto, per_layer, device, engine_path, optimization_level))
    names = [r.name for r in objs]
    if len(set(names)) != len(names):
        raise UsageError(f"runner names repeat: {', '.join(names)}", "list each runner once")
    results, seconds = {}, {}
    for r in objs:
        results[r.name], seconds[r.name] = r.timed_run(feeds)
    ref = objs[0]
    pairs = [PairResult(r.name, ref.name, compare_outputs(results[r.name], results[ref.name], atol, rtol, graph_outputs))
             for r in objs[1:]]
    report = ComparisonReport(label, atol, rtol, seed,
                              {k: f"{v.dtype}[{','.join(map(str, v.shape))}]" for k, v in feeds.items()},
                              names, seconds, pairs, feeds=feeds)
    report.notes += _tf32_notes(objs, results, graph_outputs)
    if per_layer:
        produced = node_outputs(proto)
        for r in objs:
            if not r.supports_per_layer:
                report.notes.append(f"runner {r.name} cannot return intermediate tensors; per-layer skips it")
        if not ref.supports_per_layer:
            raise UsageError(f"--per-layer needs a reference runner that returns intermediate tensors, not {ref.name}",
                             "put onnxruntime or onnx-reference first in --runners")
        for r in objs[1:]:
            if r.supports_per_layer:
                report.per_layer.append(_per_layer(r, ref.name, results[r.name], results[ref.name], produced,
                                                   atol, rtol))
    return report


def _tf32_notes(objs: list, results: dict, outputs: list[str]) -> list[str]:
    """What TF32 did: each fp32 tensorforge runner whose engine runs matmul/conv layers in TF32 says so, and when
    a TF32-off runner (tensorforge-notf32) ran beside it, the largest difference between the two per output."""
    fp32 = [r for r in objs if isinstance(r, TensorforgeRunner) and r.precision == "fp32" and r.engine is not None]
    notes = []
    on = [r for r in fp32 if tf32_state(r.engine.data)["applies"]]
    off = [r for r in fp32 if not r.tf32]
    for r in on:
        notes.append(f"runner {r.name}: {tf32_state(r.engine.data)['note']}"
                     + ("" if off else "; add the runner tensorforge-notf32 to see its effect"))
        for o in off:
            diffs = []
            for name in outputs:
                a, b = results[r.name].get(name), results[o.name].get(name)
                if a is not None and b is not None and np.shape(a) == np.shape(b):
                    d = float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)), initial=0.0))
                    m = float(np.max(np.abs(np.asarray(b, np.float64)), initial=0.0))
                    diffs.append(f"{name} max |Δ| {d:.3g} ({d / m if m else 0.0:.2g} of its max)")
            notes.append(f"TF32 on ({r.name}) vs off ({o.name}): " + ("; ".join(diffs) or "no common outputs"))
    return notes


def _per_layer(runner: Runner, ref_name: str, got: dict, want: dict, produced: dict, atol, rtol) -> PerLayer:
    pl = PerLayer(runner.name, ref_name)
    for tensor, (_, node, op_type) in produced.items():
        if tensor not in want:
            continue
        if tensor not in got:
            pl.missing.append(tensor)
            continue
        cmp = compare_arrays(tensor, np.asarray(got[tensor]), np.asarray(want[tensor]), atol, rtol)
        pl.rows.append(LayerRow(tensor, node, op_type, cmp, runner.describe_tensor(tensor)))
    return pl
