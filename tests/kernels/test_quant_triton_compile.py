"""The quantized Triton GEMM (kernels/triton_int8_gemm.py) and the standalone Q/DQ kernel (quant_pointwise.py)
compile for sm_90 — PTX and cubin through Triton's NVIDIA backend and ptxas, which run without a GPU — for int8
and fp8 operands, every output kind and epilogue,
with FMA contraction off (the bit-exact epilogue), and the int8 product really is an integer MMA in the PTX.
Runs in a subprocess: TRITON_INTERPRET=1 (set for the whole test session) turns @triton.jit into the interpreter.
"""

import json
import os
import subprocess
import sys

import pytest

SCRIPT = r'''
import json
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from tensorforge.kernels import triton_int8_gemm as T

TARGET = GPUTarget("cuda", 90, 32)
report = {}
ints = "M N K s_am s_ak s_bn s_bk s_rm s_rn s_cm s_cn x_zp".split()
floats = ("alpha beta mid_scale mid_r mid_zp mid_lo mid_hi res_scale res_zp y_scale y_r y_zp y_lo y_hi q2_r "
          "q2_scale q2_zp q2_lo q2_hi").split()
conv_ints = "pad H W CIN OW OHW KW sh sw ph pw dh dw sxn sxh sxw sxc".split()
cases = [  # name, A/B type, residual type, output type, constexprs
    ("int8_conv", "*u8", "*i8", "*i8", dict(CONV=True, SHIFT=True, FP8=False, HAS_ZP=True, RES=2, MID=1, OUT=1,
                                           ACT="Relu", RES_FIRST=True)),
    ("fp8_conv", "*fp8e4nv", "*fp32", "*fp8e4nv", dict(CONV=True, SHIFT=False, FP8=True, HAS_ZP=False, RES=0, MID=0,
                                                     OUT=2, ACT="none", RES_FIRST=True)),
    ("int8_q", "*i8", "*i8", "*i8", dict(FP8=False, HAS_ZP=True, RES=2, MID=1, OUT=1, ACT="Relu", RES_FIRST=True)),
    ("uint8_out", "*i8", "*fp32", "*u8", dict(FP8=False, HAS_ZP=False, RES=1, MID=0, OUT=1, ACT="Clip", RES_FIRST=True)),
    ("int8_float", "*i8", "*fp16", "*fp16", dict(FP8=False, HAS_ZP=True, RES=0, MID=0, OUT=0, ACT="Gelu", RES_FIRST=False)),
    ("fp8_q", "*fp8e4nv", "*fp8e4nv", "*fp8e4nv", dict(FP8=True, HAS_ZP=False, RES=1, MID=2, OUT=2, ACT="Relu", RES_FIRST=True)),
    ("fp8_float", "*fp8e4nv", "*fp32", "*fp32", dict(FP8=True, HAS_ZP=False, RES=0, MID=0, OUT=0, ACT="none", RES_FIRST=True)),
    ("int8_splitk", "*i8", "*i8", "*i8", dict(FP8=False, HAS_ZP=True, RES=2, MID=0, OUT=1, ACT="Relu", RES_FIRST=True,
                                           SPLIT=True)),
    ("int8_gelu_fast", "*i8", "*i8", "*i8", dict(FP8=False, HAS_ZP=False, RES=0, MID=0, OUT=1, ACT="Gelu",
                                              RES_FIRST=False, FAST_ERF=True)),     # ERF=fast: triton_gemm.gelu_fast
]
for i, (name, ab, rt, ct, consts) in enumerate(cases):
    cfg = T.CONFIGS[i % len(T.CONFIGS)]
    types = {"A": ab, "B": "*i8" if ab == "*u8" else ab, "Wsum": "*i32", "Mult": "*fp32", "Bias": "*fp32",
             "Post": "*fp32", "R": rt, "C": ct, "C2": "*i8", "Ktab": "*i32", "KT": "i32", "P": "*i32", "KSPLIT": "i32", **{n: "i32" for n in ints},
             **{n: "fp32" for n in floats}, **{n: "i32" for n in conv_ints}}
    consts.setdefault("OUT2", 1 if name == "int8_float" else 0)
    sig = {a: types.get(a, "constexpr") for a in T._qgemm_kernel.arg_names}
    consts = {"CONV": False, "TMA": False, "SHIFT": False, "SPLIT": False, "C_TMA": False, "FAST_ERF": False, "PAD_ZERO": name != "int8_conv", "TAP_ALIGNED": name == "fp8_conv",
              **consts, "PER_CHANNEL": True,
              "HAS_BIAS": True,
              "HAS_POST": name == "int8_q",
              "BM": cfg["BM"], "BN": cfg["BN"], "BK": cfg["BK"], "G": cfg["G"]}
    src = ASTSource(fn=T._qgemm_kernel, signature=sig, constexprs=consts)
    k = triton.compile(src, target=TARGET, options={"num_warps": cfg["warps"], "num_stages": cfg["stages"],
                                                      "enable_fp_fusion": False})
    ptx = k.asm["ptx"]
    report[name] = {"cubin": len(k.asm["cubin"]), "int_mma": ("s32.s8.s8" in ptx) or (".s8" in ptx and "wgmma" in ptx),
                    "fp8_mma": "e4m3" in ptx, "fma": ptx.count("fma.rn.f32"), "rsqrt": ptx.count("rsqrt.approx"),
                    "ex2": ptx.count("ex2.approx")}
# split-K's second pass: the partial sums and the whole epilogue (quantized residual and output)
epi_types = {"P": "*i32", "S": "i32", "MN": "i32", "Wsum": "*i32", "Mult": "*fp32", "Bias": "*fp32", "Post": "*fp32",
             "R": "*i8", "C": "*i8", "C2": "*i8", **{n: "i32" for n in "M N s_rm s_rn s_cm s_cn x_zp".split()},
             **{n: "fp32" for n in floats}}
red_consts = dict(FP8=False, HAS_ZP=True, PER_CHANNEL=True, HAS_BIAS=True, HAS_POST=False, RES=2, RES_FIRST=True,
                  ACT="Relu", MID=1, OUT=1, OUT2=0, BM=T.REDUCE_TILE[0], BN=T.REDUCE_TILE[1], FAST_ERF=False)
sig = {a: "constexpr" if a in red_consts else epi_types[a] for a in T._splitk_reduce_kernel.arg_names}
k = triton.compile(ASTSource(fn=T._splitk_reduce_kernel, signature=sig, constexprs=red_consts), target=TARGET,
                   options={"num_warps": 4, "enable_fp_fusion": False})
report["splitk_reduce"] = {"cubin": len(k.asm["cubin"]), "fma": k.asm["ptx"].count("fma.rn.f32")}
from tensorforge.kernels import quant_pointwise as P
for name, xt, yt, quant, kind in (("q_u8", "*fp32", "*u8", True, 1), ("q_fp8", "*fp16", "*fp8e4nv", True, 2),
                                  ("dq_i8", "*i8", "*fp32", False, 1), ("dq_fp8", "*fp8e4nv", "*fp32", False, 2)):
    consts = {"QUANT": quant, "KIND": kind, "HAS_ZP": kind == 1, "BLOCK": 1024}
    sig = {"X": xt, "S": "*fp32", "Z": "*u8" if yt == "*u8" else "*fp32", "Y": yt, "numel": "i32", "stride_c": "i32",
           "C": "i32", "lo": "fp32", "hi": "fp32", **{c: "constexpr" for c in consts}}
    k = triton.compile(ASTSource(fn=P._qdq_kernel, signature=sig, constexprs=consts), target=TARGET,
                       options={"num_warps": 4})
    report[name] = {"cubin": len(k.asm["cubin"])}
from tensorforge.kernels import quant_w4_triton as W
for name, at, cfg in (("w4_fp16", "*fp16", W.CONFIGS[0]), ("w4_bf16", "*bf16", W.CONFIGS[2]),
                      ("w4_fp32", "*fp32", W.CONFIGS[1])):
    consts = {"HAS_ZP": name != "w4_bf16", "HAS_BIAS": True, "ACT": "Gelu", "IEEE": at == "*fp32",
              "BM": cfg["BM"], "BN": cfg["BN"], "BK": cfg["BK"], "G": cfg["G"]}
    types = {"A": at, "W": "*i8", "S": "*fp32", "Z": "*i8", "Bias": "*fp32", "C": at, "alpha": "fp32", "beta": "fp32"}
    sig = {n: types.get(n, "constexpr" if n in consts else "i32") for n in W._w4_kernel.arg_names}
    k = triton.compile(ASTSource(fn=W._w4_kernel, signature=sig, constexprs=consts), target=TARGET,
                       options={"num_warps": cfg["warps"], "num_stages": cfg["stages"]})
    report[name] = {"cubin": len(k.asm["cubin"])}
print("REPORT" + json.dumps(report))
'''


def test_quantized_gemm_compiles_for_sm90():
    from tensorforge.kernels import triton_int8_gemm as T
    pytest.importorskip("triton.backends.nvidia", reason="Triton's NVIDIA backend is not installed")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.split("REPORT", 1)[1])
    assert len(report) == 9 + 1 + 4 + 3 and all(r["cubin"] > 0 for r in report.values())
    # the fast-erf GELU: one rsqrt and one ex2 per element a thread holds (MUFU), where the exact one (int8_float,
    # libdevice erf) has neither rsqrt
    fast = T.CONFIGS[8 % len(T.CONFIGS)]
    per = fast["BM"] * fast["BN"] // (32 * fast["warps"])
    assert report["int8_gelu_fast"]["rsqrt"] == per and report["int8_gelu_fast"]["ex2"] == per, report["int8_gelu_fast"]
    assert report["int8_float"]["rsqrt"] == 0
    assert report["int8_q"]["int_mma"] and report["uint8_out"]["int_mma"] and report["int8_conv"]["int_mma"]
    assert report["int8_splitk"]["int_mma"]
    assert report["fp8_q"]["fp8_mma"] and report["fp8_float"]["fp8_mma"] and report["fp8_conv"]["fp8_mma"]
    # no contraction: the only FMAs are the two explicit ones of each quantize (mid Q/DQ and the output Q) per
    # element a thread holds — int8_q compiles CONFIGS[2]; any contracted multiply-add would add to the count
    cfg = T.CONFIGS[2]
    per_thread = cfg["BM"] * cfg["BN"] // (32 * cfg["warps"])
    assert report["int8_q"]["fma"] == 2 * 2 * per_thread
    bm, bn = T.REDUCE_TILE        # split-K's second pass: mid Q/DQ and output Q, 4 warps
    assert report["splitk_reduce"]["fma"] == 2 * 2 * bm * bn // (32 * 4)
