"""The plugin written in docs/plugins.md §1 works as printed: loaded from a file, every autotune config of its
Triton path (TRITON_INTERPRET=1) matches its reference, and an ONNX node of it builds and runs."""

import re
from pathlib import Path

import torch

import tensorforge as tfg
import tensorforge.plugin as tfp
from plugin_helpers import FLOAT, custom_model

DOC = Path(__file__).resolve().parents[2] / "docs" / "plugins.md"


def test_documented_plugin_runs(tmp_path):
    code = re.search(r"```python\n(# my_plugins.py\n.*?)```", DOC.read_text(), re.S).group(1)
    path = tmp_path / "my_plugins.py"
    path.write_text(code)
    assert tfp.load(path) == ["custom::ScaledTanh"]
    p = tfp.get("custom::ScaledTanh")
    x = torch.randn(3, 1000)
    assert len(p.configs()) == 2
    for cfg in p.configs():
        (got,) = p.run([x], {"scale": 2.0}, cfg)
        torch.testing.assert_close(got, p.reference_fn(x, 2.0), rtol=1e-5, atol=1e-6)
    model = custom_model("ScaledTanh", [("x", FLOAT, [3, 1000])], [("y", FLOAT, None)], scale=2.0)
    torch.testing.assert_close(tfg.build(model, device="cpu")(x), 2 * torch.tanh(x), rtol=1e-5, atol=1e-6)
