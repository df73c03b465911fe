"""FX graph (aten level, as torch.export gives it) → IR Network.

    result = fx_to_ir(gm, constants={"p_fc_weight": fc.weight, ...})
    result.network, result.inputs (placeholder names fed at run time), result.unsupported [(node, op, reason)]

Placeholders listed in `constants` become Network constants holding the very tensor (parameters are shared,
detached, never copied); the other placeholders become network inputs with the traced shape and dtype. Every
call_function node goes through the table in converters.py; each one it cannot take is reported (op and
reason) and, when `strict`, the conversion fails with UnsupportedOpError naming all of them.
"""

from dataclasses import dataclass, field

import torch
import torch.fx

from ..ir import Network
from ..ir.opspec import get_spec
from ..util.errors import UnsupportedOpError
from .converters import TABLE, Unsupported, unsupported_reason


@dataclass
class Conversion:
    network: Network | None
    inputs: list[str] = field(default_factory=list)          # placeholder names, in network-input order
    unsupported: list[tuple[str, str, str]] = field(default_factory=list)   # (node, op, reason)
    outputs: list[str] = field(default_factory=list)         # IR tensor per FX output position (repeats kept)


class _Ctx:
    def __init__(self, net: Network, constants: dict):
        self.net, self.names, self.constants = net, {}, constants
        self.current = None

    # values of FX arguments
    def t(self, arg, like=None) -> str:
        if isinstance(arg, torch.fx.Node):
            return self.names[arg.name]
        if isinstance(arg, (int, float, bool)):                       # a Python scalar operand
            dtype = self.dtype(like) if like is not None else torch.float32
            return self.const(torch.tensor(arg, dtype=dtype), "scalar")
        raise Unsupported(f"argument of type {type(arg).__name__}")

    def is_const(self, arg) -> bool:
        return isinstance(arg, torch.fx.Node) and arg.name in self.constants

    def transposed_const(self, arg) -> str:
        """The constant's 2-D transpose as a view (shares the parameter's storage)."""
        return self.const(self.constants[arg.name].t(), f"{arg.name}_T")

    def const(self, value: torch.Tensor, what: str) -> str:
        return self.net.add_constant(self.net.unique_name(what), value)

    @staticmethod
    def _val(arg):
        val = arg.meta.get("val") if isinstance(arg, torch.fx.Node) else None
        if not isinstance(val, torch.Tensor):
            raise Unsupported("a value without a traced tensor (meta['val'])")
        return val

    def shape(self, arg) -> tuple:
        shape = tuple(self._val(arg).shape)
        if not all(isinstance(d, int) for d in shape):
            raise Unsupported("a symbolic (dynamic) shape")
        return shape

    def dtype(self, arg) -> torch.dtype:
        return self._val(arg).dtype

    def add(self, op: str, inputs: list[str], node, **attrs) -> str:
        name = node.name if node is not None else f"{self.current.name}/{op}"
        attrs = get_spec(op).resolve_attrs(attrs, f"{name}: ")
        layer = self.net.add_layer(op, inputs, 1, attrs, name=name, origin=[self.current.name])
        return layer.outputs[0]


def fx_to_ir(gm: torch.fx.GraphModule, constants: dict | None = None, name: str = "torch",
             strict: bool = True) -> Conversion:
    constants = dict(constants or {})
    net = Network(name)
    ctx = _Ctx(net, constants)
    result = Conversion(net)
    for node in gm.graph.nodes:
        ctx.current = node
        if node.op == "placeholder":
            if node.name in constants:
                ctx.names[node.name] = net.add_constant(net.unique_name(node.name), constants[node.name])
            else:
                val = node.meta.get("val")
                if not isinstance(val, torch.Tensor) and not node.users:
                    continue                                    # an unused size argument (dynamo's SymInts)
                if not isinstance(val, torch.Tensor):
                    result.unsupported.append((node.name, "placeholder", "a non-tensor graph input"))
                    continue
                try:
                    shape = ctx.shape(node)
                except Unsupported as e:
                    result.unsupported.append((node.name, "placeholder", str(e)))
                    continue
                net._names.add(node.name)
                net.add_input(node.name, val.dtype, shape)
                ctx.names[node.name] = node.name
                result.inputs.append(node.name)
        elif node.op == "get_attr":
            value = getattr(gm, node.target)
            ctx.constants[node.name] = value
            ctx.names[node.name] = net.add_constant(net.unique_name(node.name), value)
        elif node.op == "call_function":
            reason = unsupported_reason(node)
            if reason is None:
                try:
                    ctx.names[node.name] = TABLE[node.target](ctx, node)
                    continue
                except (Unsupported, KeyError) as e:
                    reason = str(e)
            result.unsupported.append((node.name, str(node.target), reason))
        elif node.op == "output":
            outs = node.args[0] if isinstance(node.args[0], (list, tuple)) else [node.args[0]]
            for o in outs:
                if not isinstance(o, torch.fx.Node):
                    result.unsupported.append(("output", "output", f"a non-tensor output {o!r}"))
                    continue
                if o.name not in ctx.names:
                    continue                                    # its producer is already reported
                t = ctx.names[o.name]
                if t in net.inputs or t in net.constants:       # an output must be a layer's own
                    t = ctx.add("Identity", [t], None)
                    ctx.names[o.name] = t
                net.mark_output(t)
                result.outputs.append(t)
        else:
            result.unsupported.append((node.name, node.op, f"FX node kind {node.op!r}"))
    if result.unsupported and strict:
        listing = "; ".join(f"{n} ({op}): {why}" for n, op, why in result.unsupported)
        raise UnsupportedOpError(f"{len(result.unsupported)} node(s) cannot be converted: {listing}",
                                 "use torch.compile(backend='tensorforge'), which leaves them to PyTorch")
    return result
