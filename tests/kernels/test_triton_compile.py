"""Every Triton kernel (hand-written and generated) compiles for a real GPU: sm_90 PTX and cubin through
Triton's NVIDIA backend and ptxas, which run without a GPU. The interpreter tests check numerics; this checks
what the interpreter cannot — constexpr branches, dot shapes, types — and that the generated GELU kernel
vectorises its loads (128-bit) and uses the branch-free math (MUFU only for exp2/rsqrt, no division fix-ups).
Runs in a subprocess: TRITON_INTERPRET=1 (set for the whole test session) turns @triton.jit into the interpreter.
"""

import json
import os
import subprocess
import sys

import pytest

SCRIPT = r'''
import json, os, re, subprocess, tempfile
import torch, triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from tensorforge.ir import Layer
from tensorforge.codegen import generate_pointwise
from tensorforge.kernels import triton_attention, triton_gemm, triton_layernorm, triton_softmax
from tensorforge.kernels import triton_add_layernorm, triton_conv_epilogue, triton_conv_pool, triton_pool
from tensorforge.kernels import triton_depthwise, triton_depthwise_rows, triton_gated_conv1x1, triton_mlp2
from tensorforge.kernels import triton_gemm_splitk
from tensorforge.kernels.generated import load_module, register_source

TARGET = GPUTarget("cuda", 90, 32)
ALIGNED = {i: [["tt.divisibility", 16]] for i in range(3)}
report = {}

def compile_(name, fn, sig, consts, warps=4, stages=3, attrs=None):
    sig = {**sig, **{c: "constexpr" for c in consts}}
    src = ASTSource(fn=fn, signature=sig, constexprs=consts, attrs={(k,): v for k, v in (attrs or {}).items()})
    k = triton.compile(src, target=TARGET, options={"num_warps": warps, "num_stages": stages})
    report[name] = {"ptx_lines": len(k.asm["ptx"].splitlines()), "cubin": len(k.asm["cubin"]), **usage(k)}
    return k

def usage(k):
    """Registers and stack bytes per thread of the sm_90 code (cuobjdump -res-usage, shipped with Triton's NVIDIA
    backend): a stack means spilled registers."""
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    if not os.path.exists(tool):
        return {}
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(k.asm["cubin"])
        f.flush()
        out = subprocess.run([tool, "-res-usage", f.name], capture_output=True, text=True).stdout
    found = dict(re.findall(r"(REG|STACK):(\d+)", out))
    return {"regs": int(found.get("REG", -1)), "stack": int(found.get("STACK", -1))}

ptrs = lambda names, t: {n: t for n in names}
ln_q = {"q_scale": "fp32", "q_r": "fp32", "q_zp": "fp32", "q_lo": "fp32", "q_hi": "fp32"}
for dt in ("*fp32", "*fp16", "*bf16"):
    compile_(f"layernorm{dt}", triton_layernorm._layernorm_kernel,
             {**ptrs("XWBY", dt), **{n: "i32" for n in "M N R1 stride_x0 stride_x stride_xc stride_y".split()},
              "eps": "fp32", "Shift": dt, "Q": dt, **ln_q},
             {"HAS_BIAS": True, "SINGLE": dt != "*fp32", "BLOCK_N": 1024, "ROWS": 1 if dt != "*fp16" else 8,
              "HAS_SHIFT": dt != "*fp32", "Q_KIND": 0, "STORE_Y": True})
    compile_(f"softmax{dt}", triton_softmax._softmax_kernel, {**ptrs("XY", dt), "N": "i32", "stride_x": "i32",
             "stride_y": "i32"}, {"LOG": dt == "*bf16", "SINGLE": dt == "*fp16", "BLOCK_N": 2048})
for qt, kind, rows in (("*i8", 1, 1), ("*fp8e4nv", 2, 8)):       # LayerNormalizationQuantize: y and Q(y)
    compile_(f"layernorm_q{qt}", triton_layernorm._layernorm_kernel,
             {**ptrs("XWBY", "*fp16"), **{n: "i32" for n in "M N R1 stride_x0 stride_x stride_xc stride_y".split()},
              "eps": "fp32", "Shift": "*fp16", "Q": qt, **ln_q},
             {"HAS_BIAS": True, "SINGLE": True, "BLOCK_N": 1024, "ROWS": rows, "HAS_SHIFT": False, "Q_KIND": kind,
              "STORE_Y": rows == 1})                 # STORE_Y False: only Q(y) is written (y has no reader)
gemm_sig = {"M N K s_ab s_am s_ak s_bb s_bk s_bn s_rb s_rm s_rn s_cb s_cm s_cn".split()[i]: "i32" for i in range(15)}
for dt, act, prec, picks in (("*fp16", "Gelu", "ieee", (0, 4, 6, 7, 8)), ("*bf16", "GeluTanh", "ieee", (1,)),
                             ("*fp32", "Clip", "tf32", (2,))):
    for cfg in (triton_gemm.CONFIGS[i] for i in picks):
        compile_(f"gemm{dt}{act}{cfg['BM']}x{cfg['BN']}", triton_gemm._gemm_kernel,
                 {**ptrs(["A", "B", "Bias", "R", "C"], dt), **gemm_sig,
                  "scale": "fp32", "alpha": "fp32", "beta": "fp32"},
                 {"HAS_BIAS": True, "HAS_RES": True, "RES_FIRST": act == "Clip", "ACT": act, "PRECISION": prec,
                  "BM": cfg["BM"], "BN": cfg["BN"], "BK": cfg["BK"], "G": cfg["G"]}, cfg["warps"], cfg["stages"])
att_sig = {n: "i32" for n in ("H SQ SK D DV sq_z sq_h sq_m sq_d sk_z sk_h sk_n sk_d sv_z sv_h sv_n sv_d "
                              "sm_z sm_h sm_m sm_n so_z so_h so_m so_d").split()}
for dt, kind in (("*fp16", 1), ("*bf16", 2), ("*fp32", 0)):
    mask = "*i1" if kind == 2 else dt
    cfg = triton_attention.CONFIGS[0]
    qo = {"qo_" + n.removeprefix("q_"): t for n, t in ln_q.items()}
    for q_kind in ((0, 1) if dt == "*fp16" else (0,)):     # 1: AttentionQuantize, int8 codes only (O unwritten)
        compile_(f"attention{dt}{kind}q{q_kind}", triton_attention._attention_kernel,
                 {**ptrs(["Q", "K", "V", "O"], dt), "Mask": mask, **att_sig, "qk_scale": "fp32",
                  "QO": "*i8" if q_kind else dt, **qo},
                 {"MASK_KIND": kind, "NAN_TO_ZERO": kind == 2, "PRECISION": "tf32" if dt == "*fp32" else "ieee",
                  "BM": cfg["BM"], "BN": cfg["BN"], "BD": 64, "BDV": 64, "QO_KIND": q_kind, "STORE_O": not q_kind},
                 cfg["warps"], cfg["stages"])
for dt in ("*fp16", "*fp32"):
    for store_s in (True, False):       # the sum kept (pre-norm stream) or absent (post-norm)
        compile_(f"add_layernorm{dt}{store_s}", triton_add_layernorm._add_layernorm_kernel,
                 {**ptrs(["A", "B", "W", "Bias", "S", "Y"], dt), **{n: "i32" for n in "R1 N sa0 sa1 sb0 sb1".split()},
                  "eps": "fp32", "Q": dt, **ln_q},
                 {"HAS_BIAS": True, "STORE_S": store_s, "BLOCK_N": 1024, "Q_KIND": 0, "STORE_Y": True})
        compile_(f"add_layernorm_q{dt}{store_s}", triton_add_layernorm._add_layernorm_kernel,    # + Q(Y), Y unwritten
                 {**ptrs(["A", "B", "W", "Bias", "S", "Y"], dt), **{n: "i32" for n in "R1 N sa0 sa1 sb0 sb1".split()},
                  "eps": "fp32", "Q": "*i8", **ln_q},
                 {"HAS_BIAS": True, "STORE_S": store_s, "BLOCK_N": 1024, "Q_KIND": 1, "STORE_Y": False})
    q = dt == "*fp16"         # fp16: FusedConvQuantize / FusedConvPoolQuantize (int8 codes, float output unwritten)
    compile_(f"conv_epilogue{dt}", triton_conv_epilogue._conv_epilogue_kernel,
             {**ptrs(["Y", "Bias", "R"], dt), "numel": "i32", "C": "i32", "HW": "i32", "alpha": "fp32", "beta": "fp32",
              "Q": "*i8" if q else dt, **ln_q},
             {"HAS_BIAS": True, "HAS_RES": True, "RES_FIRST": False, "ACT": "HardSwish",
              "CHANNELS_LAST": dt == "*fp16", "INT64": False, "BLOCK": 1024, "Q_KIND": int(q), "STORE_Y": not q})
    compile_(f"gap{dt}", triton_pool._gap_kernel, {**ptrs("XY", dt), **{n: "i32" for n in "C S s_n s_c s_s".split()}},
             {"BLOCK_C": 32, "BLOCK_HW": 32})
    compile_(f"conv_pool{dt}", triton_conv_pool._conv_pool_kernel,
             {**ptrs(["Y", "Bias", "R", "P"], dt), **{n: "i32" for n in "C S s_n s_c s_s".split()},
              "alpha": "fp32", "beta": "fp32", "Q": "*i8" if q else dt, **ln_q},
             {"HAS_BIAS": True, "HAS_RES": dt == "*fp16", "RES_FIRST": False, "ACT": "Silu",
              "STORE_Y": dt == "*fp32", "BLOCK_C": 16, "BLOCK_HW": 128, "Q_KIND": int(q), "STORE_P": not q})
for dt, cfg in (("*fp16", triton_depthwise.CONFIGS[2]), ("*fp32", triton_depthwise.CONFIGS[-1])):
    dw_ints = "C H W OW P s_xn s_xc s_xh s_xw s_yn s_yc s_yh s_yw s_rn s_rc s_rh s_rw stride_h stride_w pad_h pad_w"
    pool = dt == "*fp16"      # fp16: FusedConvPool's form (partial sums of the pool, y not written)
    compile_(f"depthwise{dt}", triton_depthwise._depthwise_kernel,
             {**ptrs(["X", "Wt", "Bias", "R", "Y"], dt), **{n: "i32" for n in (dw_ints + " dil_h dil_w").split()},
              "alpha": "fp32", "beta": "fp32", "Part": "*fp32", "Q": dt, **ln_q},
             {"KH": 3 if pool else 5, "KW": 3 if pool else 5, "HAS_BIAS": True, "HAS_RES": pool, "RES_FIRST": False,
              "ACT": "HardSwish", "BLOCK_P": cfg["BLOCK_P"], "BLOCK_C": cfg["BLOCK_C"], "STORE_Y": not pool,
              "POOL": pool, "Q_KIND": 0}, warps=cfg["warps"], attrs={i: [["tt.divisibility", 16]] for i in range(5)})
flat = triton_depthwise.CONFIGS[2]           # the flat NHWC kernel at ConvNeXt's 7×7 (it spilled fully unrolled)
flat_sig = {**ptrs(["X", "Wt", "Bias", "R", "Y"], "*fp16"), **{n: "i32" for n in (dw_ints + " dil_h dil_w").split()},
            "alpha": "fp32", "beta": "fp32", "Part": "*fp32", "Q": "*fp16", **ln_q}
flat_sig.pop("s_xc"), flat_sig.pop("s_yc")      # channel strides of 1: constants, as Triton specialises them
# as a real launch at C = 96 specialises: 16-byte aligned pointers, C and the other strides multiples of 16
div16 = lambda sig, names: {list(sig).index(n): [["tt.divisibility", 16]] for n in names}
compile_("depthwise_flat_7x7", triton_depthwise._depthwise_kernel, flat_sig,
         {"s_xc": 1, "s_yc": 1, "KH": 7, "KW": 7, "HAS_BIAS": False, "HAS_RES": False, "RES_FIRST": False,
          "ACT": "none", "BLOCK_P": flat["BLOCK_P"], "BLOCK_C": flat["BLOCK_C"], "STORE_Y": True, "POOL": False,
          "Q_KIND": 0}, warps=flat["warps"],
         attrs=div16(flat_sig, "X Wt Bias R Y C s_xn s_xh s_xw s_yn s_yh s_yw".split()))
rows_ints = "C H W OH OW s_xn s_xh s_xw s_yn s_yh s_yw s_rn s_rc s_rh s_rw pad_h pad_w"
rows_cases = (("depthwise_rows_7x7", triton_depthwise.CONFIGS[1],
               {"KH": 7, "KW": 7, "SH": 1, "SW": 1, "POOL": False, "C8": False}),
              ("depthwise_rows_7x7_wide", triton_depthwise.CONFIGS[0],
               {"KH": 7, "KW": 7, "SH": 1, "SW": 1, "POOL": False, "C8": True}),
              ("depthwise_rows4_7x7", {"BH": 4, "BW": 32, "BC": 32, "warps": 4},
               {"KH": 7, "KW": 7, "SH": 1, "SW": 1, "POOL": False, "C8": False}),
              ("depthwise_rows2_5x5_s2_pool", {"BH": 2, "BW": 32, "BC": 32, "warps": 4},
               {"KH": 5, "KW": 5, "SH": 2, "SW": 2, "POOL": True, "C8": True}))
rows_sig = {**ptrs(["X", "Wt", "Bias", "R", "Y"], "*fp16"), **{n: "i32" for n in rows_ints.split()},
            "alpha": "fp32", "beta": "fp32", "Part": "*fp32", "Q": "*fp16", **ln_q}
for name, cfg, consts in rows_cases:      # aligned pointers; C8 False: C = 96's multiples of 16, True: C = 72
    marked = "X Wt Bias R Y" + ("" if consts["C8"] else " C s_xn s_xh s_xw s_yn s_yh s_yw")
    compile_(name, triton_depthwise_rows._depthwise_rows_kernel, rows_sig,
             {**consts, "DH": 1, "DW": 1, "HAS_BIAS": True, "HAS_RES": not consts["POOL"], "RES_FIRST": False,
              "ACT": "HardSwish", "BH": cfg["BH"], "BW": cfg["BW"], "BC": cfg["BC"], "STORE_Y": True, "Q_KIND": 0},
             warps=cfg["warps"], attrs=div16(rows_sig, marked.split()))
splitk = triton_gemm_splitk.CONFIGS[0]       # split-K GEMM: partials (pointer main loop), then their sum + epilogue
compile_("gemm_splitk_partial", triton_gemm_splitk._gemm_partial_kernel,
         {"A": "*fp16", "B": "*fp16", "P": "*fp32",
          **{n: "i32" for n in "M N K KSPLIT MN s_am s_ak s_bk s_bn".split()}},
         {"USE_TMA": False, "B_NK": False, "PRECISION": "ieee", "BM": splitk["BM"], "BN": splitk["BN"],
          "BK": splitk["BK"], "G": splitk["G"]}, splitk["warps"], splitk["stages"])
compile_("gemm_splitk_sum", triton_gemm_splitk._partials_epilogue_kernel,
         {"P": "*fp32", "S": "i32", "MN": "i32", **ptrs(["Bias", "R", "C"], "*fp16"),
          **{n: "i32" for n in "M N s_rm s_rn s_cm s_cn".split()}, "scale": "fp32", "alpha": "fp32", "beta": "fp32"},
         {"HAS_BIAS": True, "HAS_RES": True, "RES_FIRST": False, "ACT": "Gelu",
          "BM": triton_gemm_splitk.REDUCE_BM, "BN": triton_gemm_splitk.REDUCE_BN})
compile_("depthwise_q", triton_depthwise._depthwise_kernel,            # FusedConvQuantize: codes, y unwritten
         {**ptrs(["X", "Wt", "Bias", "R", "Y"], "*fp16"), **{n: "i32" for n in (dw_ints + " dil_h dil_w").split()},
          "alpha": "fp32", "beta": "fp32", "Part": "*fp32", "Q": "*i8", **ln_q},
         {"KH": 3, "KW": 3, "HAS_BIAS": True, "HAS_RES": False, "RES_FIRST": False, "ACT": "Relu", "BLOCK_P": 32,
          "BLOCK_C": 64, "STORE_Y": False, "POOL": False, "Q_KIND": 1})
compile_("depthwise_pool_parts", triton_depthwise._pool_parts_kernel,     # FusedConvPoolQuantize: Q(P), P unwritten
         {"Part": "*fp32", "Pooled": "*fp16", "C": "i32", "PB": "i32", "inv_s": "fp32", "Q": "*i8", **ln_q},
         {"BLOCK_C": 128, "Q_KIND": 1, "STORE_P": False})

gated_ints = "M N K HW s_am s_ak s_gn s_gk s_bk s_bn s_rm s_rn s_cm s_cn".split()
for dt in ("*fp16", "*fp32"):       # GatedConv 1×1: the squeeze-excite gate scales A as it loads
    cfg = triton_gated_conv1x1.CONFIGS[-1 if dt == "*fp16" else 0]
    compile_(f"gated_conv1x1{dt}", triton_gated_conv1x1._gated_gemm_kernel,
             {**ptrs(["A", "Gate", "B", "Bias", "R", "C"], dt), **{n: "i32" for n in gated_ints},
              "alpha": "fp32", "beta": "fp32"},
             {"HAS_BIAS": True, "HAS_RES": dt == "*fp16", "RES_FIRST": False, "ACT": "HardSwish",
              "PRECISION": "tf32" if dt == "*fp32" else "ieee", "BM": cfg["BM"], "BN": cfg["BN"], "BK": cfg["BK"],
              "G": cfg["G"]}, warps=cfg["warps"], stages=cfg["stages"])

mlp_ints = "C H O s_am s_ak s_w1h s_w1c s_w2o s_w2h s_ym s_yo".split()
for hidden, cfg in ((48, triton_mlp2.CONFIGS[0]), (240, triton_mlp2.CONFIGS[1])):   # TwoLayerMLP: SE's two GEMVs
    bh, bc, bo = triton_mlp2._tiles(hidden, cfg)
    compile_(f"mlp2_h{hidden}", triton_mlp2._mlp2_kernel,
             {**ptrs(["A", "W1", "B1", "W2", "B2", "Y"], "*fp16"), **{n: "i32" for n in mlp_ints},
              **{n: "fp32" for n in "scale1 alpha1 beta1 scale2 alpha2 beta2".split()}},
             {"HAS_B1": True, "HAS_B2": True, "ACT1": "Silu", "ACT2": "HardSigmoid", "BH": bh, "BC": bc, "BO": bo},
             warps=cfg["warps"])

nvdisasm = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "nvdisasm")
for dt, tdt in (("float32", torch.float32), ("float16", torch.float16)):
    steps = [{"op": "Gelu", "args": ["in0"], "attrs": {"approximate": "none"}},
             {"op": "Gelu", "args": ["s0"], "attrs": {"approximate": "none"}}]
    layer = Layer("chain", "PointwiseChain", ["x"], ["y"], {"steps": steps, "outputs": ["s1"], "out_dtypes": [dt]})
    text = generate_pointwise(layer, [tdt], 2)
    fn = load_module(register_source(text))["pointwise_kernel"]
    ptr = "*fp32" if dt == "float32" else "*fp16"
    sig = {"in0": ptr, "out0": ptr, "n": "i32", "sz1": "i32", "st0_0": "i32", "st0_1": "i32"}
    k = compile_(f"gelu2_{dt}", fn, sig, {"FULL0": True, "NDIM": 1, "INT64": False, "BLOCK": 1024}, attrs=ALIGNED)
    compile_(f"gelu2_{dt}_bcast", fn, sig, {"FULL0": False, "NDIM": 2, "INT64": True, "BLOCK": 2048})
    ptx = k.asm["ptx"]
    report[f"gelu2_{dt}"]["vector_loads"] = sum("ld.global" in l and ".v4." in l for l in ptx.splitlines())
    report[f"gelu2_{dt}"]["div_full"] = ptx.count("div.full") + ptx.count("div.rn")
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(k.asm["cubin"])
    sass = subprocess.run([nvdisasm, "-c", f.name], capture_output=True, text=True).stdout
    report[f"gelu2_{dt}"]["mufu"] = sass.count("MUFU.")
# squeeze-excite's gate and the next layer's Q in one chain (int8 codes out): the quotient is div.rn, exact
steps = [{"op": "Mul", "args": ["in0", "in1"], "attrs": {}},
         {"op": "QuantizeLinear", "args": ["s0", "c0", "c1"],
          "attrs": {"axis": 1, "block_size": 0, "saturate": 1, "output_dtype": None, "precision": None}}]
layer = Layer("chain", "PointwiseChain", ["x", "g"], ["y"],
              {"steps": steps, "outputs": ["s1"], "out_dtypes": ["int8"],
               "consts": [{"value": 0.031, "dtype": "float32", "shape": []}, {"value": -2, "dtype": "int8", "shape": []}]})
fn = load_module(register_source(generate_pointwise(layer, [torch.float16, torch.float16], 2)))["pointwise_kernel"]
sig = {"in0": "*fp16", "in1": "*fp16", "out0": "*i8", "n": "i32", "sz1": "i32",
       **{f"st{i}_{d}": "i32" for i in range(2) for d in range(2)}}
k = compile_("gate_q_int8", fn, sig, {"FULL0": True, "FULL1": False, "NDIM": 2, "INT64": False, "BLOCK": 1024})
report["gate_q_int8"]["div_rn"] = k.asm["ptx"].count("div.rn.f32")
report["gate_q_int8"]["div_full"] = k.asm["ptx"].count("div.full")
print("REPORT" + json.dumps(report))
'''


def test_every_triton_kernel_compiles_for_sm90():
    pytest.importorskip("triton.backends.nvidia", reason="Triton's NVIDIA backend is not installed")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_DEFAULT_FP_FUSION"] = "1"
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.split("REPORT", 1)[1])
    # … + 2: the add-layernorm kernel without its sum store, per dtype; + 4: with Q(Y) and Y unwritten; + 1: the
    # attention kernel writing int8 codes; + 4: the depthwise convolution (fp16 3×3 with a residual and the pool's
    # partial sums, fp32 5×5, fp16 writing int8 codes) and the partial sums' reduction (with P's codes); + 2: the
    # gated 1×1 GEMM in fp16 and fp32; + 2: the two-layer MLP at hidden widths 48 and 240; + 2: the rows-tiled
    # depthwise kernel (7×7 with a residual; 5×5 stride 2 with the pool's partial sums and the multiple-of-8 hints);
    # + 2: the split-K GEMM's partial products and their sum with the epilogue; + 3: two more rows-kernel forms
    # (BH 4, and the 2-warp config with the multiple-of-8 path) and the flat kernel at 7×7
    assert len(report) == 6 + 7 + 3 + 6 + 4 + 2 + 2 + 2 + 1 + 4 + 1 + 4 + 2 + 2 + 2 + 2 + 3
    assert all(r["cubin"] > 0 for r in report.values())
    # no depthwise kernel spills: with every 7×7 tap unrolled the flat kernel took 255 registers and 992 bytes of
    # stack, the rows kernel 272 (sm_90); the run-time row loop keeps them in registers. (The fp32 5×5 NCHW form
    # keeps an 8-byte frame; a spill of the accumulators or the unrolled loads is hundreds of bytes.)
    spills = {n: r.get("stack") for n, r in report.items() if n.startswith("depthwise") and r.get("stack", 0) > 64}
    assert not spills, spills
    assert report["gate_q_int8"]["div_rn"] >= 1 and report["gate_q_int8"]["div_full"] == 0
    for dt, mufu in (("float32", 32), ("float16", 16)):      # 8 elements per thread, 2 GELUs each
        gelu = report[f"gelu2_{dt}"]
        assert gelu["vector_loads"] >= 1 and gelu["div_full"] == 0
        assert gelu["mufu"] == mufu, gelu        # f32: RSQ + EX2 per GELU; lo (float16): EX2 only
