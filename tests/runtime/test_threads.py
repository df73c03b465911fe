"""Threads: an engine is shared, an ExecutionContext is used by one thread at a time (docs/runtime.md, "Threads").

- 8 threads × 500 runs sharing one `tfg.Engine` (it keeps one context per concurrently running thread), and 8
  threads × 500 runs with a context each, on a small CNN and a small transformer: every output equal, bit for
  bit, to the single-threaded result for the same input.
- a second thread entering a context that is running raises UsageError (instead of racing on its state).
- the oneDNN linear kernel's lazy weight packing, shared by 8 threads and re-packed on every call: every output
  equal to the closed form x·Wᵀ + b (before the fix, `seen` was published before `packed`, and a thread could
  hand oneDNN a None weight: outputs of shape (B, 0)).
"""

import io
import threading

import pytest
import torch
import torch.nn as nn

import tensorforge as tfg
from tensorforge.engine import from_bytes
from tensorforge.ir import Layer
from tensorforge.kernels.cpu_onednn import OneDnnMatMulEpilogue, onednn_reason
from tensorforge.runtime import ExecutionContext
from tensorforge.util.errors import UsageError

THREADS, RUNS = 8, 500


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                                  nn.Conv2d(8, 8, 3, stride=2, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                                  nn.Flatten(), nn.Linear(8, 10))

    def forward(self, x):
        return self.body(x)


class SmallTransformer(nn.Module):
    """One pre-norm encoder block (d 16, 2 heads), attention written out."""

    def __init__(self, d=16, heads=2):
        super().__init__()
        self.heads, self.ln1, self.qkv, self.proj = heads, nn.LayerNorm(d), nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ln2, self.mlp = nn.LayerNorm(d), nn.Sequential(nn.Linear(d, 32), nn.GELU(), nn.Linear(32, d))

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).reshape(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        attn = (q @ k.transpose(-2, -1) * (d // self.heads) ** -0.5).softmax(dim=-1)
        x = x + self.proj((attn @ v).transpose(1, 2).reshape(b, n, d))
        return x + self.mlp(self.ln2(x))


MODELS = {"cnn": (SmallCNN, (2, 3, 8, 8)), "transformer": (SmallTransformer, (2, 6, 16))}


def _engine(name):
    cls, shape = MODELS[name]
    torch.manual_seed(0)
    model = cls().eval()
    buf = io.BytesIO()
    torch.onnx.export(model, (torch.randn(shape),), buf, dynamo=False, opset_version=17, input_names=["x"],
                      output_names=["y"])
    built = tfg.build(buf.getvalue(), device="cpu")
    inputs = [torch.randn(shape, generator=torch.Generator().manual_seed(i)) for i in range(THREADS)]
    expected = [built.run({"x": x})["y"].clone() for x in inputs]        # single-threaded
    # a fresh engine from the same file: no context yet, every kernel's lazy state still unset (the first calls
    # of the threads race to create them)
    return tfg.Engine(from_bytes(built.serialize()), "cpu"), inputs, expected


def _hammer(work, threads=THREADS):
    """Run work(i) in `threads` threads at once; the list of what went wrong."""
    problems, start = [], threading.Barrier(threads)

    def body(i):
        start.wait()
        try:
            problems.extend(work(i))
        except Exception as e:  # noqa: BLE001 - collected and reported by the test
            problems.append(f"thread {i}: {type(e).__name__}: {e}")
    pool = [threading.Thread(target=body, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return problems


def _mismatches(i, run, inputs, expected):
    bad = []
    for r in range(RUNS):
        got = run(inputs[i])
        if got.shape != expected[i].shape or not torch.equal(got, expected[i]):
            bad.append(f"thread {i} run {r}: shape {tuple(got.shape)}, max diff "
                       f"{(got - expected[i]).abs().max().item() if got.shape == expected[i].shape else 'n/a'}")
    return bad


@pytest.mark.parametrize("name", list(MODELS))
def test_one_engine_shared_by_threads(name):
    engine, inputs, expected = _engine(name)
    problems = _hammer(lambda i: _mismatches(i, lambda x: engine.run({"x": x})["y"], inputs, expected))
    assert not problems, f"{len(problems)} wrong of {THREADS * RUNS}: {problems[:3]}"


@pytest.mark.parametrize("name", list(MODELS))
def test_a_context_per_thread(name):
    engine, inputs, expected = _engine(name)
    shared = ExecutionContext(engine.data, "cpu").device_weights

    def work(i):
        ctx = ExecutionContext(engine.data, "cpu", shared_weights=shared)
        return _mismatches(i, lambda x: ctx.run({"x": x})["y"], inputs, expected)
    problems = _hammer(work)
    assert not problems, f"{len(problems)} wrong of {THREADS * RUNS}: {problems[:3]}"


def test_second_thread_in_a_running_context_raises():
    engine, inputs, expected = _engine("cnn")
    ctx = ExecutionContext(engine.data, "cpu")
    inside, release, result = threading.Event(), threading.Event(), {}

    def hook(index, phase):
        if index == 0 and phase == "start":
            inside.set()
            release.wait(10)

    def first():
        result["out"] = ctx.execute({"x": inputs[0]}, hook=hook)["y"]
    t = threading.Thread(target=first)
    t.start()
    assert inside.wait(10)
    try:
        with pytest.raises(UsageError, match="one thread at a time"):
            ctx.run({"x": inputs[1]})
    finally:
        release.set()
        t.join()
    assert torch.equal(result["out"], expected[0])
    assert torch.equal(ctx.run({"x": inputs[1]})["y"], expected[1])        # free again afterwards


@pytest.mark.skipif(onednn_reason(torch.device("cpu")) is not None, reason="no oneDNN linear in this torch")
def test_onednn_weight_packing_under_threads():
    layer = Layer("fc", "MatMulEpilogue", ["a", "w", "bias"], ["y"], attrs={"trans_b": 1})
    kernel = OneDnnMatMulEpilogue.build(layer, {}, torch.device("cpu"))
    gen = torch.Generator().manual_seed(0)
    weights = [torch.randn(24, 32, generator=gen) for _ in range(4)]
    a, bias = torch.randn(5, 32, generator=gen), torch.randn(24, generator=gen)
    want = [(a.double() @ w.double().t() + bias.double()) for w in weights]

    def work(i):
        bad = []
        for r in range(200):
            k = (i + r) % len(weights)
            w = weights[k].clone()             # a new tensor each call: the kernel packs it again
            (y,) = kernel([a, w, bias])
            if y.shape != (5, 24) or not torch.allclose(y.double(), want[k], rtol=1e-5, atol=1e-5):
                bad.append(f"thread {i} call {r}: shape {tuple(y.shape)}")
        return bad
    problems = _hammer(work)
    assert not problems, f"{len(problems)} wrong of {THREADS * 200}: {problems[:3]}"
