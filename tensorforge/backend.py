"""The `onnx.backend.base.Backend` adapter: ONNX's backend API on the real build path.

    rep = TensorforgeBackend.prepare(model, "CPU")      # parse → passes → builder → engine file → runtime
    outputs = rep.run([x, y])                          # numpy in, numpy out (graph output order)

`prepare` builds the engine when every graph input has a static shape; otherwise it parses (so an
unsupported op fails here, with the parser's message) and builds one engine per distinct input-shape
signature at `run` time, each with a static profile. Every engine is serialized to bytes and loaded back
before it runs, so the suite also proves that engines are data. Imports api and util only (and onnx).
"""

from __future__ import annotations

import os
import tempfile

import ml_dtypes
import numpy as np
import onnx
import torch
from onnx.backend.base import Backend, BackendRep, Device, DeviceType, namedtupledict

from . import api
from .api import InputError, OptionalValue, TensorSequence, UsageError

# numpy (ml_dtypes) ⇄ torch for the types numpy has no native form of: same bits, one element per byte
# for the sub-byte integer types (torch.int4/uint4/int2/uint2 hold one sign- or zero-extended value a byte).
_BITCAST = {  # numpy dtype name → (torch dtype, numpy carrier, torch carrier)
    "bfloat16": (torch.bfloat16, np.int16, torch.int16),
    "float8_e4m3fn": (torch.float8_e4m3fn, np.uint8, torch.uint8),
    "float8_e4m3fnuz": (torch.float8_e4m3fnuz, np.uint8, torch.uint8),
    "float8_e5m2": (torch.float8_e5m2, np.uint8, torch.uint8),
    "float8_e5m2fnuz": (torch.float8_e5m2fnuz, np.uint8, torch.uint8),
    "float8_e8m0fnu": (torch.float8_e8m0fnu, np.uint8, torch.uint8),
    "float4_e2m1fn": (torch.float4_e2m1fn_x2, np.uint8, torch.uint8),      # one 4-bit code a byte
}
_SUBBYTE = {"int4": (torch.int4, np.int8), "uint4": (torch.uint4, np.uint8),
            "int2": (torch.int2, np.int8), "uint2": (torch.uint2, np.uint8)}
_TORCH_TO_NP = {t: getattr(ml_dtypes, n) for n, (t, _, _) in _BITCAST.items()}
_TORCH_TO_NP.update({t: getattr(ml_dtypes, n) for n, (t, _) in _SUBBYTE.items()})


def to_torch(name: str, value) -> torch.Tensor | list | None:
    """A numpy array (or a list of them for a sequence input, None for an empty optional) → torch."""
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return [to_torch(name, v) for v in value]
    if isinstance(value, torch.Tensor):
        return value
    arr = np.asarray(value)
    kind = arr.dtype.name
    if kind in _BITCAST:
        dt, np_carrier, _ = _BITCAST[kind]
        return torch.from_numpy(np.array(arr, order="C").view(np_carrier).copy()).view(dt)
    if kind in _SUBBYTE:
        dt, np_carrier = _SUBBYTE[kind]
        return torch.from_numpy(arr.astype(np_carrier)).view(dt)
    if arr.dtype == object or kind.startswith(("str", "bytes")):
        raise InputError(f"input {name!r} holds strings; tensorforge has no string tensors",
                         "string ops are out of scope (see tests/onnx_backend/exclusions.txt)")
    return torch.from_numpy(np.array(arr, copy=True))


def _elem_dtype(elem_type: int) -> torch.dtype:
    return to_torch("", np.empty(0, dtype=onnx.helper.tensor_dtype_to_np_dtype(elem_type))).dtype


def wrap_input(name: str, type_proto: onnx.TypeProto, value):
    """A fed value → what the engine takes: a tensor, a TensorSequence or an OptionalValue (util/values.py)."""
    kind = type_proto.WhichOneof("value")
    if kind == "sequence_type":
        inner = type_proto.sequence_type.elem_type
        return TensorSequence([wrap_input(name, inner, v) for v in value], _elem_dtype(inner.tensor_type.elem_type))
    if kind == "optional_type":
        inner = type_proto.optional_type.elem_type
        is_seq = inner.WhichOneof("value") == "sequence_type"
        elem = (inner.sequence_type.elem_type if is_seq else inner).tensor_type.elem_type
        return OptionalValue(None if value is None else wrap_input(name, inner, value), _elem_dtype(elem), is_seq)
    return to_torch(name, value)


def to_numpy(value):
    """A runtime value → what the ONNX test runner compares: numpy array, list of arrays, or None."""
    if value is None:
        return None
    if isinstance(value, OptionalValue):
        return to_numpy(value.value)
    if isinstance(value, TensorSequence):
        return [to_numpy(v) for v in value]
    t = value.detach().cpu()
    if t.dtype in _TORCH_TO_NP:
        np_dt = _TORCH_TO_NP[t.dtype]
        if t.element_size() == np.dtype(np_dt).itemsize and t.dtype not in (torch.int4, torch.uint4, torch.int2, torch.uint2):
            carrier = {1: torch.uint8, 2: torch.int16}[t.element_size()]
            return t.contiguous().view(carrier).numpy().view(np_dt)
        signed = t.dtype in (torch.int4, torch.int2)
        return t.contiguous().view(torch.int8 if signed else torch.uint8).numpy().astype(np_dt)
    return t.numpy()


def _torch_device(device: str) -> str:
    try:
        dev = Device(device)
    except (AttributeError, ValueError) as e:
        raise UsageError(f"unknown ONNX backend device {device!r}", "use 'CPU' or 'CUDA' (optionally 'CUDA:N')") from e
    return "cpu" if dev.type == DeviceType.CPU else f"cuda:{dev.device_id}"


def _static_shape(vi: onnx.ValueInfoProto) -> tuple[int, ...] | None:
    if vi.type.WhichOneof("value") != "tensor_type":
        return ()           # sequences and optionals are 0-d inputs of the network
    if not vi.type.tensor_type.HasField("shape"):
        return None
    dims = vi.type.tensor_type.shape.dim
    if not all(d.HasField("dim_value") for d in dims):
        return None
    return tuple(d.dim_value for d in dims)


class TensorforgeRep(BackendRep):
    """A prepared model: one engine per input-shape signature (just one for static models)."""

    def __init__(self, model: onnx.ModelProto, device: str, optimization_level: int | None = None):
        self.model = model
        self.device = device
        self.optimization_level = optimization_level
        inits = {t.name for t in model.graph.initializer}
        self.inputs = [vi for vi in model.graph.input if vi.name not in inits]
        self.input_names = [vi.name for vi in self.inputs]
        self.output_names = [vi.name for vi in model.graph.output]
        self._engines: dict[tuple, api.Engine] = {}
        self._bytes = model.SerializeToString()
        shapes = [_static_shape(vi) for vi in self.inputs]
        if all(s is not None for s in shapes):
            self._engine({n: s for n, s in zip(self.input_names, shapes)})
        else:   # parse now so that an unsupported op fails in prepare, as the backend API expects
            api.high_level.parse(self._bytes)

    def _engine(self, shapes: dict[str, tuple[int, ...] | None]) -> api.Engine:
        key = tuple(sorted(shapes.items(), key=lambda kv: kv[0]))
        if key not in self._engines:
            kw = {} if self.optimization_level is None else {"optimization_level": self.optimization_level}
            built = api.build(self._bytes, shapes={k: v for k, v in shapes.items() if v is not None},
                              device=self.device, **kw)
            self._engines[key] = _reload(built, self.device)
        return self._engines[key]

    def run(self, inputs, **kwargs):
        if isinstance(inputs, dict):
            feed = dict(inputs)
        else:
            if not isinstance(inputs, (list, tuple)):
                inputs = [inputs]
            if len(inputs) != len(self.input_names):
                raise InputError(f"the model takes {len(self.input_names)} input(s) ({', '.join(self.input_names)}), "
                                 f"got {len(inputs)}", "pass one array per graph input, in order")
            feed = dict(zip(self.input_names, inputs))
        types = {vi.name: vi.type for vi in self.inputs}
        tensors = {k: wrap_input(k, types[k], v) if k in types else to_torch(k, v) for k, v in feed.items()}
        shapes = {k: tuple(v.shape) for k, v in tensors.items()}
        out = self._engine(shapes).context.run(tensors)
        return namedtupledict("Outputs", self.output_names)(*[to_numpy(out[n]) for n in self.output_names])


def _reload(engine: api.Engine, device: str) -> api.Engine:
    """Serialize the engine to a file and load it back: what runs is what an engine file holds."""
    fd, path = tempfile.mkstemp(suffix=".engine")
    os.close(fd)
    try:
        engine.save(path)
        return api.load(path, device=device)
    finally:
        os.unlink(path)


class TensorforgeBackend(Backend):
    """`onnx.backend.base.Backend` for tensorforge; see the module docstring."""

    @classmethod
    def is_compatible(cls, model, device: str = "CPU", **kwargs) -> bool:
        return cls.supports_device(device)

    @classmethod
    def prepare(cls, model, device: str = "CPU", **kwargs) -> TensorforgeRep:
        if isinstance(model, (str, os.PathLike)):
            model = onnx.load(model)
        elif isinstance(model, (bytes, bytearray)):
            model = onnx.load_from_string(bytes(model))
        return TensorforgeRep(model, _torch_device(device), kwargs.get("optimization_level"))

    @classmethod
    def run_model(cls, model, inputs, device: str = "CPU", **kwargs):
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node: onnx.NodeProto, inputs, device: str = "CPU", outputs_info=None, **kwargs):
        """Run one node: wrap it in a model whose inputs take the given arrays' types and shapes."""
        arrays = [np.asarray(x) for x in inputs]
        names = [n for n in node.input if n]
        in_vis = [onnx.helper.make_tensor_value_info(n, onnx.helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
                  for n, a in zip(names, arrays)]
        out_vis = []
        for i, n in enumerate(o for o in node.output if o):
            if outputs_info and i < len(outputs_info):
                dt, shape = outputs_info[i]
                out_vis.append(onnx.helper.make_tensor_value_info(n, onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dt)),
                                                                  shape))
            else:
                out_vis.append(onnx.helper.make_empty_tensor_value_info(n))
        opset = kwargs.get("opset_version", onnx.defs.onnx_opset_version())
        graph = onnx.helper.make_graph([node], f"{node.op_type}_node", in_vis, out_vis)
        model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid(node.domain or "", opset)])
        return cls.prepare(model, device).run(arrays)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        try:
            dev = Device(device)
        except (AttributeError, ValueError):
            return False
        if dev.type == DeviceType.CPU:
            return True
        return dev.type == DeviceType.CUDA and torch.cuda.is_available()


prepare = TensorforgeBackend.prepare
run_model = TensorforgeBackend.run_model
run_node = TensorforgeBackend.run_node
supports_device = TensorforgeBackend.supports_device
