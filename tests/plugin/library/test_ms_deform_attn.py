"""MMCVMultiScaleDeformableAttention: Triton kernel (TRITON_INTERPRET=1) against the torch reference, the
reference against a plain loop over queries/heads/levels/points written here, and the plugin through ONNX
(spatial shapes and level starts as initializers, as exports carry them)."""

import torch
from onnx import TensorProto, numpy_helper

import tensorforge as tfg
import tensorforge.plugin as tfp
from tensorforge.plugin.library.ms_deform_attn.reference import ms_deform_attn
from plugin_helpers import custom_model

SHAPES = torch.tensor([[4, 5], [2, 3]])
STARTS = torch.tensor([0, 20])


def _inputs(bs=2, nq=3, heads=2, D=4, P=3, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    keys = int((SHAPES[:, 0] * SHAPES[:, 1]).sum())
    value = torch.randn(bs, keys, heads, D, generator=g).to(dtype)
    loc = (torch.rand(bs, nq, heads, 2, P, 2, generator=g) * 1.2 - 0.1).to(dtype)     # some points off the map
    attn = torch.softmax(torch.randn(bs, nq, heads, 2 * P, generator=g), -1).view(bs, nq, heads, 2, P).to(dtype)
    return value, loc, attn


def _bilinear(img, x, y):
    H, W = img.shape[:2]
    x, y = x * W - 0.5, y * H - 0.5
    x0, y0 = int(torch.floor(x)), int(torch.floor(y))
    total = torch.zeros(img.shape[2])
    for yy in (y0, y0 + 1):
        for xx in (x0, x0 + 1):
            if 0 <= yy < H and 0 <= xx < W:
                total += img[yy, xx] * (1 - abs(y - yy)) * (1 - abs(x - xx))
    return total


def test_reference_matches_plain_loops():
    value, loc, attn = _inputs(bs=1, nq=2)
    got = ms_deform_attn(value, SHAPES, STARTS, loc, attn)
    heads, D = value.shape[2], value.shape[3]
    for q in range(2):
        for h in range(heads):
            want = torch.zeros(D)
            for lvl, (H, W) in enumerate(SHAPES.tolist()):
                img = value[0, STARTS[lvl]:STARTS[lvl] + H * W, h].reshape(H, W, D)
                for p in range(loc.shape[4]):
                    want += attn[0, q, h, lvl, p] * _bilinear(img, *loc[0, q, h, lvl, p])
            torch.testing.assert_close(got[0, q, h * D:(h + 1) * D], want, rtol=1e-5, atol=1e-5)


def test_triton_matches_reference_fp32_and_fp16():
    tfp.discover("MMCVMultiScaleDeformableAttention")
    p = tfp.get("mmdeploy::MMCVMultiScaleDeformableAttention")
    for dtype, tol in ((torch.float32, 1e-5), (torch.float16, 3e-3)):
        value, loc, attn = _inputs(dtype=dtype)
        (got,) = p.run([value, SHAPES, STARTS, loc, attn], {"im2col_step": 64})
        assert got.dtype == dtype
        want = ms_deform_attn(value.float(), SHAPES, STARTS, loc.float(), attn.float())
        torch.testing.assert_close(got.float(), want, rtol=tol, atol=tol)


def test_onnx_node_builds_and_runs():
    value, loc, attn = _inputs()
    F = TensorProto.FLOAT
    inits = [numpy_helper.from_array(SHAPES.numpy(), "shapes"), numpy_helper.from_array(STARTS.numpy(), "starts")]
    model = custom_model("MMCVMultiScaleDeformableAttention",
                         [("value", F, list(value.shape)), ("loc", F, list(loc.shape)), ("attn", F, list(attn.shape))],
                         [("y", F, None)], domain="mmdeploy", initializers=inits,
                         node_inputs=["value", "shapes", "starts", "loc", "attn"], im2col_step=64)
    got = tfg.build(model, device="cpu").run({"value": value, "loc": loc, "attn": attn})["y"]
    torch.testing.assert_close(got, ms_deform_attn(value, SHAPES, STARTS, loc, attn), rtol=1e-5, atol=1e-5)
