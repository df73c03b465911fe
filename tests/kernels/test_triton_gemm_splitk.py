"""The split-K Triton GEMM (kernels/triton_gemm_splitk.py) under TRITON_INTERPRET=1, against onnxruntime running the
unfused ONNX graph (Transpose → MatMul → Mul → Add bias → [Add residual] → activation → [Add residual]) in float32
on the same float16 values. Under the interpreter split_plan sizes for 8 multiprocessors, so a 40 × 24 product in
32 × 32 tiles (2 tiles) over K = 200 (7 steps of 32) runs 4 splits, the last one partial. Also: both main loops,
the one-split fallback, the tactic's reasons, and that the comparison catches a lost split."""

import pytest
import torch

from epilogue_oracle import check_gemm as check
from epilogue_oracle import gemm_epilogue_oracle as oracle
from tensorforge.ir import Layer
from tensorforge.kernels import triton_gemm, triton_gemm_splitk
from tensorforge.kernels.quant_split import sm_count, split_plan
from tensorforge.kernels.triton_gemm_splitk import TritonGemmSplitK, gemm_splitk

M, K, N = 40, 200, 24
SMALL = {"BM": 32, "BN": 32, "BK": 32, "G": 1, "stages": 1, "warps": 1, "TMA": 1, "SPLIT": 1}
POINTERS = {key: v for key, v in SMALL.items() if key != "TMA"}


def operands(trans_b, seed):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(M, K, generator=g).half()
    w = (torch.randn(N, K, generator=g) if trans_b else torch.randn(K, N, generator=g)).mul(0.2).half()
    return a, w, torch.randn(N, generator=g).half(), torch.randn(M, N, generator=g).half()


def test_the_shapes_split():
    assert split_plan(M, N, K, SMALL, sm_count(torch.device("cpu"))) == (4, 64)


@pytest.mark.parametrize("cfg", [SMALL, POINTERS], ids=["tma", "pointers"])
@pytest.mark.parametrize("trans_b", [0, 1])
@pytest.mark.parametrize("act", ["Gelu", "Relu", "none"])
def test_split_gemm_matches_onnxruntime(cfg, trans_b, act):
    a, w, bias, _ = operands(trans_b, seed=trans_b)
    b = w.t() if trans_b else w
    got = gemm_splitk(a, b, bias, activation=act, cfg=cfg)
    assert got.dtype == torch.float16 and got.shape == (M, N)
    check(got, oracle(a, w, bias, trans_b=trans_b, act=act))


@pytest.mark.parametrize("res_first", [0, 1])
def test_split_gemm_residual_scale_and_folded_rows(res_first):
    """A (2, 20, K) folded into 40 rows, scale 0.5, a residual before or after the activation."""
    a, w, bias, r = operands(1, seed=5)
    got = gemm_splitk(a.reshape(2, 20, K), w.t(), bias, r.reshape(2, 20, N), scale=0.5, activation="Relu",
                      residual_first=res_first, cfg=SMALL)
    assert got.shape == (2, 20, N)
    check(got.reshape(M, N), oracle(a, w, bias, r, trans_b=1, scale=0.5, act="Relu", residual_first=res_first))


def test_one_split_runs_the_one_pass_kernel(monkeypatch):
    """Tiles enough for every multiprocessor (8 under the interpreter): the plan is one split, and the call is the
    one-pass GEMM of the same tiles, not a split of one."""
    class Forbidden:
        def __getitem__(self, grid):
            raise AssertionError("the split kernel ran for a one-split plan")
    monkeypatch.setattr(triton_gemm_splitk, "_gemm_partial_kernel", Forbidden())
    tiny = {**SMALL, "BM": 16, "BN": 16}        # 3 × 2 tiles … and K = 200 in 7 steps
    a, w, bias, _ = operands(1, seed=6)
    a = torch.cat([a, a])                       # 80 rows: 5 × 2 = 10 tiles ≥ 8
    assert split_plan(80, N, K, tiny, 8)[0] == 1
    got = gemm_splitk(a, w.t(), bias, activation="Gelu", cfg=tiny)
    check(got, oracle(a, w, bias, trans_b=1, act="Gelu"))


def test_a_lost_split_is_caught(monkeypatch):
    """The comparison's power: the second pass summing S − 1 of the S partials must fail the check."""
    real = triton_gemm_splitk._partials_epilogue_kernel

    class DropLast:
        def __getitem__(self, grid):
            return lambda P, S, *rest, **kw: real[grid](P, S - 1, *rest, **kw)
    monkeypatch.setattr(triton_gemm_splitk, "_partials_epilogue_kernel", DropLast())
    a, w, bias, _ = operands(1, seed=7)
    got = gemm_splitk(a, w.t(), bias, cfg=SMALL)
    with pytest.raises(AssertionError):
        check(got, oracle(a, w, bias, trans_b=1))


def test_tactic_builds_and_says_where_it_does_not_fit():
    a, w, bias, r = operands(1, seed=8)
    layer = Layer("fc", "MatMulEpilogue", ["x", "w", "b", "r"], ["y"],
                  {"trans_b": 1, "activation": "Gelu", "residual_first": 0})
    assert TritonGemmSplitK.fits(layer, SMALL, [a, w, bias, r]) is None
    got = TritonGemmSplitK.build(layer, SMALL, torch.device("cpu"))([a, w, bias, r])[0]
    check(got, oracle(a, w, bias, r, trans_b=1, act="Gelu"))
    assert "2-D weight" in TritonGemmSplitK.fits(layer, SMALL, [a.reshape(2, 20, K), w.expand(2, N, K)])
    assert "split-K not needed" in TritonGemmSplitK.fits(layer, {**SMALL, "BM": 16, "BN": 16},
                                                         [torch.cat([a, a]), w])


ON_CUDA = r'''
import torch
import torch.nn.functional as F
from tensorforge.kernels.triton_gemm import tma_reason
from tensorforge.kernels.triton_gemm_splitk import CONFIGS, gemm_splitk
for cfg in CONFIGS:
    for m, k, n, act in ((128, 768, 3072, "Gelu"), (128, 3072, 768, "none"), (100, 768, 768, "Relu")):
        a = torch.randn(m, k, device="cuda").half()
        w = (torch.randn(n, k, device="cuda") * k ** -0.5).half()
        bias, r = torch.randn(n, device="cuda").half(), torch.randn(m, n, device="cuda").half()
        assert tma_reason(a, w.t()) is None
        want = F.linear(a.float(), w.float(), bias.float())
        want = {"Gelu": F.gelu, "Relu": F.relu, "none": lambda t: t}[act](want) + r.float()
        got = gemm_splitk(a, w.t(), bias, r, activation=act, cfg=cfg)
        torch.testing.assert_close(got.float(), want, rtol=2e-3, atol=2e-3 * float(want.abs().max()))
print("OK")
'''


def test_split_gemm_on_cuda_at_transformer_batch1_shapes():
    """The compiled kernels on a GPU (skips without CUDA; a subprocess without TRITON_INTERPRET): BERT-base's FC1
    + GELU and FC2 at 128 tokens, and a 100-row product, every config, tensor-descriptor loop, against torch's
    float32 product of the same float16 values."""
    import os
    import subprocess
    import sys
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU (the interpreter tests above cover the CPU)")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-c", ON_CUDA], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stderr[-3000:]


COMPILE = r'''
import json, triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from tensorforge.kernels import triton_gemm_splitk
out = {}
for cfg in triton_gemm_splitk.CONFIGS:
    for b_nk in (True, False):
        bblock = [cfg["BN"], cfg["BK"]] if b_nk else [cfg["BK"], cfg["BN"]]
        consts = {"USE_TMA": True, "B_NK": b_nk, "PRECISION": "ieee", "BM": cfg["BM"], "BN": cfg["BN"],
                  "BK": cfg["BK"], "G": cfg["G"]}
        sig = {"A": f"tensordesc<fp16[{cfg['BM']}, {cfg['BK']}]>", "B": f"tensordesc<fp16[{bblock[0]}, {bblock[1]}]>",
               "P": "*fp32", **{n: "i32" for n in "M N K KSPLIT MN s_am s_ak s_bk s_bn".split()},
               **{c: "constexpr" for c in consts}}
        k = triton.compile(ASTSource(fn=triton_gemm_splitk._gemm_partial_kernel, signature=sig, constexprs=consts),
                           target=GPUTarget("cuda", 90, 32),
                           options={"num_warps": cfg["warps"], "num_stages": cfg["stages"]})
        ptx = k.asm["ptx"]
        out[f"{cfg['BM']}{b_nk}"] = {"wgmma": "wgmma" in ptx, "tma": "cp.async.bulk.tensor" in ptx,
                                     "cubin": len(k.asm["cubin"]), "smem": k.metadata.shared}
print("REPORT" + json.dumps(out))
'''


def test_split_kernel_compiles_for_sm90_with_bulk_copies_and_wgmma():
    """The tensor-descriptor main loop of the partial products (what the interpreter cannot check): every config,
    both B layouts, compiles to sm_90 code with cp.async.bulk.tensor loads and wgmma, in an H100's shared memory."""
    import json
    import os
    import subprocess
    import sys
    pytest.importorskip("triton.backends.nvidia", reason="Triton's NVIDIA backend is not installed")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-c", COMPILE], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.split("REPORT", 1)[1])
    assert len(report) == 2 * len(triton_gemm_splitk.CONFIGS), report
    for r in report.values():
        assert r["wgmma"] and r["tma"] and r["cubin"] > 0 and r["smem"] <= 232448, report
