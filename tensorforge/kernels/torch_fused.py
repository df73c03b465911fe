"""Torch tactics for the fused ops: library kernels (cuBLAS, cuDNN, flash attention) plus in-place epilogues.

- Attention → F.scaled_dot_product_attention: flash / memory-efficient attention on CUDA (never writes the
  Sq×Sk matrix), a fused kernel on CPU. Traffic: q + k + v + mask + out. nan_to_zero zeroes NaN output rows
  (softmax rows are all-NaN or NaN-free; only a NaN inside v itself would read differently).
- LayerNormalization (Y only) → F.layer_norm: one kernel, float32 statistics for half inputs.
- MatMulEpilogue → addmm (the bias rides in the GEMM's β·C epilogue) then the activation and residual in
  place: one GEMM plus at most two in-place passes, no extra allocations.
- FusedConv → the convolution with its bias in one cuDNN/oneDNN call, then the epilogue in place.
Every tactic here runs on CPU and CUDA, and matches the op's reference within float rounding.
"""

import torch
import torch.nn.functional as F

from ..ir import get_spec
from .registry import tactic

_HALF = (torch.float16, torch.bfloat16)


def activation_(y: torch.Tensor, act: str, alpha: float, beta: float) -> torch.Tensor:
    """act(y), in place where torch has an in-place form."""
    if act == "none":
        return y
    if act == "Relu":
        return y.relu_()
    if act == "Sigmoid":
        return y.sigmoid_()
    if act == "Tanh":
        return y.tanh_()
    if act == "LeakyRelu":
        return F.leaky_relu_(y, alpha)
    if act == "Clip":
        return y.clamp_(alpha, beta)
    if act == "HardSigmoid":
        return y.mul_(alpha).add_(beta).clamp_(0, 1)
    if act == "HardSwish":
        return y.mul_((y / 6 + 0.5).clamp_(0, 1))
    if act == "Gelu":
        return F.gelu(y, approximate="tanh" if alpha == 1 else "none")
    if act == "Silu":
        return F.silu(y, inplace=True)
    if act == "Elu":
        return F.elu_(y, alpha)
    if act == "PRelu":
        raise ValueError("the PRelu epilogue needs its slope: use prelu_(y, slope)")
    raise ValueError(f"unknown epilogue activation {act!r}")


def prelu_(y: torch.Tensor, slope: torch.Tensor) -> torch.Tensor:
    """y where y ≥ 0, else y·slope, slope (C,) per channel of axis 1: torch's prelu kernel, one read and one
    write (into a new buffer: torch has no in-place prelu)."""
    return torch.prelu(y, slope.reshape(-1).to(y.dtype))


CONV_ATTRS = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")


def conv_attrs(attrs: dict) -> dict:
    """The Conv attributes among a FusedConv/FusedConvPool layer's attributes (the rest is its epilogue)."""
    return {k: attrs.get(k) for k in CONV_ATTRS if k in attrs}


def epilogue_operands(inputs: list) -> tuple:
    """(a, b, bias, residual) of a MatMulEpilogue / FusedConv / FusedConvPool layer; absent ones are None."""
    return (inputs[0], inputs[1], inputs[2] if len(inputs) > 2 else None,
            inputs[3] if len(inputs) > 3 else None)


def epilogue_(y, residual, act, alpha, beta, residual_first, slope=None):
    """y ← act(y [+ residual]) [+ residual], in place (y is a fresh GEMM/conv output); `slope` is PRelu's."""
    if residual is not None and residual_first:
        y = y.add_(residual)
    y = prelu_(y, slope) if act == "PRelu" else activation_(y, act, alpha, beta)
    if residual is not None and not residual_first:
        y = y.add_(residual)
    return y


@tactic("Attention", name="torch_sdpa", priority=5)
class TorchSDPA:
    @staticmethod
    def supports(layer, device):
        return None

    @staticmethod
    def build(layer, cfg, device):
        scale, nan_to_zero = layer.attrs.get("scale"), layer.attrs.get("nan_to_zero", 0)

        def run(inputs):
            q, k, v = inputs[:3]
            mask = inputs[3] if len(inputs) > 3 else None
            batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
            q, k, v = (t.expand(*batch, *t.shape[-2:]) for t in (q, k, v))
            if mask is not None:
                if mask.dim() < 2:          # SDPA wants a mask of rank ≥ 2
                    mask = torch.broadcast_to(mask, (q.shape[-2], k.shape[-2]))
                if mask.dtype != torch.bool:
                    mask = mask.to(q.dtype)
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
            if nan_to_zero:      # a softmax row is all-NaN or NaN-free, so its NaN output row is the guarded 0
                out = torch.where(torch.isnan(out), 0.0, out)
            return [out]
        return run


def layernorm_y_only_reason(layer) -> str | None:
    """Why a fast LayerNorm tactic (which computes Y only, statistics in float32) cannot run `layer`."""
    if len(layer.outputs) != 1 or not layer.outputs[0]:
        return "the layer also asks for Mean/InvStdDev (the fast kernels return Y only)"
    if layer.attrs.get("stash_type", 1) != 1:
        return f"stash_type={layer.attrs.get('stash_type')}"
    return None


@tactic("LayerNormalization", name="torch_layer_norm", priority=5)
class TorchLayerNorm:
    @staticmethod
    def supports(layer, device):
        return layernorm_y_only_reason(layer)

    @staticmethod
    def build(layer, cfg, device):
        axis, eps = int(layer.attrs.get("axis", -1)), float(layer.attrs.get("epsilon", 1e-5))

        def run(inputs):
            x, scale = inputs[0], inputs[1]
            bias = inputs[2] if len(inputs) > 2 else None
            shape = x.shape[axis % x.dim():]
            w = scale.to(x.dtype).expand(shape)
            b = bias.to(x.dtype).expand(shape) if bias is not None else None
            return [F.layer_norm(x, shape, w, b, eps)]
        return run


def epilogue_attrs(a: dict) -> tuple[str, float, float, int]:
    """(activation, alpha, beta, residual_first) of a MatMulEpilogue/FusedConv layer, with the ops' defaults."""
    return (a.get("activation", "none"), float(a.get("alpha", 0.0)), float(a.get("beta", 0.0)),
            int(a.get("residual_first", 0)))


def dense_order(t: torch.Tensor, dims=None) -> list[int] | None:
    """`dims` (default: all) outermost first by stride — the order t's memory walks them — when t permuted that
    way is contiguous (t is dense in a permuted layout), else None."""
    dims = list(range(t.dim())) if dims is None else list(dims)
    order = sorted(dims, key=lambda d: (-t.stride(d), d))
    rest = [d for d in range(t.dim()) if d not in dims]
    return order if t.permute(order + rest).is_contiguous() else None


def rows_in_memory_order(product):
    """Wrap `product(a, b, bias, residual) -> y` (a row-wise product: y[…, :] depends on a[…, :] only, B 2-D) so
    that an `a` whose leading dims are a permutation of a dense layout — a transposed activation, as ViT's
    Transpose(0, 1) before each projection — is multiplied in its memory order and y is returned as the same
    permutation of a dense result: a view where `a.reshape(-1, K)` would have copied a, and a y whose consumers
    (the Transpose back) see a dense tensor again. Traffic saved: one read and write of a per call. A product
    returning a tuple (a quantized GEMM's second output) has each output permuted alike."""
    def run(a, b, bias, residual):
        if b.dim() != 2 or a.dim() < 3 or a.stride(-1) != 1 or a.is_contiguous():
            return product(a, b, bias, residual)
        lead = dense_order(a, range(a.dim() - 1))
        if lead is None:
            return product(a, b, bias, residual)
        order = lead + [a.dim() - 1]
        a_mem = a.permute(order)
        if residual is not None:     # to a's leading dims (its own last dim kept: N, or 1 to broadcast)
            out_shape = (*a.shape[:-1], residual.shape[-1] if residual.dim() else 1)
            residual = torch.broadcast_to(residual, torch.broadcast_shapes(residual.shape, out_shape)).permute(order)
        y = product(a_mem, b, bias, residual)
        back = sorted(range(len(order)), key=order.__getitem__)
        return tuple(t.permute(back) for t in y) if isinstance(y, tuple) else y.permute(back)
    return run


@tactic("MatMulEpilogue", name="torch_addmm", priority=5)
class TorchMatMulEpilogue:
    @staticmethod
    def supports(layer, device):
        return None

    @staticmethod
    def build(layer, cfg, device):
        a_ = layer.attrs
        trans_b, scale = int(a_.get("trans_b", 0)), float(a_.get("scale", 1.0))
        act, alpha, beta, res_first = epilogue_attrs(a_)

        def run(inputs):
            a, b, bias, residual = epilogue_operands(inputs)
            if trans_b:
                b = b.transpose(-1, -2)
            return [product(a, b, bias, residual)]

        @rows_in_memory_order
        def product(a, b, bias, residual):
            if b.dim() == 2 and a.dim() >= 2:
                a2 = a.reshape(-1, a.shape[-1])
                if bias is not None:
                    y = torch.addmm(bias.reshape(-1).to(a.dtype), a2, b, alpha=scale)
                else:
                    y = torch.mm(a2, b)
                    if scale != 1.0:
                        y.mul_(scale)
                y = y.reshape(*a.shape[:-1], b.shape[-1])
            else:
                y = torch.matmul(a, b)
                if scale != 1.0:
                    y.mul_(scale)
                if bias is not None:
                    y = y.add_(bias) if torch.broadcast_shapes(y.shape, bias.shape) == y.shape else y + bias
            return epilogue_(y, residual, act, alpha, beta, res_first)
        return run


@tactic("FusedConv", name="torch_conv", priority=5)
class TorchFusedConv:
    @staticmethod
    def supports(layer, device):
        return None

    @staticmethod
    def build(layer, cfg, device):
        conv = get_spec("Conv").reference
        attrs = conv_attrs(layer.attrs)
        act, alpha, beta, res_first = epilogue_attrs(layer.attrs)

        def run(inputs):
            x, w, bias, residual = epilogue_operands(inputs)
            y = conv(x, w, bias, **attrs)
            slope = inputs[4] if len(inputs) > 4 else None
            return [epilogue_(y, residual, act, alpha, beta, res_first, slope)]
        return run


@tactic("FusedConvPool", name="torch_conv_pool", priority=5)
class TorchFusedConvPool:
    """FusedConv's torch path (cuDNN/oneDNN with bias, in-place epilogue), then the mean over the positions."""

    @staticmethod
    def supports(layer, device):
        return None

    @staticmethod
    def build(layer, cfg, device):
        conv = TorchFusedConv.build(layer, cfg, device)
        pool = get_spec("GlobalAveragePool").reference
        store_y = bool(layer.outputs and layer.outputs[0])

        def run(inputs):
            y = conv(inputs)[0]
            return [y if store_y else None, pool(y)]
        return run

