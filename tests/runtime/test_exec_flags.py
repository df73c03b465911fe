"""The trtexec flags served by the runtime and builder work through `tensorforge exec` (CPU): layer info, the
per-layer profile, several streams, CUDA-graph switches, workspace limits and the timing-cache flags."""

import json

import pytest

from tensorforge.cli import trtexec_flags
from tensorforge.cli.main import main

from rt_models import affine_relu


@pytest.fixture
def model(tmp_path):
    path = tmp_path / "m.onnx"
    path.write_bytes(affine_relu())
    return path


def test_profile_layer_info_streams(model, tmp_path, capsys):
    prof, info = tmp_path / "profile.json", tmp_path / "layers.json"
    code = main(["exec", f"--onnx={model}", "--shapes=x:3x4", "--iterations=4", "--duration=0", "--warmUp=0",
                 "--dumpProfile", f"--exportProfile={prof}", "--separateProfileRun", "--dumpLayerInfo",
                 f"--exportLayerInfo={info}", "--infStreams=2", "--noCudaGraph", "--memPoolSize=workspace:64M",
                 f"--timingCacheFile={tmp_path / 'cache.json'}", "--builderOptimizationLevel=0",
                 "--device=cpu"])
    out = capsys.readouterr().out
    assert code == 0
    rows = json.loads(prof.read_text())
    assert rows[0] == {"count": 4} and {r["name"] for r in rows[1:]} == {layer["Name"] for layer in
                                                                            json.loads(info.read_text())["Layers"]}
    assert "=== Profile (4 iterations ) ===" in out and "=== Layer Information (4 layers) ===" in out
    assert "Throughput with 2 contexts" in out and "CUDA graphs: off (CUDA graphs turned off (--noCudaGraph))" in out
    assert "timing cache" in out and "not used" in out


def test_layer_info_with_skip_inference_and_switch_conflicts(model, tmp_path, capsys):
    info = tmp_path / "layers.json"
    assert main(["exec", f"--onnx={model}", "--shapes=x:2x4", "--skipInference", f"--exportLayerInfo={info}",
                 "--device=cpu"]) == 0
    assert json.loads(info.read_text())["Bindings"] == ["x", "y"]
    assert main(["exec", f"--onnx={model}", "--useCudaGraph", "--noCudaGraph"]) == 2
    assert "set the same option" in capsys.readouterr().err
    assert main(["exec", f"--onnx={model}", "--shapes=x:2x4", "--useCudaGraph", "--device=cpu", "--duration=0",
                 "--warmUp=0", "--iterations=1"]) == 0      # issue 14.1: said, and the run goes on
    assert "--useCudaGraph does not apply on cpu" in capsys.readouterr().out


@pytest.mark.parametrize("text,want", [("workspace:64", 64 << 20), ("workspace:1G", 1 << 30), ("workspace:512K", 512 << 10),
                                       ("workspace:100B", 100)])
def test_mem_pool_size(text, want):
    assert trtexec_flags.parse_argv([f"--memPoolSize={text}"]).workspace_bytes == want


@pytest.mark.parametrize("text,message", [("dlaSRAM:4", "only workspace"), ("workspace", "pool:size"),
                                          ("workspace:lots", "not a number")])
def test_mem_pool_size_errors(text, message):
    from tensorforge.util.errors import UsageError
    with pytest.raises(UsageError, match=message):
        trtexec_flags.parse_argv([f"--memPoolSize={text}"])
