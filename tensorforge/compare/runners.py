"""Runners: one way each of computing a model's outputs from numpy feeds.

    TensorforgeRunner(model, precision="fp32"|"fp16"|"bf16")   parse → build (profile = the feeds' shapes) → run
                                                               (fp32: TF32 on, as exec; runner tensorforge-notf32: off)
    EngineFileRunner("model.engine")                           a prebuilt engine file
    OnnxRuntimeRunner(model)                                   onnxruntime, CPU execution provider
    OnnxReferenceRunner(model)                                 onnx.reference.ReferenceEvaluator (slow, exact)
    TorchRunner(module, input_names, output_names)             an nn.Module, from Python only

`run(feeds) -> {name: ndarray}`. With `per_layer=True` the ONNX-based runners also return every intermediate
tensor: the ONNX runners by listing every node output as a graph output, tensorforge by marking every layer
output that carries an ONNX tensor's name as a network output before building (the builder keeps network
outputs, so passes cannot fuse them away; a tensor that was folded into a constant is simply not returned).
"""

import time

import numpy as np
import onnx
import torch

from ..builder import BuilderConfig, OptimizationProfile, build_engine
from ..engine import Engine as EngineData
from ..parser import parse_model
from ..runtime import ExecutionContext, load_engine_file
from ..util.device import resolve_device
from ..util.errors import UsageError

PRECISIONS = ("fp32", "fp16", "bf16", "int8", "fp8", "best")   # int8/fp8/best: calibrated on the compared inputs


def node_outputs(model: onnx.ModelProto) -> dict[str, tuple[int, str, str]]:
    """Every tensor a top-level node produces → (node index, node name, op_type), in graph order."""
    out = {}
    for index, node in enumerate(model.graph.node):
        for o in node.output:
            if o:
                out[o] = (index, node.name or f"{node.op_type}_{index}", node.op_type)
    return out


def with_all_outputs(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of `model` whose graph outputs also list every node output (untyped value infos)."""
    marked = onnx.ModelProto()
    marked.CopyFrom(model)
    have = {o.name for o in marked.graph.output}
    for name in node_outputs(model):
        if name not in have:
            marked.graph.output.append(onnx.ValueInfoProto(name=name))
    return marked


class Engine:
    """An engine and its execution context on one device: numpy feeds in, numpy outputs out (the runners'
    contract). compare may not import api (DESIGN.md), so this is the runners' own thin wrapper."""

    def __init__(self, data: EngineData, device=None):
        self.data = data
        self.context = ExecutionContext(data, resolve_device(device))

    def run(self, feeds: dict) -> dict:
        tensors = {k: v if isinstance(v, torch.Tensor) else torch.from_numpy(np.require(v, requirements="C"))
                   for k, v in feeds.items()}
        return {k: v.detach().cpu().numpy() for k, v in self.context.run(tensors).items()}


class Runner:
    name = "runner"
    supports_per_layer = False

    def run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def timed_run(self, feeds):
        t0 = time.perf_counter()
        out = self.run(feeds)
        return out, time.perf_counter() - t0

    def describe_tensor(self, name: str) -> str:
        """How this runner computed tensor `name` (tensorforge: layer, tactic, precision)."""
        return ""


class TensorforgeRunner(Runner):
    supports_per_layer = True

    def __init__(self, model, precision: str = "fp32", device=None, per_layer: bool = False,
                 optimization_level: int = 3, name: str | None = None, tf32: bool = True):
        if precision not in PRECISIONS:
            raise UsageError(f"unknown precision {precision!r}", f"choose one of {', '.join(PRECISIONS)}")
        self.model = model if isinstance(model, onnx.ModelProto) else onnx.load_from_string(bytes(model))
        self.precision, self.device, self.per_layer = precision, device, per_layer
        self.optimization_level, self.tf32 = optimization_level, tf32     # tf32: trtexec's default, as in exec
        self.name = name or ("tensorforge" if precision == "fp32" else f"tensorforge-{precision}")
        self.engine: Engine | None = None
        self._shapes = None

    def _build(self, shapes: dict[str, tuple]) -> None:
        net = parse_model(self.model)
        if self.per_layer:
            wanted = node_outputs(self.model)
            for layer in net.layers:
                for o in layer.outputs:
                    if o in wanted:
                        net.mark_output(o)
        profile = OptimizationProfile()
        for name in net.inputs:
            profile.set_shape(name, shapes[name], shapes[name], shapes[name])
        config = BuilderConfig(fp16=self.precision == "fp16", bf16=self.precision == "bf16", profiles=[profile],
                               optimization_level=self.optimization_level, tf32=self.tf32,
                               device=str(self.device) if self.device is not None else None)
        if self.precision in ("int8", "fp8", "best"):     # calibrated on the inputs being compared (documented)
            from ..builder.calibration import configure
            configure(config, **{self.precision: True}, data=[dict(self._calibration_feeds)])
        self.engine = Engine(build_engine(net, config), self.device)
        self._shapes = shapes

    def run(self, feeds):
        shapes = {k: tuple(v.shape) for k, v in feeds.items()}
        self._calibration_feeds = feeds
        if self.engine is None or shapes != self._shapes:
            self._build(shapes)
        return self.engine.run(dict(feeds))

    def describe_tensor(self, name):
        """The engine layer that produced `name`; a boundary Cast (reduced precision) names its producer too."""
        if self.engine is None:
            return ""
        producer = {o: layer for layer in self.engine.data.layers for o in layer.outputs}
        layer = producer.get(name)
        if layer is None:
            return ""
        text = f"layer {layer.name!r} ({layer.op}, from {','.join(layer.origin)}) tactic {layer.tactic}, {layer.precision}"
        inner = producer.get(layer.inputs[0]) if layer.op == "Cast" and layer.inputs else None
        if inner is not None:
            text = (f"layer {inner.name!r} ({inner.op}, from {','.join(inner.origin)}) tactic {inner.tactic}, "
                    f"{inner.precision}, then {text}")
        return text


class EngineFileRunner(Runner):
    def __init__(self, path, device=None, name: str = "tensorforge-engine"):
        self.engine = Engine(load_engine_file(path), device)
        self.name = name

    def run(self, feeds):
        return self.engine.run(dict(feeds))


class OnnxRuntimeRunner(Runner):
    name = "onnxruntime"
    supports_per_layer = True

    def __init__(self, model, per_layer: bool = False, threads: int | None = None):
        try:
            import onnxruntime as ort
        except ImportError:
            raise UsageError("the onnxruntime runner needs the onnxruntime package",
                             "pip install onnxruntime, or leave it out of --runners") from None
        proto = model if isinstance(model, onnx.ModelProto) else onnx.load_from_string(bytes(model))
        if per_layer:
            proto = with_all_outputs(proto)
        opts = ort.SessionOptions()
        if threads:
            opts.intra_op_num_threads = threads
        self.session = ort.InferenceSession(proto.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        self.names = [o.name for o in self.session.get_outputs()]

    def run(self, feeds):
        return dict(zip(self.names, self.session.run(None, dict(feeds))))


class OnnxReferenceRunner(Runner):
    name = "onnx-reference"
    supports_per_layer = True

    def __init__(self, model, per_layer: bool = False):
        from onnx.reference import ReferenceEvaluator

        proto = model if isinstance(model, onnx.ModelProto) else onnx.load_from_string(bytes(model))
        if per_layer:
            proto = with_all_outputs(proto)
        self.names = [o.name for o in proto.graph.output]
        self.evaluator = ReferenceEvaluator(proto)

    def run(self, feeds):
        return {n: np.asarray(v) for n, v in zip(self.names, self.evaluator.run(None, dict(feeds)))}


class TorchRunner(Runner):
    """Runs an nn.Module on CPU tensors made from the feeds (in `input_names` order), under torch.no_grad."""

    def __init__(self, module: torch.nn.Module, input_names: list[str] | None = None,
                 output_names: list[str] | None = None, name: str = "torch", device="cpu"):
        self.module, self.name, self.device = module.eval(), name, torch.device(device)
        self.input_names, self.output_names = input_names, output_names

    def run(self, feeds):
        names = self.input_names or list(feeds)
        with torch.no_grad():
            result = self.module(*[torch.from_numpy(np.ascontiguousarray(feeds[n])).to(self.device) for n in names])
        outs = list(result) if isinstance(result, (tuple, list)) else [result]
        onames = self.output_names or [f"output_{i}" for i in range(len(outs))]
        if len(onames) != len(outs):
            raise UsageError(f"the torch module returned {len(outs)} outputs, {len(onames)} names were given",
                             "pass output_names matching the module's outputs")
        return {n: t.detach().cpu().numpy() for n, t in zip(onames, outs)}


def make_runner(spec: str, model, per_layer: bool = False, device=None, engine_path=None,
                optimization_level: int = 3) -> Runner:
    """A runner from its command-line name: tensorforge[-fp16|-bf16], onnxruntime, onnx-reference, engine."""
    if spec in ("tensorforge", "tensorforge-fp32"):
        return TensorforgeRunner(model, "fp32", device, per_layer, optimization_level)
    if spec == "tensorforge-notf32":          # fp32 with TF32 off: IEEE fp32 products (exec --noTF32)
        return TensorforgeRunner(model, "fp32", device, per_layer, optimization_level, name=spec, tf32=False)
    if spec in ("tensorforge-fp16", "tensorforge-bf16", "tensorforge-int8", "tensorforge-fp8", "tensorforge-best"):
        return TensorforgeRunner(model, spec.rsplit("-", 1)[1], device, per_layer, optimization_level)
    if spec in ("onnxruntime", "ort"):
        return OnnxRuntimeRunner(model, per_layer)
    if spec in ("onnx-reference", "reference"):
        return OnnxReferenceRunner(model, per_layer)
    if spec == "engine":
        if engine_path is None:
            raise UsageError("the engine runner needs an engine file", "give --engine model.engine")
        return EngineFileRunner(engine_path, device)
    raise UsageError(f"unknown runner {spec!r}",
                     "choose from tensorforge, tensorforge-notf32, tensorforge-fp16, tensorforge-bf16, tensorforge-int8, "
                     "tensorforge-fp8, tensorforge-best, onnxruntime, onnx-reference, engine")
