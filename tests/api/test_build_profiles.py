"""tfg.build(shapes=[{...}, {...}]): one optimization profile per dict; each call runs under a profile its shapes
fit; outputs checked against onnxruntime."""

import numpy as np
import pytest
import torch

import tensorforge as tfg
from oracle import export, ort_run


def test_build_with_two_profiles_runs_shapes_of_each():
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh()).eval()
    data = export(model, (torch.rand(2, 4),), input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "n"}})
    engine = tfg.build(data, device="cpu", shapes=[{"x": ((1, 4), (2, 4), (4, 4))}, {"x": ((16, 4), (16, 4), (32, 4))}])
    assert [p["x"][0] for p in engine.data.profiles] == [(1, 4), (16, 4)]
    for n in (3, 20):
        x = np.random.default_rng(n).standard_normal((n, 4)).astype(np.float32)
        np.testing.assert_allclose(engine.run({"x": x})["y"], ort_run(data, {"x": x})["y"], rtol=1e-5, atol=1e-6)
    with pytest.raises(Exception, match="outside profile"):
        engine.run({"x": np.zeros((8, 4), np.float32)})               # between the two profiles
    with pytest.raises(Exception, match="one non-empty"):
        tfg.build(data, device="cpu", shapes=[{}])
