"""`tensorforge exec` end to end on a tiny dynamic model, against onnxruntime and trtexec's formats.

Runs the CLI in-process through `tensorforge.cli.main.main` (and once as a subprocess): build + run with
outputs checked against onnxruntime via --exportOutput, --saveEngine → --loadEngine, min/opt/max profiles
with --shapes, --loadInputs (raw and .npy), the --exportTimes schema, the summary block's numbers, and the
flag table, shape-spec parser, statistics and timing loop on their own.
"""

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from oracle import ort_run
from tensorforge.cli import perf_report
from tensorforge.cli.inference_bench import Trace, benchmark
from tensorforge.cli.main import main
from tensorforge.cli.shapes_arg import parse_named_values, parse_shapes
from tensorforge.cli.trtexec_flags import FLAGS, ExecOptions, help_text, parse_argv
from tensorforge.util.errors import UsageError

FAST = ["--warmUp=0", "--duration=0", "--iterations=3"]


def tiny_model(path: Path) -> Path:
    """out = tanh(x)·y + w, act = relu(x); x, y: float32[N, 4] with N dynamic."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])
    outs = [helper.make_tensor_value_info("out", TensorProto.FLOAT, None),
            helper.make_tensor_value_info("act", TensorProto.FLOAT, None)]
    w = helper.make_tensor("w", TensorProto.FLOAT, [4], [0.5, -1.0, 2.0, 3.0])
    nodes = [helper.make_node("Tanh", ["x"], ["t"]), helper.make_node("Mul", ["t", "y"], ["m"]),
             helper.make_node("Add", ["m", "w"], ["out"]), helper.make_node("Relu", ["x"], ["act"])]
    model = helper.make_model(helper.make_graph(nodes, "tiny", [x, y], outs, initializer=[w]),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


@pytest.fixture
def model(tmp_path):
    return tiny_model(tmp_path / "tiny.onnx")


def tfexec(capsys, *args):
    rc = main(["exec", *map(str, args)])
    out, err = capsys.readouterr()
    return rc, out, err


def read_outputs(path) -> dict:
    recs = json.loads(Path(path).read_text())
    return {r["name"]: np.array(r["values"], np.float32).reshape([int(d) for d in r["dimensions"].split("x")])
            for r in recs}


def write_inputs(tmp_path, n, seed=0):
    rng = np.random.default_rng(seed)
    x, y = rng.standard_normal((n, 4), dtype=np.float32), rng.standard_normal((n, 4), dtype=np.float32)
    np.save(tmp_path / "x.npy", x)
    (tmp_path / "y.bin").write_bytes(y.astype("<f4").tobytes())
    return x, y


def test_build_save_load_match_onnxruntime(tmp_path, model, capsys):
    x, y = write_inputs(tmp_path, 3)
    want = ort_run(model.read_bytes(), {"x": x, "y": y})
    engine, out1, out2 = tmp_path / "m.engine", tmp_path / "o1.json", tmp_path / "o2.json"
    inputs = f"--loadInputs=x:{tmp_path / 'x.npy'},y:{tmp_path / 'y.bin'}"
    rc, log, err = tfexec(capsys, f"--onnx={model}", "--shapes=x:3x4,y:3x4", f"--saveEngine={engine}", inputs,
                          f"--exportOutput={out1}", *FAST)
    assert rc == 0, err
    assert log.startswith("&&&& RUNNING TensorRT.trtexec [TensorForge") and "&&&& PASSED" in log.splitlines()[-1]
    assert "Input build shape (profile 0): x=3x4+3x4+3x4" in log
    got = read_outputs(out1)
    for name in ("out", "act"):
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6)
    rc, log, err = tfexec(capsys, f"--loadEngine={engine}", inputs, f"--exportOutput={out2}", *FAST)
    assert rc == 0, err
    assert "Engine deserialized" in log and "Start parsing" not in log
    again = read_outputs(out2)
    for name in ("out", "act"):
        np.testing.assert_array_equal(again[name], got[name])


def test_dynamic_profile_defaults_to_opt_and_takes_shapes(tmp_path, model, capsys):
    profile = ["--minShapes=x:1x4,y:1x4", "--optShapes=x:2x4,y:2x4", "--maxShapes=x:4x4,y:4x4"]
    engine, out = tmp_path / "d.engine", tmp_path / "o.json"
    rc, _, err = tfexec(capsys, f"--onnx={model}", *profile, f"--saveEngine={engine}", f"--exportOutput={out}", *FAST)
    assert rc == 0, err
    assert {k: v.shape for k, v in read_outputs(out).items()} == {"out": (2, 4), "act": (2, 4)}   # the opt shape
    x, y = write_inputs(tmp_path, 4, seed=1)
    np.save(tmp_path / "y.npy", y)
    rc, _, err = tfexec(capsys, f"--loadEngine={engine}", "--shapes=x:4x4,y:4x4", f"--exportOutput={out}",
                        f"--loadInputs=x:{tmp_path / 'x.npy'},y:{tmp_path / 'y.npy'}", *FAST)
    assert rc == 0, err
    want = ort_run(model.read_bytes(), {"x": x, "y": y})
    got = read_outputs(out)
    np.testing.assert_allclose(got["out"], want["out"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["act"], want["act"], rtol=1e-5, atol=1e-6)


def test_npy_inputs_set_the_shape_and_raw_equals_npy(tmp_path, model, capsys):
    profile = ["--minShapes=x:1x4,y:1x4", "--optShapes=x:2x4,y:2x4", "--maxShapes=x:4x4,y:4x4"]
    x, y = write_inputs(tmp_path, 3, seed=2)
    np.save(tmp_path / "y.npy", y)
    (tmp_path / "x.bin").write_bytes(x.tobytes())
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    rc, log, err = tfexec(capsys, f"--onnx={model}", *profile, f"--exportOutput={a}",
                          f"--loadInputs=x:{tmp_path / 'x.npy'},y:{tmp_path / 'y.npy'}", *FAST)
    assert rc == 0, err
    assert "Input shape of x: 3x4" in log          # taken from the .npy, not the opt shape
    rc, _, err = tfexec(capsys, f"--onnx={model}", *profile, "--shapes=x:3x4,y:3x4", f"--exportOutput={b}",
                        f"--loadInputs='x':{tmp_path / 'x.bin'},y:{tmp_path / 'y.bin'}", *FAST)
    assert rc == 0, err
    ra, rb = read_outputs(a), read_outputs(b)
    want = ort_run(model.read_bytes(), {"x": x, "y": y})
    for name in ("out", "act"):
        np.testing.assert_array_equal(ra[name], rb[name])
        np.testing.assert_allclose(ra[name], want[name], rtol=1e-5, atol=1e-6)


def test_fp16_build_stays_close_to_onnxruntime(tmp_path, model, capsys):
    x, y = write_inputs(tmp_path, 2, seed=3)
    out = tmp_path / "o.json"
    rc, log, err = tfexec(capsys, f"--onnx={model}", "--fp16", "--noTF32", "--shapes=x:2x4,y:2x4",
                          f"--loadInputs=x:{tmp_path / 'x.npy'},y:{tmp_path / 'y.bin'}", f"--exportOutput={out}", *FAST)
    assert rc == 0, err
    assert "Precision: FP32+FP16" in log and "TF32: Disabled" in log
    want = ort_run(model.read_bytes(), {"x": x, "y": y})
    got = read_outputs(out)
    np.testing.assert_allclose(got["out"], want["out"], rtol=1e-2, atol=1e-2)


TIME_KEYS = {"startEnqMs", "endEnqMs", "startH2dMs", "endH2dMs", "startComputeMs", "endComputeMs", "startD2hMs",
             "endD2hMs", "h2dMs", "computeMs", "d2hMs", "latencyMs", "endToEndMs"}


def test_export_times_has_trtexec_records(tmp_path, model, capsys):
    times = tmp_path / "t.json"
    rc, log, err = tfexec(capsys, f"--onnx={model}", "--shapes=x:2x4,y:2x4", f"--exportTimes={times}",
                          "--warmUp=0", "--duration=0", "--iterations=7")
    assert rc == 0, err
    recs = json.loads(times.read_text())
    n = int(re.search(r"Timing trace has (\d+) queries", log).group(1))
    assert len(recs) == n == 7
    prev_end = -1.0
    for r in recs:
        assert set(r) == TIME_KEYS
        assert r["h2dMs"] == pytest.approx(r["endH2dMs"] - r["startH2dMs"])
        assert r["computeMs"] == pytest.approx(r["endComputeMs"] - r["startComputeMs"])
        assert r["d2hMs"] == pytest.approx(r["endD2hMs"] - r["startD2hMs"])
        assert r["latencyMs"] == pytest.approx(r["h2dMs"] + r["computeMs"] + r["d2hMs"])
        assert r["endToEndMs"] == pytest.approx(r["endD2hMs"] - r["startH2dMs"])
        assert prev_end <= r["startH2dMs"] <= r["endH2dMs"] <= r["startComputeMs"] < r["endComputeMs"] \
            <= r["startD2hMs"] <= r["endD2hMs"]
        prev_end = r["endD2hMs"]


_NUM = r"([0-9.e+-]+|inf)"


def test_summary_block_fields_and_numbers(tmp_path, model, capsys):
    rc, log, err = tfexec(capsys, f"--onnx={model}", "--shapes=x:2x4,y:2x4", "--warmUp=0", "--duration=0",
                          "--iterations=9", "--avgRuns=4", "--percentile=50,99.9")
    assert rc == 0, err
    body = log[log.index("=== Performance summary ==="):]
    n = int(re.search(r"Timing trace has (\d+) queries", log).group(1))
    assert n == 9 and len(re.findall(r"Average on 4 runs - GPU latency", log)) == 2
    assert "GPU Compute Time" not in body                  # on the CPU the device time is named by its device
    for metric in ("Latency", "Enqueue Time", "H2D Latency", "CPU Compute Time", "D2H Latency"):
        m = re.search(rf"\] {metric}: min = {_NUM} ms, max = {_NUM} ms, mean = {_NUM} ms, median = {_NUM} ms, "
                      rf"percentile\(50%\) = {_NUM} ms, percentile\(99.9%\) = {_NUM} ms", body)
        assert m, metric
        lo, hi, mean, med, p50, p999 = map(float, m.groups())
        assert lo <= med <= hi and lo <= mean <= hi and lo <= p50 <= p999 <= hi
        assert p999 == hi                          # trtexec: ⌊0.1% · 9⌋ = 0 excluded → the max
    wall = float(re.search(rf"Total Host Walltime: {_NUM} s", body).group(1))
    compute = float(re.search(rf"Total CPU Compute Time: {_NUM} s", body).group(1))
    qps = float(re.search(rf"Throughput: {_NUM} qps", body).group(1))
    assert 0 < compute <= wall * (1 + 1e-5)
    assert qps == pytest.approx(n / wall, rel=1e-4)
    assert "device compute time" in body and "CPU Compute Time histogram" in body


def test_skip_inference_and_build_only_write_the_engine(tmp_path, model, capsys):
    for flag in ("--skipInference", "--buildOnly"):
        engine = tmp_path / f"{flag[2:]}.engine"
        rc, log, err = tfexec(capsys, f"--onnx={model}", "--shapes=x:2x4,y:2x4", f"--saveEngine={engine}", flag)
        assert rc == 0, err
        assert engine.read_bytes()[:8] == b"TFGENGIN"
        assert "Skipped inference phase" in log and "Performance summary" not in log


def test_subprocess_run_exits_zero(tmp_path, model):
    proc = subprocess.run([sys.executable, "-m", "tensorforge", "exec", f"--onnx={model}", "--shapes=x:2x4,y:2x4",
                           "--dumpOutput", *FAST], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "&&&& PASSED" in proc.stdout and "Output Tensors:" in proc.stdout and "act: (2x4)" in proc.stdout
    assert "Traceback" not in proc.stderr


# ---- the pieces on their own ------------------------------------------------------------------------------
SPEC_FLAGS = """--onnx --saveEngine --minShapes --optShapes --maxShapes --profile --fp16 --bf16 --int8 --fp8 --best
--noTF32 --stronglyTyped --precisionConstraints --layerPrecisions --layerOutputTypes --memPoolSize --timingCacheFile
--noBuilderCache --builderOptimizationLevel --sparsity --calib --profilingVerbosity --dumpLayerInfo --exportLayerInfo
--skipInference --buildOnly --staticPlugins --dynamicPlugins --plugins --verbose --device --loadEngine --shapes
--loadInputs --warmUp --duration --iterations --avgRuns --percentile --useCudaGraph --noCudaGraph --noDataTransfers
--includeDataTransfers --streams --infStreams --useSpinWait --dumpProfile --exportProfile --exportTimes --dumpOutput
--exportOutput --separateProfileRun""".split()


def test_flag_table_covers_spec_and_is_consistent():
    fields = set(ExecOptions.__dataclass_fields__)
    missing = [f for f in SPEC_FLAGS if f not in FLAGS]
    assert not missing, missing
    page = help_text()
    for row in FLAGS.values():
        assert (row.field in fields) != bool(row.refused), row.name      # exactly one: a field or a reason
        assert row.name in page
    for name in ("--int4", "--layerDeviceTypes", "--refit"):
        with pytest.raises(UsageError, match=f"{name} is not supported yet: .+"):
            parse_argv([name] if FLAGS[name].value is None else [f"{name}=x"])


def test_parse_argv_values_and_defaults():
    o = parse_argv(["--onnx=m.onnx", "--warmUp=50", "--duration=-1", "--percentile=90,99.5", "--noDataTransfers",
                    "--noTF32", "--device=cpu", "--shapes='in:0':1x3,len:scalar"])
    assert (o.onnx, o.warmup_ms, o.duration_s, o.percentiles) == ("m.onnx", 50.0, -1.0, [90.0, 99.5])
    assert (o.data_transfers, o.tf32, o.device, o.shapes) == (False, False, "cpu", {"in:0": (1, 3), "len": ()})
    d = ExecOptions()
    assert (d.warmup_ms, d.duration_s, d.iterations, d.avg_runs, d.percentiles) == (200.0, 3.0, 10, 10, [90, 95, 99])
    for bad, why in ((["--iterations=0"], "at least 1"), (["--percentile=101"], "outside"), (["--fp16=1"], "switch"),
                     (["--onnx"], "needs a value"), (["--warmUp=-5"], "at least 0"),
                     (["--noDataTransfers", "--includeDataTransfers"], "set the same option"),
                     (["--onnx=a", "--onnx=b"], "twice"), (["--builderOptimizationLevel=7"], "between 0 and 5")):
        with pytest.raises(UsageError, match=why):
            parse_argv(bad)


def test_shape_specs_follow_trtexec_quoting():
    assert parse_shapes("x:1x3x224x224,y:2") == {"x": (1, 3, 224, 224), "y": (2,)}
    assert parse_shapes("input:0:1x3") == {"input:0": (1, 3)}                  # name ends at the last ':'
    assert parse_shapes("'a,b:c':4x5, s:") == {"a,b:c": (4, 5), "s": ()}        # quoted names keep ',' and ':'
    assert parse_named_values("'x':C:\\data\\x.bin,y:/tmp/y.npy") == {"x": "C:\\data\\x.bin", "y": "/tmp/y.npy"}
    for bad in ("x:1x-1", "x1x3", "x:1x3,x:1x3", "'x:1x3", "x:1xax3", ":1x3", "x:1x3,,y:2"):
        with pytest.raises(UsageError):
            parse_shapes(bad)


def test_statistics_follow_trtexec():
    v = [float(i) for i in range(1, 11)]                   # 1..10
    s = perf_report.summarize(list(reversed(v)), [0, 50, 90, 99, 100])
    assert (s.min, s.max, s.mean, s.median) == (1.0, 10.0, 5.5, 5.5)
    # index = max(n - 1 - ⌊(100 - p)·n/100⌋, 0): p=90 → 10-1-1 = 8 → 9.0 (exact, not 10.0 from 0.1·10 = 0.999…)
    assert s.percentiles == {0: 1.0, 50: 5.0, 90: 9.0, 99: 10.0, 100: 10.0}
    assert perf_report.summarize([3.0, 1.0, 2.0], [50]).median == 2.0


class _FakeRunner:
    def __init__(self, clock, step_ms, stop_after=None):
        self.clock, self.step_ms, self.n, self.stop_after = clock, step_ms, 0, stop_after

    def step(self):
        if self.stop_after is not None and self.n == self.stop_after:
            raise KeyboardInterrupt
        t = self.clock.now * 1e3
        self.clock.now += self.step_ms / 1e3
        self.n += 1
        return Trace(t, t, t, t, t, t + self.step_ms, t + self.step_ms, t + self.step_ms)


class _Clock:
    now = 0.0

    def __call__(self):
        return self.now


def test_timing_loop_needs_iterations_and_duration():
    clock = _Clock()
    r = benchmark(_FakeRunner(clock, 10.0), warmup_ms=35, duration_s=0.0, iterations=5, clock=clock)
    assert (len(r.warmup), len(r.timed)) == (4, 5)         # warm-up runs until 35 ms have passed: 4 × 10 ms
    r = benchmark(_FakeRunner(clock, 10.0), warmup_ms=0, duration_s=0.25, iterations=5, clock=clock)
    assert len(r.timed) == 25 and r.walltime_ms == pytest.approx(250.0)
    r = benchmark(_FakeRunner(clock, 1.0, stop_after=12), warmup_ms=0, duration_s=-1, iterations=5, clock=clock)
    assert r.interrupted and len(r.timed) == 12             # --duration=-1: until Ctrl-C, keeping what ran
    with pytest.raises(KeyboardInterrupt):                  # otherwise Ctrl-C is an interrupt, not a report
        benchmark(_FakeRunner(clock, 1.0, stop_after=3), warmup_ms=0, duration_s=1, iterations=5, clock=clock)


def test_repeatable_rows_append_and_help_lists_every_flag(monkeypatch, capsys):
    from tensorforge.cli import trtexec_flags as tf
    row = tf.use("--staticPlugins", "System", "plugins", "load a plugin file", "<file>", repeat=True)
    monkeypatch.setitem(tf.FLAGS, "--staticPlugins", row)     # what flipping the row will look like
    assert parse_argv(["--staticPlugins=a.py", "--staticPlugins=b.py"]).plugins == ["a.py", "b.py"]
    assert main(["exec", "--help"]) == 0
    page = capsys.readouterr().out
    assert all(name in page for name in FLAGS) and "=== Inference Options ===" in page


def test_seed_gelu_model_through_exec_matches_onnxruntime(tmp_path, capsys):
    import torch
    from oracle import export

    class MyNet(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.gelu(torch.nn.functional.gelu(x))

    x = torch.randn(3, 17)
    path = tmp_path / "seed.onnx"
    path.write_bytes(export(MyNet(), (x,), opset=11))
    name = onnx.load(path).graph.input[0].name
    np.save(tmp_path / "x.npy", x.numpy())
    out = tmp_path / "o.json"
    rc, _, err = tfexec(capsys, f"--onnx={path}", f"--loadInputs={name}:{tmp_path / 'x.npy'}", f"--exportOutput={out}",
                        *FAST)
    assert rc == 0, err
    want = ort_run(path.read_bytes(), {name: x.numpy()})
    got = read_outputs(out)
    for k, w in want.items():
        np.testing.assert_allclose(got[k], w, rtol=1e-3, atol=1e-4)
