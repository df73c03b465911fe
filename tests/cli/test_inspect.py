"""`tensorforge inspect` on an ONNX model (capability report without building), an engine (fused layers with
their ONNX origins, tactics, precisions), and a timing cache; text and --json; bad files give one line."""

import json

import onnx
import pytest
import torch
import torch.nn as nn
from onnx import TensorProto, helper

import tensorforge as tfg
from oracle import export
from tensorforge.builder.timing_cache import TimingCache
from tensorforge.cli.main import main


def _model(nodes, opsets=(("", 17),)):
    graph = helper.make_graph(nodes, "caps", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])
    model.ir_version = 8
    return model


def test_capability_report_lists_every_unsupported_node_with_its_reason(tmp_path, capsys):
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="ok"),
             helper.make_node("NoSuchOp", ["a"], ["b"], name="unknown_op"),
             helper.make_node("Sigmoid", ["b"], ["c"], name="downstream"),
             helper.make_node("Frob", ["x"], ["d"], name="custom", domain="acme"),
             helper.make_node("DepthToSpace", ["x"], ["e"], name="bad_mode", blocksize=2, mode="XYZ"),
             helper.make_node("Add", ["c", "d"], ["y"], name="sum")]
    path = tmp_path / "caps.onnx"
    onnx.save(_model(nodes, (("", 17), ("acme", 1))), path)
    assert main(["inspect", str(path)]) == 1
    out = capsys.readouterr().out
    assert "input  x: float32[N,4]" in out and "nodes: 6 (" in out
    assert "3 of 6 nodes cannot be imported" in out
    assert "[1] unknown_op (NoSuchOp): unsupported: " in out and "op NoSuchOp is not supported" in out
    assert "[3] custom (acme::Frob): unsupported: " in out and "no plugin is registered for acme::Frob" in out
    assert "[4] bad_mode (DepthToSpace): error: " in out and "mode 'XYZ' is not DCR or CRD" in out
    assert "downstream" not in out                      # Sigmoid itself is fine
    assert main(["inspect", str(path), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    cap = doc["capability"]
    assert doc["kind"] == "onnx" and not cap["supported"] and cap["nodes"] == 6
    assert [(p["index"], p["status"]) for p in cap["problems"]] == [(1, "unsupported"), (3, "unsupported"), (4, "error")]


def test_supported_model_exits_zero(tmp_path, capsys):
    path = tmp_path / "ok.onnx"
    onnx.save(_model([helper.make_node("Relu", ["x"], ["y"])]), path)
    assert main(["inspect", str(path)]) == 0
    assert "capability: all 1 nodes can be imported" in capsys.readouterr().out


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)
        self.gelu = nn.GELU()

    def forward(self, x):
        return self.gelu(self.gelu(self.fc(x)))


def test_engine_lists_layers_with_onnx_origins_tactics_and_precisions(tmp_path, capsys):
    model = export(Block(), (torch.randn(2, 6),), opset=11, input_names=["x"], output_names=["y"],
                   dynamic_axes={"x": {0: "b"}, "y": {0: "b"}})
    engine = tfg.build(model, device="cpu", shapes={"x": ((1, 6), (2, 6), (4, 6))})
    path = tmp_path / "block.engine"
    engine.save(path)
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert "input  x: float32[-1,6]" in out and "profile 0: x min 1x6 opt 2x6 max 4x6" in out
    layers = engine.data.layers
    assert f"layers: {len(layers)}" in out
    for i, layer in enumerate(layers):
        assert f"[{i}] {layer.name}: {layer.op} [{layer.precision}" in out and str(layer.tactic) in out
        assert f"origin (ONNX nodes or API layers): {', '.join(layer.origin)}" in out
    onnx_nodes = {n.name for n in onnx.load_from_string(model).graph.node if n.op_type != "Constant"}
    fused = [layer for layer in layers if len(layer.origin) > 1]
    assert fused, "the exporter's decomposed GELU should be fused into fewer layers"
    assert set().union(*(layer.origin for layer in layers)) >= onnx_nodes - {""}
    assert main(["inspect", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [(d["name"], d["origin"], d["tactic"], d["precision"]) for d in doc["layers"]] == \
        [(layer.name, layer.origin, layer.tactic, layer.precision) for layer in layers]
    assert doc["profiles"] == [{"x": [[1, 6], [2, 6], [4, 6]]}] and doc["plugins"] == []


def test_timing_cache_entries(tmp_path, capsys):
    cache = TimingCache()
    cache.record("cuda:H200 torch", "abc123", {"op": "Conv", "best": "conv.fast", "times_ms": {"conv.fast": 0.04,
                                                                                             "conv.torch_ref": 0.09},
                                               "rejected": {"conv.x": "needs fp16"}})
    path = tmp_path / "cache.json"
    path.write_bytes(cache.serialize())
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert "timing cache" in out and "1 entries" in out and "device cuda:H200 torch: 1 entries" in out
    assert "abc123 Conv: best conv.fast (conv.fast 0.04 ms, conv.torch_ref 0.09 ms); 1 rejected" in out
    assert main(["inspect", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["devices"]["cuda:H200 torch"][0]["best"] == "conv.fast"


@pytest.mark.parametrize("content,fragment", [(b"\x08\x01garbage-bytes", "not a valid ONNX protobuf"),
                                              (b"TFGENGIN\x01", "truncated"),
                                              (b'{"format": "other"}', "not a tensorforge timing cache")])
def test_bad_files_are_one_line(tmp_path, capsys, content, fragment):
    path = tmp_path / "bad.bin"
    path.write_bytes(content)
    rc = main(["inspect", str(path)])
    err = capsys.readouterr().err.strip()
    assert rc == 1 and len(err.splitlines()) == 1 and fragment in err, err


def test_usage(capsys, tmp_path):
    assert main(["inspect", "--help"]) == 0 and "--json" in capsys.readouterr().out
    assert main(["inspect"]) == 2 and "no file given" in capsys.readouterr().err
    assert main(["inspect", str(tmp_path / "missing.onnx")]) == 1 and "not found" in capsys.readouterr().err
    assert main(["inspect", "a", "b"]) == 2 and "unrecognized arguments" in capsys.readouterr().err


def test_engine_lists_plugins_used(tmp_path, capsys):
    import tensorforge.plugin as tfp

    logger = tfg.Logger(tfg.Logger.ERROR)
    with tfp.scope():
        @tfp.register("test_inspect::Scale")
        def _(x: tfp.TensorDesc, factor: float = 1.0) -> tfp.TensorDesc:
            return x.like()

        @tfp.reference("test_inspect::Scale")
        def _(x, factor):
            return x * factor

        builder = tfg.Builder(logger, device="cpu")
        network = builder.create_network(0)
        x = network.add_input("x", tfg.float32, (2, 3))
        network.mark_output(network.add_plugin([x], "test_inspect::Scale", {"factor": 2}).get_output(0))
        path = tmp_path / "plugin.engine"
        path.write_bytes(builder.build_serialized_network(network, builder.create_builder_config()))
        assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert "[0] Plugin_0: plugin:test_inspect::Scale:1 [float32]" in out
    assert "plugins: test_inspect::Scale v1 (1 layer(s))" in out
