"""Quantization scales of an engine's tensors, read from the engine's data (for layer information displays).

Entry point: `tensor_scales(engine) -> {tensor name: scale}`. Two sources: the calibrated scales the builder stores
in `build_info["quantization"]["tensor_scales"]` (implicit INT8/FP8: amax/127 or amax/448 for every tensor the
calibration saw), and the constant per-tensor scale input of every QuantizeLinear/DequantizeLinear layer (explicit
Q/DQ models, and the Q/DQ pairs that run as written), which labels both the layer's input and its output.
"""

from .engine import Engine


def tensor_scales(engine: Engine) -> dict[str, float]:
    scales = {k: float(v) for k, v in engine.build_info.get("quantization", {}).get("tensor_scales", {}).items()}
    for layer in engine.layers:
        if layer.op not in ("QuantizeLinear", "DequantizeLinear") or len(layer.inputs) < 2:
            continue
        s = engine.constants.get(layer.inputs[1])
        if s is None or s.numel() != 1:
            continue
        for name in (layer.inputs[0], layer.outputs[0]):
            if name and name not in engine.constants:
                scales.setdefault(name, float(s.reshape(())))
    return scales


def layer_scales(engine: Engine, layer, scales: dict[str, float] | None = None) -> tuple[dict, dict]:
    """({input: scale}, {output: scale}) of one layer, only the tensors that have a scale."""
    scales = tensor_scales(engine) if scales is None else scales
    ins = {i: scales[i] for i in layer.inputs if i and i in scales}
    outs = {o: scales[o] for o in layer.outputs if o and o in scales}
    return ins, outs


def format_scales(ins: dict, outs: dict) -> str:
    """`scales in x=0.0157 out y=0.0312` (empty when the layer has none)."""
    parts = []
    if ins:
        parts.append("in " + " ".join(f"{k}={v:.6g}" for k, v in ins.items()))
    if outs:
        parts.append("out " + " ".join(f"{k}={v:.6g}" for k, v in outs.items()))
    return ("scales " + " ".join(parts)) if parts else ""
