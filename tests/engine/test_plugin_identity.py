"""Plugins in engines (issue 13.7): which registration wins, what the engine records, and the one-line errors.

Rule (TensorRT's registry): a second registration of a (namespace, name, version) is refused until the first is
deregistered; library plugins load lazily, so a user plugin registered first keeps its key. The engine records
each plugin's signature and origin and refuses to load against another plugin of the same id. Oracles: torch's
erf GELU (the library's MyGelu) and x·3 (the user's), computed here.
"""

import math

import pytest
import torch
from onnx import TensorProto

import tensorforge as tfg
import tensorforge.plugin as tfp
from tensorforge.cli.main import main
from tensorforge.engine import from_bytes
from tensorforge.runtime import Runtime
from tensorforge.util.errors import PluginError

FLOAT = TensorProto.FLOAT


def _model(op="MyGelu", outputs=("y",), domain="custom") -> bytes:
    import sys
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1] / "plugin"))
    from plugin_helpers import custom_model
    return custom_model(op, [("x", FLOAT, [2, 3])], [(o, FLOAT, None) for o in outputs], domain=domain)


def _register_user_gelu():
    @tfp.register("custom::MyGelu")
    def _(x: tfp.TensorDesc, scale: float = 3.0) -> tfp.TensorDesc:
        return x.like()

    @tfp.reference("custom::MyGelu")
    def _(x, scale):
        return x * scale


def _gelu(x):
    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))


def test_engine_built_with_a_user_plugin_refuses_the_library_one(tmp_path):
    x = torch.randn(2, 3)
    with tfp.scope():
        if tfp.find("custom::MyGelu") is not None:
            tfp.deregister("custom::MyGelu")
        _register_user_gelu()
        eng = tfg.build(_model(), device="cpu")
        torch.testing.assert_close(eng.run({"x": x})["y"], x * 3)
        data = eng.serialize()
        rec = from_bytes(data).plugins[0]
        assert rec["library"] is False and rec["signature"]["scale"] == "float"
    # the user's file is not loaded now: the library's custom::MyGelu is found, and it is another plugin
    with tfp.scope():
        with pytest.raises(PluginError) as e:
            Runtime("cpu").deserialize(data)
        msg = str(e.value)
        assert "\n" not in msg and "built-in library" in msg and "scale: float" in msg and "approximate: str" in msg


def test_engine_built_with_the_library_plugin_refuses_a_user_one():
    x = torch.randn(2, 3)
    with tfp.scope():
        tfp.discover("MyGelu")
        assert tfp.is_library(tfp.get("custom::MyGelu"))
        eng = tfg.build(_model(), device="cpu")
        torch.testing.assert_close(eng.run({"x": x})["y"], _gelu(x), rtol=1e-4, atol=1e-5)
        data = eng.serialize()
        tfp.deregister("custom::MyGelu")
        _register_user_gelu()
        with pytest.raises(PluginError, match="built-in library"):
            Runtime("cpu").deserialize(data)


def test_a_user_registration_over_the_library_plugin_is_refused():
    with tfp.scope():
        tfp.discover("MyGelu")
        with pytest.raises(PluginError, match="registered twice.*deregister"):
            _register_user_gelu()


def test_reference_returning_the_wrong_shape_is_an_error():
    with tfp.scope():
        @tfp.register("bad::Flat")
        def _(x: tfp.TensorDesc) -> tfp.TensorDesc:
            return x.like()

        @tfp.reference("bad::Flat")
        def _(x):
            return x.flatten()               # [6] where the descriptor says [2, 3]
        with pytest.raises(PluginError, match=r"@reference output 0 .*\[6\].*\[2, 3\]"):
            tfg.build(_model("Flat", domain="bad"), device="cpu").run({"x": torch.randn(2, 3)})


def test_descriptor_with_more_outputs_than_the_node_is_a_build_error():
    with tfp.scope():
        @tfp.register("bad::Three")
        def _(x: tfp.TensorDesc) -> tuple[tfp.TensorDesc, tfp.TensorDesc, tfp.TensorDesc]:
            return x.like(), x.like(), x.like()

        @tfp.reference("bad::Three")
        def _(x):
            return x, x, x
        with pytest.raises(PluginError, match="3 outputs, the node has 1"):
            tfg.build(_model("Three", domain="bad"), device="cpu")


def test_static_plugins_that_is_not_python(tmp_path, capsys):
    (tmp_path / "plugin.txt").write_text("not python")
    (tmp_path / "m.onnx").write_bytes(_model())
    rc = main(["exec", f"--onnx={tmp_path / 'm.onnx'}", f"--staticPlugins={tmp_path / 'plugin.txt'}", "--device=cpu"])
    err = capsys.readouterr().err.strip()
    assert rc != 0 and "not a Python file" in err and "NoneType" not in err and "\n" not in err


def test_shared_library_plugins_are_refused_with_the_built_in_list(tmp_path, capsys):
    (tmp_path / "libplug.so").write_bytes(b"\x7fELF")
    (tmp_path / "m.onnx").write_bytes(_model())
    rc = main(["exec", f"--onnx={tmp_path / 'm.onnx'}", f"--plugins={tmp_path / 'libplug.so'}", "--device=cpu"])
    err = capsys.readouterr().err.strip()
    assert rc != 0 and "shared-library plugins are not loadable" in err and "EfficientNMS_TRT" in err
