"""Loading plugins: a user's file outside the package through `tensorforge exec --staticPlugins` (build, save,
reload, and the one-line error when the plugin is not loaded), tfp.load of files and modules (idempotent,
re-run after deregistration), installed packages' entry points, and the errors for bad sources."""

import textwrap

import numpy as np
import pytest
import torch

import tensorforge as tfg
import tensorforge.plugin as tfp
from tensorforge.cli.main import main
from tensorforge.util.errors import PluginError
from plugin_helpers import FLOAT, custom_model, one_line

USER_PLUGIN = textwrap.dedent('''
    import torch
    import tensorforge.plugin as tfp

    @tfp.register("user::AddScaled")
    def _(a: tfp.TensorDesc, b: tfp.TensorDesc, scale: float = 1.0) -> tfp.TensorDesc:
        if tuple(a.shape) != tuple(b.shape):
            raise ValueError("a and b must have the same shape")
        return a.like()

    @tfp.impl("user::AddScaled")
    def _(a, b, out, scale, stream=None):
        torch.add(a, b, alpha=scale, out=out)

    @tfp.reference("user::AddScaled")
    def _(a, b, scale):
        return a + scale * b
''')


def _model(path):
    path.write_bytes(custom_model("AddScaled", [("a", FLOAT, [2, 5]), ("b", FLOAT, [2, 5])], [("y", FLOAT, None)],
                                  domain="user", scale=0.5))
    return path


def test_user_file_through_tensorforge_exec(tmp_path, capsys):
    plugin_file = tmp_path / "my_plugins.py"
    plugin_file.write_text(USER_PLUGIN)
    model, engine_file = _model(tmp_path / "model.onnx"), tmp_path / "model.engine"
    a, b = np.random.rand(2, 5).astype(np.float32), np.random.rand(2, 5).astype(np.float32)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    out_json = tmp_path / "out.json"
    common = ["--device=cpu", "--iterations=1", "--duration=0", "--warmUp=0",
              f"--loadInputs=a:{tmp_path / 'a.npy'},b:{tmp_path / 'b.npy'}", f"--exportOutput={out_json}"]
    rc = main(["exec", f"--onnx={model}", f"--staticPlugins={plugin_file}", f"--saveEngine={engine_file}", *common])
    assert rc == 0, capsys.readouterr().err
    assert "Loading plugins from" in capsys.readouterr().out
    import json
    y = np.array(json.loads(out_json.read_text())[0]["values"], dtype=np.float32).reshape(2, 5)
    np.testing.assert_allclose(y, a + 0.5 * b, rtol=1e-6)

    rc = main(["exec", f"--loadEngine={engine_file}", f"--plugins={plugin_file}", *common])
    assert rc == 0, capsys.readouterr().err

    tfp.deregister("user::AddScaled")
    rc = main(["exec", f"--loadEngine={engine_file}", *common])
    err = capsys.readouterr().err.strip()
    assert rc != 0 and err.count("\n") == 0
    assert "needs plugin user::AddScaled version 1" in err and "--staticPlugins" in err


def test_load_file_is_idempotent_and_reruns_after_deregistration(tmp_path):
    f = tmp_path / "p.py"
    f.write_text(USER_PLUGIN)
    assert tfp.load(f) == ["user::AddScaled"]
    first = tfp.get("user::AddScaled")
    assert tfp.load(str(f)) == ["user::AddScaled"] and tfp.get("user::AddScaled") is first
    tfp.deregister("user::AddScaled")
    assert tfp.load(f) == ["user::AddScaled"] and tfp.get("user::AddScaled") is not first
    x, y = torch.rand(2, 5), torch.rand(2, 5)
    out = tfg.build(_model(tmp_path / "m.onnx").read_bytes(), device="cpu").run({"a": x, "b": y})["y"]
    torch.testing.assert_close(out, x + 0.5 * y)


def test_load_module_by_name(tmp_path, monkeypatch):
    (tmp_path / "site_plugins_for_test.py").write_text(USER_PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    with tfp.scope():
        assert tfp.load("site_plugins_for_test") == ["user::AddScaled"]
    assert tfp.find("user::AddScaled") is None
    assert tfp.load("site_plugins_for_test") == ["user::AddScaled"]      # re-imported: its plugins come back


def test_entry_points_of_installed_packages_are_discovered(tmp_path, monkeypatch):
    dist = tmp_path / "fake_tf_plugins-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-tf-plugins\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[tensorforge.plugins]\nfake = fake_tf_plugins_mod\n")
    (tmp_path / "fake_tf_plugins_mod.py").write_text(USER_PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    x, y = torch.rand(2, 5), torch.rand(2, 5)
    engine = tfg.build(_model(tmp_path / "m.onnx").read_bytes(), device="cpu")     # the parser discovers it
    torch.testing.assert_close(engine.run({"a": x, "b": y})["y"], x + 0.5 * y)
    assert "entry point fake" in tfp.registry.SOURCES[tfp.get("user::AddScaled").key]


def test_bad_sources_are_one_line_errors(tmp_path):
    with pytest.raises(PluginError) as e:
        tfp.load(tmp_path / "missing.py")
    assert "does not exist" in one_line(e)
    with pytest.raises(PluginError) as e:
        tfp.load("no_such_module_for_tensorforge_tests")
    assert "no such file or Python module" in one_line(e)
    bad = tmp_path / "bad.py"
    bad.write_text("import tensorforge.plugin as tfp\nraise RuntimeError('oops\\nsecond line')\n")
    with pytest.raises(PluginError) as e:
        tfp.load(bad)
    assert f"loading plugins from {bad.resolve()} failed: RuntimeError: oops" in one_line(e)
