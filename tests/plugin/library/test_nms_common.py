"""The Triton greedy-NMS sweep (TRITON_INTERPRET=1) against the torch greedy loop, for every IoU convention
the NMS plugins use, and the torch loop against hand-computed cases."""

import pytest
import torch

from tensorforge.plugin.library.nms_common import greedy_keep, iou_matrix, suppress


def _random_segments(S=3, M=10, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    xy = torch.rand(S, M, 2, generator=g) * 10
    wh = torch.rand(S, M, 2, generator=g) * 6 + 0.5
    boxes = torch.cat([xy, xy + wh], dim=-1).to(dtype)
    classes = torch.randint(0, 2, (S, M), generator=g, dtype=torch.int32)
    count = torch.tensor([M, M - 3, 0][:S], dtype=torch.int32)
    return boxes, classes, count


@pytest.mark.parametrize("strict,reorder,aware,inter,area", [
    (False, True, True, 0.0, 0.0),     # EfficientNMS_TRT
    (True, True, False, 1.0, 1.0),     # BatchedNMSDynamic_TRT, pixel boxes, Caffe semantics
    (True, False, False, 0.0, 0.0),    # mmdeploy TRTBatchedNMS
])
def test_triton_sweep_matches_torch(strict, reorder, aware, inter, area):
    boxes, classes, count = _random_segments()
    if reorder:
        boxes[0, ::3] = boxes[0, ::3][..., [2, 3, 0, 1]]          # some corners given swapped
    for thr in (0.1, 0.3):
        got = suppress(boxes, classes, count, thr, strict, reorder, aware, inter, area)
        want = greedy_keep(boxes, classes, count, thr, strict, reorder, aware, inter, area)
        assert torch.equal(got, want)
        assert not got[2].any() and not got[1, 7:].any()          # count bounds the segment


def test_triton_sweep_fp16_boxes():
    boxes, classes, count = _random_segments(dtype=torch.float16)
    got = suppress(boxes, classes, count, 0.2, False, True, True)
    assert torch.equal(got, greedy_keep(boxes, classes, count, 0.2, False, True, True))


def test_iou_and_greedy_by_hand():
    b = torch.tensor([[0., 0., 2., 2.], [1., 0., 3., 2.], [4., 4., 5., 5.], [0., 0., 2., 2.]])
    iou = iou_matrix(b, reorder=False, inter_offset=0.0, area_offset=0.0)
    assert iou[0, 1].item() == pytest.approx(2 / 6) and iou[0, 2].item() == 0 and iou[0, 3].item() == 1
    keep = greedy_keep(b[None], torch.zeros(1, 4, dtype=torch.int32), torch.tensor([4]), 0.3, True, False, False)
    assert keep.tolist() == [[True, False, True, False]]
    keep = greedy_keep(b[None], torch.zeros(1, 4, dtype=torch.int32), torch.tensor([4]), 0.5, True, False, False)
    assert keep.tolist() == [[True, True, True, False]]
    classes = torch.tensor([[0, 0, 0, 1]], dtype=torch.int32)     # same box, other class: kept when class-aware
    keep = greedy_keep(b[None], classes, torch.tensor([4]), 0.5, False, False, True)
    assert keep.tolist() == [[True, True, True, True]]
