"""Reading an engine checks each PointwiseChain from its program (shapes broadcast step by step, dtypes as recorded)
instead of evaluating the steps on meta tensors, which imported torch._dynamo (GELU's decomposition) and Triton:
+1.3 s on every `tfg.load`. A fresh process loads and runs the seed-model engine without importing either, and a
chain whose recorded output shape disagrees with its program is still refused."""

import json
import struct
import subprocess
import sys
import hashlib

import numpy as np
import pytest
import torch

import tensorforge as tfg
from tensorforge.engine import from_bytes
from tensorforge.util.errors import EngineFileError

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[2] / "examples" / "gelu"))
from model import MyNet  # noqa: E402


@pytest.fixture(scope="module")
def seed_engine(tmp_path_factory):
    path = tmp_path_factory.mktemp("seed") / "seed.engine"
    tfg.build(MyNet(), example_inputs=(torch.randn(2, 16),), device="cpu").save(path)
    return path


def test_loading_a_chain_engine_imports_no_dynamo_or_triton(seed_engine):
    code = ("import sys, torch, tensorforge as tfg\n"
            f"e = tfg.load({str(seed_engine)!r})\n"
            "x = torch.linspace(-3, 3, 32).reshape(2, 16)\n"
            "y = e.run({e.input_names[0]: x})[e.output_names[0]]\n"
            "g = torch.nn.functional.gelu(torch.nn.functional.gelu(x))\n"
            "assert torch.allclose(y, g, rtol=1e-5, atol=1e-6), (y - g).abs().max()\n"
            "print(sorted(m for m in ('torch._dynamo', 'triton') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_a_chain_output_shape_that_disagrees_with_its_program_is_refused(seed_engine):
    data = seed_engine.read_bytes()
    head = struct.unpack_from("<8sIQQ32s", data)
    m = json.loads(data[60:60 + head[2]])
    chain_outs = {o for la in m["layers"] if la["op"] == "PointwiseChain" for o in la["outputs"]}
    for t in m["tensors"]:
        if t["name"] in chain_outs and t["shape"]:
            t["shape"] = [d + 1 if isinstance(d, int) else d for d in t["shape"]]
    mb = json.dumps(m, sort_keys=True, separators=(",", ":")).encode()
    body = mb + data[60 + head[2]:]
    forged = struct.pack("<8sIQQ32s", head[0], head[1], len(mb), head[3], hashlib.sha256(body).digest()) + body
    with pytest.raises(EngineFileError):
        from_bytes(forged)
