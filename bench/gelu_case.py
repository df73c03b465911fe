"""Case 1 of BENCH.md: the seed's gelu(gelu(x)) as the opset-11 export emits it (Div, Erf, Add, Mul, Mul, twice),
x of `n` elements, fp32 and fp16, against a device copy of the same bytes and the torch peers.

    effective bandwidth = 2 · bytes(x) / time        (one read of x, one write of y: the physical minimum)

Accuracy: fp32 output vs torch's exact-erf F.gelu applied twice (target: allclose rtol 1e-6, atol 1e-6);
fp16 output vs the same computed in fp32 and rounded (max abs and max relative error reported).
"""

import io
import math

import torch
import torch.nn.functional as F

import tensorforge as tfg
from tensorforge.runtime import ExecutionContext

from measure import cuda_times, stats
from peers import torch_peers


class SeedNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.gelu = torch.nn.GELU()

    def forward(self, x):
        return self.gelu(self.gelu(x))


def seed_onnx(dtype: torch.dtype) -> bytes:
    buf = io.BytesIO()
    torch.onnx.export(SeedNet().to(dtype), (torch.randn(64, dtype=dtype),), buf, dynamo=False, opset_version=11,
                      input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "n"}, "y": {0: "n"}})
    return buf.getvalue()


def _decomposed(x):
    for _ in range(2):
        x = (torch.erf(x / math.sqrt(2.0)) + 1.0) * x * 0.5
    return x


def run_case(n: int, dtype: torch.dtype, iters: int, warmup: int, use_compile: bool, log) -> dict:
    name = str(dtype).replace("torch.", "")
    nbytes = n * torch.empty((), dtype=dtype).element_size()
    x = torch.randn(n, device="cuda", dtype=dtype)
    engine = tfg.build(seed_onnx(dtype), shapes={"x": (n,)}, device="cuda")
    device_layers = [layer.op for layer in engine.data.layers if layer.placement != "host"]
    ctx = ExecutionContext(engine.data, "cuda")
    bound = ctx.bind_inputs({"x": x}) or {"x": x}
    y = ctx.run(bound, copy_outputs=False)["y"]
    ref = F.gelu(F.gelu(x.float()))
    err = (y.float() - ref).abs()
    big = ref.abs() > 1e-3
    accuracy = {"max_abs_err": err.max().item(), "max_rel_err_where_abs_ref_gt_1e-3": (err[big] / ref[big].abs()).max().item()}
    if dtype == torch.float32:
        accuracy["allclose_rtol1e-6_atol1e-6"] = bool(torch.allclose(y, ref, rtol=1e-6, atol=1e-6))
        accuracy["max_err_over_tolerance"] = (err / (1e-6 + 1e-6 * ref.abs())).max().item()     # ≤ 1 ⇔ allclose
    del y, ref, err, big
    dst = torch.empty_like(x)
    runners = {"device copy": lambda: dst.copy_(x), "tensorforge": lambda: ctx.run(bound, copy_outputs=False),
               "eager decomposed": lambda: _decomposed(x)}
    runners.update(torch_peers(SeedNet().cuda(), (x,), use_compile=use_compile))
    results = {}
    for rname, fn in runners.items():
        if isinstance(fn, str):
            results[rname] = {"error": fn}
            continue
        st = stats(cuda_times(fn, iters, warmup))
        st["TB_per_s"] = round(2 * nbytes / (st["median_ms"] * 1e-3) / 1e12, 3)
        results[rname] = st
        log(f"gelu {name}: {rname:<18} {st['median_ms']:.4f} ms  {st['TB_per_s']:.2f} TB/s  spread {st['spread_pct']}%")
    copy_bw = results["device copy"].get("TB_per_s")
    for st in results.values():
        if "TB_per_s" in st and copy_bw:
            st["pct_of_copy"] = round(100 * st["TB_per_s"] / copy_bw, 1)
    out = {"dtype": name, "elements": n, "bytes": nbytes, "engine_device_layers": device_layers,
           "graphs": ctx.graphs_enabled, "graph_note": ctx.graph_disabled_reason, "accuracy": accuracy,
           "runners": results, "build_seconds": engine.data.build_info.get("build_seconds")}
    return out                  # the caller releases the memory (run.py: release())
