"""gpu_check section 1: every plugin of tensorforge/plugin/library at realistic sizes, Triton impl vs torch reference.

Each plugin is pulled from the library the way the parser does (`tfp.discover(op_type)`), attributes are typed by
the plugin itself (`p.typed_attrs`), and `p.run(inputs, attrs, cfg)` runs its impl (Triton on CUDA) for every
autotune config; `p.run_reference` is the oracle on the same device. fp16 outputs are compared with the reference
run on the same fp16 values widened to fp32; NMS outputs (integer decisions) must match exactly in both dtypes.
A library folder without a case here is a failing row, so a new plugin cannot be skipped silently.
"""

import math

import torch

import tensorforge.plugin as tfp
from tensorforge.plugin.library import LIBRARY

from gpu_check_common import check_against_reference, guard, shape_text

FLOAT = dict(fp32=dict(rtol=1e-5, atol=1e-5), fp16=dict(rtol=2e-3, atol=1e-3, scale=2e-3))
SUMS = dict(fp32=dict(rtol=1e-4, atol=1e-5, scale=1e-5), fp16=dict(rtol=1e-2, atol=1e-3, scale=3e-3))
EXACT = dict(fp32=dict(rtol=0.0, atol=0.0), fp16=dict(rtol=0.0, atol=0.0))
DTYPES = {"fp32": torch.float32, "fp16": torch.float16}


def _gen(dev, seed=0):
    """A seeded generator on the device (none on 'meta', where the tests check the full-size cases' shapes)."""
    return None if dev.type == "meta" else torch.Generator(device=dev).manual_seed(seed)


def gelu(dt, dev, smoke, approximate):
    x = torch.randn(*((3, 1111) if smoke else (8192, 8192)), generator=_gen(dev), device=dev) * 3
    return [x.to(dt)], {"approximate": approximate}


def leaky_relu(dt, dev, smoke):
    x = torch.randn(*((5, 333) if smoke else (8192, 8192)), generator=_gen(dev), device=dev)
    return [x.to(dt)], {"alpha": 0.1}


def _detections(dt, dev, smoke, per_anchor_dim: bool):
    """YOLO-like head output: B images × N anchors × C classes, most scores tiny (a few hundred above 0.25 per
    image), boxes in pixels (640-ish image, 4–100 px wide) so that many overlap."""
    B, N, C = (2, 40, 3) if smoke else (8, 10000, 80)
    g = _gen(dev, 1)
    shape = (B, N, 1, 2) if per_anchor_dim else (B, N, 2)
    xy = torch.rand(*shape, generator=g, device=dev) * (12 if smoke else 600)
    wh = torch.rand(*shape, generator=g, device=dev) * (6 if smoke else 96) + (1 if smoke else 4)
    boxes = torch.cat([xy, xy + wh], dim=-1)
    scores = torch.rand(B, N, C, generator=g, device=dev) if smoke else \
        torch.sigmoid(torch.randn(B, N, C, generator=g, device=dev) * 2 - 7.2)
    return boxes.to(dt), scores.to(dt), (B, N, C)


def efficient_nms(dt, dev, smoke):
    boxes, scores, _ = _detections(dt, dev, smoke, False)
    return [boxes, scores], dict(score_threshold=0.25, iou_threshold=0.45, max_output_boxes=6 if smoke else 100)


def batched_nms(dt, dev, smoke):
    boxes, scores, (_, _, C) = _detections(dt, dev, smoke, True)
    return [boxes, scores], dict(numClasses=C, topK=8 if smoke else 1000, keepTopK=7 if smoke else 100,
                                 scoreThreshold=0.25, iouThreshold=0.5, isNormalized=False, clipBoxes=False)


def trt_batched_nms(dt, dev, smoke):
    boxes, scores, (_, _, C) = _detections(dt, dev, smoke, True)
    return [boxes, scores], dict(num_classes=C, topk=8 if smoke else 1000, keep_topk=7 if smoke else 100,
                                 score_threshold=0.25, iou_threshold=0.5, is_normalized=False, clip_boxes=False,
                                 return_index=True)


def roi_align(dt, dev, smoke, mode):
    """Mask R-CNN's P2 level of a 1088×800 image (stride 4), 1000 proposals of 8–308 px."""
    N, C, H, W, K = (2, 5, 9, 11, 6) if smoke else (2, 256, 200, 272, 1000)
    scale = 1.0 if smoke else 0.25
    g = _gen(dev, 2)
    x = torch.randn(N, C, H, W, generator=g, device=dev)
    xy = torch.rand(K, 2, generator=g, device=dev) * torch.tensor([W / scale, H / scale], device=dev) * 0.8
    wh = torch.rand(K, 2, generator=g, device=dev) * (6 if smoke else 300) + (1 if smoke else 8)
    batch = torch.randint(0, N, (K, 1), generator=g, device=dev).float()
    rois = torch.cat([batch, xy, xy + wh], dim=1)
    attrs = dict(output_height=3 if smoke else 7, output_width=2 if smoke else 7, spatial_scale=scale,
                 sampling_ratio=0, mode=mode, aligned=True)
    return [x.to(dt), rois], attrs


def grid_sampler(dt, dev, smoke, padding, align):
    N, C, H, W = (2, 3, 5, 8) if smoke else (8, 64, 128, 128)
    g = _gen(dev, 3)
    x = torch.randn(N, C, H, W, generator=g, device=dev)
    grid = torch.rand(N, H, W, 2, generator=g, device=dev) * 2.2 - 1.1          # some points outside the image
    return [x.to(dt), grid.to(dt)], dict(interpolation_mode=0, padding_mode=padding, align_corners=align)


def deform_conv(dt, dev, smoke, stride, dg, groups):
    """DCNv2 in a ResNet-50 res4 bottleneck (256 → 256 channels, 3×3) at 64×64, batch 2."""
    N, Cin, H, W, Cout = (2, 4, 6, 7, 6) if smoke else (2, 256, 64, 64, 256)
    k, pad = 3, 1
    Ho, Wo = (H + 2 * pad - k) // stride + 1, (W + 2 * pad - k) // stride + 1
    g = _gen(dev, 4)
    x = torch.randn(N, Cin, H, W, generator=g, device=dev)
    offset = torch.randn(N, 2 * dg * k * k, Ho, Wo, generator=g, device=dev) * 2
    mask = torch.sigmoid(torch.randn(N, dg * k * k, Ho, Wo, generator=g, device=dev))
    weight = torch.randn(Cout, Cin // groups, k, k, generator=g, device=dev) / math.sqrt(Cin // groups * k * k)
    bias = torch.randn(Cout, generator=g, device=dev)
    attrs = dict(stride=[stride, stride], padding=[pad, pad], dilation=[1, 1], groups=groups, deform_groups=dg)
    return [t.to(dt) for t in (x, offset, mask, weight, bias)], attrs


def ms_deform_attn(dt, dev, smoke, queries):
    """Deformable DETR (ResNet-50, 1333×800 input): 4 levels, 8 heads × 32 channels, 4 points; the encoder's
    queries are its keys (22 223), the decoder's are 300."""
    shapes = [[4, 5], [2, 3]] if smoke else [[100, 167], [50, 84], [25, 42], [13, 21]]
    bs, heads, D, P = (2, 2, 4, 3) if smoke else (2, 8, 32, 4)
    L = len(shapes)
    keys = sum(h * w for h, w in shapes)
    nq = 3 if smoke else (keys if queries == "encoder" else 300)
    g = _gen(dev, 5)
    value = torch.randn(bs, keys, heads, D, generator=g, device=dev)
    loc = torch.rand(bs, nq, heads, L, P, 2, generator=g, device=dev) * 1.1 - 0.05
    attn = torch.softmax(torch.randn(bs, nq, heads, L * P, generator=g, device=dev), -1).view(bs, nq, heads, L, P)
    spatial = torch.tensor(shapes, dtype=torch.int64, device=dev)
    starts = torch.cumsum(torch.tensor([0] + [h * w for h, w in shapes[:-1]], device=dev), 0)
    return [value.to(dt), spatial, starts, loc.to(dt), attn.to(dt)], dict(im2col_step=64)


# (library folder, op_type, plugin id, label, make(dt, dev, smoke), dtypes, tolerance)
CASES = [
    ("gelu", "MyGelu", "custom::MyGelu", "erf", lambda *a: gelu(*a, "none"), ("fp32", "fp16"), FLOAT),
    ("gelu", "MyGelu", "custom::MyGelu", "tanh", lambda *a: gelu(*a, "tanh"), ("fp32", "fp16"), FLOAT),
    ("leaky_relu", "LeakyReLU", "custom::LeakyReLU", "alpha=0.1", leaky_relu, ("fp32", "fp16"), FLOAT),
    ("efficient_nms", "EfficientNMS_TRT", "EfficientNMS_TRT", "yolo head", efficient_nms, ("fp32", "fp16"), EXACT),
    ("batched_nms", "BatchedNMSDynamic_TRT", "BatchedNMSDynamic_TRT", "per class", batched_nms, ("fp32", "fp16"),
     EXACT),
    ("trt_batched_nms", "TRTBatchedNMS", "mmdeploy::TRTBatchedNMS", "per class", trt_batched_nms, ("fp32", "fp16"),
     EXACT),
    ("roi_align", "MMCVRoiAlign", "mmcv::MMCVRoiAlign", "avg", lambda *a: roi_align(*a, "avg"), ("fp32", "fp16"),
     SUMS),
    ("roi_align", "MMCVRoiAlign", "mmcv::MMCVRoiAlign", "max", lambda *a: roi_align(*a, "max"), ("fp32",), SUMS),
    ("grid_sampler", "grid_sampler", "mmcv::grid_sampler", "zeros", lambda *a: grid_sampler(*a, 0, False),
     ("fp32", "fp16"), FLOAT),
    ("grid_sampler", "grid_sampler", "mmcv::grid_sampler", "border,align", lambda *a: grid_sampler(*a, 1, True),
     ("fp32",), FLOAT),
    ("grid_sampler", "grid_sampler", "mmcv::grid_sampler", "reflection", lambda *a: grid_sampler(*a, 2, False),
     ("fp32",), FLOAT),
    ("modulated_deform_conv", "MMCVModulatedDeformConv2d", "mmcv::MMCVModulatedDeformConv2d", "s1 dg1",
     lambda *a: deform_conv(*a, 1, 1, 1), ("fp32", "fp16"), SUMS),
    ("modulated_deform_conv", "MMCVModulatedDeformConv2d", "mmcv::MMCVModulatedDeformConv2d", "s2 dg2 g2",
     lambda *a: deform_conv(*a, 2, 2, 2), ("fp32",), SUMS),
    ("ms_deform_attn", "MMCVMultiScaleDeformableAttention", "mmdeploy::MMCVMultiScaleDeformableAttention", "encoder",
     lambda *a: ms_deform_attn(*a, "encoder"), ("fp32", "fp16"), SUMS),
    ("ms_deform_attn", "MMCVMultiScaleDeformableAttention", "mmdeploy::MMCVMultiScaleDeformableAttention", "decoder",
     lambda *a: ms_deform_attn(*a, "decoder"), ("fp32",), SUMS),
]


def _widen(inputs):
    return [t.float() if t is not None and t.dtype in (torch.float16, torch.bfloat16) else t for t in inputs]


def _body(ctx, folder, op_type, ident, make, dname, tol):
    def body(row):
        if not tfp.discover(op_type) and tfp.find(ident) is None:
            raise LookupError(f"tfp.discover({op_type!r}) registered nothing and {ident} is not registered")
        p = tfp.get(ident)
        inputs, raw = make(DTYPES[dname], ctx.device, ctx.smoke)
        attrs = p.typed_attrs(raw)
        row.shape = shape_text(*[t.shape for t in inputs if t is not None and t.dtype.is_floating_point][:2])
        widened = dname != "fp32" and tol is not EXACT
        check_against_reference(
            ctx, row, p.configs(), lambda cfg: p.run(inputs, attrs, cfg), lambda: p.run_reference(inputs, attrs),
            (lambda: p.run_reference(_widen(inputs), attrs)) if widened else None, **tol[dname])
    return body


def run(ctx, only: set | None = None) -> None:
    """One row per (case, dtype); `only`: library folder names to run (None = all)."""
    covered = set()
    for folder, op_type, ident, label, make, dtypes, tol in CASES:
        covered.add(folder)
        if only is not None and folder not in only:
            continue
        for dname in dtypes:
            guard(ctx, "plugins", f"{op_type} {label}", "", dname, _body(ctx, folder, op_type, ident, make, dname, tol))
    for folder in sorted(set(LIBRARY.values()) - covered):
        if only is None or folder in only:
            guard(ctx, "plugins", f"library/{folder}", "", "", _missing(folder))


def _missing(folder):
    def body(row):
        raise NotImplementedError(f"plugin folder {folder} has no case in bench/gpu_check_plugins.py: add one")
    return body


def names() -> list[str]:
    return sorted({c[0] for c in CASES} | set(LIBRARY.values()))
