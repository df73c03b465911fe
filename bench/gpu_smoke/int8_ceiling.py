"""GPU diagnosis (issue 12): how fast can an int8 / fp8 GEMM be in Triton on this GPU, with no epilogue beyond a
scale and an fp16 store — the ceiling the fused quantized kernel (kernels/triton_int8_gemm.py) is measured against.

    PYTHONPATH=. python3 bench/gpu_smoke/int8_ceiling.py [--budget-s 150]

For BERT-base GEMMs (32×128 tokens) and resnet50's convolutions as GEMMs (batch 32, NHWC: a 1×1 convolution is
one GEMM; a 3×3 one after im2col, K = 9·C), every kernel form × config below is captured in a CUDA graph and
replayed (no launch cost), beside fp16 cuBLAS (torch.mm), torch._int_mm and torch._scaled_mm on the same shape:
  ptr   pointer loads (asynchronous copies), one output tile per program, grouped launch order
  tma   host-side tensor descriptors (TMA bulk copies into shared memory), one output tile per program
  pers  tma, persistent: one program per multiprocessor walks the output tiles (the next tile's loads overlap
        this tile's epilogue); pers-ws the same loop warp-specialised (producer warps issue the copies)
With --fp16, the same Triton forms on the fp16 operands (float32 accumulator) beside cuBLAS. With --fused, also the engine's own kernel (kernels/triton_int8_gemm.py) on the BERT shapes with its real epilogue
(per-channel scale, bias, GELU or none, int8 output quantized): what the epilogue costs beside the bare `tma` form.
Prints one line per shape with TOPS; exits 0 (a diagnosis, not a check).
"""

import argparse
import sys
import time

import os

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from tensorforge.kernels.triton_gemm import grouped_tile, output_tiles  # noqa: E402  (the engine's launch order, tile count)
from tensorforge.kernels.triton_int8_gemm import _tma_acc  # noqa: E402  (the engine's bulk-copy main loop)

from int8_profile import graph_ms  # noqa: E402  (one CUDA-graph replay timing for the int8 smokes)

DEV = torch.device("cuda")
CONFIGS = [  # BM, BN, BK, stages, warps
    (128, 128, 128, 3, 8), (128, 256, 128, 3, 8), (256, 128, 128, 3, 8), (128, 128, 64, 4, 4),
    (128, 64, 128, 4, 4), (64, 128, 128, 4, 4), (128, 256, 64, 4, 8), (128, 128, 128, 4, 4),
]


@triton.jit
def _mm_ptr(A, B, C, M, N, K, scale, FP8: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
            G: tl.constexpr):
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, BM, BN, G)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptr = A + rm[:, None].to(tl.int64) * K + rk[None, :]
    b_ptr = B + rn[None, :].to(tl.int64) * K + rk[:, None]
    if FP8:
        acc = tl.zeros((BM, BN), dtype=tl.float32)
    else:
        acc = tl.zeros((BM, BN), dtype=tl.int32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr, mask=(rm[:, None] < M) & (rk[None, :] + k < K), other=0)
        b = tl.load(b_ptr, mask=(rn[None, :] < N) & (rk[:, None] + k < K), other=0)
        if FP8:
            acc = tl.dot(a, b, acc)
        else:
            acc = tl.dot(a, b, acc, out_dtype=tl.int32)
        a_ptr += BK
        b_ptr += BK
    c = (acc.to(tl.float32) * scale).to(tl.float16)
    tl.store(C + rm[:, None].to(tl.int64) * N + rn[None, :], c, mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def _mm_tma(a_desc, b_desc, c_desc, M, N, K, scale, FP8: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
            BK: tl.constexpr, G: tl.constexpr):
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, BM, BN, G)
    acc = _tma_acc(a_desc, b_desc, pid_m, pid_n, 0, K, FP8, BM, BN, BK)
    c_desc.store([pid_m * BM, pid_n * BN], (acc.to(tl.float32) * scale).to(tl.float16))


@triton.jit
def _mm_persist(a_desc, b_desc, c_desc, M, N, K, scale, FP8: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                BK: tl.constexpr, G: tl.constexpr, NUM_SMS: tl.constexpr, WS: tl.constexpr):
    num_tiles = tl.cdiv(M, BM) * tl.cdiv(N, BN)
    for tile in tl.range(tl.program_id(0), num_tiles, NUM_SMS, flatten=not WS, warp_specialize=WS):
        pid_m, pid_n = grouped_tile(tile, M, N, BM, BN, G)
        acc = _tma_acc(a_desc, b_desc, pid_m, pid_n, 0, K, FP8, BM, BN, BK)
        c_desc.store([pid_m * BM, pid_n * BN], (acc.to(tl.float32) * scale).to(tl.float16))


def persistent_forms(a, b, fp8, da, db, dc, cfg):
    """The persistent forms of one config: (ms, name) pairs."""
    bm, bn, bk, st, wp = cfg
    (m, k), n = a.shape, b.shape[0]
    sms = torch.cuda.get_device_properties(DEV).multi_processor_count
    grid = (min(sms, output_tiles(m, n, {"BM": bm, "BN": bn})),)
    out = []
    for ws in (False, True):
        name = f"pers{'-ws' if ws else ''} {bm}x{bn}x{bk}s{st}w{wp}"
        try:
            out.append((graph_ms(lambda: _mm_persist[grid](da, db, dc, m, n, k, 1e-3, FP8=fp8, BM=bm, BN=bn, BK=bk,
                                                           G=8, NUM_SMS=sms, WS=ws, num_stages=st,
                                                           num_warps=wp)), name))
        except Exception as e:  # noqa: BLE001 - a diagnosis
            out.append((float("inf"), f"{name} {type(e).__name__}: {str(e)[:80]}"))
    return out


def fused_forms(a8, n, act):
    """The engine's fused kernel on (a8, a weight of n rows) with a per-channel scale, bias, `act` and an int8
    output, in each TMA config and the best pointer config: (ms, name) pairs."""
    from quant_kernels import make_layer, q8
    from tensorforge.kernels import triton_int8_gemm as tig
    layer = make_layer("QuantizedMatMul", n, act=act)
    from tensorforge.ir import get_spec
    inputs = [a8, q8((n, a8.shape[1])), torch.randn(n, device=DEV) * 0.1]
    small = [a8[:256], *inputs[1:]]
    want = get_spec(layer.op).reference(*small, **layer.attrs)     # the op's reference on 256 rows
    configs = tig.TMA_CONFIGS + tig.PERSISTENT_CONFIGS + tig.CONFIGS[:2]
    forms = []            # each tile with its output by one bulk copy (CTMA=1) and by pointer stores (CTMA=0)
    for cfg in [c for c in configs if not c.get("CTMA")]:
        form = 'pers' if cfg.get('PERSIST') else ('tma' if cfg.get('TMA') else 'ptr')
        for copy in (1, 0):
            variant = {**cfg, "CTMA": 1} if copy else cfg
            name = (f"fused-{act} {form} {cfg['BM']}x{cfg['BN']}x{cfg['BK']}s{cfg['stages']}w{cfg['warps']}"
                    f"{' copy-out' if copy else ' ptr-out'}{' (engine)' if variant in configs else ''}")
            forms.append((variant, name))
    forms += [(c, f"fused-{act} tma {c['BM']}x{c['BN']}x{c['BK']}s{c['stages']}w{c['warps']} copy-out "
                  f"ERF={c['ERF']} (engine)") for c in configs if c.get("ERF") and act == "Gelu"]
    out = []
    for cfg, name in forms:
        try:
            kern = tig.build_kernel(layer, cfg, DEV)
            off = (kern(small)[0].int() - want.int()).abs()
            exact = "" if int(off.max()) == 0 else \
                f" NOT BIT-EXACT ({float(off.ne(0).float().mean()):.1e} of the codes off, max {int(off.max())})"
            out.append((graph_ms(lambda: kern(inputs)), name + exact))
        except Exception as e:  # noqa: BLE001
            out.append((float("inf"), f"{name} {type(e).__name__}: {str(e)[:80]}"))
    return sorted(out)


def triton_forms(a, b, fp8):
    from triton.tools.tensor_descriptor import TensorDescriptor
    (m, k), n = a.shape, b.shape[0]
    c = torch.empty(m, n, device=DEV, dtype=torch.float16)
    out = []
    for bm, bn, bk, st, wp in CONFIGS:
        grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
        cfg = f"{bm}x{bn}x{bk}s{st}w{wp}"
        try:
            out.append((graph_ms(lambda: _mm_ptr[grid](a, b, c, m, n, k, 1e-3, FP8=fp8, BM=bm, BN=bn, BK=bk, G=8,
                                                       num_stages=st, num_warps=wp)), f"ptr {cfg}"))
        except Exception as e:  # noqa: BLE001 - a diagnosis
            out.append((float("inf"), f"ptr {cfg} {type(e).__name__}: {str(e)[:80]}"))
        try:
            da, db = TensorDescriptor.from_tensor(a, [bm, bk]), TensorDescriptor.from_tensor(b, [bn, bk])
            dc = TensorDescriptor.from_tensor(c, [bm, bn])
            out.append((graph_ms(lambda: _mm_tma[grid](da, db, dc, m, n, k, 1e-3, FP8=fp8, BM=bm, BN=bn, BK=bk,
                                                       G=8, num_stages=st, num_warps=wp)), f"tma {cfg}"))
            out += persistent_forms(a, b, fp8, da, db, dc, (bm, bn, bk, st, wp))
        except Exception as e:  # noqa: BLE001
            out.append((float("inf"), f"tma {cfg} {type(e).__name__}: {str(e)[:80]}"))
    return sorted(out)


def shapes():
    t = 32 * 128
    yield "bert qkv", t, 768, 2304
    yield "bert ffn1", t, 768, 3072
    yield "bert ffn2", t, 3072, 768
    yield "bert attn_out", t, 768, 768
    p56, p28, p14 = 32 * 56 * 56, 32 * 28 * 28, 32 * 14 * 14
    yield "r50 1x1 64->256 @56", p56, 64, 256
    yield "r50 1x1 256->64 @56", p56, 256, 64
    yield "r50 3x3 64 @56 (im2col)", p56, 576, 64
    yield "r50 3x3 128 @28 (im2col)", p28, 1152, 128
    yield "r50 1x1 1024->256 @14", p14, 1024, 256
    yield "r50 3x3 256 @14 (im2col)", p14, 2304, 256


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--budget-s", type=float, default=150)
    p.add_argument("--int8-only", action="store_true", help="skip the fp8 forms")
    p.add_argument("--fused", action="store_true", help="also the engine's fused kernel on the BERT shapes")
    p.add_argument("--bert-only", action="store_true", help="only the BERT shapes")
    p.add_argument("--fp16", action="store_true", help="also fp16 Triton forms (float accumulator) beside cuBLAS")
    a = p.parse_args()
    t0 = time.perf_counter()
    print(f"device {torch.cuda.get_device_name()} torch {torch.__version__} triton {triton.__version__}", flush=True)
    for label, m, k, n in shapes():
        if a.bert_only and not label.startswith("bert"):
            continue
        if time.perf_counter() - t0 > a.budget_s:
            print(f"SKIP {label}: budget spent")
            continue
        ops = 2.0 * m * n * k
        a16, b16 = torch.randn(m, k, device=DEV, dtype=torch.float16), torch.randn(n, k, device=DEV, dtype=torch.float16)
        a8 = torch.randint(-128, 128, (m, k), device=DEV, dtype=torch.int16).to(torch.int8)
        b8 = torch.randint(-128, 128, (n, k), device=DEV, dtype=torch.int16).to(torch.int8)
        t16 = graph_ms(lambda: torch.mm(a16, b16.t()))
        tim = graph_ms(lambda: torch._int_mm(a8, b8.t()))
        f8a, f8b = a16.to(torch.float8_e4m3fn), b16.to(torch.float8_e4m3fn)
        one = torch.ones((), device=DEV)
        tsm = graph_ms(lambda: torch._scaled_mm(f8a, f8b.t(), scale_a=one, scale_b=one, out_dtype=torch.float16))
        i8 = triton_forms(a8, b8, False)
        f8 = [] if a.int8_only else triton_forms(f8a, f8b, True)
        h16 = triton_forms(a16, b16, True) if a.fp16 else []     # FP8=True: the float-accumulator path
        tops = lambda ms: ops / ms / 1e9  # noqa: E731
        print(f"{label} M{m} K{k} N{n}: fp16 mm {t16:.4f} ms ({tops(t16):.0f} TFLOPS) | _int_mm {tim:.4f} "
              f"({t16 / tim:.2f}x) | _scaled_mm fp8 {tsm:.4f} ({t16 / tsm:.2f}x)", flush=True)
        fused = []
        if a.fused and label.startswith("bert"):
            fused = fused_forms(a8, n, "Gelu" if "ffn1" in label else "none")
        for tag, res in (("int8", i8), ("fp8", f8), ("int8 fused", fused), ("fp16", h16)):
            if not res:
                continue
            shown = res if tag == "int8 fused" else res[:6]      # every fused form: both store paths side by side
            print(f"   triton {tag}: " + ", ".join(f"{t:.4f} ({t16 / t:.2f}x) {c}" for t, c in shown), flush=True)
            bad = [c for t, c in res if t == float("inf")]
            if bad:
                print(f"   triton {tag} failed: {bad[:2]}", flush=True)
    print(f"total {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
