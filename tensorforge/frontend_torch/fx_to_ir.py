"""FX graph (aten level, as torch.export gives it) → IR Network.

    result = fx_to_ir(gm, constants={"p_fc_weight": fc.weight, ...})
    result.network, result.inputs (placeholder names fed at run time), result.unsupported [(node, op, reason)]

Placeholders listed in `constants` become Network constants holding the very tensor (parameters are shared,
detached, never copied); the other placeholders become network inputs with the traced shape and dtype (-1 for a
dim export made symbolic; converters write such dims as run-time shape inputs, `_Ctx.target_shape`). Every
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
    def __init__(self, net: Network, constants: dict, copy_transposed: bool = False):
        self.net, self.names, self.constants = net, {}, constants
        self.copy_transposed = copy_transposed
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
        """The constant's 2-D transpose: a view sharing the parameter's storage, or — when the build converts the
        weights anyway (`copy_transposed`: fp16/bf16) — a contiguous (in, out) copy, the layout the ONNX exporter
        gives the same MatMul, so both paths build the same GEMMs on the same weight strides."""
        wt = self.constants[arg.name].t()
        return self.const(wt.contiguous() if self.copy_transposed else wt, f"{arg.name}_T")

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

    def rank(self, arg) -> int:
        return self._val(arg).dim()

    def dims(self, arg) -> tuple:
        """The traced sizes: ints, and torch.SymInt for the dims dynamo/export made dynamic."""
        return tuple(self._val(arg).shape)

    def static_dim(self, arg, i: int, what: str) -> int:
        d = self._val(arg).shape[i]
        if not isinstance(d, int):
            raise Unsupported(f"{what} along a dynamic dimension")
        return d

    def target_shape(self, src, out_dims, what: str = "shape", expand: bool = False) -> str:
        """An int64 shape input giving `out_dims` at run time for a value computed from `src`.

        Static dims are written as they are. A dynamic dim is, for Reshape, 0 (ONNX: copy the input's dim) where
        `src` has the same symbol at the same index, the input's dim read by a Shape layer where `src` has it at
        another index, or -1 (inferred) for one leftover; for Expand, 1 (keep the input's dim) where the
        right-aligned input dim is the same symbol. Anything else is Unsupported."""
        src_dims = self.dims(src)
        same = lambda a, b: not isinstance(a, int) and not isinstance(b, int) and str(a) == str(b)  # noqa: E731
        if all(isinstance(d, int) for d in out_dims):
            return self.const(torch.tensor([int(d) for d in out_dims], dtype=torch.int64), what)
        if not expand and any(isinstance(d, int) and d == 0 for d in out_dims):
            raise Unsupported(f"a {what} with a zero-size dim next to a dynamic one")
        pieces, static, inferred = [], [], False
        for i, d in enumerate(out_dims):
            if isinstance(d, int):
                static.append(int(d))
                continue
            if expand:
                j = i - (len(out_dims) - len(src_dims))
                if j < 0 or not same(src_dims[j], d):
                    raise Unsupported(f"an expand to a dynamic size the input does not have ({d})")
                static.append(1)
            elif i < len(src_dims) and same(src_dims[i], d):
                static.append(0)
            elif any(same(s, d) for s in src_dims):
                if static:
                    pieces.append(self.const(torch.tensor(static, dtype=torch.int64), what))
                    static = []
                j = next(k for k, s in enumerate(src_dims) if same(s, d))
                pieces.append(self.add("Shape", [self.t(src)], None, start=j, end=j + 1))
            elif not inferred:
                static.append(-1)
                inferred = True
            else:
                raise Unsupported(f"a {what} with several dynamic dims not carried over from its input ({out_dims})")
        if static:
            pieces.append(self.const(torch.tensor(static, dtype=torch.int64), what))
        return pieces[0] if len(pieces) == 1 else self.add("Concat", pieces, None, axis=0)

    def dtype(self, arg) -> torch.dtype:
        return self._val(arg).dtype

    def add(self, op: str, inputs: list[str], node, **attrs) -> str:
        return self.add_outputs(op, inputs, node, 1, **attrs)[0]

    def add_outputs(self, op: str, inputs: list[str], node, count: int, **attrs) -> list[str]:
        """One layer with `count` outputs (Split); returns their names."""
        name = node.name if node is not None else f"{self.current.name}/{op}"
        attrs = get_spec(op).resolve_attrs(attrs, f"{name}: ")
        layer = self.net.add_layer(op, inputs, count, attrs, name=name, origin=[self.current.name])
        return list(layer.outputs)


def fx_to_ir(gm: torch.fx.GraphModule, constants: dict | None = None, name: str = "torch",
             strict: bool = True, copy_transposed: bool = False) -> Conversion:
    constants = dict(constants or {})
    net = Network(name)
    ctx = _Ctx(net, constants, copy_transposed)
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
                shape = tuple(d if isinstance(d, int) else -1 for d in val.shape)   # -1: dynamic (a profile's)
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
