"""The OpSpec registry: one entry per IR op.

An OpSpec holds
- `attrs`: the attribute schema, name → default (`REQUIRED` when the op cannot run without it);
- `reference`: ONE torch implementation, called as `reference(*inputs, **attrs)`, returning a tensor
  or a tuple of tensors. It is the oracle for every tactic test and for constant folding;
- `infer`: optional shape/dtype function. When absent, shapes and dtypes are inferred by running the
  reference on meta tensors (see `interpret.py`), which is exact for every op whose output shape
  depends only on input shapes and on the values of small host tensors.
- `host_ok`: the op may run on the host as shape arithmetic (int tensors from Shape and constants).
- `value_inputs`: positions of inputs whose VALUES the op reads (shape, axes, pads, k …). Shape inference
  keeps them as real host tensors (see `interpret.py`), so the reference can call `.tolist()` on them.

Register with the decorator:

    @op("LeakyRelu", attrs={"alpha": 0.01})
    def leaky_relu(x, alpha): return torch.nn.functional.leaky_relu(x, alpha)
"""

from dataclasses import dataclass, field
from typing import Any, Callable


class _Required:
    def __repr__(self):
        return "REQUIRED"


REQUIRED = _Required()


@dataclass
class OpSpec:
    name: str
    reference: Callable[..., Any]
    attrs: dict[str, Any] = field(default_factory=dict)
    infer: Callable[..., Any] | None = None
    host_ok: bool = True
    metadata_only: bool = False   # reads only its input's shape (Shape, Size): input need not be materialised
    doc: str = ""
    value_inputs: tuple[int, ...] = ()

    def resolve_attrs(self, attrs: dict[str, Any], where: str = "") -> dict[str, Any]:
        """Fill defaults; reject unknown or missing required attributes."""
        unknown = set(attrs) - set(self.attrs)
        if unknown:
            raise KeyError(f"{where}op {self.name} has no attribute(s) {sorted(unknown)}; known: {sorted(self.attrs)}")
        out = {}
        for k, default in self.attrs.items():
            if k in attrs:
                out[k] = attrs[k]
            elif default is REQUIRED:
                raise KeyError(f"{where}op {self.name} needs attribute {k!r}")
            else:
                out[k] = default
        return out


_REGISTRY: dict[str, OpSpec] = {}


def register_spec(spec: OpSpec) -> OpSpec:
    if spec.name in _REGISTRY:
        raise ValueError(f"op {spec.name!r} is registered twice")
    _REGISTRY[spec.name] = spec
    return spec


def op(name: str, attrs: dict[str, Any] | None = None, infer: Callable | None = None, host_ok: bool = True,
       metadata_only: bool = False, value_inputs: tuple[int, ...] = ()):
    """Decorator: register `fn` as the reference implementation of IR op `name`."""
    def wrap(fn):
        register_spec(OpSpec(name, fn, dict(attrs or {}), infer, host_ok, metadata_only, (fn.__doc__ or "").strip(),
                             tuple(value_inputs)))
        return fn
    return wrap


def get_spec(name: str) -> OpSpec:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"no IR op named {name!r}") from None


def has_spec(name: str) -> bool:
    return name in _REGISTRY


def registered_ops() -> list[str]:
    return sorted(_REGISTRY)


def unregister_spec(name: str) -> None:
    """Used by the plugin registry when a plugin is deregistered (tests)."""
    _REGISTRY.pop(name, None)
