"""The plugin registry and the typed descriptor: registration, typing of attributes, scoping, and the
one-line errors a plugin author sees."""

import pytest
import torch

import tensorforge.plugin as tfp
from tensorforge.ir import has_spec
from tensorforge.kernels import candidates
from tensorforge.ir import Layer
from tensorforge.util.errors import PluginError
from plugin_helpers import one_line


def _scale_plugin(name="test::Scale", version="1"):
    @tfp.register(name, version=version)
    def _(x: tfp.TensorDesc, factor: float = 2.0, axes: list[int] = (0,), mode: str = "a",
          flag: bool = False) -> tfp.TensorDesc:
        return x.like()

    @tfp.reference(name, version)
    def _(x, factor, axes, mode, flag):
        return x * factor
    return tfp.get(name, version)


def test_register_creates_op_and_typed_signature():
    p = _scale_plugin()
    assert p.op_name == "plugin:test::Scale:1" and has_spec(p.op_name)
    assert [n for n, _ in p.inputs] == ["x"]
    assert {k: t.name for k, (t, _) in p.attrs.items()} == {"factor": "float", "axes": "list[int]", "mode": "str",
                                                            "flag": "bool"}
    assert p.attrs["axes"][1] == [0]          # defaults are typed too (tuple → list)


def test_scope_undoes_registration():
    with tfp.scope():
        p = _scale_plugin("test::Scoped")
        assert tfp.find("test::Scoped") is p
    assert tfp.find("test::Scoped") is None and not has_spec("plugin:test::Scoped:1")


def test_duplicate_registration_raises():
    _scale_plugin()
    with pytest.raises(PluginError) as e:
        _scale_plugin()
    assert "registered twice" in one_line(e)


def test_two_versions_coexist_and_get_needs_a_version():
    _scale_plugin(version="1")
    _scale_plugin(version="2")
    assert tfp.get("test::Scale", "2").version == "2"
    with pytest.raises(PluginError) as e:
        tfp.get("test::Scale")
    assert "versions ['1', '2']" in one_line(e)


def test_deregister_removes_op_and_tactic():
    p = _scale_plugin()

    @tfp.impl("test::Scale")
    def _(x, out, factor, axes, mode, flag):
        out.copy_(x * factor)
    layer = Layer("l", p.op_name, ["x"], ["y"], {"factor": 2.0, "axes": [0], "mode": "a", "flag": False})
    found, _ = candidates(layer, torch.device("cpu"))
    assert [t.name for t, _ in found][0] == "plugin"
    tfp.deregister("test::Scale")
    assert not has_spec(p.op_name)
    found, reasons = candidates(layer, torch.device("cpu"))
    assert "plugin" not in [t.name for t, _ in found]


@pytest.mark.parametrize("raw,attr,expected,got", [
    ({"factor": "x"}, "factor", "float", "str"),
    ({"axes": 3}, "axes", "list[int]", "int"),
    ({"axes": [1.5]}, "axes", "list[int]", "list"),
    ({"flag": 2}, "flag", "bool", "int"),
    ({"mode": 1}, "mode", "str", "int"),
])
def test_wrong_attribute_type_is_one_line(raw, attr, expected, got):
    p = _scale_plugin()
    with pytest.raises(PluginError) as e:
        p.typed_attrs(raw)
    text = one_line(e)
    assert f"plugin test::Scale attribute {attr!r} expects {expected}, got {got}" in text


def test_attribute_conversions():
    p = _scale_plugin()
    got = p.typed_attrs({"factor": 3, "axes": (1, 2), "flag": 1, "mode": "b"})
    assert got == {"factor": 3.0, "axes": [1, 2], "mode": "b", "flag": True}
    assert isinstance(got["factor"], float)
    assert p.typed_attrs({"axes": torch.tensor([4, 5])})["axes"] == [4, 5]


def test_unknown_and_missing_attributes():
    @tfp.register("test::Need")
    def _(x: tfp.TensorDesc, k: int) -> tfp.TensorDesc:
        return x.like()
    p = tfp.get("test::Need")
    with pytest.raises(PluginError) as e:
        p.typed_attrs({})
    assert "needs attribute 'k' (int)" in one_line(e)
    with pytest.raises(PluginError) as e:
        p.typed_attrs({"k": 1, "other": 2})
    assert "has no attribute 'other'" in one_line(e)


def test_bad_descriptor_signatures():
    with pytest.raises(PluginError) as e:
        @tfp.register("test::NoAnn")
        def _(x: tfp.TensorDesc, k=1):
            return x.like()
    assert "parameter 'k' has no annotation" in one_line(e)
    with pytest.raises(PluginError) as e:
        @tfp.register("test::Order")
        def _(k: int, x: tfp.TensorDesc):
            return x.like()
    assert "declares no input" in one_line(e) or "follows an attribute" in one_line(e)
    with pytest.raises(PluginError) as e:
        @tfp.register("test::Dict")
        def _(x: tfp.TensorDesc, d: dict = None):
            return x.like()
    assert "unsupported type" in one_line(e)


def test_impl_signature_is_checked():
    _scale_plugin()
    with pytest.raises(PluginError) as e:
        @tfp.impl("test::Scale")
        def _(x, out, factor):
            pass
    assert "no parameter for attribute(s) ['axes', 'mode', 'flag']" in one_line(e)


def test_descriptor_output_count_from_annotation_and_multi_output_run():
    @tfp.register("test::Split2")
    def _(x: tfp.TensorDesc, k: int = 1) -> tuple[tfp.TensorDesc, tfp.TensorDesc]:
        return x.new((x.shape[0], k)), x.new((x.shape[0], x.shape[1] - k), torch.int32)

    @tfp.impl("test::Split2")
    def _(x, a, b, k):
        a.copy_(x[:, :k])
        b.copy_(x[:, k:].to(torch.int32))
    p = tfp.get("test::Split2")
    assert p.num_outputs == 2
    x = torch.arange(12.0).reshape(3, 4)
    a, b = p.run([x], {"k": 1})
    assert torch.equal(a, x[:, :1]) and b.dtype == torch.int32 and torch.equal(b, x[:, 1:].int())


def test_descriptor_error_names_plugin_and_inputs():
    @tfp.register("test::Boom")
    def _(x: tfp.TensorDesc) -> tfp.TensorDesc:
        raise ValueError("rank must be 3")
    with pytest.raises(PluginError) as e:
        tfp.get("test::Boom").describe([tfp.TensorDesc((2, 3), torch.float32)], {})
    text = one_line(e)
    assert "plugin test::Boom: descriptor raised ValueError: rank must be 3" in text and "float32[2,3]" in text


def test_autotune_configs_become_tactic_candidates():
    p = _scale_plugin()

    @tfp.impl("test::Scale")
    def _(x, out, factor, axes, mode, flag, config):
        out.copy_(x * factor)

    @tfp.autotune("test::Scale")
    def _():
        return [{"BLOCK": 128}, {"BLOCK": 256, "num_warps": 8}]
    layer = Layer("l", p.op_name, ["x"], ["y"], {"factor": 2.0, "axes": [0], "mode": "a", "flag": False})
    found, _ = candidates(layer, torch.device("cpu"))
    ids = [t.id(cfg) for t, cfg in found]
    assert ids[:2] == ["plugin:test::scale:1.plugin[BLOCK=128]", "plugin:test::scale:1.plugin[BLOCK=256,num_warps=8]"]
    assert ids[-1] == "any.torch_ref"
    with pytest.raises(PluginError) as e:
        @tfp.autotune("test::Scale")
        def _():
            return [{"BLOCK": 1.5}]
    assert "not a dict of int or word values" in one_line(e)


def test_user_plugin_clashing_with_library_plugin_needs_deregister_and_scope_restores_it():
    """TensorRT's registry rule (issue 13.7): a second registration of a key is refused, even over the library's;
    deregistering the library plugin first lets the user's take the key."""
    assert tfp.discover("MyGelu")
    lib = tfp.get("custom::MyGelu")
    assert tfp.is_library(lib)
    with tfp.scope():
        def mine(x: tfp.TensorDesc) -> tfp.TensorDesc:
            return x.like()
        with pytest.raises(PluginError) as e:
            tfp.register("custom::MyGelu")(mine)
        assert "built-in plugin library" in one_line(e) and "deregister" in one_line(e)
        assert tfp.get("custom::MyGelu") is lib
        tfp.deregister("custom::MyGelu")
        tfp.register("custom::MyGelu")(mine)
        assert tfp.get("custom::MyGelu") is not lib and not tfp.is_library(tfp.get("custom::MyGelu"))
    assert tfp.get("custom::MyGelu") is lib
