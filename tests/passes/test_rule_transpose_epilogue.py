"""ConvNeXt's block tail, `layer_scale · Permute(0, 3, 1, 2)(Linear(…)) + input` (passes/rules/transpose_epilogue.py):
the per-channel scale folds into the second Linear's weight and bias, the residual joins its epilogue through the
inverse Transpose, and the PointwiseChain that multiplied and added goes. Oracle: onnxruntime on the exported graph
(and the unfused build, check_fused); negative cases keep the chain and log the reason."""

import numpy as np
import torch
from torch import nn

from fusion_helpers import check_fused, export_quiet, feeds_for, ops


class Block(nn.Module):
    """torchvision's CNBlock in eval mode: depthwise 7×7 → channels-last LayerNorm → Linear → GELU → Linear →
    NCHW → · layer_scale (C, 1, 1) → + input. `scale_shape` and `act2` make the negative cases."""

    def __init__(self, c=16, scale_shape=None, act2=False):
        super().__init__()
        self.dw = nn.Conv2d(c, c, 7, padding=3, groups=c)
        self.norm = nn.LayerNorm(c)
        self.fc1, self.fc2 = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)
        self.act2 = act2
        self.layer_scale = nn.Parameter(torch.rand(*(scale_shape or (c, 1, 1))) + 0.5)

    def forward(self, x):
        h = self.fc2(torch.nn.functional.gelu(self.fc1(self.norm(self.dw(x).permute(0, 2, 3, 1)))))
        if self.act2:
            h = torch.relu(h)
        return self.layer_scale * h.permute(0, 3, 1, 2) + x


def _build(**kw):
    torch.manual_seed(0)
    x = torch.randn(2, 16, 6, 5)
    model = export_quiet(Block(**kw).eval(), (x,), opset=17, dynamo=False)
    return check_fused(model, feeds_for(model, x.numpy()), rtol=1e-4, atol=1e-5)


def test_layer_scale_and_residual_join_the_second_linear():
    engine, _ = _build()
    names = ops(engine)
    assert "PointwiseChain" not in names and "Mul" not in names and "Add" not in names, names
    fc2 = [la for la in engine.data.layers if la.op == "MatMulEpilogue" and len(la.inputs) == 4 and la.inputs[3]]
    assert len(fc2) == 1 and fc2[0].attrs["activation"] == "none"
    back = next(la for la in engine.data.layers if fc2[0].inputs[3] in la.outputs)
    assert back.op == "Transpose" and list(back.attrs["perm"]) == [0, 2, 3, 1]     # the residual, channels-last
    after = [la for la in engine.data.layers if fc2[0].outputs[0] in la.inputs]
    assert [la.op for la in after] == ["Transpose"] and [o.name for o in engine.data.outputs] == after[0].outputs


def test_a_scale_along_another_axis_stays():
    engine, log = _build(scale_shape=(1, 6, 1))                 # varies along H, not the channels
    assert any(op in ops(engine) for op in ("PointwiseChain", "Mul"))
    assert "varies along an axis other than the channels'" in log


def test_an_activation_after_the_second_linear_stays():
    engine, log = _build(act2=True)
    assert any(op in ops(engine) for op in ("PointwiseChain", "Mul"))
    assert "the GEMM has an activation or a residual of its own" in log
