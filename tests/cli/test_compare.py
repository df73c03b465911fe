"""`tensorforge compare` (Polygraphy-style): a healthy model passes with exit code 0; a model whose op is broken
on purpose fails with exit code 1 and --per-layer names that node as the first divergence; reports in text,
HTML (inline SVG histograms) and JSON; inputs saved and reloaded; a torch nn.Module as a runner from Python."""

import json
import xml.etree.ElementTree as ET

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper

from tensorforge.cli.main import main
from tensorforge.compare import TorchRunner, compare_model
from tensorforge.compare.report_html import render_html
from tensorforge.ir.interpret import as_outputs
from tensorforge.ir import get_spec
from tensorforge.kernels import registry

RNG = np.random.default_rng(0)
W1, W2 = RNG.standard_normal((4, 6)).astype(np.float32), RNG.standard_normal((6, 3)).astype(np.float32)


@pytest.fixture
def mlp(tmp_path):
    """x → MatMul(W1) 'mm1' → Relu 'act' → MatMul(W2) 'mm2' → Tanh 'out'."""
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h1"], name="mm1"),
             helper.make_node("Relu", ["h1"], ["a1"], name="act"),
             helper.make_node("MatMul", ["a1", "w2"], ["h2"], name="mm2"),
             helper.make_node("Tanh", ["h2"], ["y"], name="out")]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
                              initializer=[onnx.numpy_helper.from_array(W1, "w1"), onnx.numpy_helper.from_array(W2, "w2")])
    path = tmp_path / "mlp.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.fixture
def broken_mm2(monkeypatch):
    """A tactic that is 5 % off, preferred over every other tactic, for whichever layer computes node 'mm2'
    (the MatMul itself, or a fused layer that absorbed it)."""
    class Broken:
        @staticmethod
        def supports(layer, device):
            return None if "mm2" in layer.origin else "only breaks node mm2"

        @staticmethod
        def build(layer, cfg, device):
            ref = get_spec(layer.op).reference
            return lambda inputs: [o * 1.05 for o in as_outputs(ref(*inputs, **layer.attrs), len(layer.outputs))]
    tac = registry.Tactic("*", "broken_for_test", Broken.supports, Broken.build, [{}], priority=10**6)
    monkeypatch.setitem(registry._TACTICS, "*", [tac] + registry._TACTICS.get("*", []))


def test_healthy_model_passes(mlp, capsys, tmp_path):
    rc = main(["compare", str(mlp), "--input-shapes", "x:5x4", "--per-layer", "--json", str(tmp_path / "r.json")])
    out = capsys.readouterr().out
    assert rc == 0 and out.rstrip().endswith("PASSED") and "no layer diverges" in out
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["passed"] and doc["inputs"] == {"x": "float32[5,4]"}
    rows = doc["per_layer"][0]["rows"]
    assert [r["tensor"] for r in rows] == ["h1", "a1", "h2", "y"] and all(r["comparison"]["passed"] for r in rows)


def test_broken_op_is_the_first_divergence(mlp, broken_mm2, capsys, tmp_path):
    rc = main(["compare", str(mlp), "--per-layer", "--input-shapes", "x:2x4", "--save-report", str(tmp_path / "r.html"),
               "--json", str(tmp_path / "r.json")])
    out = capsys.readouterr().out
    assert rc == 1 and out.rstrip().endswith("FAILED")
    assert "[E] first divergence: node 'mm2' (MatMul), output 'h2'" in out
    assert "tactic any.broken_for_test" in out
    doc = json.loads((tmp_path / "r.json").read_text())
    first = doc["per_layer"][0]["first_divergence"]
    assert (first["node"], first["tensor"], first["op_type"]) == ("mm2", "h2", "MatMul")
    verdicts = {r["tensor"]: r["comparison"]["passed"] for r in doc["per_layer"][0]["rows"]}
    assert verdicts == {"h1": True, "a1": True, "h2": False, "y": False}
    html = (tmp_path / "r.html").read_text()
    assert "first divergence: node <b>mm2</b>" in html and html.count("<svg") == 2
    assert main(["compare", str(mlp), "--input-shapes", "x:2x4"]) == 1       # without --per-layer: still fails
    assert "y: FAILED" in capsys.readouterr().out


def test_tolerances_decide(mlp, broken_mm2, capsys):
    """A 5 % error passes once rtol allows it (y moves by at most 5 % relatively, fused or not)."""
    assert main(["compare", str(mlp), "--input-shapes", "x:2x4", "--rtol", "0.06", "--atol", "0"]) == 0
    assert main(["compare", str(mlp), "--input-shapes", "x:2x4", "--rtol", "0.001", "--atol", "0"]) == 1


def test_inputs_round_trip_and_reference_runner(mlp, capsys, tmp_path):
    saved = tmp_path / "in.npz"
    assert main(["compare", str(mlp), "--input-shapes", "x:3x4", "--seed", "7", "--val-range=-2,2",
                 "--save-inputs", str(saved), "--runners", "onnx-reference,tensorforge,onnxruntime"]) == 0
    first = capsys.readouterr().out
    x = np.load(saved)["x"]
    assert x.shape == (3, 4) and x.min() >= -2 and x.max() < 2 and x.min() < 0
    assert main(["compare", str(mlp), "--load-inputs", str(saved), "--runners",
                 "onnx-reference,tensorforge,onnxruntime"]) == 0
    again = capsys.readouterr().out
    keep = [line for line in first.splitlines() if "max abs" in line]
    assert keep == [line for line in again.splitlines() if "max abs" in line]


def test_torch_module_runner_and_html_histograms(mlp, monkeypatch):
    from tensorforge.compare import report_html
    # the bar checks below read the built-in SVG; with matplotlib installed the page embeds matplotlib's instead
    monkeypatch.setattr(report_html, "histogram_svg", report_html.svg_histogram)
    module = torch.nn.Sequential(torch.nn.Linear(4, 6, bias=False), torch.nn.ReLU(), torch.nn.Linear(6, 3, bias=False),
                                 torch.nn.Tanh())
    with torch.no_grad():
        module[0].weight.copy_(torch.from_numpy(W1.T))
        module[2].weight.copy_(torch.from_numpy(W2.T))
    report = compare_model(str(mlp), ["onnxruntime", TorchRunner(module), "tensorforge"], shapes={"x": (4, 4)},
                           atol=1e-5, rtol=1e-4)
    assert report.passed and [p.runner for p in report.pairs] == ["torch", "tensorforge"]
    wrong = torch.nn.Sequential(module, torch.nn.Hardtanh(-0.5, 0.5))
    bad = compare_model(str(mlp), ["onnxruntime", TorchRunner(wrong, name="torch-clipped")], shapes={"x": (4, 4)},
                        val_range=(-3, 3))
    assert not bad.passed
    html = render_html(bad)
    svg = html[html.index("<svg"):html.index("</svg>") + 6]
    root = ET.fromstring(svg)
    bars = [r for r in root.iter("{http://www.w3.org/2000/svg}rect")]
    hist = bad.pairs[0].outputs[0].abs_hist
    assert len(bars) == len(hist.counts) + (1 if hist.infinite else 0)
    heights = [float(b.get("height")) for b in bars]
    tallest = int(np.argmax(hist.counts))
    assert heights[tallest] == max(heights) and sum(hist.counts) + hist.infinite == 12


@pytest.mark.parametrize("argv,code,fragment", [
    (["--runners", "onnxruntime,nosuch"], 2, "unknown runner 'nosuch'"),
    (["--runners", "onnxruntime"], 2, "at least two runners"),
    (["--atol", "-1"], 2, "cannot be negative"),
    (["--val-range", "3,1"], 2, "LOW must not exceed HIGH"),
    (["--input-shapes", "x:2x5"], 2, "static shape"),
    (["--runners", "onnxruntime,engine"], 2, "needs --engine"),
    (["--load-inputs", "/nonexistent.npz"], 1, "not found"),
])
def test_bad_arguments_are_one_line(mlp, capsys, argv, code, fragment):
    rc = main(["compare", str(mlp)] + argv)
    err = capsys.readouterr().err.strip()
    assert rc == code and len(err.splitlines()) == 1 and err.startswith("tensorforge: error: "), err
    assert fragment is None or fragment in err


def test_help(capsys):
    assert main(["compare", "--help"]) == 0
    text = capsys.readouterr().out
    for flag in ("--runners", "--engine", "--atol", "--rtol", "--seed", "--load-inputs", "--per-layer",
                 "--save-report", "--json", "--input-shapes"):
        assert flag in text
