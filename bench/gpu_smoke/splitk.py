"""GPU smoke (issue 15.1): the split-K GEMM (kernels/triton_gemm_splitk.py) against cuBLAS and the one-pass Triton
GEMM at the transformer projections of batch 1, float16.

Per shape (rows M = tokens; weight (N, K) as nn.Linear stores it): cuBLAS through F.linear with the bias (the
engine's torch_addmm tactic) plus the activation / residual as torch ops, the best one-pass triton_gemm TMA config,
and every split-K config; each output checked against torch's float32 product of the same values (max error over
max |ref| ≤ 4e-3), timed as the builder times tactics (CudaEventTimer: CUDA-graph replays, L2 flushed before each).

    PYTHONPATH=. python3 bench/gpu_smoke/splitk.py [--budget-s 60]
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))     # bench/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))                                   # the smokes

from depthwise import median_us  # noqa: E402  (timed as the builder times a candidate: CudaEventTimer)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from tensorforge.kernels.quant_split import sm_count, split_plan  # noqa: E402
from tensorforge.kernels.triton_gemm import TMA_CONFIGS, gemm_epilogue  # noqa: E402
from tensorforge.kernels.triton_gemm_splitk import CONFIGS, gemm_splitk  # noqa: E402

# (name, M, K, N, activation, residual): BERT-base / GPT-2 at 128 tokens, ViT-B/16 at 197
SHAPES = [("bert qkv", 128, 768, 2304, "none", False), ("bert out-proj", 128, 768, 768, "none", True),
          ("bert fc1+gelu", 128, 768, 3072, "Gelu", False), ("bert fc2", 128, 3072, 768, "none", True),
          ("vit fc1+gelu", 197, 768, 3072, "Gelu", False), ("vit fc2", 197, 3072, 768, "none", True)]
ACT = {"Gelu": F.gelu, "none": lambda t: t}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--budget-s", type=float, default=60.0)
    args = p.parse_args()
    t0 = time.perf_counter()
    dev = torch.device("cuda")
    print(f"device {torch.cuda.get_device_name()} torch {torch.__version__}, {sm_count(dev)} SMs")
    fails = 0
    for name, m, k, n, act, res in SHAPES:
        if time.perf_counter() - t0 > args.budget_s:
            print(f"{name}: no time left")
            continue
        a = torch.randn(m, k, device=dev).half()
        w = (torch.randn(n, k, device=dev) * k ** -0.5).half()
        bias = torch.randn(n, device=dev).half()
        r = torch.randn(m, n, device=dev).half() if res else None
        ref = ACT[act](F.linear(a.float(), w.float(), bias.float())) + (r.float() if res else 0.0)
        scale = float(ref.abs().max())

        def cublas():
            y = ACT[act](F.linear(a, w, bias))
            return y + r if res else y
        rows = [("cuBLAS + torch epilogue", median_us(cublas), float((cublas().float() - ref).abs().max()) / scale)]
        sms = sm_count(dev)
        tiles = lambda cfg: f"{cfg['BM']}x{cfg['BN']}x{cfg['BK']}"
        candidates = ([(f"one-pass {tiles(cfg)}", lambda cfg=cfg: gemm_epilogue(a, w.t(), bias, r, 0, 1.0, act,
                                                                                 cfg=cfg)) for cfg in TMA_CONFIGS]
                      + [(f"split-K {tiles(cfg)} S={split_plan(m, n, k, cfg, sms)[0]}",
                          lambda cfg=cfg: gemm_splitk(a, w.t(), bias, r, 1.0, act, cfg=cfg)) for cfg in CONFIGS])
        for label, call in candidates:
            rows.append((label, median_us(call), float((call().float() - ref).abs().max()) / scale))
        fails += sum(e > 4e-3 for _, _, e in rows)
        base = rows[0][1]
        best_one = min(us for lab, us, _ in rows if lab.startswith("one-pass"))
        best_split = min(us for lab, us, _ in rows if lab.startswith("split-K"))
        rows.sort(key=lambda t: t[1])
        text = ", ".join(f"{lab} {us:.1f}{'' if e <= 4e-3 else f' FAIL err {e:.1e}'}" for lab, us, e in rows)
        print(f"{name} (M{m} K{k} N{n} {act}{' +res' if res else ''}): {text} | split ÷ cuBLAS "
              f"{best_split / base:.2f}, split ÷ one-pass {best_split / best_one:.2f}")
    print(f"{fails} FAIL; {time.perf_counter() - t0:.1f} s")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
