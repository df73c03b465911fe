"""examples/gelu/run.py's report helpers: the node → layer line (the legacy export's 2 × 5 ops become one
layer: a hand count of the seed model) and the min/median read from `tensorforge exec`'s summary line."""

import importlib.util
import sys
from pathlib import Path

import torch

import tensorforge as tfg

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "gelu"


def _run_module():
    sys.path.insert(0, str(EXAMPLE))
    spec = importlib.util.spec_from_file_location("gelu_example_run", EXAMPLE / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_fusion_line_counts_nodes_and_layers(tmp_path):
    run = _run_module()
    path = tmp_path / "legacy.onnx"
    run.export(run.MyNet(), torch.randn(4, 8), path, dynamo=False, opset=11)
    engine = tfg.build(str(path), shapes={"x": (4, 8)}, device="cpu")
    line = run.fusion_line(path, engine)
    assert line.startswith("10 ONNX nodes (Div 2, Erf 2, Add 2, Mul 4"), line
    assert "→ 10 IR layers after parsing → 1 engine layer after fusion (PointwiseChain 1)" in line


def test_compute_times_reads_min_and_median_of_the_named_metric():
    run = _run_module()
    log = ("[I] GPU Compute Time: min = 9 ms, max = 9 ms, mean = 9 ms, median = 9 ms\n"
           "[I] CPU Compute Time: min = 0.25 ms, max = 3 ms, mean = 1.1 ms, median = 0.5 ms, percentile(99%) = 3 ms\n")
    assert run.compute_times(log, "CPU Compute Time") == (0.25, 0.5)
    assert run.compute_times("nothing here", "CPU Compute Time") is None
