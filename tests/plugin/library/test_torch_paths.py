"""Without a GPU and without TRITON_INTERPRET, every library plugin's impl takes its torch path: the outputs
must equal the plugin's reference exactly as the Triton path's do (checked here for each plugin)."""

import pytest
import torch

import tensorforge.plugin as tfp

g = torch.Generator().manual_seed(0)
_xy = torch.rand(2, 10, 1, 2, generator=g) * 8
BOXES = torch.cat([_xy, _xy + torch.rand(2, 10, 1, 2, generator=g) * 4 + 1], -1)
SCORES = torch.rand(2, 10, 3, generator=g)
ROIS = torch.tensor([[0, 1.0, 1.0, 5.0, 4.0], [1, 0.5, 2.0, 6.0, 6.0]])

CASES = {
    "MyGelu": ("custom::MyGelu", [torch.randn(3, 7, generator=g)], {"approximate": "tanh"}),
    "LeakyReLU": ("custom::LeakyReLU", [torch.randn(3, 7, generator=g)], {"alpha": 0.2}),
    "EfficientNMS_TRT": ("EfficientNMS_TRT", [BOXES[:, :, 0], SCORES],
                         dict(score_threshold=0.2, iou_threshold=0.5, max_output_boxes=5)),
    "BatchedNMSDynamic_TRT": ("BatchedNMSDynamic_TRT", [BOXES, SCORES],
                              dict(numClasses=3, topK=6, keepTopK=5, scoreThreshold=0.2, iouThreshold=0.5)),
    "TRTBatchedNMS": ("mmdeploy::TRTBatchedNMS", [BOXES, SCORES],
                      dict(num_classes=3, topk=6, keep_topk=5, score_threshold=0.2, iou_threshold=0.5)),
    "MMCVRoiAlign": ("mmcv::MMCVRoiAlign", [torch.randn(2, 3, 8, 8, generator=g), ROIS],
                     dict(output_height=2, output_width=2, sampling_ratio=0)),
    "grid_sampler": ("mmcv::grid_sampler", [torch.randn(1, 2, 4, 5, generator=g),
                                            torch.rand(1, 3, 3, 2, generator=g) * 2 - 1], {"padding_mode": 2}),
    "MMCVModulatedDeformConv2d": ("mmcv::MMCVModulatedDeformConv2d",
                                  [torch.randn(1, 2, 5, 5, generator=g), torch.randn(1, 18, 5, 5, generator=g),
                                   torch.rand(1, 9, 5, 5, generator=g), torch.randn(3, 2, 3, 3, generator=g)],
                                  dict(padding=[1, 1])),
    "MMCVMultiScaleDeformableAttention": ("mmdeploy::MMCVMultiScaleDeformableAttention",
                                          [torch.randn(1, 6, 2, 4, generator=g), torch.tensor([[2, 3]]),
                                           torch.tensor([0]), torch.rand(1, 3, 2, 1, 2, 2, generator=g),
                                           torch.rand(1, 3, 2, 1, 2, generator=g)], {}),
}


@pytest.mark.parametrize("op_type", sorted(CASES))
def test_torch_path_equals_reference(op_type, monkeypatch):
    ident, inputs, raw = CASES[op_type]
    assert tfp.discover(op_type)
    p = tfp.get(ident)
    attrs = p.typed_attrs(raw)
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    assert not tfp.use_triton(inputs[0])
    got = p.run(inputs, attrs)
    want = p.run_reference(inputs, attrs)
    assert len(got) >= len(want) and len(want) >= 1
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)
