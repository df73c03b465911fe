"""The seed model (GELU twice) through both exporters, against onnxruntime, before and after save/load."""

import torch
import onnx
import pytest

from oracle import check_against_ort, export


from seed_models import MyNet


@pytest.mark.parametrize("dynamo,opset,ops", [(False, 11, ["Div", "Erf", "Add", "Mul", "Mul"] * 2),
                                              (True, 20, ["Gelu", "Gelu"])])
def test_seed_model_matches_onnxruntime(tmp_path, dynamo, opset, ops):
    x = torch.randn(3, 257)
    model = export(MyNet(), (x,), opset=opset, dynamo=dynamo)
    assert [n.op_type for n in onnx.load_from_string(model).graph.node if n.op_type != "Constant"] == ops
    check_against_ort(model, {onnx.load_from_string(model).graph.input[0].name: x.numpy()}, tmp_path=tmp_path)
