"""FusedConv as ONE cuDNN call: relu(conv(x, w) + bias [+ residual]) through cuDNN's fused convolution kernels.

Tactic `fusedconv.cudnn_fused_relu`, configs {"layout": "nchw"} and {"layout": "nhwc"} (channels-last operands, as
conv_channels_last.py): `torch.cudnn_convolution_relu` / `torch.cudnn_convolution_add_relu` compute

    y = relu(x ⊛ w + bias [+ residual])        traffic: read x, w, bias, residual once, write y once

where the reference runs the convolution, then bias, residual and ReLU as separate kernels (each one more read and
write of y). Applies to the ResNet pattern (BN folded into the bias, residual added before the ReLU); other
activations, residual after the activation, asymmetric or automatic padding, and non-2-D convolutions are
refused with the reason, and cuDNN configurations it cannot fuse fail while timing and are rejected there.
"""

import torch

from .registry import tactic
from .torch_fused import epilogue_operands


@tactic("FusedConv", name="cudnn_fused_relu", configs=[{"layout": "nchw"}, {"layout": "nhwc"}], priority=-160)
class FusedConvCudnnRelu:
    @staticmethod
    def supports(layer, device):
        a = layer.attrs
        if device.type != "cuda":
            return "cuDNN's fused convolution kernels run on CUDA devices only"
        if a.get("activation") != "Relu":
            return f"cuDNN fuses only ReLU (this epilogue's activation: {a.get('activation')})"
        if len(layer.inputs) > 3 and layer.inputs[3] and not a.get("residual_first"):
            return "the residual is added after the activation; cuDNN adds it before the ReLU"
        if a.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
            return f"auto_pad {a.get('auto_pad')} is resolved per shape by the reference only"
        pads = a.get("pads") or [0, 0, 0, 0]
        if len(pads) != 4 or list(pads[:2]) != list(pads[2:]):
            return f"only symmetric 2-D padding maps onto cuDNN's (pads {list(pads)})"
        ks = a.get("kernel_shape")
        if ks is not None and len(ks) != 2:
            return f"only 2-D convolutions (kernel_shape {list(ks)})"
        return None

    @staticmethod
    def build(layer, cfg, device):
        a = layer.attrs
        stride = list(a.get("strides") or [1, 1])
        dilation = list(a.get("dilations") or [1, 1])
        padding = list((a.get("pads") or [0, 0, 0, 0])[:2])
        groups = int(a.get("group", 1))
        fmt = torch.channels_last if cfg.get("layout") == "nhwc" else torch.contiguous_format
        kept: list = [None, None]

        def run(inputs):
            x, w, bias, residual = epilogue_operands(inputs)
            if x.dim() != 4:
                raise ValueError(f"cuDNN fused convolution needs a 4-D input, got {x.dim()}-D")
            if kept[0] is not w:
                kept[0], kept[1] = w, w.contiguous(memory_format=fmt)
            x = x.contiguous(memory_format=fmt)
            if residual is None:
                return [torch.cudnn_convolution_relu(x, kept[1], bias, stride, padding, dilation, groups)]
            residual = residual.contiguous(memory_format=fmt)
            return [torch.cudnn_convolution_add_relu(x, kept[1], residual, 1.0, bias, stride, padding, dilation,
                                                     groups)]
        return run
