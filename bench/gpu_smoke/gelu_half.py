"""GPU smoke (issue 15.2): the float16 GELU of generated kernels (codegen/fastmath.py, grade lo) on the real GPU,
where MUFU.EX2 and fused FFMAs replace the interpreter's numpy arithmetic. Checks, for every one of the 65536
float16 inputs, that gelu(x) and gelu(gelu(x)) are within 1 ulp of the correctly rounded float16 of the float64
GELU (x·Φ(x), torch.special.ndtr; GELU(−inf) = 0), and times the generated gelu(gelu(x)) kernel at each
BLOCK config on 256 M float16 elements against a device copy of the same bytes (the bench row's 95 % target).

    PYTHONPATH=. python3 bench/gpu_smoke/gelu_half.py
"""

import sys

import numpy as np
import torch

from tensorforge.codegen import generate_pointwise
from tensorforge.ir import Layer
from tensorforge.kernels.generated import register_source
from tensorforge.kernels.triton_pointwise import CONFIGS, TritonPointwise

DEV = torch.device("cuda")


def chain(n_gelu: int) -> Layer:
    steps = [{"op": "Gelu", "args": ["in0" if k == 0 else f"s{k - 1}"], "attrs": {"approximate": "none"}}
             for k in range(n_gelu)]
    layer = Layer("chain", "PointwiseChain", ["x"], ["y"],
                  {"steps": steps, "outputs": [f"s{n_gelu - 1}"], "out_dtypes": ["float16"]})
    layer.attrs["kernel"] = register_source(generate_pointwise(layer, [torch.float16], 1))
    return layer


def exact(x64: np.ndarray) -> np.ndarray:
    t = torch.from_numpy(x64)
    return np.where(np.isneginf(x64), -0.0, (t * torch.special.ndtr(t)).numpy())


def ulps(got: np.ndarray, want64: np.ndarray) -> tuple[int, float, int]:
    want = want64.astype(np.float16)
    order = lambda h: np.where(h.view(np.int16) < 0, -(h.view(np.int16).astype(np.int64) & 0x7FFF),
                               h.view(np.int16).astype(np.int64))
    nan_mismatch = int((np.isnan(want) != np.isnan(got)).sum())
    d = np.where(np.isnan(want), 0, np.abs(order(got) - order(want)))
    return int(d.max()), float((d == 0).mean()), nan_mismatch


def median_ms(fn, iters=20):
    for _ in range(3):
        fn()
    times = []
    for _ in range(iters):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
    return float(np.median(times))


def main() -> int:
    fails = 0
    x = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(torch.float16)
    x64 = x.numpy().astype(np.float64)
    for n_gelu in (1, 2):
        kernel = TritonPointwise.build(chain(n_gelu), CONFIGS[0], DEV)
        got = kernel([x.to(DEV)])[0].cpu().numpy()
        want = exact(x64) if n_gelu == 1 else exact(exact(x64))
        worst, exact_share, nan_bad = ulps(got, want)
        ok = worst <= 1 and nan_bad == 0
        fails += not ok
        print(f"{'PASS' if ok else 'FAIL'} gelu_x{n_gelu}_all_fp16 max {worst} ulp, {100 * exact_share:.2f} % "
              f"correctly rounded, NaN mismatches {nan_bad}")
    n = 256 << 20
    big = torch.randn(n, device=DEV, dtype=torch.float16)
    dst = torch.empty_like(big)
    copy = median_ms(lambda: dst.copy_(big))
    best = None
    for cfg in CONFIGS:
        k = TritonPointwise.build(chain(2), cfg, DEV)
        ms = median_ms(lambda: k([big]))
        pct = 100 * copy / ms
        best = max(best or 0, pct)
        print(f"INFO gelu2_fp16 BLOCK={cfg['BLOCK']} warps={cfg['warps']}: {ms:.4f} ms, {pct:.1f} % of copy "
              f"({2 * big.numel() * 2 / ms / 1e9:.2f} TB/s; copy {copy:.4f} ms)")
    ok = best >= 95.0
    fails += not ok
    print(f"{'PASS' if ok else 'FAIL'} gelu2_fp16_bandwidth best {best:.1f} % of copy (target 95 %)")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
