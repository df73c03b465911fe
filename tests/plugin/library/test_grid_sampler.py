"""grid_sampler: the Triton kernel (TRITON_INTERPRET=1) against torch.nn.functional.grid_sample for every
supported mode, padding and alignment, fp16, the bicubic refusal, and the plugin through an ONNX model."""

import pytest
import torch
from onnx import TensorProto

import tensorforge as tfg
import tensorforge.plugin as tfp
from tensorforge.util.errors import PluginError
from tensorforge.plugin.library.grid_sampler.reference import grid_sampler
from plugin_helpers import custom_model, one_line


def _plugin():
    tfp.discover("grid_sampler")
    return tfp.get("mmcv::grid_sampler")


def _inputs(dtype=torch.float32):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 5, 8, generator=g).to(dtype)
    grid = (torch.rand(2, 4, 6, 2, generator=g) * 2.6 - 1.3)          # some points outside [-1, 1]
    grid[0, 0, 0] = torch.tensor([1.0, -1.0])                          # exact corners
    grid[0, 0, 1] = torch.tensor([-0.75, 0.0])                          # x → 0.5 (align=0): nearest ties to even
    grid[0, 0, 2] = torch.tensor([-0.25, 0.0])                          # x → 2.5
    return x, grid


@pytest.mark.parametrize("mode", [0, 1])
@pytest.mark.parametrize("padding", [0, 1, 2])
@pytest.mark.parametrize("align", [False, True])
def test_triton_matches_grid_sample(mode, padding, align):
    x, grid = _inputs()
    attrs = dict(interpolation_mode=mode, padding_mode=padding, align_corners=align)
    (got,) = _plugin().run([x, grid], attrs)
    torch.testing.assert_close(got, grid_sampler(x, grid, **attrs), rtol=1e-5, atol=1e-5)


def test_fp16():
    x, grid = _inputs(torch.float16)
    attrs = dict(interpolation_mode=0, padding_mode=1, align_corners=False)
    (got,) = _plugin().run([x, grid.half()], attrs)
    assert got.dtype == torch.float16
    torch.testing.assert_close(got.float(), grid_sampler(x.float(), grid.half().float(), **attrs), rtol=2e-3, atol=2e-3)


def test_bicubic_is_refused_in_one_line():
    x, grid = _inputs()
    with pytest.raises(PluginError) as e:
        _plugin().run([x, grid], dict(interpolation_mode=2, padding_mode=0, align_corners=False))
    assert "interpolation_mode 2" in one_line(e)


def test_onnx_node_builds_and_runs():
    F = TensorProto.FLOAT
    x, grid = _inputs()
    model = custom_model("grid_sampler", [("x", F, [2, 3, 5, 8]), ("grid", F, [2, 4, 6, 2])], [("y", F, None)],
                         domain="mmdeploy", interpolation_mode=0, padding_mode=2, align_corners=0)
    got = tfg.build(model, device="cpu").run({"x": x, "grid": grid})["y"]
    torch.testing.assert_close(got, grid_sampler(x, grid, interpolation_mode=0, padding_mode=2, align_corners=False),
                               rtol=1e-5, atol=1e-5)
