"""torch_op: one plugin definition → a PyTorch custom op that runs eagerly and exports as the plugin's node.

    gelu = tfp.torch_op("custom::MyGelu")
    y = gelu(x, approximate="tanh")          # eager: the plugin's impl (Triton on CUDA) or reference

- eager / torch.compile: a `torch.library` op `tfp_<ns>::<Name>` whose kernel calls `Plugin.run` and whose fake
  (meta) kernel is the descriptor, so output shapes follow symbolic dimensions (SymInts) under torch.export;
- `torch.onnx.export(..., dynamo=True)`: the call becomes `torch.onnx.ops.symbolic("<ns>::<Name>", ...)`, i.e.
  exactly the custom node the parser maps back to the plugin (no translation table needed);
- `torch.onnx.export(..., dynamo=False)`: a TorchScript symbolic registered for the op emits the same node.
"""

import inspect
import re

import torch

from ..ir.opspec import REQUIRED
from ..util.errors import PluginError
from . import registry
from .attrs import AttrTypeError, schema_type
from .desc import TensorDesc
from .plugin import Plugin

_OPS: dict[tuple, object] = {}
_LIBS: list = []          # keep torch.library fragments alive


def _ident(text: str) -> str:
    return re.sub(r"\W", "_", text)


def _schema(p: Plugin) -> str:
    args = [f"Tensor{'?' if optional else ''} {name}" for name, optional in p.inputs]
    for name, (t, default) in p.attrs.items():
        try:
            typ = schema_type(t)
        except AttrTypeError as e:
            raise PluginError(f"plugin {p.id}: attribute {name!r}: {e}",
                              "torch_op needs non-tensor attributes") from None
        args.append(f"{typ} {name}" if default is REQUIRED else f"{typ} {name}={_default(default)}")
    outs = "Tensor" if p.num_outputs == 1 else "(" + ", ".join(["Tensor"] * p.num_outputs) + ")"
    return f"({', '.join(args)}) -> {outs}"


def _default(v) -> str:
    if isinstance(v, str):
        return '"' + v.replace('"', '\\"') + '"'
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, list):
        return "[" + ", ".join(_default(x) for x in v) + "]"
    return repr(v)


def _current(key) -> Plugin:
    p = registry._PLUGINS.get(key)
    if p is None:
        raise PluginError(f"plugin {key[0]}::{key[1]} version {key[2]} is no longer registered",
                          "register it again before calling its torch op")
    return p


def _split(p: Plugin, args, kwargs=None) -> tuple[list, dict]:
    """Positional schema arguments → (inputs, attributes); the dispatcher may omit trailing defaults."""
    n = len(p.inputs)
    inputs = list(args[:n]) + [None] * (n - len(args[:n]))
    attrs = {k: d for k, (_, d) in p.attrs.items()}
    attrs.update(zip(p.attrs, args[n:]))
    attrs.update({k: v for k, v in (kwargs or {}).items() if k in attrs})
    for i, (name, _) in enumerate(p.inputs):
        if kwargs and name in kwargs:
            inputs[i] = kwargs[name]
    return inputs, attrs


def _define(p: Plugin):
    ns = "tfp_" + _ident(p.namespace or "default")
    name = _ident(p.name) + ("" if p.version == "1" else f"_v{p.version}")
    key = p.key
    lib = torch.library.Library(ns, "FRAGMENT")
    lib.define(name + _schema(p))
    _LIBS.append(lib)

    def eager(*args, **kwargs):
        plugin = _current(key)
        inputs, attrs = _split(plugin, args, kwargs)
        outs = plugin.run(inputs, attrs)
        return outs[0] if plugin.num_outputs == 1 else tuple(outs[:plugin.num_outputs])

    def fake(*args, **kwargs):
        plugin = _current(key)
        inputs, attrs = _split(plugin, args, kwargs)
        device = next(t.device for t in inputs if t is not None)
        descs = plugin.describe([_desc(t) for t in inputs], attrs)[:plugin.num_outputs]
        outs = [torch.empty(d.shape, dtype=d.dtype, device=device) for d in descs]
        return outs[0] if plugin.num_outputs == 1 else tuple(outs)

    lib.impl(name, eager, "CompositeExplicitAutograd")
    torch.library.register_fake(f"{ns}::{name}", fake, lib=lib)
    torch.onnx.register_custom_op_symbolic(f"{ns}::{name}", _legacy_symbolic(key), 1)
    return getattr(getattr(torch.ops, ns), name)


def _desc(t):
    return None if t is None else TensorDesc(tuple(t.shape), t.dtype)


def _onnx_attrs(p: Plugin, attrs: dict) -> dict:
    out = {k: (int(v) if isinstance(v, bool) else v) for k, v in attrs.items()}
    if p.version != "1":
        out["plugin_version"] = p.version
    return out


def _legacy_symbolic(key):
    def symbolic(g, *args):
        from torch.onnx import symbolic_helper as sh
        p = _current(key)
        inputs, raw = _split(p, args)
        while inputs and sh._is_none(inputs[-1]):
            inputs.pop()
        kinds = {int: "i", float: "f", str: "s", bool: "b"}
        attrs = {}
        for name, value in raw.items():
            t = p.attrs[name][0]
            kind = kinds.get(t.kind) or ("is" if t.item is int else "fs" if t.item is float else None)
            if kind is None:
                raise PluginError(f"plugin {p.id}: attribute {name!r} ({t.name}) cannot be exported by the legacy "
                                  "exporter", "use torch.onnx.export(..., dynamo=True)")
            v = sh._maybe_get_const(value, kind)
            suffix = {"i": "i", "b": "i", "f": "f", "s": "s", "is": "i", "fs": "f"}[kind]
            attrs[f"{name}_{suffix}"] = int(v) if kind == "b" else v
        if p.version != "1":
            attrs["plugin_version_s"] = p.version
        return g.op(f"{_domain(p)}::{p.name}", *inputs, outputs=p.num_outputs, **attrs)
    return symbolic


def _domain(p: Plugin) -> str:
    return p.namespace or next((d for d in p.domains if d), "")


def torch_op(plugin_id: str, version: str | None = None):
    """A callable `op(*inputs, **attributes)` backed by a torch custom op for plugin `plugin_id`."""
    p = registry.get(plugin_id, version)
    key = p.key
    if key in _OPS:
        if _OPS[key].schema != _schema(p):       # torch ops live for the whole process; signatures cannot change
            raise PluginError(f"plugin {p.id} v{p.version} was made a torch op with signature {_OPS[key].schema}; "
                              f"it is now registered as {_schema(p)}", "give the changed plugin a new version")
        return _OPS[key]
    op = _define(p)
    signature = inspect.signature(p.descriptor)

    def call(*args, **kwargs):
        plugin = _current(key)
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as e:
            raise PluginError(f"plugin {plugin.id}: bad call: {e}", f"call it as {plugin.name}{signature}") from None
        given = dict(bound.arguments)
        inputs = [given.pop(name, None) for name, _ in plugin.inputs]
        attrs = plugin.typed_attrs(given)
        if torch.onnx.is_in_onnx_export() and not torch.jit.is_tracing():
            descs = plugin.describe([_desc(t) for t in inputs], attrs)[:plugin.num_outputs]
            name = f"{_domain(plugin)}::{plugin.name}"
            onnx_attrs = _onnx_attrs(plugin, attrs)
            if plugin.num_outputs == 1:
                return torch.onnx.ops.symbolic(name, inputs, onnx_attrs, dtype=descs[0].dtype, shape=descs[0].shape,
                                               version=1)
            return tuple(torch.onnx.ops.symbolic_multi_out(name, inputs, onnx_attrs, dtypes=[d.dtype for d in descs],
                                                           shapes=[d.shape for d in descs], version=1))
        return op(*inputs, *[attrs[k] for k in plugin.attrs])

    call.__name__ = _ident(p.name)
    call.__doc__ = f"torch op for plugin {p.id} v{p.version}: {p.name}{signature}"
    call.op = op
    call.schema = _schema(p)
    _OPS[key] = call
    return call
