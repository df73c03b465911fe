"""mmcv::MMCVRoiAlign: the Triton kernel (TRITON_INTERPRET=1) against the torch reference, the reference against
the closed form on a linear feature map (bilinear sampling is exact there), and the plugin through ONNX."""

import pytest
import torch
from onnx import TensorProto

import tensorforge as tfg
import tensorforge.plugin as tfp
from tensorforge.plugin.library.roi_align.reference import roi_align
from plugin_helpers import custom_model

ROIS = torch.tensor([[0, 1.0, 1.5, 6.0, 5.0], [1, 0.0, 0.0, 7.0, 7.0], [1, 2.5, 3.0, 3.5, 9.5],
                     [0, -2.0, -1.0, 3.0, 2.0]])


def test_reference_is_exact_on_a_linear_map():
    H, W = 10, 12
    ys, xs = torch.meshgrid(torch.arange(H, dtype=torch.float32), torch.arange(W, dtype=torch.float32), indexing="ij")
    feat = torch.stack([2 * ys + 3 * xs + 1, -ys + 0.5 * xs])[None]        # [1, 2, H, W]
    rois = torch.tensor([[0, 1.0, 2.0, 7.0, 6.0]])
    out = roi_align(feat, rois, output_height=2, output_width=3, spatial_scale=1.0, sampling_ratio=2, aligned=True)
    sy, sx, bh, bw = 1.5, 0.5, 2.0, 2.0
    for ph in range(2):
        for pw in range(3):
            y, x = sy + (ph + 0.5) * bh, sx + (pw + 0.5) * bw
            assert out[0, 0, ph, pw].item() == pytest.approx(2 * y + 3 * x + 1, rel=1e-5)
            assert out[0, 1, ph, pw].item() == pytest.approx(-y + 0.5 * x, rel=1e-5, abs=1e-5)


@pytest.mark.parametrize("mode,aligned,ratio,scale", [("avg", True, 2, 1.0), ("avg", False, 0, 0.5),
                                                      ("max", True, 0, 1.0), ("max", False, 1, 0.25)])
def test_triton_matches_reference(mode, aligned, ratio, scale):
    x = torch.randn(2, 5, 9, 11)
    attrs = dict(output_height=3, output_width=2, spatial_scale=scale, sampling_ratio=ratio, mode=mode,
                 aligned=aligned)
    tfp.discover("MMCVRoiAlign")
    (got,) = tfp.get("mmcv::MMCVRoiAlign").run([x, ROIS], attrs)
    torch.testing.assert_close(got, roi_align(x, ROIS, **attrs), rtol=1e-5, atol=1e-5)


def test_triton_fp16():
    tfp.discover("MMCVRoiAlign")
    x = torch.randn(2, 3, 8, 8).half()
    attrs = dict(output_height=2, output_width=2, spatial_scale=1.0, sampling_ratio=2, mode="avg", aligned=True)
    (got,) = tfp.get("mmcv::MMCVRoiAlign").run([x, ROIS], attrs)
    assert got.dtype == torch.float16
    torch.testing.assert_close(got.float(), roi_align(x.float(), ROIS, **attrs), rtol=2e-3, atol=2e-3)


def test_onnx_node_with_mmcv_name_builds_and_runs():
    F = TensorProto.FLOAT
    x = torch.randn(2, 4, 8, 10)
    attrs = dict(output_height=2, output_width=3, spatial_scale=0.5, sampling_ratio=0, mode="avg", aligned=1)
    model = custom_model("MMCVRoiAlign", [("x", F, [2, 4, 8, 10]), ("rois", F, [4, 5])], [("y", F, None)],
                         domain="mmcv", **attrs)
    got = tfg.build(model, device="cpu").run({"x": x, "rois": ROIS})["y"]
    torch.testing.assert_close(got, roi_align(x, ROIS, **{**attrs, "aligned": True}), rtol=1e-5, atol=1e-5)
