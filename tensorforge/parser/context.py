"""ImportContext: what an importer sees while one ONNX node is being turned into layers.

An importer is `fn(ctx, node, inputs) -> list[str]`: `node` is a `NodeView` (typed attributes with the
ONNX schema's defaults already filled in), `inputs` the IR tensor names of the node's inputs ('' = absent);
it adds layers with `ctx.add(...)` and returns one tensor name per node output. A returned name that the
importer just created is renamed to the ONNX output name, so IR names follow the model's names.
"""

from dataclasses import dataclass, field
from typing import Any

import torch

from ..ir import Network
from ..util.errors import ModelError


@dataclass
class NodeView:
    name: str
    op_type: str
    domain: str
    version: int
    attrs: dict[str, Any]
    outputs: list[str]
    explicit_attrs: set[str] = field(default_factory=set)   # attributes the node actually carries

    def where(self) -> str:
        dom = f"{self.domain}::" if self.domain else ""
        return f"node {self.name!r} ({dom}{self.op_type}, opset {self.version})"


class ImportContext:
    def __init__(self, net: Network, opsets: dict[str, int], base_dir: str | None = None, import_graph=None):
        self.net = net
        self.opsets = opsets
        self.base_dir = base_dir
        # the parser's graph importer, for subgraphs (If/Loop/Scan bodies): handed in by the parser, so that the
        # importers never import the parser that imports them
        self.import_graph = import_graph
        self.node: NodeView | None = None
        self.alias: dict[str, str] = {}
        self._created: set[str] = set()
        self._start = 0

    # ---- names ------------------------------------------------------------------------------
    def resolve(self, onnx_name: str) -> str:
        while onnx_name in self.alias:
            onnx_name = self.alias[onnx_name]
        return onnx_name

    # ---- building ---------------------------------------------------------------------------
    def add(self, op: str, inputs: list[str], attrs: dict | None = None, num_outputs: int = 1,
            name: str | None = None) -> list[str]:
        """Append an IR layer for the current node; returns its (fresh) output names."""
        base = name or (self.node.name if self.node and self.node.name else op)
        layer = self.net.add_layer(op, inputs, num_outputs, attrs, name=base,
                                   origin=[self.node.name or self.node.op_type] if self.node else None)
        self._created.update(layer.outputs)
        return list(layer.outputs)

    def add1(self, op: str, inputs: list[str], attrs: dict | None = None) -> str:
        return self.add(op, inputs, attrs)[0]

    def const(self, value, dtype: torch.dtype | None = None, name: str = "const") -> str:
        """Add a constant tensor (from a tensor, number or list) and return its name."""
        t = value if isinstance(value, torch.Tensor) else torch.tensor(value, dtype=dtype)
        if dtype is not None:
            t = t.to(dtype)
        base = f"{self.node.name}/{name}" if self.node and self.node.name else name
        return self.net.add_constant(self.net.unique_name(base), t)

    def constant_value(self, name: str) -> torch.Tensor | None:
        """The value of tensor `name` if it is a constant (an initializer or a Constant node), else None."""
        return self.net.constants.get(name) if name else None

    def require_constant(self, name: str, what: str) -> torch.Tensor:
        v = self.constant_value(name)
        if v is None:
            raise ModelError(f"{self.node.where()}: {what} must be a constant (initializer or Constant node)",
                             "fold it before export (e.g. onnx-simplifier) or make it static")
        return v

    def info(self, name: str):
        return self.net.tensors.get(name)

    # ---- binding node outputs ---------------------------------------------------------------
    def begin(self, node: NodeView) -> None:
        self.node = node
        self._start = len(self.net.layers)
        self._created.clear()

    def bind_outputs(self, node: NodeView, produced: list[str]) -> None:
        """Give the layers' fresh outputs the node's ONNX names; anything else becomes an alias."""
        mine = self.net.layers[self._start:]
        for onnx_name, ir_name in zip(node.outputs, produced):
            if not onnx_name:
                continue
            if ir_name in self._created and onnx_name not in self.net.tensors:
                for layer in mine:
                    layer.outputs = [onnx_name if o == ir_name else o for o in layer.outputs]
                    layer.inputs = [onnx_name if i == ir_name else i for i in layer.inputs]
                info = self.net.tensors.pop(ir_name)
                info.name = onnx_name
                self.net.tensors[onnx_name] = info
                self._created.discard(ir_name)
            elif ir_name != onnx_name:
                self.alias[onnx_name] = ir_name
        self._created.clear()
