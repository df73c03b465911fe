"""MatMulEpilogue → MatMulEpilogue ⇒ TwoLayerMLP (passes/rules/two_layer_mlp.py): fires for a squeeze-excite block's
two fully connected layers (after conv_as_gemm made them GEMMs), numerics against onnxruntime and the unfused
build, the engine file round trip; negative cases with their reasons (wide hidden layer, residual, many rows, an
MLP that does not read a pooled image)."""

import numpy as np
import pytest
import torch

from fusion_helpers import check_fused, export_quiet, feeds_for, ops
from se_blocks import InvertedResidualSE


def _build(module, shape, seed=0):
    torch.manual_seed(seed)
    data = export_quiet(module.eval(), (torch.randn(*shape),), opset=17)
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    engine, text = check_fused(data, feeds_for(data, x))
    return data, x, engine, text


def test_squeeze_excite_mlp_is_one_layer(tmp_path):
    data, x, engine, _ = _build(InvertedResidualSE(), (2, 8, 7, 7))
    mlp = [layer for layer in engine.data.layers if layer.op == "TwoLayerMLP"]
    assert len(mlp) == 1 and "MatMulEpilogue" not in ops(engine)
    a = mlp[0].attrs
    assert (a["activation1"], a["activation2"], a["trans_b1"], a["trans_b2"]) == ("Relu", "Sigmoid", 1, 1)
    assert mlp[0].tactic.startswith("twolayermlp.pair_")      # on the CPU: the two GEMMs as before
    engine.save(tmp_path / "mlp.tfg")
    import tensorforge as tfg
    loaded = tfg.load(tmp_path / "mlp.tfg", device="cpu")
    feeds = feeds_for(data, x)
    np.testing.assert_array_equal(list(loaded.run(dict(feeds)).values())[0],
                                  list(engine.run(dict(feeds)).values())[0])


class _PooledMlp(torch.nn.Module):
    """GAP → flatten → Linear → ReLU → Linear [+ the pooled vector] → sigmoid: a squeeze-excite MLP written with
    Linear layers (the pooled image read through a view)."""

    def __init__(self, c, hidden, residual=False):
        super().__init__()
        self.fc1, self.fc2, self.residual = torch.nn.Linear(c, hidden), torch.nn.Linear(hidden, c), residual

    def forward(self, x):
        p = torch.flatten(torch.nn.functional.adaptive_avg_pool2d(x, 1), 1)
        y = self.fc2(torch.relu(self.fc1(p)))
        return torch.sigmoid(y + p if self.residual else y)


class _Mlp(torch.nn.Module):
    def __init__(self, c, hidden):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(c, hidden), torch.nn.Linear(hidden, c)

    def forward(self, x):
        return torch.sigmoid(self.fc2(torch.relu(self.fc1(x))))


def test_pooled_mlp_of_linear_layers_fuses():
    _, _, engine, _ = _build(_PooledMlp(16, 8), (3, 16, 4, 4))
    assert ops(engine).count("TwoLayerMLP") == 1 and "MatMulEpilogue" not in ops(engine)


@pytest.mark.parametrize("module,shape,reason", [
    (InvertedResidualSE(hidden=600, squeeze=300), (1, 8, 5, 5), "hidden width 300 > 256"),
    (_PooledMlp(16, 8, residual=True), (3, 16, 4, 4), "adds a residual"),
    (_PooledMlp(16, 8), (300, 16, 2, 2), "300 rows > 256"),
    (_Mlp(16, 32), (4, 16), "not a squeeze-excite MLP"),
], ids=["wide-hidden", "residual", "many-rows", "not-pooled"])
def test_two_layer_mlp_rejections(module, shape, reason):
    _, _, engine, text = _build(module, shape)
    assert "TwoLayerMLP" not in ops(engine) and reason in text
