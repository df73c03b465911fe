"""Reading QuantizeLinear/DequantizeLinear layers for the Q/DQ fusion rules (qdq.py): which tensor a DQ
dequantizes, with which constant scale and zero point, and the int8/fp8 value of a quantized constant.

Every helper returns (value, None) or (None, reason): the reasons end up in the rule's rejection list and in
the build log line of a Q/DQ pair that runs as written.
"""

from dataclasses import dataclass

import torch

from ...ir import dtype_from_name, get_spec
from ...ir.ops.low_precision import FLOAT8
from ..pattern import Graph

QUANT_TYPES = {torch.int8: "int8", torch.uint8: "uint8", torch.float8_e4m3fn: "float8_e4m3fn"}


@dataclass
class Dequant:
    """A DequantizeLinear layer's operands: `source` is the quantized tensor it reads (computed or constant)."""
    source: str
    dtype: torch.dtype
    scale: torch.Tensor          # float32, 1-D: one value, or one per channel along `axis`
    zero_point: torch.Tensor | None
    axis: int
    layer_name: str


def constant_through(g: Graph, name: str) -> torch.Tensor | None:
    """The constant `name` is, also through Identity layers (some exporters route scales through them)."""
    for _ in range(8):
        c = g.constant(name)
        if c is not None or not name:
            return c
        layer = g.producer(name)
        if layer is None or layer.op != "Identity":
            return None
        name = layer.inputs[0]
    return None


def _scale_zp(g: Graph, layer, what: str):
    scale = constant_through(g, layer.inputs[1]) if len(layer.inputs) > 1 else None
    if scale is None:
        return None, None, f"the scale of {what} {layer.name!r} is computed at run time"
    zp_name = layer.inputs[2] if len(layer.inputs) > 2 else ""
    zp = constant_through(g, zp_name) if zp_name else None
    if zp_name and zp is None:
        return None, None, f"the zero point of {what} {layer.name!r} is computed at run time"
    if layer.attrs.get("block_size", 0):
        return None, None, f"{what} {layer.name!r} is blocked (block_size={layer.attrs['block_size']})"
    if not scale.dtype.is_floating_point or scale.dim() > 1:
        return None, None, f"the scale of {what} {layer.name!r} has shape {tuple(scale.shape)}"
    if not bool(torch.isfinite(scale).all()) or bool((scale <= 0).any()):
        return None, None, f"the scale of {what} {layer.name!r} is not positive and finite"
    return scale.float().reshape(-1), (None if zp is None else zp.reshape(-1)), None


def dequant(g: Graph, name: str) -> tuple[Dequant | None, str | None]:
    """`name` as the output of a DequantizeLinear with constant scale and zero point."""
    layer = g.producer(name)
    if layer is None or layer.op != "DequantizeLinear":
        what = layer.op if layer is not None else ("a constant" if g.constant(name) is not None else "an input")
        return None, f"{name!r} is not dequantized (produced by {what})"
    scale, zp, why = _scale_zp(g, layer, "DequantizeLinear")
    if why:
        return None, why
    src = layer.inputs[0]
    dt = g.dtype(src)
    if dt is None and src in g.net.tensors:
        dt = g.net.tensors[src].dtype
    if dt not in QUANT_TYPES:
        return None, f"DequantizeLinear {layer.name!r} reads {dt}; quantized kernels take {sorted(QUANT_TYPES.values())}"
    if dt in FLOAT8 and zp is not None and bool((zp.float() != 0).any()):
        return None, f"DequantizeLinear {layer.name!r}: float8 with a non-zero zero point"
    return Dequant(src, dt, scale, zp, int(layer.attrs.get("axis", 1)), layer.name), None


def per_tensor(d: Dequant, what: str) -> str | None:
    if d.scale.numel() != 1 or (d.zero_point is not None and d.zero_point.numel() != 1):
        return f"{what} is quantized per axis ({d.scale.numel()} scales); activations need one scale per tensor"
    return None


def quantized_constant(g: Graph, d: Dequant) -> tuple[torch.Tensor | None, str | None]:
    """The stored int8/uint8/fp8 value a weight DQ reads: a constant, or QuantizeLinear of a float constant
    with the same scale (ModelOpt / PyTorch fake-quant export), evaluated here by its reference."""
    c = constant_through(g, d.source)
    if c is not None:
        return c, None
    q = g.producer(d.source)
    if q is None or q.op != "QuantizeLinear" or constant_through(g, q.inputs[0]) is None:
        return None, f"the weights {d.source!r} are computed at run time"
    scale, zp, why = _scale_zp(g, q, "QuantizeLinear")
    if why:
        return None, why
    if not torch.equal(scale, d.scale):
        return None, f"QuantizeLinear {q.name!r} and DequantizeLinear {d.layer_name!r} use different scales"
    ins = [constant_through(g, i) if i else None for i in q.inputs]
    return get_spec("QuantizeLinear").reference(*ins, **q.attrs), None


def quantize_params(g: Graph, layer) -> tuple[dict | None, str | None]:
    """A per-tensor QuantizeLinear's {scale, zero_point, dtype} (attributes of the fused op)."""
    scale, zp, why = _scale_zp(g, layer, "QuantizeLinear")
    if why:
        return None, why
    if scale.numel() != 1 or (zp is not None and zp.numel() != 1):
        return None, f"QuantizeLinear {layer.name!r} is per axis; outputs are quantized per tensor"
    dt = zp.dtype if zp is not None else None
    if dt is None:
        out = layer.attrs.get("output_dtype")
        dt = dtype_from_name(out) if out else torch.uint8
    if dt not in QUANT_TYPES:
        return None, f"QuantizeLinear {layer.name!r} makes {dt}; quantized kernels write {sorted(QUANT_TYPES.values())}"
    if dt in FLOAT8:
        if zp is not None and float(zp.float()[0]) != 0:
            return None, f"QuantizeLinear {layer.name!r}: float8 with a non-zero zero point"
        if not layer.attrs.get("saturate", 1):
            return None, f"QuantizeLinear {layer.name!r} does not saturate (saturate=0)"
    if layer.attrs.get("precision"):
        return None, f"QuantizeLinear {layer.name!r} computes in {layer.attrs['precision']}"
    z = 0 if zp is None or dt in FLOAT8 else int(zp.to(torch.int64)[0])
    return {"scale": float(scale[0]), "zero_point": z, "dtype": QUANT_TYPES[dt]}, None


def dequantized_constant(g: Graph, name: str) -> tuple[torch.Tensor | None, str | None]:
    """A float value known at build time: a float constant, or DequantizeLinear of constants (ORT's int32 bias)."""
    c = g.constant(name)
    if c is not None:
        return (c, None) if c.dtype.is_floating_point else (None, f"{name!r} is a {c.dtype} constant")
    layer = g.producer(name)
    if layer is None or layer.op != "DequantizeLinear" or any(i and g.constant(i) is None for i in layer.inputs):
        return None, f"{name!r} is computed at run time"
    ins = [g.constant(i) if i else None for i in layer.inputs]
    return get_spec("DequantizeLinear").reference(*ins, **layer.attrs).float(), None
