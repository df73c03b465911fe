"""GPU smoke (issue 13.2, threads): one `tfg.Engine` on CUDA shared by 8 threads (CUDA graphs on: each pooled
context captures its own), and 8 threads with a context each, on the small CNN and transformer of
tests/runtime/test_threads.py; every output compared with the single-threaded result for the same input.
Also: a second thread entering a running context raises UsageError.

    PYTHONPATH=. python3 bench/gpu_smoke/threads.py        (H200; < 90 s; exit 1 on any FAIL)

Equality: bitwise is reported; PASS needs shape equal and |diff| ≤ 1e-5 (a graph replay and an eager run of the
same kernels are expected to agree bit for bit, but cuBLAS may pick another algorithm inside a capture).
"""

import io
import os
import sys
import threading
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

import tensorforge as tfg  # noqa: E402
from tensorforge.engine import from_bytes  # noqa: E402
from tensorforge.runtime import ExecutionContext  # noqa: E402
from tensorforge.util.errors import UsageError  # noqa: E402

THREADS, RUNS = 8, 200
DEVICE = "cpu" if "--cpu" in sys.argv else "cuda"      # --cpu: try the script's logic without a GPU
FAILS: list[str] = []


def line(ok: bool, name: str, msg: str) -> None:
    print(f"{'PASS' if ok else 'FAIL'} {name} {msg}", flush=True)
    if not ok:
        FAILS.append(name)


class SmallCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        nn = torch.nn
        self.body = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                                  nn.Conv2d(8, 8, 3, stride=2, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                                  nn.Flatten(), nn.Linear(8, 10))

    def forward(self, x):
        return self.body(x)


class SmallTransformer(torch.nn.Module):
    """One pre-norm encoder block (d 16, 2 heads), attention written out (as in tests/runtime/test_threads.py)."""

    def __init__(self, d=16, heads=2):
        super().__init__()
        nn = torch.nn
        self.heads, self.ln1, self.qkv, self.proj = heads, nn.LayerNorm(d), nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ln2, self.mlp = nn.LayerNorm(d), nn.Sequential(nn.Linear(d, 32), nn.GELU(), nn.Linear(32, d))

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).reshape(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        attn = (q @ k.transpose(-2, -1) * (d // self.heads) ** -0.5).softmax(dim=-1)
        x = x + self.proj((attn @ v).transpose(1, 2).reshape(b, n, d))
        return x + self.mlp(self.ln2(x))


def models():
    return {"cnn": (SmallCNN, (2, 3, 8, 8)), "transformer": (SmallTransformer, (2, 6, 16))}


def build(cls, shape):
    torch.manual_seed(0)
    buf = io.BytesIO()
    torch.onnx.export(cls().eval(), (torch.randn(shape),), buf, dynamo=False, opset_version=17, input_names=["x"],
                      output_names=["y"])
    built = tfg.build(buf.getvalue(), device=DEVICE, tf32=False)
    inputs = [torch.randn(shape, generator=torch.Generator().manual_seed(i)).to(DEVICE) for i in range(THREADS)]
    expected = [built.run({"x": x})["y"].clone() for x in inputs]
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    return built.serialize(), inputs, expected


def hammer(run, inputs, expected):
    worst, bitwise, wrong, errors = 0.0, 0, 0, []
    lock, start = threading.Lock(), threading.Barrier(THREADS)

    def body(i, run_i):
        nonlocal worst, bitwise, wrong
        start.wait()
        try:
            for _ in range(RUNS):
                y = run_i(inputs[i])
                if DEVICE == "cuda":
                    torch.cuda.current_stream().synchronize()
                ok_shape = y.shape == expected[i].shape
                d = (y - expected[i]).abs().max().item() if ok_shape else float("inf")
                with lock:
                    worst = max(worst, d)
                    bitwise += int(ok_shape and torch.equal(y, expected[i]))
                    wrong += int(d > 1e-5)
        except Exception as e:  # noqa: BLE001 - reported as a FAIL line
            with lock:
                errors.append(f"thread {i}: {type(e).__name__}: {str(e)[:200]}")
    pool = [threading.Thread(target=body, args=(i, run(i))) for i in range(THREADS)]
    t0 = time.perf_counter()
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return worst, bitwise, wrong, errors, time.perf_counter() - t0


def main() -> int:
    if DEVICE == "cuda" and not torch.cuda.is_available():
        line(False, "threads", "no CUDA device")
        return 1
    for name, (cls, shape) in models().items():
        data, inputs, expected = build(cls, shape)
        engine = tfg.Engine(from_bytes(data), DEVICE)
        worst, same, wrong, errors, s = hammer(lambda i: (lambda x: engine.run({"x": x})["y"]), inputs, expected)
        line(not errors and wrong == 0, f"threads_shared_engine_{name}",
             f"{THREADS}x{RUNS} runs in {s:.1f} s: {wrong} wrong, {same} bitwise equal, max |diff| {worst:.2e}, "
             f"{len(engine._idle)} pooled contexts" + (f"; {errors[0]}" if errors else ""))
        eng_data = from_bytes(data)
        first = ExecutionContext(eng_data, DEVICE)

        def per_thread(i):
            ctx = ExecutionContext(eng_data, DEVICE, shared_weights=first.device_weights)
            return lambda x: ctx.run({"x": x})["y"]
        worst, same, wrong, errors, s = hammer(per_thread, inputs, expected)
        line(not errors and wrong == 0, f"threads_context_per_thread_{name}",
             f"{THREADS}x{RUNS} runs in {s:.1f} s: {wrong} wrong, {same} bitwise equal, max |diff| {worst:.2e}"
             + (f"; {errors[0]}" if errors else ""))
    ctx = ExecutionContext(from_bytes(data), DEVICE)
    inside, release = threading.Event(), threading.Event()

    def hook(index, phase):
        if index == 0 and phase == "start":
            inside.set()
            release.wait(10)
    t = threading.Thread(target=lambda: ctx.execute({"x": inputs[0]}, hook=hook))
    t.start()
    inside.wait(10)
    try:
        ctx.run({"x": inputs[1]})
        line(False, "threads_second_thread_raises", "a second thread ran inside a running context")
    except UsageError as e:
        line(True, "threads_second_thread_raises", str(e).splitlines()[0][:120])
    finally:
        release.set()
        t.join()
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
