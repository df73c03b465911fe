"""The importer registry: (domain, op_type, since_version) → import function.

    @importer("LeakyRelu", versions=(6, 16))
    def import_leaky_relu(ctx, node, inputs): ...

`versions` are exact ONNX since_versions: the parser resolves a node's version from the model's opset
through the ONNX schema and dispatches only on an exact match, so a version nobody has checked fails
loudly instead of being imported with the wrong semantics.
"""

from typing import Callable

_IMPORTERS: dict[tuple[str, str, int], Callable] = {}


def _norm_domain(domain: str) -> str:
    return "" if domain in ("", "ai.onnx") else domain


def importer(op_type: str, versions: tuple[int, ...], domain: str = ""):
    def wrap(fn):
        for v in versions:
            key = (_norm_domain(domain), op_type, v)
            if key in _IMPORTERS:
                raise ValueError(f"importer for {key} registered twice")
            _IMPORTERS[key] = fn
        return fn
    return wrap


def lookup(domain: str, op_type: str, version: int) -> Callable | None:
    return _IMPORTERS.get((_norm_domain(domain), op_type, version))


def supported_versions(op_type: str, domain: str = "") -> list[int]:
    d = _norm_domain(domain)
    return sorted(v for (dd, o, v) in _IMPORTERS if dd == d and o == op_type)


def all_importers() -> dict[tuple[str, str, int], Callable]:
    return dict(_IMPORTERS)
