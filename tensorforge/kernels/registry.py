"""The tactic registry.

    @tactic("LayerNorm", name="triton_rowwise", configs=[{"BLOCK": 1024, "warps": 4}, ...])
    class LayerNormRowwise:
        def supports(layer, device) -> str | None: ...     # None = applicable, else the reason it is not
        def build(layer, cfg, device) -> Kernel: ...

A tactic id is stable text — `layernorm.triton_rowwise[BLOCK=1024,warps=4]` — stored in timing caches and
engines; `instantiate(id, layer, device)` rebuilds the kernel from it at load time.
`op="*"` registers a tactic that applies to every op (the generic reference tactic).
"""

import importlib.util
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

import torch

from ..ir import Layer


class Kernel(Protocol):
    def __call__(self, inputs: list[torch.Tensor | None]) -> list[torch.Tensor]: ...


@dataclass
class Tactic:
    op: str
    name: str
    supports: Callable[[Layer, torch.device], str | None]
    build: Callable[[Layer, dict, torch.device], Kernel]
    configs: list[dict[str, Any]] = field(default_factory=lambda: [{}])
    priority: int = 0          # higher = preferred when tactics are not timed (CPU builds, level 0)
    # optional fits(layer, cfg, inputs) -> reason | None: whether one config suits the inputs' shapes (judged when
    # tactics are timed, on the opt-point inputs); a config that does not fit is not timed
    fits: Callable[[Layer, dict, list], str | None] | None = None
    # optional code_slack(layer, cfg) -> (output indices, fraction) | None: integer outputs of this config that may
    # be one code off the reference on at most that fraction of their elements (an approximate epilogue), which
    # the builder's validation then accepts; None (or no callable): validated as the op's defaults say
    code_slack: Callable[[Layer, dict], tuple[tuple[int, ...], float] | None] | None = None

    def id(self, cfg: dict[str, Any]) -> str:
        base = f"{self.op.lower() if self.op != '*' else 'any'}.{self.name}"
        if not cfg:
            return base
        return base + "[" + ",".join(f"{k}={v}" for k, v in sorted(cfg.items())) + "]"


_TACTICS: dict[str, list[Tactic]] = {}
_OPTIONAL: list[Callable[[], None]] = []     # loaders of tactic modules that import an optional package (Triton)
_OPTIONAL_LOCK = threading.RLock()


def optional_tactics(loader: Callable[[], None]) -> Callable[[], None]:
    """Register `loader`, which imports tactic modules needing an optional, slow-to-import package (Triton). It runs
    once, the first time tactics are listed for a build (`candidates`) or one is looked up on a CUDA device or not
    found (`instantiate`): loading and running a CPU engine never imports Triton."""
    _OPTIONAL.append(loader)
    return loader


def _load_optional() -> None:
    if _OPTIONAL:
        with _OPTIONAL_LOCK:
            while _OPTIONAL:
                _OPTIONAL.pop(0)()


def tactic(op: str, name: str, configs: list[dict] | None = None, priority: int = 0):
    """Class decorator: the class provides static `supports(layer, device)` and `build(layer, cfg, device)`."""
    def wrap(cls):
        register(Tactic(op, name, cls.supports, cls.build, list(configs or [{}]), priority, getattr(cls, "fits", None),
                        getattr(cls, "code_slack", None)))
        return cls
    return wrap


def register(t: Tactic) -> Tactic:
    """Add a tactic made without the decorator (kernels/gated_conv.py derives them from another op's)."""
    existing = _TACTICS.setdefault(t.op, [])
    if any(e.name == t.name for e in existing):
        raise ValueError(f"tactic {t.op}.{t.name} registered twice")
    existing.append(t)
    return t


def derive(op: str, from_op: str, prefix: str, wrap: Callable[[Tactic], Tactic], skip: frozenset = frozenset()) -> int:
    """Register `wrap(t)` — a tactic of `op` named prefix + t.name — for every tactic t of `from_op` not in `skip`
    that has none yet (fused ops whose unfused kernels are another op's tactics: kernels/gated_conv.py,
    kernels/mlp_pair.py); returns how many were added. Called again after the optional tactics load."""
    have = {t.name for t in registered(op)}
    return len([register(wrap(t)) for t in registered(from_op) if prefix + t.name not in have and t.name not in skip])


def registered(op: str) -> list[Tactic]:
    """The tactics registered for `op` so far (not the generic `*` ones), in registration order."""
    return list(_TACTICS.get(op, []))


def triton_device_reason(device: torch.device) -> str | None:
    """Why a hand-written or generated Triton tactic does not apply on `device` (None on CUDA). Tests run such
    kernels on the CPU by building them directly under TRITON_INTERPRET=1, never through tactic selection."""
    if device.type != "cuda":
        return "Triton kernels run on CUDA devices (CPU tests build them directly under TRITON_INTERPRET=1)"
    return None


def candidates(layer: Layer, device: torch.device) -> tuple[list[tuple[Tactic, dict]], dict[str, str]]:
    """All (tactic, config) pairs applicable to `layer` on `device`, best-priority first, and the reasons
    the others were rejected (tactic name → reason)."""
    _load_optional()
    found, reasons = [], {}
    for t in _TACTICS.get(layer.op, []) + _TACTICS.get("*", []):
        why = t.supports(layer, device)
        if why is None:
            found.extend((t, cfg) for cfg in t.configs)
        else:
            reasons[t.name] = why
    found.sort(key=lambda tc: -tc[0].priority)
    return found, reasons


def _parse_id(tactic_id: str) -> tuple[str, str, dict]:
    head, _, rest = tactic_id.partition("[")
    op_lower, _, name = head.partition(".")
    cfg: dict[str, Any] = {}
    if rest:
        for item in rest.rstrip("]").split(","):
            k, _, v = item.partition("=")
            cfg[k] = int(v) if v.lstrip("-").isdigit() else v
    return op_lower, name, cfg


def instantiate(tactic_id: str, layer: Layer, device: torch.device) -> Kernel:
    """Rebuild the kernel named by `tactic_id` for `layer` (engine load time)."""
    op_lower, name, cfg = _parse_id(tactic_id)
    if device.type == "cuda":
        _load_optional()
    for attempt in range(2):
        for t in _TACTICS.get(layer.op, []) + _TACTICS.get("*", []):
            if t.name == name:
                why = t.supports(layer, device)
                if why is not None:
                    raise ValueError(f"tactic {tactic_id} cannot run layer {layer.name!r} on {device}: {why}")
                return t.build(layer, cfg, device)
        if attempt == 0 and _OPTIONAL:         # a tactic of an optional module (a GPU engine loaded on the CPU)
            _load_optional()
        else:
            break
    if name.startswith("triton") and importlib.util.find_spec("triton") is None:
        raise ValueError(f"tactic {tactic_id} of layer {layer.name!r} needs Triton, which is not installed "
                         "(pip install 'tensorforge[gpu]')")
    raise KeyError(f"tactic {tactic_id!r} for layer {layer.name!r} ({layer.op}) is not available in this tensorforge")
