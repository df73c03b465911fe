"""GPU smoke (issue 15.1): the depthwise convolution + epilogue kernel (kernels/triton_depthwise.py) against what the
engine ran before it, at the zoo's depthwise shapes, float16.

ConvNeXt-T's 18 7×7 depthwise convolutions took 703.7 µs of its 2116 µs of kernels at batch 32 on the H200
(cuDNN's conv2d_c1_k1_nhwc_specialized; torch.compile runs the same kernel); their traffic is ~272 MB, ~68 µs at
4 TB/s, and their 6.7 GFLOP of fp32 FMAs ~100 µs: cuDNN is far from either bound. MobileNetV3 and EfficientNet's
3×3 / 5×5 ones run as cuDNN + the Triton epilogue pass.

Also the 1×1 convolutions as one GEMM on channels-last rows (kernels/triton_conv1x1.py) against cuDNN + the Triton
epilogue, at MobileNetV3 / EfficientNet shapes; and the squeeze-excite projections as GatedConv
(kernels/triton_gated_conv1x1.py: the gate scales A as the GEMM loads it) against the gate Mul + cuDNN + epilogue;
and the squeeze-excite MLPs as TwoLayerMLP (kernels/triton_mlp2.py, one launch) against two Triton GEMM launches.

Per shape: cuDNN's convolution alone (channels-last, no bias: the floor of the old path), cuDNN + the Triton epilogue
(the old tactic, `cudnn_triton_epilogue`), every config of `triton_depthwise` and EXPLORE's (marked *), timed as
the builder times tactics (median_us), median µs; each output checked against torch's float32 convolution of the
same values.

    PYTHONPATH=. python3 bench/gpu_smoke/depthwise.py [--budget-s 170]
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))     # bench/

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from tensorforge.builder.tactics import CudaEventTimer  # noqa: E402
from tensorforge.kernels.triton_conv_epilogue import conv_bias_act_  # noqa: E402
from tensorforge.kernels.triton_depthwise import CONFIGS, depthwise_conv, tap_major  # noqa: E402

# (name, N, C, H, k, stride, activation): ConvNeXt-T's four stages (7×7, bias moved into the LayerNorm: none here),
# MobileNetV3-Large's and EfficientNet-B0's larger 3×3 / 5×5 ones
SHAPES = [("convnext s1", 32, 96, 56, 7, 1, "none"), ("convnext s2", 32, 192, 28, 7, 1, "none"),
          ("convnext s3", 32, 384, 14, 7, 1, "none"), ("convnext s4", 32, 768, 7, 7, 1, "none"),
          ("mobilenet 72@56 s2", 32, 72, 56, 5, 2, "Relu"), ("mobilenet 240@28", 32, 240, 28, 3, 1, "HardSwish"),
          ("mobilenet 672@14 s2", 32, 672, 14, 5, 2, "HardSwish"), ("effnet 96@112 s2", 32, 96, 112, 3, 2, "Silu"),
          ("convnext s1 b1", 1, 96, 56, 7, 1, "none"), ("mobilenet 240@28 b1", 1, 240, 28, 3, 1, "HardSwish")]


# rows-kernel configs timed beside the tactic's CONFIGS (marked * in the output), to choose the next CONFIGS from
EXPLORE = [{"layout": "rows", "BH": bh, "BW": bw, "BC": bc, "warps": wp}
           for bh, bw, bc, wp in ((1, 16, 64, 4), (2, 32, 32, 4), (4, 32, 32, 4), (4, 16, 64, 4))]


def describe(cfg: dict) -> str:
    """A config in a few characters: rows BHxBWxBC, or the flat kernel's layout BLOCK_PxBLOCK_C."""
    shape = (f"{cfg['BH']}x{cfg['BW']}x{cfg['BC']}" if cfg["layout"] == "rows"
             else f"{cfg['BLOCK_P']}x{cfg['BLOCK_C']}")
    return f"{cfg['layout']} {shape}{'' if cfg in CONFIGS else '*'}"


def median_us(fn) -> float:
    """Median µs of one call as the builder times a candidate (builder/tactics.CudaEventTimer: a CUDA-graph replay
    per timed run, L2 flushed before each). The flush also keeps the GPU busy while the host submits the replay: with
    replays back to back and nothing queued ahead, every small case read ~20 µs on the H100 (session 39's smoke:
    a 7×7×960 Mul, and the same Mul + a convolution, both 21 µs), the host's submission rather than the kernels."""
    return 1e3 * CudaEventTimer(torch.device("cuda"), iters=20).measure("smoke", lambda: [fn()]).median_ms


def sweep(run, ref, configs, describe) -> tuple[list, str, int]:
    """Each config's output checked against `ref` (max error over max |ref| ≤ 4e-3), then timed: (rows (µs, cfg,
    error) fastest first, their text, the number that failed the check)."""
    scale, rows, fails = float(ref.abs().max()), [], 0
    for cfg in configs:
        err = float((run(cfg).float() - ref).abs().max()) / scale
        fails += err > 4e-3
        rows.append((median_us(lambda: run(cfg)), cfg, err))
    rows.sort(key=lambda t: t[0])
    text = ", ".join(f"{us:.1f} {describe(c)}{'' if e <= 4e-3 else f' FAIL err {e:.1e}'}" for us, c, e in rows)
    return rows, text, fails


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--budget-s", type=float, default=170.0)
    args = p.parse_args()
    t0 = time.perf_counter()
    dev = torch.device("cuda")
    print(f"device {torch.cuda.get_device_name()} torch {torch.__version__}")
    fails = 0
    totals = {"cudnn+epilogue": 0.0, "triton best": 0.0}
    for name, n, c, h, k, s, act in SHAPES:
        if time.perf_counter() - t0 > args.budget_s:
            print(f"{name}: no time left")
            continue
        x = torch.randn(n, c, h, h, device=dev).half().contiguous(memory_format=torch.channels_last)
        w = (torch.randn(c, 1, k, k, device=dev) * 0.2).half()
        b = None if act == "none" else torch.randn(c, device=dev).half()
        wl = w.contiguous(memory_format=torch.channels_last)
        attrs = {"group": c, "pads": [k // 2] * 4, "strides": [s, s], "kernel_shape": [k, k]}
        ref = F.conv2d(x.float(), w.float(), None if b is None else b.float(), s, k // 2, 1, c)
        ref = {"none": ref, "Relu": F.relu(ref), "HardSwish": F.hardswish(ref), "Silu": F.silu(ref)}[act]
        scale = float(ref.abs().max())
        cudnn = median_us(lambda: F.conv2d(x, wl, None, s, k // 2, 1, c))
        old = median_us(lambda: conv_bias_act_(F.conv2d(x, wl, None, s, k // 2, 1, c), b, None, act))
        wt = tap_major(w)
        rows = []
        for cfg in CONFIGS + EXPLORE:
            out = depthwise_conv(x, w, b, None, attrs, act, channels_last=cfg["layout"] == "nhwc", cfg=cfg, wt=wt)
            err = float((out.float() - ref).abs().max()) / scale
            ok = err <= 4e-3
            fails += not ok
            us = median_us(lambda: depthwise_conv(x, w, b, None, attrs, act, channels_last=cfg["layout"] == "nhwc",
                                                  cfg=cfg, wt=wt))
            rows.append((us, cfg, err, ok))
        rows.sort(key=lambda r: r[0])
        totals["cudnn+epilogue"] += old if b is not None else cudnn
        totals["triton best"] += rows[0][0]
        text = ", ".join(f"{us:.1f} {describe(c_)}{'' if ok else f' FAIL err {e:.1e}'}" for us, c_, e, ok in rows)
        in_tactic = min(us for us, c_, _, _ in rows if c_ in CONFIGS)
        base = old if b is not None else cudnn
        print(f"{name} (N{n} C{c} {h}x{h} k{k} s{s} {act}): cuDNN {cudnn:.1f} µs, cuDNN + epilogue {old:.1f} | "
              f"triton {text} | best ÷ old path {rows[0][0] / base:.2f}, best of CONFIGS ÷ old "
              f"{in_tactic / base:.2f}")
    print(f"sum over the shapes: old path {totals['cudnn+epilogue']:.1f} µs, triton best {totals['triton best']:.1f}"
          f" µs; {fails} FAIL; {time.perf_counter() - t0:.1f} s")
    fails += pointwise_convs(t0, args.budget_s)
    fails += gated_convs(t0, args.budget_s)
    fails += se_mlps(t0, args.budget_s)
    return 1 if fails else 0


# 1×1 convolutions (kernels/triton_conv1x1.py): (name, N, C_in, C_out, H, activation, residual)
POINTWISE = [("mobilenet 72→24@28 b1", 1, 72, 24, 28, "none", False),
             ("mobilenet 240→80@14 b32", 32, 240, 80, 14, "none", False),
             ("mobilenet 80→200@14 b1", 1, 80, 200, 14, "HardSwish", False),
             ("mobilenet 672→160@7 b32", 32, 672, 160, 7, "none", True),
             ("effnet 96→24@56 b32", 32, 96, 24, 56, "none", False),
             ("effnet 24→144@56 b32", 32, 24, 144, 56, "Silu", False)]


def pointwise_convs(t0: float, budget_s: float) -> int:
    """cuDNN + the Triton epilogue (the old tactic) against the 1×1 GEMM's configs, channels-last float16."""
    from tensorforge.kernels.triton_conv1x1 import CONFIGS as C1, conv1x1_gemm
    dev, fails = torch.device("cuda"), 0
    for name, n, c, o, h, act, res in POINTWISE:
        if time.perf_counter() - t0 > budget_s:
            print(f"{name}: no time left")
            continue
        x = torch.randn(n, c, h, h, device=dev).half().contiguous(memory_format=torch.channels_last)
        w = (torch.randn(o, c, 1, 1, device=dev) * 0.1).half()
        b, wl = torch.randn(o, device=dev).half(), w.contiguous(memory_format=torch.channels_last)
        r = torch.randn(n, o, h, h, device=dev).half().contiguous(memory_format=torch.channels_last) if res else None
        ref = F.conv2d(x.float(), w.float(), b.float())
        ref = {"none": ref, "HardSwish": F.hardswish(ref), "Silu": F.silu(ref)}[act] + (0 if r is None else r.float())
        old = median_us(lambda: conv_bias_act_(F.conv2d(x, wl, None), b, r, act))
        rows, text, bad = sweep(lambda cfg: conv1x1_gemm(x, w, b, r, act, cfg=cfg), ref, C1,
                                lambda c_: f"{c_['BM']}x{c_['BN']}x{c_['BK']}{' TMA' if c_.get('TMA') else ''}")
        fails += bad
        print(f"1x1 {name}: cuDNN + epilogue {old:.1f} µs | triton GEMM {text} | best ÷ old {rows[0][0] / old:.2f}")
    return fails


# squeeze-excite projections (GatedConv): (name, N, C_in, C_out, H, residual)
GATED = [("effnet 96→24@56 b32", 32, 96, 24, 56, False), ("effnet 240→40@28 b32", 32, 240, 40, 28, True),
         ("effnet 480→80@14 b32", 32, 480, 80, 14, True), ("effnet 1152→192@7 b32", 32, 1152, 192, 7, True),
         ("mobilenet 960→160@7 b32", 32, 960, 160, 7, True), ("effnet 96→24@56 b1", 1, 96, 24, 56, False),
         ("mobilenet 672→112@14 b1", 1, 672, 112, 14, False)]


def gated_convs(t0: float, budget_s: float) -> int:
    """The old path — torch's x·gate, then cuDNN + the Triton epilogue (`gatedconv.mul_cudnn_triton_epilogue`) —
    against GatedConv's one GEMM in every config, channels-last float16 with a bias."""
    from tensorforge.kernels.triton_gated_conv1x1 import CONFIGS as CG, gated_conv1x1
    dev, fails = torch.device("cuda"), 0
    for name, n, c, o, h, res in GATED:
        if time.perf_counter() - t0 > budget_s:
            print(f"gated {name}: no time left")
            continue
        x = torch.randn(n, c, h, h, device=dev).half().contiguous(memory_format=torch.channels_last)
        gate = torch.rand(n, c, 1, 1, device=dev).half()
        w = (torch.randn(o, c, 1, 1, device=dev) * 0.1).half()
        b, wl = torch.randn(o, device=dev).half(), w.contiguous(memory_format=torch.channels_last)
        r = torch.randn(n, o, h, h, device=dev).half().contiguous(memory_format=torch.channels_last) if res else None
        ref = F.conv2d((x * gate).float(), w.float(), b.float()) + (0 if r is None else r.float())
        mul = median_us(lambda: x * gate)
        old = median_us(lambda: conv_bias_act_(F.conv2d(x * gate, wl, None), b, r, "none"))
        rows, text, bad = sweep(lambda cfg: gated_conv1x1(x, gate, w, b, r, "none", cfg=cfg), ref, CG,
                                lambda c_: f"{c_['BM']}x{c_['BN']}x{c_['BK']}")
        fails += bad
        print(f"gated {name}: Mul {mul:.1f} + cuDNN + epilogue = {old:.1f} µs | gated GEMM {text} | "
              f"best ÷ old {rows[0][0] / old:.2f}")
    return fails


# squeeze-excite MLPs (TwoLayerMLP): (name, rows, C, hidden)
MLPS = [("effnet 1152/48 b1", 1, 1152, 48), ("effnet 480/20 b1", 1, 480, 20), ("mobilenet 960/240 b1", 1, 960, 240),
        ("effnet 1152/48 b32", 32, 1152, 48), ("mobilenet 672/168 b32", 32, 672, 168)]


def se_mlps(t0: float, budget_s: float) -> int:
    """Two launches of the Triton GEMM (each layer's best skinny / 64-row config, as the engine timed them) against
    TwoLayerMLP's one launch, SiLU then sigmoid, float16."""
    from tensorforge.kernels.triton_gemm import CONFIGS as GC, gemm_epilogue
    from tensorforge.kernels.triton_mlp2 import CONFIGS as CM, mlp2
    dev, fails = torch.device("cuda"), 0
    for name, rows, c, hidden in MLPS:
        if time.perf_counter() - t0 > budget_s:
            print(f"mlp {name}: no time left")
            continue
        a = torch.rand(rows, c, device=dev).half()
        w1, b1 = (torch.randn(hidden, c, device=dev) * 0.05).half(), torch.randn(hidden, device=dev).half()
        w2, b2 = (torch.randn(c, hidden, device=dev) * 0.1).half(), torch.randn(c, device=dev).half()
        h = F.silu(F.linear(a.float(), w1.float(), b1.float())).half().float()
        ref = torch.sigmoid(F.linear(h, w2.float(), b2.float()))
        pair = min(median_us(lambda: gemm_epilogue(gemm_epilogue(a, w1, b1, trans_b=1, activation="Silu", cfg=cfg),
                                                   w2, b2, trans_b=1, activation="Sigmoid", cfg=cfg))
                   for cfg in (GC[6], GC[7], GC[8], GC[3]))
        rows_, text, bad = sweep(lambda cfg: mlp2(a, w1, b1, w2, b2, 1, 1, act1="Silu", act2="Sigmoid", cfg=cfg),
                                 ref, CM, lambda c_: f"BO{c_['BO']}w{c_['warps']}")
        fails += bad
        print(f"mlp {name}: two GEMM launches (best config) {pair:.1f} µs | one launch {text} | best ÷ pair "
              f"{rows_[0][0] / pair:.2f}")
    return fails


if __name__ == "__main__":
    raise SystemExit(main())
