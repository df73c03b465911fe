"""custom::LeakyReLU: the seed's second custom activation, y = max(x, 0) + alpha·min(x, 0).

Attribute `alpha` (float, default 0.01, ONNX LeakyRelu's name). Kernel: kernel.py (Triton); reference: reference.py.
"""

from ...desc import TensorDesc
from ...plugin import Plugin
from ...triton_util import use_triton
from ....util.errors import PluginError
from .reference import leaky_relu_reference


def describe(x: TensorDesc, alpha: float = 0.01) -> TensorDesc:
    if not x.dtype.is_floating_point:
        raise PluginError(f"LeakyReLU: input must be floating point, got {x.dtype}", "cast the input to float")
    return x.like()


PLUGIN = Plugin("custom::LeakyReLU", describe)


@PLUGIN.impl
def leaky_relu_impl(x, out, alpha, stream=None, config=None):
    if use_triton(x):
        from .kernel import launch
        cfg = config or {}
        launch(x.contiguous(), out, alpha, cfg.get("BLOCK", 1024), cfg.get("num_warps", 4))
    else:
        out.copy_(leaky_relu_reference(x, alpha))


PLUGIN.reference(leaky_relu_reference)


@PLUGIN.autotune
def leaky_relu_configs():
    return [{"BLOCK": 1024, "num_warps": 4}, {"BLOCK": 4096, "num_warps": 8}]


PLUGINS = [PLUGIN]
