"""GPU diagnosis (issue 12 / 15, build time): which Triton kernels the build's compile pool hands back to an
in-process compile, and why — a small stem + bottleneck net built INT8 on CUDA with the verbose log captured.

    PYTHONPATH=. python3 bench/gpu_smoke/int8_pool_diag.py          (H200: ~35 s)

Seen at e8420c5: from the fourth quantized layer on, every job (the unchanged _qdq_kernel too) came back with
"the worker's cache key … is not the parent's …", so each variant compiled again in the parent (the resnet50
INT8 b32 build of the bench: 129 in-process compiles, 122 s of its 173 s). Prints those log lines and the tactics.
At 05ae267 the mismatch named its part: _qgemm_kernel's function key, with the module-level constexpr _MAGIC in the
parent's and not in the worker's (Triton 3.6 merges callees' globals before hashing them: order-dependent keys).
Fixed at 59eea9d (no constexpr globals in kernels; tests/kernels/test_kernel_globals.py); not yet re-run here.
"""
import io
import sys
import time

import torch
import torch.nn as nn
sys.path.insert(0, ".")
import tensorforge as tfg
from tensorforge.util.log import set_severity, Severity, get_logger


class _Tee(io.StringIO):
    """Keeps the log and echoes the pool's lines as they come (a run cut by its timeout still shows them)."""
    def write(self, text):
        if "in-process" in text or "pool" in text or "rror" in text:
            sys.stdout.write(text[:600] + "\n")
            sys.stdout.flush()
        return super().write(text)


def main():
    m = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3), nn.ReLU(), nn.MaxPool2d(3, 2, 1), nn.Conv2d(64, 64, 1), nn.ReLU(),
                      nn.Conv2d(64, 64, 3, 1, 1), nn.ReLU(), nn.Conv2d(64, 256, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                      nn.Flatten(), nn.Linear(256, 10)).eval()
    x = torch.randn(32, 3, 224, 224)
    buf = _Tee()
    get_logger().stream = buf
    set_severity(Severity.VERBOSE)
    t0 = time.perf_counter()
    e = tfg.build(m, example_inputs=(x,), int8=True, fp16=True, device="cuda")
    print("build s", round(time.perf_counter() - t0, 1))
    text = buf.getvalue()
    for line in text.splitlines():
        if "in-process instead" in line or "Traceback" in line or "rror" in line:
            print(line[:1500])
    print("tactics", {l.name: l.tactic for l in e.data.layers})


if __name__ == "__main__":
    main()
