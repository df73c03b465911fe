"""Implicit quantization: calibrated ranges → QuantizeLinear/DequantizeLinear layers, as an explicit Q/DQ model has.

Entry point: `insert_qdq(net, amax, kind, skip) -> QdqReport`. Around every Conv, Gemm, and MatMul with a constant
operand (the layers TensorRT runs in INT8) that a quantized GEMM kernel runs, not listed in `skip` (grouped and
depthwise convolutions, ConvTranspose and non-2-D convolutions keep their float precision: `_no_fast_kernel`):

    x ─► Q(s_x, 0) ─► DQ(s_x, 0) ─┐          s_x = amax(x) / 127  (INT8, per tensor, symmetric: zero point 0)
    W_q (constant) ─► DQ(s_w, 0) ─┴─► Conv   s_w[c] = max |W[c, …]| / 127 per output channel, W_q = Q(W)

FP8 is the same in E4M3 with 448 in place of 127 (float8_e4m3fn zero points, as opsets 19+ write them). The
weight is stored quantized (int8/fp8 constant), its scale and zero point as constants: the engine keeps them as
data. A tensor read by several such layers gets one Q/DQ pair. MatMuls of two computed tensors (attention) stay
float: quantizing them costs accuracy and hides the attention pattern. The Q/DQ fusion rules (passes/rules/qdq.py)
then turn each pattern into one quantized kernel; a pair they cannot fuse runs as written.
"""

from dataclasses import dataclass, field

import torch

from ...ir import Layer, Network, TensorInfo, get_spec
from ...kernels.quant_common import conv_is_gemm_reason

LEVELS = {"int8": 127.0, "fp8": 448.0}
QTYPE = {"int8": torch.int8, "fp8": torch.float8_e4m3fn}
QUANTIZED_OPS = ("Conv", "ConvTranspose", "Gemm", "MatMul")


@dataclass
class QdqReport:
    kind: str
    layers: list[str] = field(default_factory=list)                  # layers given Q/DQ inputs
    skipped: dict[str, str] = field(default_factory=dict)            # layer → why it stays float
    scales: dict[str, float] = field(default_factory=dict)           # activation tensor → scale


def has_qdq(net: Network) -> bool:
    return any(la.op in ("QuantizeLinear", "DequantizeLinear") for la in net.layers)


def _weight_axis(layer: Layer, k: int, w: torch.Tensor) -> int | None:
    """The output-channel axis of constant input k, or None for one scale per tensor."""
    if layer.op == "Conv" and k == 1:
        return 0
    if layer.op == "Gemm" and w.dim() == 2:
        if k == 1:
            return 0 if layer.attrs.get("transB", 0) else 1
        return 1 if layer.attrs.get("transA", 0) else 0
    if layer.op == "MatMul" and w.dim() == 2:
        return 1 if k == 1 else 0
    return None


def _no_fast_kernel(net: Network, layer: Layer) -> str | None:
    """Why no quantized GEMM kernel would run this Conv/ConvTranspose (None: one does). Such a layer keeps its
    float precision: quantized, it would run the exact float32 fallback (quant_float_exact.py) or the reference,
    slower than the float layer and no more accurate (H100, batch 32, every depthwise conv quantized:
    mobilenet_v3_large INT8 0.14x, FP8 0.04x its fp16 engine). TensorRT too runs a layer in INT8 only where that
    is faster. Explicit Q/DQ graphs are not affected: their pairs run as written."""
    if layer.op == "ConvTranspose":
        return "ConvTranspose has no quantized GEMM kernel here"
    w = net.constants.get(layer.inputs[1]) if len(layer.inputs) > 1 else None
    attrs = dict(layer.attrs)
    if not attrs.get("kernel_shape") and w is not None:                # ONNX: from the weights
        attrs["kernel_shape"] = [int(d) for d in w.shape[2:]]
    why = conv_is_gemm_reason(Layer(layer.name, "QuantizedConv", [], [], attrs))
    return None if why is None else f"no quantized GEMM kernel takes it ({why})"


def _roles(net: Network, layer: Layer) -> tuple[list[int], list[int]] | str:
    """(activation input positions, weight input positions), or why the layer stays float."""
    if layer.op in ("Conv", "ConvTranspose"):
        why = _no_fast_kernel(net, layer)
        if why:
            return why
        acts, weights = [0], [1]
    else:
        acts = [k for k in (0, 1) if layer.inputs[k] not in net.constants]
        weights = [k for k in (0, 1) if layer.inputs[k] in net.constants]
        if not weights:
            return "both operands are computed tensors (kept float)"
        if not acts:
            return "both operands are constants"
    for k in weights:
        w = net.constants.get(layer.inputs[k])
        if w is None:
            return f"its weight {layer.inputs[k]!r} is computed at run time"
        if w.dtype != torch.float32:
            return f"its weight is {w.dtype}, not float32"
    return acts, weights


def _const(net: Network, base: str, value: torch.Tensor) -> str:
    return net.add_constant(net.unique_name(base), value)


def insert_qdq(net: Network, amax: dict[str, float], kind: str = "int8", skip: set[str] = frozenset()) -> QdqReport:
    levels, qtype = LEVELS[kind], QTYPE[kind]
    quantize = get_spec("QuantizeLinear").reference
    report = QdqReport(kind)
    act_done: dict[str, str] = {}
    weight_done: dict[str, str] = {}
    out_layers: list[Layer] = []
    producer = {o: la for la in net.layers for o in la.outputs}
    for layer in net.layers:
        if layer.op not in QUANTIZED_OPS or layer.name in skip:
            out_layers.append(layer)
            continue
        roles = _roles(net, layer)
        if isinstance(roles, str):
            report.skipped[layer.name] = roles
            out_layers.append(layer)
            continue
        acts, weights = roles
        missing = [layer.inputs[k] for k in acts if amax.get(layer.inputs[k], 0.0) <= 0.0]
        if missing:
            report.skipped[layer.name] = f"input {missing[0]!r} has no calibrated range"
            out_layers.append(layer)
            continue
        for k in acts:
            x = layer.inputs[k]
            if x not in act_done:
                s = amax[x] / levels
                scale = _const(net, f"{x}/scale", torch.tensor(s, dtype=torch.float32))
                zp = _const(net, f"{x}/zero_point", torch.zeros((), dtype=qtype))
                q, dq = net.unique_name(f"{x}/quantized"), net.unique_name(f"{x}/dequantized")
                net.tensors[q], net.tensors[dq] = TensorInfo(q, qtype), TensorInfo(dq, torch.float32)
                origin = list(producer[x].origin) if x in producer else [x]     # x's quantization: x's producer
                out_layers.append(Layer(net.unique_name(f"{x}/QuantizeLinear"), "QuantizeLinear", [x, scale, zp], [q],
                                        {"axis": 1, "saturate": 1}, origin))
                out_layers.append(Layer(net.unique_name(f"{x}/DequantizeLinear"), "DequantizeLinear", [q, scale, zp],
                                        [dq], {"axis": 1}, list(origin)))
                act_done[x] = dq
                report.scales[x] = s
            layer.inputs[k] = act_done[x]
        for k in weights:
            wname = layer.inputs[k]
            w = net.constants[wname]
            axis = _weight_axis(layer, k, w)
            key = f"{wname}@{axis}"
            if key not in weight_done:
                if axis is None:
                    a = w.abs().max().reshape(())
                else:
                    a = w.abs().transpose(0, axis).reshape(w.shape[axis], -1).amax(dim=1)
                s = torch.where(a > 0, a / levels, torch.ones_like(a)).to(torch.float32)
                zp = torch.zeros(s.shape, dtype=qtype)
                wq = quantize(w, s, zp, axis=axis if axis is not None else 1)
                q = _const(net, f"{wname}/quantized", wq)
                sc, z = _const(net, f"{wname}/scale", s), _const(net, f"{wname}/zero_point", zp)
                dq = net.unique_name(f"{wname}/dequantized")
                net.tensors[dq] = TensorInfo(dq, torch.float32)
                out_layers.append(Layer(net.unique_name(f"{wname}/DequantizeLinear"), "DequantizeLinear", [q, sc, z],
                                        [dq], {"axis": axis if axis is not None else 1}, list(layer.origin)))
                weight_done[key] = dq
            layer.inputs[k] = weight_done[key]
        report.layers.append(layer.name)
        out_layers.append(layer)
    net.layers = out_layers
    net.prune_tensors()
    return report
