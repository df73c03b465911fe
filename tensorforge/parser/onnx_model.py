"""parse_model: ONNX file/bytes/ModelProto → Network.

Steps: load (external data read lazily, relative to the model's folder) → graph inputs (initializers
that shadow an input are weights, as in TensorRT) → initializers → nodes in order, each dispatched to the
importer registered for its exact (domain, op_type, since_version), else to a registered plugin →
graph outputs. Any failure names the node, its op_type and opset, and what to do.
"""

import math
import os
from pathlib import Path

import onnx
from google.protobuf.message import DecodeError

from ..ir import Network
from ..ir.verifier import problems
from ..util.errors import ModelError, TensorforgeError, UnsupportedOpError
from ..util.fileio import read_bytes
from . import importers  # noqa: F401  (registers the built-in importers)
from .attributes import check_attributes, node_attributes
from .context import ImportContext, NodeView
from .importers.ml import check_value_outputs
from .plugins import import_plugin_node, override_importer
from .registry import lookup, supported_versions
from .tensors import to_torch, torch_dtype


def load_model_proto(source, external_data_dir=None) -> tuple[onnx.ModelProto, str | None]:
    """Accept a path, raw bytes or a ModelProto; return the proto and the folder for external data.

    External data is read only from the model's own folder (a path) or from `external_data_dir` (bytes or a
    ModelProto): a model given as bytes has no folder, and the current directory is never assumed."""
    if isinstance(source, onnx.ModelProto):
        model, base_dir, what = source, None, "ONNX ModelProto"
    else:
        if isinstance(source, (bytes, bytearray)):
            data, base_dir, what = bytes(source), None, "ONNX model bytes"
        else:
            data = read_bytes(source, "ONNX model")
            base_dir, what = str(Path(source).resolve().parent), f"ONNX model {source}"
        model = onnx.ModelProto()
        try:
            model.ParseFromString(data)
        except (DecodeError, ValueError, RuntimeError) as e:
            raise ModelError(f"cannot read {what}: not a valid ONNX protobuf ({e})",
                             "the file is truncated or not an ONNX model; re-export it") from None
        if not model.HasField("graph") or (not model.graph.node and not model.graph.output):
            raise ModelError(f"{what} has no graph", "the file is truncated or not an ONNX model; re-export it")
    if external_data_dir is not None:
        if not Path(external_data_dir).is_dir():
            raise ModelError(f"external_data_dir {external_data_dir} is not a folder", "name the model's folder")
        base_dir = str(Path(external_data_dir).resolve())
    check_external_data(model.graph, base_dir, what)
    return model, base_dir


def _graph_tensors(graph: onnx.GraphProto, depth: int = 0):
    """Every TensorProto of a graph: initializers, tensor attributes, and those of its sub-graphs."""
    if depth > 64:
        raise ModelError("the model nests sub-graphs more than 64 levels deep", "the model is malformed")
    yield from graph.initializer
    for node in graph.node:
        for a in node.attribute:
            if a.HasField("t"):
                yield a.t
            yield from a.tensors
            for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                yield from _graph_tensors(g, depth + 1)


def check_external_data(graph: onnx.GraphProto, base_dir: str | None, what: str) -> None:
    """External-data locations must be relative paths that stay inside the model's folder (no '..', no absolute
    path, no symlink out of it), and a model without a folder may not have any."""
    for t in _graph_tensors(graph):
        if t.data_location != onnx.TensorProto.EXTERNAL:
            continue
        location = next((e.value for e in t.external_data if e.key == "location"), "")
        if base_dir is None:
            raise ModelError(f"{what}: tensor {t.name!r} keeps its data in an external file ({location!r}), and a "
                             "model given as bytes has no folder to read it from",
                             "pass external_data_dir= (the model's folder) or give the model's path")
        if not location or os.path.isabs(location) or ".." in Path(location).parts or "\0" in location:
            raise ModelError(f"{what}: tensor {t.name!r} names external data {location!r}, which is not a relative "
                             "path inside the model's folder", "re-save the model with onnx.save(..., "
                             "save_as_external_data=True)")
        root = os.path.realpath(base_dir)
        full = os.path.realpath(os.path.join(root, location))
        if os.path.commonpath([root, full]) != root:
            raise ModelError(f"{what}: tensor {t.name!r}: external data {location!r} leads out of the model's "
                             f"folder ({full})", "keep external data files beside the model")


def _opsets(model: onnx.ModelProto) -> dict[str, int]:
    ops = {("" if o.domain == "ai.onnx" else o.domain): o.version for o in model.opset_import}
    for domain, version in ops.items():
        known = onnx.defs.onnx_opset_version() if domain == "" else 2**31 - 1
        if not 1 <= version <= known:
            raise ModelError(f"the model imports opset {version} of domain {domain or 'ai.onnx'!r}; this onnx "
                             f"({onnx.__version__}) knows opsets 1..{known}",
                             "export with a supported opset (opset_version=17 is well tested)")
    if "" not in ops:
        ops[""] = 1 if model.ir_version < 3 else onnx.defs.onnx_opset_version()
    return ops


def _shape_of(value_info: onnx.ValueInfoProto):
    t = value_info.type.tensor_type
    if not t.HasField("shape"):
        return None
    shape = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or -1) for d in t.shape.dim)
    static = [d for d in shape if isinstance(d, int) and d != -1]
    if any(not 0 <= d <= 2**31 - 1 for d in static) or math.prod(static) > 2**40:
        raise ModelError(f"graph input {value_info.name!r} has shape {list(shape)}: a dimension is negative, above "
                         "2^31, or the tensor would hold more than 2^40 elements", "fix the input's shape in the model")
    return shape


def _element_type(value_info: onnx.ValueInfoProto) -> int:
    """The tensor element type inside a sequence/optional type (map types are refused)."""
    t = value_info.type
    while t.WhichOneof("value") in ("sequence_type", "optional_type"):
        t = t.sequence_type.elem_type if t.HasField("sequence_type") else t.optional_type.elem_type
    if t.WhichOneof("value") != "tensor_type":
        raise ModelError(f"graph input {value_info.name!r} has type {t.WhichOneof('value')}",
                         "only tensors, sequences and optionals of tensors are supported")
    return t.tensor_type.elem_type


def _schema(op_type: str, version: int, domain: str):
    try:
        return onnx.defs.get_schema(op_type, version, domain)
    except onnx.defs.SchemaError:
        return None


def import_graph(graph: onnx.GraphProto, opsets: dict[str, int], base_dir: str | None, name: str) -> Network:
    net = Network(name or "network")
    for vi in list(graph.input) + list(graph.output) + list(graph.value_info):
        net._names.add(vi.name)
    for node in graph.node:
        net._names.update(o for o in node.output if o)
    ctx = ImportContext(net, opsets, base_dir, import_graph)

    inits = {t.name: t for t in graph.initializer}
    for vi in graph.input:
        if vi.name in inits:
            continue
        if vi.type.WhichOneof("value") is None:   # untyped (a control-flow body's input): dtype unknown
            net.add_input(vi.name, None, None)
            continue
        if not vi.type.HasField("tensor_type"):   # sequence/optional: a 0-d input of its element type
            net.add_input(vi.name, torch_dtype(_element_type(vi), f"input {vi.name!r}: "), ())   # (util/values.py)
            continue
        net.add_input(vi.name, torch_dtype(vi.type.tensor_type.elem_type, f"input {vi.name!r}: "), _shape_of(vi))
    for t in graph.initializer:
        net.add_constant(t.name, to_torch(t, base_dir))

    for index, proto in enumerate(graph.node):
        _import_node(ctx, proto, index)

    for vi in graph.output:
        resolved = ctx.resolve(vi.name)
        if resolved not in net.tensors:
            raise ModelError(f"graph output {vi.name!r} is not produced by any node", "the model is malformed")
        if resolved == vi.name and resolved in net.constants:   # a constant that is also a graph output:
            value = net.constants.pop(resolved)                   # free its name for the output's Identity
            del net.tensors[resolved]
            renamed = net.add_constant(net.unique_name(f"{resolved}/value"), value)
            for la in net.layers:
                la.inputs = [renamed if i == resolved else i for i in la.inputs]
            resolved = renamed
        if resolved != vi.name or resolved in net.constants:   # an input named as an output passes through
            layer = net.add_layer("Identity", [resolved], [vi.name], name=f"{vi.name}/identity", origin=[vi.name])
            net.tensors[vi.name].dtype = net.tensors[resolved].dtype
            resolved = layer.outputs[0]
        net.mark_output(resolved)
        if vi.type.tensor_type.elem_type not in (0, onnx.TensorProto.STRING):   # strings: ir/ops/ml_zipmap.py
            net.tensors[resolved].dtype = torch_dtype(vi.type.tensor_type.elem_type, f"output {vi.name!r}: ")
    check_value_outputs(net)            # string labels / ZipMap maps reach graph outputs only (importers/ml.py)
    found = problems(net)
    if found:
        raise ModelError(f"the model's graph is malformed: {found[0]}", "check the exporter's output with onnx.checker")
    net.prune_tensors()
    return net


def _import_node(ctx: ImportContext, proto: onnx.NodeProto, index: int) -> None:
    domain = "" if proto.domain == "ai.onnx" else proto.domain
    name = proto.name or f"{proto.op_type}_{index}"
    opset = ctx.opsets.get(domain)
    schema = _schema(proto.op_type, opset, domain) if opset is not None else None
    version = schema.since_version if schema is not None else (opset or 1)
    try:
        attrs = node_attributes(proto, schema, ctx.base_dir)
    except TensorforgeError:
        raise
    except Exception as e:  # noqa: BLE001
        raise ModelError(f"node {name!r} ({proto.op_type}): cannot decode attributes: {e}", "re-export the model") from e
    node = NodeView(name, proto.op_type, domain, version, attrs, list(proto.output), {a.name for a in proto.attribute})
    if not domain:
        check_attributes(proto.op_type, attrs, node.where())
    inputs = [ctx.resolve(i) if i else "" for i in proto.input]
    for i in inputs:
        if i and i not in ctx.net.tensors:
            raise ModelError(f"{node.where()} reads {i!r}, which no earlier node, input or initializer defines",
                             "the graph is not topologically sorted or is malformed")
    fn = override_importer(node) or (lookup(domain, proto.op_type, version)
                                     if schema is not None or domain == "com.microsoft" else None)  # contrib: no onnx schema
    ctx.begin(node)
    try:
        if fn is not None:
            produced = fn(ctx, node, inputs)
        else:
            produced = import_plugin_node(ctx, node, inputs)
            if produced is None:
                raise _unsupported(node, schema)
        ctx.bind_outputs(node, produced)
    except TensorforgeError:
        raise
    except Exception as e:  # noqa: BLE001 - importer bugs and bad attributes are reported per node
        raise ModelError(f"{node.where()}: {type(e).__name__}: {e}",
                         "check the node's attributes and inputs; run with --verbose for the traceback") from e


def _unsupported(node: NodeView, schema) -> UnsupportedOpError:
    verified = supported_versions(node.op_type, node.domain)
    if verified:
        return UnsupportedOpError(
            f"{node.where()}: {node.op_type} version {node.version} has no verified importer; verified versions: "
            f"{', '.join(map(str, verified))}", "export with an opset whose version of this op is verified")
    if schema is None and node.domain:
        return UnsupportedOpError(
            f"{node.where()}: no plugin is registered for {node.domain}::{node.op_type}",
            "register one with @tensorforge.plugin.register and load it with --staticPlugins=FILE.py")
    return UnsupportedOpError(f"{node.where()}: op {node.op_type} is not supported",
                              "write a plugin for it (docs/plugins.md) and load it with --staticPlugins=FILE.py")


def parse_model(source, name: str | None = None, external_data_dir=None) -> Network:
    """Parse an ONNX model (path, bytes or ModelProto) into a Network; `external_data_dir`: where a model given
    as bytes or a ModelProto keeps its external data (a path's own folder is used otherwise)."""
    model, base_dir = load_model_proto(source, external_data_dir)
    if name is None:
        name = model.graph.name or (os.path.splitext(os.path.basename(str(source)))[0]
                                    if isinstance(source, (str, os.PathLike)) else "network")
    return import_graph(model.graph, _opsets(model), base_dir, name)
