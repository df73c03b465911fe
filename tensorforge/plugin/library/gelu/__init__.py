"""custom::MyGelu (alias CustomGelu): the seed's custom GELU, exported by an autograd Function whose symbolic
emits g.op("custom::MyGelu", x). Attribute `approximate` ("none" | "tanh", ONNX Gelu's name) is optional.

Kernel: kernel.py (Triton, elementwise, autotuned over BLOCK/num_warps). Reference: reference.py.
"""

from ...desc import TensorDesc
from ...plugin import Plugin
from ...triton_util import use_triton
from .reference import gelu_reference
from ....util.errors import PluginError


def describe(x: TensorDesc, approximate: str = "none") -> TensorDesc:
    if approximate not in ("none", "tanh"):
        raise PluginError(f"MyGelu: approximate must be 'none' or 'tanh', got {approximate!r}",
                          "export approximate='none' or 'tanh'")
    if not x.dtype.is_floating_point:
        raise PluginError(f"MyGelu: input must be floating point, got {x.dtype}", "cast the input to float")
    return x.like()


PLUGIN = Plugin("custom::MyGelu", describe, aliases=("CustomGelu",))


@PLUGIN.impl
def gelu_impl(x, out, approximate, stream=None, config=None):
    if use_triton(x):
        from .kernel import launch
        cfg = config or {}
        launch(x.contiguous(), out, approximate, cfg.get("BLOCK", 1024), cfg.get("num_warps", 4))
    else:
        out.copy_(gelu_reference(x, approximate))


PLUGIN.reference(gelu_reference)


@PLUGIN.autotune
def gelu_configs():
    return [{"BLOCK": 1024, "num_warps": 4}, {"BLOCK": 4096, "num_warps": 8}]


PLUGINS = [PLUGIN]
