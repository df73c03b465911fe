"""Without a GPU and without TRITON_INTERPRET, every library plugin's impl takes its torch path. That path calls the
plugin's own reference, so comparing the two checks nothing; each case here compares the torch path with an
oracle that shares no code with it: a closed form, plain Python loops written here (bilinear sampling, greedy
NMS), or torch's conv2d on inputs where deformable convolution reduces to it."""

import importlib.util
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import tensorforge.plugin as tfp

HERE = Path(__file__).resolve().parent


def _sibling(name):
    """A sibling test module (its plain-loop oracles), loaded from its file."""
    spec = importlib.util.spec_from_file_location(f"torch_paths_{name}", HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def torch_path(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")

    def run(op_type, ident, inputs, raw):
        tfp.discover(op_type)           # False when already registered (an earlier test); get() fails if absent
        p = tfp.get(ident)
        assert not tfp.use_triton(inputs[0])
        return p.run(inputs, p.typed_attrs(raw))
    return run


def test_gelu_tanh_closed_form(torch_path):
    x = torch.linspace(-6, 6, 101, dtype=torch.float64).float()
    (got,) = torch_path("MyGelu", "custom::MyGelu", [x], {"approximate": "tanh"})
    x64 = x.double()
    want = 0.5 * x64 * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x64 + 0.044715 * x64 ** 3)))
    torch.testing.assert_close(got.double(), want, rtol=1e-6, atol=1e-6)


def test_gelu_erf_closed_form(torch_path):
    x = torch.linspace(-6, 6, 101)
    (got,) = torch_path("MyGelu", "custom::MyGelu", [x], {"approximate": "none"})
    want = torch.tensor([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x.tolist()], dtype=torch.float64)
    torch.testing.assert_close(got.double(), want, rtol=1e-6, atol=1e-6)


def test_leaky_relu_closed_form(torch_path):
    x = torch.linspace(-3, 3, 61)
    (got,) = torch_path("LeakyReLU", "custom::LeakyReLU", [x], {"alpha": 0.2})
    want = torch.tensor([v if v >= 0 else 0.2 * v for v in x.double().tolist()], dtype=torch.float64)
    torch.testing.assert_close(got.double(), want, rtol=1e-7, atol=1e-7)


def _plain_grid_sample(x, grid):
    """Bilinear, zeros padding, align_corners=False, in loops: ix = ((gx + 1)·W − 1)/2."""
    N, C, H, W = x.shape
    out = torch.zeros(N, C, grid.shape[1], grid.shape[2], dtype=torch.float64)
    for n in range(N):
        for i in range(grid.shape[1]):
            for j in range(grid.shape[2]):
                gx, gy = grid[n, i, j].double().tolist()
                ix, iy = ((gx + 1) * W - 1) / 2, ((gy + 1) * H - 1) / 2
                x0, y0 = math.floor(ix), math.floor(iy)
                for yy in (y0, y0 + 1):
                    for xx in (x0, x0 + 1):
                        if 0 <= yy < H and 0 <= xx < W:
                            out[n, :, i, j] += x[n, :, yy, xx].double() * (1 - abs(iy - yy)) * (1 - abs(ix - xx))
    return out


def test_grid_sampler_plain_loops(torch_path):
    g = torch.Generator().manual_seed(0)
    x, grid = torch.randn(1, 2, 4, 5, generator=g), torch.rand(1, 3, 3, 2, generator=g) * 2.4 - 1.2
    (got,) = torch_path("grid_sampler", "mmcv::grid_sampler", [x, grid],
                        {"interpolation_mode": 0, "padding_mode": 0, "align_corners": False})
    torch.testing.assert_close(got.double(), _plain_grid_sample(x, grid), rtol=1e-5, atol=1e-5)


def test_roi_align_linear_map_closed_form(torch_path):
    """Bilinear sampling is exact on a linear map: each bin's average is the map at the bin centre."""
    H, W = 10, 12
    ys, xs = torch.meshgrid(torch.arange(H, dtype=torch.float32), torch.arange(W, dtype=torch.float32), indexing="ij")
    feat = torch.stack([2 * ys + 3 * xs + 1, -ys + 0.5 * xs])[None]
    rois = torch.tensor([[0, 1.0, 2.0, 7.0, 6.0]])
    (got,) = torch_path("MMCVRoiAlign", "mmcv::MMCVRoiAlign", [feat, rois],
                        dict(output_height=2, output_width=3, spatial_scale=1.0, sampling_ratio=2, aligned=1))
    for ph in range(2):
        for pw in range(3):
            y, x = 1.5 + (ph + 0.5) * 2.0, 0.5 + (pw + 0.5) * 2.0
            assert got[0, 0, ph, pw].item() == pytest.approx(2 * y + 3 * x + 1, rel=1e-5)
            assert got[0, 1, ph, pw].item() == pytest.approx(-y + 0.5 * x, rel=1e-5, abs=1e-5)


def test_modulated_deform_conv_reduces_to_conv2d(torch_path):
    """Zero offsets and a unit mask: exactly a convolution (torch's conv2d is the oracle)."""
    g = torch.Generator().manual_seed(1)
    x, w = torch.randn(1, 2, 5, 5, generator=g), torch.randn(3, 2, 3, 3, generator=g)
    offset, mask = torch.zeros(1, 18, 5, 5), torch.ones(1, 9, 5, 5)
    (got,) = torch_path("MMCVModulatedDeformConv2d", "mmcv::MMCVModulatedDeformConv2d", [x, offset, mask, w],
                        dict(padding=[1, 1]))
    torch.testing.assert_close(got, F.conv2d(x, w, padding=1), rtol=1e-4, atol=1e-4)


def test_ms_deform_attn_plain_loops(torch_path):
    m = _sibling("test_ms_deform_attn")
    value, loc, attn = m._inputs(bs=1, nq=2)
    (got,) = torch_path("MMCVMultiScaleDeformableAttention", "mmdeploy::MMCVMultiScaleDeformableAttention",
                        [value, m.SHAPES, m.STARTS, loc, attn], {})
    heads, D = value.shape[2], value.shape[3]
    for q in range(2):
        for h in range(heads):
            want = torch.zeros(D)
            for lvl, (H, W) in enumerate(m.SHAPES.tolist()):
                img = value[0, m.STARTS[lvl]:m.STARTS[lvl] + H * W, h].reshape(H, W, D)
                for p in range(loc.shape[4]):
                    want += attn[0, q, h, lvl, p] * m._bilinear(img, *loc[0, q, h, lvl, p])
            torch.testing.assert_close(got[0, q, h * D:(h + 1) * D], want, rtol=1e-5, atol=1e-5)


def test_efficient_nms_plain_loops(torch_path):
    m = _sibling("test_efficient_nms")
    boxes, scores = m._inputs()
    num, det_boxes, det_scores, det_classes = torch_path("EfficientNMS_TRT", "EfficientNMS_TRT", [boxes, scores],
                                                         m.ATTRS)
    for b, kept in enumerate(m._plain_nms(boxes, scores, 0.3, 0.45, 6, False)):
        assert num[b, 0].item() == len(kept)
        assert det_classes[b, :len(kept)].tolist() == [c for _, _, c in kept]
        torch.testing.assert_close(det_scores[b, :len(kept)], torch.tensor([s for s, _, _ in kept]))
        torch.testing.assert_close(det_boxes[b, :len(kept)], boxes[b, [n for _, n, _ in kept]])


def test_batched_nms_plain_loops(torch_path):
    m = _sibling("test_batched_nms")
    boxes, scores = m._inputs()
    num, nb, ns, nc = torch_path("BatchedNMSDynamic_TRT", "BatchedNMSDynamic_TRT", [boxes, scores],
                                 {**m.TRT, "isNormalized": False, "shareLocation": True})
    for b, kept in enumerate(m._plain(boxes, scores, 8, 7, 0.25, 0.4, 1.0)):
        k = len(kept)
        assert num[b, 0].item() == k
        assert nc[b, :k].tolist() == [float(c) for _, _, c in kept]
        torch.testing.assert_close(ns[b, :k], torch.tensor([s for s, _, _ in kept]))
        torch.testing.assert_close(nb[b, :k], torch.stack([boxes[b, n, 0] for _, n, _ in kept]))


def test_mmdeploy_batched_nms_plain_loops(torch_path):
    m = _sibling("test_batched_nms")
    boxes, scores = m._inputs(per_class=True, seed=4)
    dets, labels, index = torch_path("TRTBatchedNMS", "mmdeploy::TRTBatchedNMS", [boxes, scores], m.MMD)
    for b, kept in enumerate(m._plain(boxes, scores, 8, 7, 0.25, 0.4, 0.0)):
        k = len(kept)
        assert labels[b, :k].tolist() == [c for _, _, c in kept]
        assert index[b, :k].tolist() == [c * 12 + n for _, n, c in kept]
        torch.testing.assert_close(dets[b, :k, 4], torch.tensor([s for s, _, _ in kept]))
