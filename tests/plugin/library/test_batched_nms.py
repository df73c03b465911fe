"""BatchedNMSDynamic_TRT and mmdeploy's TRTBatchedNMS: Triton sweep (TRITON_INTERPRET=1) vs torch reference,
the references vs a plain per-class NMS written here, and both plugins through ONNX models."""

import pytest
import torch
from onnx import TensorProto

import tensorforge as tfg
from tensorforge.plugin.library.batched_nms.reference import batched_nms
from tensorforge.plugin.library.trt_batched_nms.reference import trt_batched_nms
from plugin_helpers import custom_model

F, I32 = TensorProto.FLOAT, TensorProto.INT32
TRT = dict(shareLocation=True, backgroundLabelId=-1, numClasses=3, topK=8, keepTopK=7, scoreThreshold=0.25,
           iouThreshold=0.4, isNormalized=False, clipBoxes=False)
MMD = dict(background_label_id=-1, num_classes=3, topk=8, keep_topk=7, score_threshold=0.25, iou_threshold=0.4,
           is_normalized=False, clip_boxes=False, return_index=True)


def _inputs(B=2, N=12, C=3, per_class=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    xy = torch.rand(B, N, C if per_class else 1, 2, generator=g) * 8
    boxes = torch.cat([xy, xy + torch.rand(xy.shape, generator=g) * 5 + 1], dim=-1)
    return boxes, torch.rand(B, N, C, generator=g)


def _iou(a, b, plus):
    iw = min(a[2], b[2]) - max(a[0], b[0]) + plus
    ih = min(a[3], b[3]) - max(a[1], b[1]) + plus
    if iw <= 0 or ih <= 0:
        return 0.0
    area = lambda t: (t[2] - t[0] + plus) * (t[3] - t[1] + plus)   # noqa: E731
    return float(iw * ih / (area(a) + area(b) - iw * ih))


def _plain(boxes, scores, topk, keep, thr, iou_thr, plus):
    """Loops only: per class filter/sort/topk, greedy NMS (IoU > thr), merge, best `keep`; (score, n, c) lists."""
    out = []
    for b in range(scores.shape[0]):
        kept = []
        for c in range(scores.shape[2]):
            cand = sorted([(scores[b, n, c].item(), n) for n in range(scores.shape[1]) if scores[b, n, c] > thr],
                          key=lambda t: -t[0])[:topk]
            mine = []
            for s, n in cand:
                box = boxes[b, n, 0 if boxes.shape[2] == 1 else c].tolist()
                if all(_iou(boxes[b, m, 0 if boxes.shape[2] == 1 else c].tolist(), box, plus) <= iou_thr
                       for _, m in mine):
                    mine.append((s, n))
            kept += [(s, n, c) for s, n in mine]
        out.append(sorted(kept, key=lambda t: -t[0])[:keep])
    return out


@pytest.mark.parametrize("normalized,per_class", [(False, False), (True, True)])
def test_tensorrt_reference_matches_plain(normalized, per_class):
    boxes, scores = _inputs(per_class=per_class)
    attrs = {**TRT, "isNormalized": normalized, "shareLocation": not per_class}
    num, nb, ns, nc = batched_nms(boxes, scores, **attrs, force_reference=True)
    for b, kept in enumerate(_plain(boxes, scores, 8, 7, 0.25, 0.4, 0.0 if normalized else 1.0)):
        k = len(kept)
        assert num[b, 0].item() == k and nc.dtype == torch.float32
        assert nc[b, :k].tolist() == [float(c) for _, _, c in kept] and nc[b, k:].eq(-1).all()
        torch.testing.assert_close(ns[b, :k], torch.tensor([s for s, _, _ in kept]))
        want = torch.stack([boxes[b, n, 0 if not per_class else c] for _, n, c in kept])
        torch.testing.assert_close(nb[b, :k], want)


def test_mmdeploy_reference_matches_plain_and_index():
    boxes, scores = _inputs(per_class=True, seed=4)
    dets, labels, index = trt_batched_nms(boxes, scores, **MMD, force_reference=True)
    for b, kept in enumerate(_plain(boxes, scores, 8, 7, 0.25, 0.4, 0.0)):
        k = len(kept)
        assert labels[b, :k].tolist() == [c for _, _, c in kept] and labels[b, k:].eq(-1).all()
        assert index[b, :k].tolist() == [c * 12 + n for _, n, c in kept] and index[b, k:].eq(-1).all()
        torch.testing.assert_close(dets[b, :k, 4], torch.tensor([s for s, _, _ in kept]))
        assert dets[b, k:].eq(0).all()


@pytest.mark.parametrize("variant", [{}, {"isNormalized": True, "clipBoxes": True}, {"backgroundLabelId": 0},
                                     {"caffeSemantics": False}])
def test_tensorrt_triton_matches_reference(variant):
    boxes, scores = _inputs(seed=1)
    attrs = {**TRT, **variant}
    for g, w in zip(batched_nms(boxes, scores, **attrs), batched_nms(boxes, scores, **attrs, force_reference=True)):
        torch.testing.assert_close(g, w)


@pytest.mark.parametrize("per_class", [False, True])
def test_mmdeploy_triton_matches_reference(per_class):
    boxes, scores = _inputs(per_class=per_class, seed=2)
    for g, w in zip(trt_batched_nms(boxes, scores, **MMD), trt_batched_nms(boxes, scores, **MMD, force_reference=True)):
        torch.testing.assert_close(g, w)


def test_onnx_nodes_build_and_run():
    boxes, scores = _inputs()
    model = custom_model("BatchedNMSDynamic_TRT", [("boxes", F, [2, 12, 1, 4]), ("scores", F, [2, 12, 3])],
                         [("num_detections", I32, None), ("nmsed_boxes", F, None), ("nmsed_scores", F, None),
                          ("nmsed_classes", F, None)], domain="", **{k: int(v) if isinstance(v, bool) else v
                                                                    for k, v in TRT.items()})
    got = tfg.build(model, device="cpu").run({"boxes": boxes, "scores": scores})
    for name, w in zip(["num_detections", "nmsed_boxes", "nmsed_scores", "nmsed_classes"],
                       batched_nms(boxes, scores, **TRT, force_reference=True)):
        torch.testing.assert_close(got[name], w)
    attrs = {k: int(v) if isinstance(v, bool) else v for k, v in MMD.items() if k != "return_index"}
    model = custom_model("TRTBatchedNMS", [("boxes", F, [2, 12, 1, 4]), ("scores", F, [2, 12, 3])],
                         [("dets", F, None), ("labels", I32, None)], domain="mmdeploy", **attrs)
    got = tfg.build(model, device="cpu").run({"boxes": boxes, "scores": scores})
    dets, labels, _ = trt_batched_nms(boxes, scores, **{**MMD, "return_index": False}, force_reference=True)
    torch.testing.assert_close(got["dets"], dets)
    torch.testing.assert_close(got["labels"], labels)
