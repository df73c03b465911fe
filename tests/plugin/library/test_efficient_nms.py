"""EfficientNMS_TRT: Triton sweep (TRITON_INTERPRET=1) vs the torch reference, the reference vs a plain
per-image NMS written here, and the plugin through an ONNX model (domain "TRT") built into an engine."""

import pytest
import torch
from onnx import TensorProto

import tensorforge as tfg
import tensorforge.plugin as tfp
from tensorforge.plugin.library.efficient_nms.reference import efficient_nms
from plugin_helpers import custom_model

ATTRS = dict(score_threshold=0.3, iou_threshold=0.45, max_output_boxes=6, background_class=-1,
             score_activation=False, class_agnostic=False, box_coding=0)


def _inputs(B=2, N=14, C=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    xy = torch.rand(B, N, 2, generator=g) * 8
    boxes = torch.cat([xy, xy + torch.rand(B, N, 2, generator=g) * 5 + 1], dim=-1)
    scores = torch.rand(B, N, C, generator=g)
    return boxes, scores


def _plain_nms(boxes, scores, thr, iou_thr, k, agnostic):
    """Per image: sort candidates, greedy suppression with IoU ≥ thr, first k kept (a second, loop-only oracle)."""
    out = []
    for b in range(boxes.shape[0]):
        cand = [(scores[b, n, c].item(), n, c) for n in range(boxes.shape[1]) for c in range(scores.shape[2])
                if scores[b, n, c] >= thr]
        cand.sort(key=lambda t: -t[0])
        kept = []
        for s, n, c in cand:
            ok = True
            for _, m, d in kept:
                if (agnostic or d == c) and _iou(boxes[b, n], boxes[b, m]) >= iou_thr:
                    ok = False
                    break
            if ok:
                kept.append((s, n, c))
        out.append(kept[:k])
    return out


def _iou(a, b):
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = iw * ih
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return float(inter / union)


@pytest.mark.parametrize("agnostic", [False, True])
def test_reference_matches_plain_nms(agnostic):
    boxes, scores = _inputs()
    num, det_boxes, det_scores, det_classes = efficient_nms(boxes, scores, **{**ATTRS, "class_agnostic": agnostic},
                                                            force_reference=True)
    want = _plain_nms(boxes, scores, 0.3, 0.45, 6, agnostic)
    for b, kept in enumerate(want):
        assert num[b, 0].item() == len(kept)
        assert det_classes[b, :len(kept)].tolist() == [c for _, _, c in kept]
        torch.testing.assert_close(det_scores[b, :len(kept)], torch.tensor([s for s, _, _ in kept]))
        torch.testing.assert_close(det_boxes[b, :len(kept)], boxes[b, [n for _, n, _ in kept]])
        assert det_scores[b, len(kept):].eq(0).all() and det_classes[b, len(kept):].eq(0).all()


@pytest.mark.parametrize("variant", [{}, {"class_agnostic": True}, {"score_activation": True, "score_threshold": 0.6},
                                     {"box_coding": 1}, {"background_class": 0}])
def test_triton_matches_reference(variant):
    boxes, scores = _inputs(seed=1)
    attrs = {**ATTRS, **variant}
    got = efficient_nms(boxes, scores, **attrs)
    want = efficient_nms(boxes, scores, **attrs, force_reference=True)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        torch.testing.assert_close(g, w)


def test_fused_box_decoder_and_per_class_boxes_and_fp16():
    boxes, scores = _inputs(seed=2)
    anchors = _inputs(B=1, seed=3)[0]
    deltas = torch.randn_like(boxes) * 0.1
    for args in [(deltas, scores, anchors), (boxes[:, :, None].expand(-1, -1, 3, -1).contiguous(), scores, None),
                 (boxes.half(), scores.half(), None)]:
        got = efficient_nms(*args, **ATTRS)
        want = efficient_nms(*args, **ATTRS, force_reference=True)
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w)


def test_onnx_node_builds_and_runs():
    boxes, scores = _inputs()
    F = TensorProto.FLOAT
    model = custom_model("EfficientNMS_TRT", [("boxes", F, [2, 14, 4]), ("scores", F, [2, 14, 3])],
                         [("num_detections", TensorProto.INT32, None), ("detection_boxes", F, None),
                          ("detection_scores", F, None), ("detection_classes", TensorProto.INT32, None)],
                         domain="TRT", plugin_version="1", **ATTRS)
    engine = tfg.build(model, device="cpu")
    assert tfp.get("EfficientNMS_TRT").version == "1"
    got = engine.run({"boxes": boxes, "scores": scores})
    want = efficient_nms(boxes, scores, **ATTRS, force_reference=True)
    names = ["num_detections", "detection_boxes", "detection_scores", "detection_classes"]
    for name, w in zip(names, want):
        torch.testing.assert_close(got[name], w)
