"""Plugin: one custom operator — identity, typed signature, descriptor, impl, reference, autotune configs.

    p = Plugin("custom::MyGelu", descriptor)       # descriptor(x: TensorDesc, approximate: str = "none")
    p.impl(fn)        # fn(*inputs, *outputs, **attrs, stream=..., config=...) writes the outputs in place
    p.reference(fn)   # fn(*inputs, **attrs) -> tensor | tuple: the torch oracle
    p.autotune(fn)    # fn() -> [{"BLOCK": 256}, ...]: configs the builder times like tactics
    p.run(inputs, attrs)   # allocate outputs from the descriptor, call impl (or the reference)

Identity is (namespace, name, version); the IR op is `plugin:<ns>::<name>:<version>` (see `op_name`).
Imports ir and util only; the registry (`registry.py`) makes a Plugin visible to parser, kernels, runtime.
"""

import inspect
import re
import typing
from typing import Any, Callable

import torch

from ..ir.opspec import REQUIRED, OpSpec
from ..util.errors import PluginError, TensorforgeError
from .attrs import AttrType, AttrTypeError, coerce, parse_annotation
from .desc import TensorDesc

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")
_VERSION = re.compile(r"^[A-Za-z0-9_]+$")
_CONFIG_VALUE = re.compile(r"^[A-Za-z0-9_\-]+$")


def split_id(plugin_id: str) -> tuple[str, str]:
    """'ns::Name' → ('ns', 'Name'); 'Name' → ('', 'Name')."""
    ns, sep, name = plugin_id.rpartition("::")
    return (ns, name) if sep else ("", plugin_id)


def _is_desc(annotation) -> tuple[bool, bool]:
    """(is a TensorDesc annotation, is optional)."""
    if annotation is TensorDesc:
        return True, False
    args = typing.get_args(annotation)
    if args and TensorDesc in args and all(a in (TensorDesc, type(None)) for a in args):
        return True, type(None) in args
    return False, False


def _count_outputs(annotation) -> int | None:
    if annotation is TensorDesc:
        return 1
    if typing.get_origin(annotation) in (tuple, list):
        args = typing.get_args(annotation)
        if args and Ellipsis not in args and all(a is TensorDesc for a in args):
            return len(args)
    return None


class Plugin:
    def __init__(self, plugin_id: str, descriptor: Callable, version: str = "1", *, domains=None,
                 aliases: tuple[str, ...] = (), override: bool = False, num_outputs: int | None = None, doc: str = "",
                 optional_outputs: int = 0):
        self.namespace, self.name = split_id(plugin_id)
        self.version = str(version)
        if not _NAME.match(self.name) or (self.namespace and not _NAME.match(self.namespace.replace("::", "_"))):
            raise PluginError(f"plugin id {plugin_id!r} is not valid", "use 'namespace::Name' with letters, digits, _")
        if not _VERSION.match(self.version):
            raise PluginError(f"plugin {plugin_id}: version {version!r} is not valid", "use letters, digits and _ only")
        self.domains = tuple(domains) if domains is not None else (self.namespace,)
        self.aliases = tuple(aliases)
        self.override = bool(override)
        self.descriptor = descriptor
        self.doc = doc or (descriptor.__doc__ or "").strip()
        self.inputs: list[tuple[str, bool]] = []               # (name, optional)
        self.attrs: dict[str, tuple[AttrType, Any]] = {}       # name → (type, default or REQUIRED)
        self._parse_signature(descriptor)
        hinted = _count_outputs(typing.get_type_hints(descriptor).get("return"))
        self.num_outputs = num_outputs or hinted or 1
        if not 0 <= optional_outputs < self.num_outputs:
            raise PluginError(f"plugin {plugin_id}: optional_outputs={optional_outputs} must be below its "
                              f"{self.num_outputs} outputs", "count only trailing outputs a node may leave out")
        self.optional_outputs = int(optional_outputs)    # trailing outputs an ONNX node may omit (computed, dropped)
        self.impl_fn: Callable | None = None
        self.reference_fn: Callable | None = None
        self.autotune_fn: Callable | None = None
        self._impl_extras: set[str] = set()
        self._configs: list[dict] | None = None
        self.on_change: Callable[["Plugin"], None] | None = None    # set by the registry while registered

    # ---- identity ---------------------------------------------------------------------------------
    @property
    def id(self) -> str:
        return f"{self.namespace}::{self.name}" if self.namespace else self.name

    @property
    def key(self) -> tuple[str, str, str]:
        return self.namespace, self.name, self.version

    @property
    def op_name(self) -> str:
        """IR op name; dots (ONNX-style domains) become '_' because tactic ids use '.' as a separator."""
        return f"plugin:{self.id}:{self.version}".replace(".", "_")

    def __repr__(self) -> str:
        return f"Plugin({self.id} v{self.version})"

    # ---- signature --------------------------------------------------------------------------------
    def _parse_signature(self, fn: Callable) -> None:
        try:
            hints = typing.get_type_hints(fn)
        except Exception as e:  # noqa: BLE001 - unresolvable annotation
            raise PluginError(f"plugin {self.id}: cannot read the descriptor's annotations ({e})",
                              "annotate inputs with tfp.TensorDesc, attributes with int/float/str/bool/list") from e
        for p in inspect.signature(fn).parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise PluginError(f"plugin {self.id}: descriptor parameter *{p.name} is not supported",
                                  "list every input and attribute as its own parameter")
            ann = hints.get(p.name, inspect.Parameter.empty)
            is_desc, optional = _is_desc(ann)
            if is_desc:
                if self.attrs:
                    raise PluginError(f"plugin {self.id}: input {p.name!r} follows an attribute",
                                      "declare the inputs first, then the attributes")
                self.inputs.append((p.name, optional or p.default is None))
                continue
            t = parse_annotation(ann)
            if t is None:
                what = "has no annotation" if ann is inspect.Parameter.empty else f"has unsupported type {ann!r}"
                raise PluginError(f"plugin {self.id}: descriptor parameter {p.name!r} {what}",
                                  "annotate inputs with tfp.TensorDesc and attributes with int, float, str, bool, "
                                  "list[int], list[float], list[str] or torch.Tensor")
            if p.default is inspect.Parameter.empty:
                default = REQUIRED
            else:
                try:
                    default = coerce(p.default, t)
                except AttrTypeError as e:
                    raise PluginError(f"plugin {self.id}: default of attribute {p.name!r} {e}",
                                      "make the default match the annotation") from None
            self.attrs[p.name] = (t, default)
        if not self.inputs:
            raise PluginError(f"plugin {self.id}: the descriptor declares no input",
                              "annotate inputs with tfp.TensorDesc")

    # ---- decorators -------------------------------------------------------------------------------
    def impl(self, fn: Callable) -> Callable:
        """Register the implementation: fn(*inputs, *outputs, <attributes by name>, stream=None, config=None)."""
        params = inspect.signature(fn).parameters
        kinds = {p.kind for p in params.values()}
        positional = [p for p in params.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        need = len(self.inputs) + self.num_outputs
        if inspect.Parameter.VAR_POSITIONAL not in kinds and len(positional) < need:
            raise PluginError(f"plugin {self.id}: @impl takes {len(positional)} positional parameters, needs {need} "
                              f"({len(self.inputs)} inputs then {self.num_outputs} outputs)",
                              "write impl(*inputs, *outputs, **attributes, stream)")
        if inspect.Parameter.VAR_KEYWORD not in kinds:
            names = set(params)
            missing = [a for a in self.attrs if a not in names]
            if missing:
                raise PluginError(f"plugin {self.id}: @impl has no parameter for attribute(s) {missing}",
                                  "add them (or **attrs) to the impl's signature")
            self._impl_extras = {k for k in ("stream", "config") if k in names}
        else:
            self._impl_extras = {"stream", "config"}
        self.impl_fn = fn
        self._changed()
        return fn

    def reference(self, fn: Callable) -> Callable:
        """Register the torch oracle: fn(*inputs, **attributes) -> tensor or tuple of tensors."""
        self.reference_fn = fn
        self._changed()
        return fn

    def autotune(self, fn: Callable) -> Callable:
        """Register the candidate configs: fn() -> list of {name: int | str} dicts."""
        self.autotune_fn = fn
        self._configs = None
        self._changed()
        return fn

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change(self)

    def configs(self) -> list[dict]:
        """The autotune configs, validated once ([{}] when there is no @autotune)."""
        if self._configs is None:
            found = list(self.autotune_fn()) if self.autotune_fn is not None else [{}]
            for cfg in found:
                bad = [k for k, v in (cfg.items() if isinstance(cfg, dict) else [("?", None)])
                       if not _CONFIG_VALUE.match(str(k)) or isinstance(v, bool)
                       or not (isinstance(v, int) or (isinstance(v, str) and _CONFIG_VALUE.match(v)))]
                if not isinstance(cfg, dict) or bad:
                    raise PluginError(f"plugin {self.id}: @autotune config {cfg!r} is not a dict of int or word values",
                                      "return e.g. [{'BLOCK': 256, 'num_warps': 4}, ...]")
            self._configs = found or [{}]
        return self._configs

    # ---- attributes -------------------------------------------------------------------------------
    def typed_attrs(self, raw: dict, where: str = "", strict_keys: set | None = None) -> dict:
        """Typed attributes with defaults filled. Keys in `strict_keys` (default: all of `raw`) must be declared;
        other undeclared keys (schema defaults of an overridden built-in op) are dropped."""
        strict = set(raw) if strict_keys is None else strict_keys
        unknown = sorted(k for k in raw if k not in self.attrs and k in strict)
        if unknown:
            raise PluginError(f"{where}plugin {self.id} has no attribute {unknown[0]!r} "
                              f"(declared: {', '.join(self.attrs) or 'none'})",
                              "remove it from the node or declare it in the plugin's descriptor")
        out = {}
        for name, (t, default) in self.attrs.items():
            if name not in raw:
                if default is REQUIRED:
                    raise PluginError(f"{where}plugin {self.id} needs attribute {name!r} ({t.name})",
                                      "set it on the node or give it a default in the descriptor")
                out[name] = default
                continue
            try:
                out[name] = coerce(raw[name], t)
            except AttrTypeError as e:
                raise PluginError(f"{where}plugin {self.id} attribute {name!r} {e}",
                                  f"export the attribute as {t.name} or change the descriptor's annotation") from None
        return out

    # ---- shapes -----------------------------------------------------------------------------------
    def describe(self, descs: list[TensorDesc | None], attrs: dict) -> list[TensorDesc]:
        """Run the descriptor; check its inputs and its result."""
        if len(descs) > len(self.inputs):
            raise PluginError(f"plugin {self.id} takes {len(self.inputs)} inputs, got {len(descs)}",
                              "check the node's inputs against the plugin's descriptor")
        descs = list(descs) + [None] * (len(self.inputs) - len(descs))
        for (name, optional), d in zip(self.inputs, descs):
            if d is None and not optional:
                raise PluginError(f"plugin {self.id} needs input {name!r}", "connect it, or declare it Optional")
        try:
            result = self.descriptor(*descs, **attrs)
        except TensorforgeError:
            raise
        except Exception as e:  # noqa: BLE001 - user code: reported in one line with the plugin named
            shown = ", ".join(repr(d) for d in descs)
            raise PluginError(f"plugin {self.id}: descriptor raised {type(e).__name__}: {e} (inputs: {shown})",
                              "fix the function decorated with @tfp.register") from e
        outs = list(result) if isinstance(result, (tuple, list)) else [result]
        if not outs or not all(isinstance(o, TensorDesc) for o in outs):
            raise PluginError(f"plugin {self.id}: descriptor returned {result!r}, not TensorDesc(s)",
                              "return x.like(), x.new(shape, dtype) or a tuple of them")
        if len(outs) < self.num_outputs:
            raise PluginError(f"plugin {self.id}: descriptor returned {len(outs)} outputs, declared {self.num_outputs}",
                              "return one TensorDesc per output")
        for o in outs:
            if any(isinstance(d, int) and d < 0 for d in o.shape) or not isinstance(o.dtype, torch.dtype):
                raise PluginError(f"plugin {self.id}: descriptor returned invalid output {o!r}",
                                  "dimensions must be >= 0 and dtype a torch.dtype")
        return outs

    # ---- execution --------------------------------------------------------------------------------
    def run(self, inputs: list, attrs: dict, config: dict | None = None) -> list[torch.Tensor]:
        """Allocate the outputs from the descriptor and run the impl (or, without one, the reference)."""
        if self.impl_fn is None:
            return self.run_reference(inputs, attrs)
        inputs = list(inputs) + [None] * (len(self.inputs) - len(inputs))
        outs_desc = self.describe([TensorDesc.of(t) if t is not None else None for t in inputs], attrs)
        device = next(t.device for t in inputs if t is not None)
        outs = [torch.empty(tuple(int(d) for d in o.shape), dtype=o.dtype, device=device) for o in outs_desc]
        kwargs = dict(attrs)
        if "stream" in self._impl_extras:
            kwargs["stream"] = torch.cuda.current_stream(device) if device.type == "cuda" else None
        if "config" in self._impl_extras:
            kwargs["config"] = dict(config or {})
        returned = self.impl_fn(*inputs, *outs, **kwargs)
        if returned is not None:
            raise PluginError(f"plugin {self.id}: @impl returned a value", "write into the output tensors, return None")
        return outs

    def run_reference(self, inputs: list, attrs: dict) -> list[torch.Tensor]:
        fn = self.reference_fn
        if fn is None:
            if self.impl_fn is None:
                raise PluginError(f"plugin {self.id} has neither @impl nor @reference", "register one of them")
            return self.run(inputs, attrs)
        result = fn(*inputs, **attrs)
        outs = list(result) if isinstance(result, (tuple, list)) else [result]
        self._check_reference(inputs, attrs, outs)
        return outs

    def _check_reference(self, inputs: list, attrs: dict, outs: list) -> None:
        """The reference must return what the descriptor declares: count, shapes and dtypes."""
        if any(isinstance(t, torch.Tensor) and t.device.type == "meta" for t in inputs):
            return                      # shape inference runs the descriptor itself
        want = self.describe([TensorDesc.of(t) if t is not None else None for t in inputs], attrs)
        if len(outs) < self.num_outputs or not all(isinstance(o, torch.Tensor) for o in outs[:self.num_outputs]):
            raise PluginError(f"plugin {self.id}: @reference returned {len(outs)} value(s), not "
                              f"{self.num_outputs} tensor(s)", "return one tensor per declared output")
        for k, (o, d) in enumerate(zip(outs, want)):
            if tuple(o.shape) != tuple(int(x) for x in d.shape) or o.dtype != d.dtype:
                raise PluginError(f"plugin {self.id}: @reference output {k} is {str(o.dtype).replace('torch.', '')}"
                                  f"{list(o.shape)}, the descriptor declares {str(d.dtype).replace('torch.', '')}"
                                  f"{[int(x) for x in d.shape]}", "make the reference and the descriptor agree")

    # ---- the IR op --------------------------------------------------------------------------------
    def spec(self) -> OpSpec:
        """The OpSpec: shapes from the descriptor, reference = @reference (or @impl), never folded on the host."""
        def infer(*ins, **attrs):
            descs = [TensorDesc.of(t) if t is not None else None for t in ins]
            return [torch.empty(tuple(int(d) for d in o.shape), dtype=o.dtype, device="meta")
                    for o in self.describe(descs, attrs)]

        def reference(*ins, **attrs):
            return self.run_reference(list(ins), attrs)

        return OpSpec(name=self.op_name, reference=reference, attrs={k: d for k, (_, d) in self.attrs.items()},
                      infer=infer, host_ok=False, doc=self.doc)

    def record(self, layers: list) -> dict:
        """What an engine stores about this plugin: identity, version, and each layer's attributes (never code)."""
        return {"id": self.id, "namespace": self.namespace, "name": self.name, "version": self.version,
                "op": self.op_name,
                "layers": [{"name": layer.name, "attrs": {k: _jsonable(v) for k, v in layer.attrs.items()}}
                           for layer in layers]}


def _jsonable(value):
    if isinstance(value, torch.Tensor):
        return f"tensor({str(value.dtype).replace('torch.', '')}{list(value.shape)})"
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value
