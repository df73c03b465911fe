"""The generated kernel's variant configs compile for sm_90 (Triton's NVIDIA backend and ptxas run without a GPU)
and the machine code is what each switch claims, counted in the SASS (nvdisasm) of the float16 gelu(gelu(x)):
lean drops exactly one FFMA per GELU (2 per element) and nothing else changes; persist makes a loop whose
next-tile load is issued before the current tile's first exp2; stream turns the 128-bit stores evict-first
(STG.E.EF); every variant keeps 128-bit loads and stores. Runs in a subprocess without TRITON_INTERPRET.
"""

import json
import os
import subprocess
import sys

import pytest

SCRIPT = r'''
import collections, json, os, re, subprocess, tempfile
import torch, triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from tensorforge.ir import Layer
from tensorforge.codegen import generate_pointwise
from tensorforge.kernels.generated import load_module, register_source

nvdisasm = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "nvdisasm")
steps = [{"op": "Gelu", "args": ["in0"], "attrs": {"approximate": "none"}},
         {"op": "Gelu", "args": ["s0"], "attrs": {"approximate": "none"}}]
layer = Layer("chain", "PointwiseChain", ["x"], ["y"], {"steps": steps, "outputs": ["s1"], "out_dtypes": ["float16"]})
mod = load_module(register_source(generate_pointwise(layer, [torch.float16], 1)))
sig = {"in0": "*fp16", "out0": "*fp16", "n": "i32", "st0_0": "i32"}
report = {}
for label, flags in (("plain", None), ("lean", (1, 0, 0)), ("persist", (0, 1, 0)), ("lean_persist", (1, 1, 0)),
                     ("stream", (0, 0, 1))):
    consts = {"FULL0": True, "NDIM": 1, "INT64": False, "BLOCK": 1024}
    fn = mod["pointwise_kernel"]
    if flags:
        consts.update(dict(zip(("LEAN", "PERSIST", "STREAM"), map(bool, flags))))
        fn = mod["pointwise_kernel_variant"]
    src = ASTSource(fn=fn, signature={**sig, **{c: "constexpr" for c in consts}}, constexprs=consts,
                    attrs={(i,): [["tt.divisibility", 16]] for i in range(3)})
    k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(k.asm["cubin"])
    sass = subprocess.run([nvdisasm, "-c", f.name], capture_output=True, text=True).stdout
    ops = []
    for line in sass.splitlines():
        m = re.match(r"\s*/\*[0-9a-f]+\*/\s+(@!?U?P\w+\s+)?([A-Z0-9_.]+)", line)
        if m:
            ops.append(m.group(2))
        elif re.match(r"^\.L_x_\d+:", line.strip()):
            ops.append("LABEL")
    report[label] = {"ops": ops, "count": dict(collections.Counter(ops))}
print("REPORT" + json.dumps(report))
'''


@pytest.fixture(scope="module")
def sass():
    pytest.importorskip("triton.backends.nvidia", reason="Triton's NVIDIA backend is not installed")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_DEFAULT_FP_FUSION"] = "1"
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.split("REPORT", 1)[1])


def test_lean_drops_one_ffma_per_gelu_and_nothing_else(sass):
    plain, lean = sass["plain"]["count"], sass["lean"]["count"]
    assert plain["FFMA"] - lean["FFMA"] == 2 * 8          # 8 float16 elements per thread, 2 GELUs each
    assert lean["MUFU.EX2"] == plain["MUFU.EX2"] == 16
    assert {k: v for k, v in lean.items() if k != "FFMA"} == {k: v for k, v in plain.items() if k != "FFMA"}


def test_every_variant_keeps_128_bit_accesses(sass):
    for label, r in sass.items():
        c = r["count"]
        assert any(k.startswith("LDG.E") and k.endswith(".128") for k in c), (label, c)
        assert any(k.startswith("STG.E") and k.endswith(".128") for k in c), (label, c)
        assert not any(k.startswith("LDG") and not k.endswith(".128") for k in c), (label, c)


def test_persistent_loop_loads_the_next_tile_before_the_math(sass):
    for label in ("persist", "lean_persist"):
        ops = sass[label]["ops"]
        assert "BRA" in ops and "LABEL" in ops
        body = ops[ops.index("LABEL") + 1:]                # the loop: first label to the backward branch
        body = body[:body.index("BRA")]
        assert "LDG.E.EF.128" in body and "MUFU.EX2" in body
        assert body.index("LDG.E.EF.128") < body.index("MUFU.EX2"), label
        assert body.count("MUFU.EX2") == 16 and body.count("STG.E.128") == 1


def test_stream_stores_are_evict_first(sass):
    assert "STG.E.EF.128" in sass["stream"]["count"] and "STG.E.128" not in sass["stream"]["count"]
    assert "STG.E.128" in sass["plain"]["count"]
