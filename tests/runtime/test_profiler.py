"""Per-layer profile in trtexec's --exportProfile JSON shape, and layer info with ONNX origins and tactics."""

import json

import pytest
import torch

import tensorforge as tfg
from tensorforge.runtime import ExecutionContext
from tensorforge.runtime.profiler import format_layer_info, layer_info, profile_layers, write_layer_info

from rt_models import affine_relu


@pytest.fixture(scope="module")
def engine():
    return tfg.build(affine_relu(), device="cpu", shapes={"x": ((1, 4), (2, 4), (8, 4))}, optimization_level=0).data


def test_profile_json_shape(engine, tmp_path):
    prof = profile_layers(ExecutionContext(engine, "cpu"), {"x": torch.randn(3, 4)}, iterations=7)
    path = tmp_path / "profile.json"
    prof.write(path)
    data = json.loads(path.read_text())
    assert data[0] == {"count": 7}
    rows = data[1:]
    assert [r["name"] for r in rows] == [layer.name for layer in engine.layers]
    for r in rows:
        assert set(r) == {"name", "timeMs", "averageMs", "medianMs", "percentage"}
        assert r["timeMs"] > 0 and r["averageMs"] == pytest.approx(r["timeMs"] / 7)
        assert r["medianMs"] <= r["timeMs"]
    assert sum(r["percentage"] for r in rows) == pytest.approx(100.0)
    table = prof.format_table()
    assert table.splitlines()[0] == "=== Profile (7 iterations ) ===" and table.splitlines()[-1].endswith("Total")


def test_layer_info_names_origins_tactics_precision(engine, tmp_path):
    info = layer_info(engine)
    assert info["Bindings"] == ["x", "y"]
    by_origin = {tuple(l["Origin"]): l for l in info["Layers"]}
    assert set(by_origin) == {("n_mul",), ("n_add",), ("n_relu",), ("n_sub",)}
    relu = by_origin[("n_relu",)]
    layer = next(layer for layer in engine.layers if layer.origin == ["n_relu"])
    assert relu["LayerType"] == "Relu" and relu["TacticName"] == layer.tactic and relu["Precision"] == "float32"
    assert relu["Metadata"] == "[ONNX Layer: n_relu]" and relu["Inputs"][0]["Dimensions"] == [-1, 4]
    add = by_origin[("n_add",)]
    assert add["Weights"] == [{"Name": "b", "Count": 4}] and [i["Name"] for i in add["Inputs"]] != ["b"]
    path = tmp_path / "layers.json"
    write_layer_info(engine, path)
    assert json.loads(path.read_text()) == info
    text = format_layer_info(engine)
    assert f"tactic={layer.tactic}" in text and "onnx=[n_relu]" in text


def test_fused_layers_keep_every_onnx_origin():
    """At the default level the pointwise chain may be fused: the layer info still accounts for every ONNX node."""
    data = tfg.build(affine_relu(), device="cpu", shapes={"x": ((1, 4), (2, 4), (8, 4))}).data
    origins = [o for layer in layer_info(data)["Layers"] for o in layer["Origin"]]
    assert sorted(origins) == ["n_add", "n_mul", "n_relu", "n_sub"]
    for entry in layer_info(data)["Layers"]:
        assert entry["Metadata"] == f"[ONNX Layer: {', '.join(entry['Origin'])}]"
