"""What a CPU-only install (`pip install tensorforge`, no Triton) and a quick start get (issue 14.5).

`import tensorforge` and `tensorforge --help` load neither torch, onnx, Triton nor the builder (names resolve on
first use); a plugin file that imports Triton where it is missing, and an engine tactic that needs Triton, say so
with the install command; that command is the extra pyproject.toml really declares and the README names.
(Times are measured by bench/startup_time.py, not asserted here.)
"""

import importlib.util
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import torch

import tensorforge as tfg
from tensorforge.plugin import loader
from tensorforge.runtime import ExecutionContext
from tensorforge.util.errors import PluginError

import rt_models

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "onnx", "onnxruntime", "triton", "numpy", "tensorforge.builder", "tensorforge.parser")


def _child(code: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_import_and_help_load_nothing_heavy():
    out = _child("import sys, tensorforge\n"
                 "from tensorforge.cli.main import main\n"
                 "code = main(['--help'])\n"
                 f"print('LOADED', sorted(m for m in {HEAVY!r} if m in sys.modules), code, tensorforge.__version__)")
    line = out.split("LOADED", 1)[1].split()
    assert line[0] == "[]" and line[1] == "0", out
    assert "usage: tensorforge" in out


def test_lazy_names_still_resolve():
    assert tfg.build.__module__ == "tensorforge.api.high_level" and tfg.Engine.__name__ == "Engine"
    assert tfg.Builder.__module__.startswith("tensorforge.api.trt") and tfg.plugin.__name__ == "tensorforge.plugin"
    assert {"build", "load", "Builder", "Runtime", "OnnxParser"} <= set(tfg.__all__)
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        tfg.not_a_name  # noqa: B018


PLUGIN = '''
import triton
import triton.language as tl
import tensorforge.plugin as tfp
'''


def test_a_plugin_that_imports_missing_triton_names_the_install_command(tmp_path, monkeypatch):
    path = tmp_path / "my_plugin.py"
    path.write_text(PLUGIN)
    monkeypatch.setitem(sys.modules, "triton", None)           # as on an install without the gpu extra
    with pytest.raises(PluginError) as info:
        loader.load(str(path))
    assert "it imports Triton, which is not installed" in str(info.value)
    assert "pip install 'tensorforge[gpu]'" in str(info.value)


def test_an_engine_tactic_that_needs_missing_triton_says_so(monkeypatch):
    engine = tfg.build(rt_models.affine_relu(), device="cpu")
    engine.data.layers[0].tactic = "pointwisechain.triton_of_a_newer_build[BLOCK=64]"
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "triton" else real(name, *a))
    ctx = ExecutionContext(engine.data, "cpu")                 # runs the layer's reference, and says why
    (why,) = ctx.substituted.values()
    assert "needs Triton, which is not installed (pip install 'tensorforge[gpu]')" in why
    x = torch.randn(1, 4)
    torch.testing.assert_close(ctx.run({"x": x})["y"], rt_models.reference_affine_relu(x))


def test_the_install_command_is_true():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(req.startswith("triton") for req in extras["gpu"])
    assert not any(req.startswith("triton") for req in tomllib.loads((ROOT / "pyproject.toml").read_text())
                   ["project"]["dependencies"])
    readme = (ROOT / "README.md").read_text()
    assert "pip install 'tensorforge[gpu]'" in readme and "pip install tensorforge " in readme
