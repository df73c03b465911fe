"""Tactics: Conv, FusedConv and FusedConvPool on the CPU through oneDNN, channels-last, weights packed once.

    y = act(conv(x, W) + bias [+ residual]) [+ residual]     one oneDNN primitive: bias, activation (and a residual
                                                             added before it) ride as post-ops
x is taken in the channels-last (NHWC) layout — free when its producer is one of these convolutions, one copy at a
chain's first input — and y is returned channels-last, so a chain of convolutions with the elementwise and pooling
layers between them (whose torch references keep the layout) never converts again. The weight is reordered once
into oneDNN's blocked layout (`mkldnn._reorder_convolution_weight`) and kept per weight tensor: the contexts of one
loaded engine share their CPU weight tensors, so it is packed once per engine, not per context or per call.
Why: at batch 1 torch's NCHW `conv2d` takes slow paths on depthwise and small 1×1 layers (MobileNetV3-Large b1,
2 cores: 16→64 1×1 at 112² 0.60 ms NCHW against 0.51 ms here, depthwise 672 5×5/2 at 14² 0.17 against 0.07 ms),
and a separate HardSwish pass costs as much as the convolution. Traffic: x (plus its NHWC copy at a chain's first
layer), the packed W and the bias read once, y written once (residual read once when fused, else in one add).
oneDNN fuses one activation, or a residual then ReLU; the rest of an epilogue (PRelu, Elu, a non-ONNX HardSigmoid,
a residual beside another activation, a broadcast residual) runs torch's in-place epilogue on y. Consumers get NHWC-strided tensors (as on CUDA, conv_channels_last).
Untimed CPU builds choose it for 4-D float32 inputs (priority above torch_conv, below the K×1 lowering when that
fits); timed CPU builds keep that choice untimed too (builder/tactics.py `_layout_bound`: timed alone, torch_conv
won and cost its consumers NHWC copies), except --best's trial builds, which time it against torch_conv.
"""

import functools
import threading

import torch
from torch.utils.weak import WeakIdKeyDictionary

from ..ir import get_spec
from ..ir.ops.nn_common import per_dim, torch_pad_arg, window_geometry
from .cpu_onednn import _post_op
from .registry import tactic
from .torch_fused import epilogue_, epilogue_attrs

_PACKED: WeakIdKeyDictionary = WeakIdKeyDictionary()   # weight tensor → {geometry: packed weight}; dies with it
_LOCK = threading.Lock()
PACK_COUNT = [0]                                        # reorders done in this process (tests read it)


def _reason(layer, device) -> str | None:
    if device.type != "cpu":
        return "oneDNN's packed convolution is a CPU tactic"
    if not torch.backends.mkldnn.is_available() or not hasattr(torch.ops.mkldnn, "_convolution_pointwise"):
        return "this torch build has no oneDNN convolution"
    if layer.precision not in (None, "float32"):
        return f"a {layer.precision} layer (this tactic runs float32)"
    ks = layer.attrs.get("kernel_shape")
    if ks is not None and len(ks) != 2:
        return f"only 2-D convolutions (kernel_shape {list(ks)})"
    return None


def _fits(layer, cfg, inputs):
    x, w = inputs[0], inputs[1] if len(inputs) > 1 else None
    if x is None or w is None or x.dim() != 4 or w.dim() != 4:
        return "input and weight are not 4-D (a 2-D convolution)"
    if x.dtype != torch.float32 or w.dtype != torch.float32:
        return f"dtypes {x.dtype} · {w.dtype}: this tactic runs float32"
    return None


def static_geometry(attrs: dict) -> tuple:
    """The layer's Conv attributes as one hashable tuple, made once per kernel."""
    pads = attrs.get("pads")
    return (tuple(per_dim(attrs.get("strides"), 2, 1)), tuple(per_dim(attrs.get("dilations"), 2, 1)),
            tuple(int(p) for p in pads) if pads else None, attrs.get("auto_pad", "NOTSET"),
            int(attrs.get("group", 1) or 1))


@functools.lru_cache(maxsize=4096)
def _geometry(static: tuple, in_sizes: tuple, kernel: tuple):
    """(output sizes, begin pads, end pads, strides, dilations, groups) for these spatial sizes: ONNX's window
    arithmetic, computed once per (attributes, input size, kernel size)."""
    strides, dilations, pads, auto_pad, groups = static
    out, begin, end, _ = window_geometry(list(in_sizes), list(kernel), list(strides), list(dilations),
                                         list(pads) if pads else None, auto_pad)
    return tuple(out), list(begin), list(end), list(strides), list(dilations), groups


def packed_weight(w: torch.Tensor, pads, strides, dilations, groups, input_size) -> torch.Tensor:
    """W reordered for oneDNN once per (weight tensor, geometry); the input size of the first call picks the
    blocked format (other sizes run with it too). Published whole under the lock."""
    key = (tuple(pads), tuple(strides), tuple(dilations), groups)
    per = _PACKED.get(w)
    if per is not None and key in per:
        return per[key]
    with _LOCK:
        per = _PACKED.get(w)
        if per is None:
            per = {}
            _PACKED[w] = per
        if key not in per:
            src = w.detach().contiguous()
            packed = torch.ops.mkldnn._reorder_convolution_weight(src, list(pads), list(strides), list(dilations),
                                                                  groups, list(input_size))
            PACK_COUNT[0] += 1
            per = {**per, key: packed}
            _PACKED[w] = per
        return per[key]


def conv_nhwc(x, w, bias, static, post=("none", [], ""), residual=None):
    """post(conv(x, w) + bias [+ residual]) in one oneDNN call, x made channels-last; y channels-last.
    `residual`, when given, has y's shape exactly (the caller checks: `fusable_residual`)."""
    _, begin, end, strides, dilations, groups = _geometry(static, x.shape[2:], w.shape[2:])
    if begin != end:                  # asymmetric padding: one padded copy first (as the reference does)
        x = torch.nn.functional.pad(x, torch_pad_arg(begin, end))
        begin = [0, 0]
    x = x.contiguous(memory_format=torch.channels_last)
    pw = packed_weight(w, begin, strides, dilations, groups, x.shape)
    b = None
    if bias is not None:
        b = bias.reshape(-1).to(x.dtype)
        b = (b.expand(w.shape[0]) if b.numel() == 1 else b).contiguous()
    attr, scalars, algorithm = post
    if residual is not None:
        return torch.ops.mkldnn._convolution_pointwise.binary(
            x, residual.contiguous(memory_format=torch.channels_last), pw, b, begin, strides, dilations, groups, "add",
            None, None if attr == "none" else attr, scalars, algorithm or None)
    return torch.ops.mkldnn._convolution_pointwise(x, pw, b, begin, strides, dilations, groups, attr, scalars,
                                                   algorithm or None)


def fusable_residual(static, x, w, residual) -> bool:
    """Whether `residual` has the convolution output's shape exactly (oneDNN's binary post-op does not broadcast)."""
    if residual is None or residual.dim() != 4:
        return False
    out = _geometry(static, x.shape[2:], w.shape[2:])[0]
    return tuple(residual.shape) == (x.shape[0], w.shape[0], *out)


def _fused_runner(layer):
    """run(inputs) -> y of a FusedConv layer, with as much of the epilogue in the oneDNN call as its post-ops take:
    an activation alone; a residual added before ReLU (or with no activation); else the residual fused and the
    activation in place, or the activation fused and the residual added after it."""
    act, alpha, beta, res_first = epilogue_attrs(layer.attrs)
    attrs = static_geometry(layer.attrs)
    post = _post_op(act, alpha, beta) if act != "PRelu" else None
    none = ("none", [], "")

    def run(inputs):
        x, w, bias, residual, slope = [inputs[k] if len(inputs) > k else None for k in range(5)]
        check_operands(layer, x, w)
        if residual is None:
            if post is not None:
                return conv_nhwc(x, w, bias, attrs, post)
            return epilogue_(conv_nhwc(x, w, bias, attrs), None, act, alpha, beta, res_first, slope)
        if not fusable_residual(attrs, x, w, residual):            # a broadcast residual: torch's epilogue
            return epilogue_(conv_nhwc(x, w, bias, attrs), residual, act, alpha, beta, res_first, slope)
        if res_first or act == "none":
            if act in ("none", "Relu"):
                return conv_nhwc(x, w, bias, attrs, post, residual)
            y = conv_nhwc(x, w, bias, attrs, none, residual)
            return epilogue_(y, None, act, alpha, beta, res_first, slope)
        y = conv_nhwc(x, w, bias, attrs, post) if post is not None else \
            epilogue_(conv_nhwc(x, w, bias, attrs), None, act, alpha, beta, res_first, slope)
        return y.add_(residual)
    return run


def check_operands(layer, x, w, tactic_name: str = "cpu_onednn_nhwc"):
    """Raise when a kernel is handed operands its fits() would have rejected at build."""
    why = _fits(layer, {}, [x, w])
    if why is not None:
        raise ValueError(f"tactic {tactic_name} got inputs it does not take for layer {layer.name!r}: {why} "
                         "(fits() rejects such layers at build; rebuild the engine)")


def conv_pool_kernel(layer, run):
    """FusedConvPool's kernel from a FusedConv run(inputs) -> y: [y, or None when nothing else reads it; P = the
    mean of y over its positions]."""
    pool = get_spec("GlobalAveragePool").reference
    store_y = bool(layer.outputs and layer.outputs[0])

    def kernel(inputs):
        y = run(inputs)
        return [y if store_y else None, pool(y)]
    return kernel


@tactic("Conv", name="cpu_onednn_nhwc", priority=8)
class ConvOneDnn:
    supports = staticmethod(_reason)
    fits = staticmethod(_fits)

    @staticmethod
    def build(layer, cfg, device):
        attrs = static_geometry(layer.attrs)

        def run(inputs):
            x, w = inputs[0], inputs[1]
            check_operands(layer, x, w)
            return [conv_nhwc(x, w, inputs[2] if len(inputs) > 2 else None, attrs)]
        return run


@tactic("FusedConv", name="cpu_onednn_nhwc", priority=8)
class FusedConvOneDnn:
    supports = staticmethod(_reason)
    fits = staticmethod(_fits)

    @staticmethod
    def build(layer, cfg, device):
        run = _fused_runner(layer)
        return lambda inputs: [run(inputs)]


@tactic("FusedConvPool", name="cpu_onednn_nhwc", priority=8)
class FusedConvPoolOneDnn:
    """FusedConv here, then P = mean of y over its positions (y is not returned when nothing else reads it)."""
    supports = staticmethod(_reason)
    fits = staticmethod(_fits)

    @staticmethod
    def build(layer, cfg, device):
        return conv_pool_kernel(layer, _fused_runner(layer))
