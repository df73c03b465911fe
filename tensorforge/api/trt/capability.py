"""Capability report: which nodes of an ONNX model tensorforge can import, and why not — without building.

    report = capability_report("model.onnx")      # one NodeReport per top-level node, in graph order
    [r for r in report.nodes if r.status != "ok"]

Every node goes through the real importer (the same code `parse_model` runs), so a rejection carries the
importer's own reason: no importer for the op, an unverified opset version, no registered plugin for a custom
domain, an attribute or input the importer refuses. Unlike parsing, a failure does not stop the walk: the
failed node's outputs become untyped stand-ins so later nodes are still examined; a later failure that reads
a stand-in is reported as "blocked" (it may be fine once its producer is), not as unsupported.
"""

from dataclasses import dataclass, field

from ...ir import Network
from ...parser.context import ImportContext
from ...parser.onnx_model import _import_node, _opsets, _shape_of, import_graph, load_model_proto
from ...parser.tensors import to_torch, torch_dtype
from ...util.errors import TensorforgeError, UnsupportedOpError


@dataclass
class NodeReport:
    index: int
    name: str
    op_type: str
    domain: str
    status: str                  # "ok" | "unsupported" | "error" | "blocked"
    reason: str = ""

    def to_json(self) -> dict:
        return dict(self.__dict__)


@dataclass
class CapabilityReport:
    model: str
    opsets: dict[str, int]
    nodes: list[NodeReport] = field(default_factory=list)

    @property
    def supported(self) -> bool:
        return all(n.status == "ok" for n in self.nodes)

    def problems(self) -> list[NodeReport]:
        return [n for n in self.nodes if n.status != "ok"]

    def to_json(self) -> dict:
        return {"model": self.model, "opsets": self.opsets, "supported": self.supported,
                "nodes": len(self.nodes), "problems": [n.to_json() for n in self.problems()]}


def capability_report(source, name: str | None = None) -> CapabilityReport:
    model, base_dir = load_model_proto(source)
    graph = model.graph
    opsets = _opsets(model)
    report = CapabilityReport(name or graph.name or "model", dict(opsets))
    net = Network(graph.name or "capability")
    for vi in list(graph.input) + list(graph.output) + list(graph.value_info):
        net._names.add(vi.name)
    for node in graph.node:
        net._names.update(o for o in node.output if o)
    inits = {t.name for t in graph.initializer}
    for vi in graph.input:
        if vi.name not in inits and vi.type.HasField("tensor_type"):
            try:
                dtype = torch_dtype(vi.type.tensor_type.elem_type)
            except TensorforgeError:
                dtype = None
            net.add_input(vi.name, dtype, _shape_of(vi))
    for t in graph.initializer:
        try:
            net.add_constant(t.name, to_torch(t, base_dir))
        except TensorforgeError:
            net.add_input(t.name, None, tuple(t.dims))
    ctx = ImportContext(net, opsets, base_dir, import_graph)
    stand_ins: set[str] = set()
    for index, proto in enumerate(graph.node):
        node_name = proto.name or f"{proto.op_type}_{index}"
        domain = "" if proto.domain == "ai.onnx" else proto.domain
        try:
            _import_node(ctx, proto, index)
            report.nodes.append(NodeReport(index, node_name, proto.op_type, domain, "ok"))
            continue
        except UnsupportedOpError as e:
            status, reason = "unsupported", str(e)
        except TensorforgeError as e:
            status, reason = "error", str(e)
        reads_stand_in = any(ctx.resolve(i) in stand_ins for i in proto.input if i)
        if reads_stand_in and status == "error":
            status = "blocked"
            reason = "reads the output of a node that failed above; " + reason
        report.nodes.append(NodeReport(index, node_name, proto.op_type, domain, status, reason))
        del net.layers[ctx._start:]
        for out in proto.output:
            if out and out not in net.tensors:
                net.add_input(out, None, None)
                stand_ins.add(out)
    return report
