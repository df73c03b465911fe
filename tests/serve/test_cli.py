"""`tensorforge export-triton` and `tensorforge serve --emit-config` through the CLI entry point (no server);
serving code stays out of `import tensorforge`."""

import subprocess
import sys

import yaml

from tensorforge.cli.main import main


def test_export_triton_writes_a_repository(engine_path, tmp_path, capsys):
    assert main(["export-triton", str(engine_path), "-o", str(tmp_path / "repo"), "--name", "m",
                 "--max-batch-size", "4", "--instances-per-gpu", "2"]) == 0
    model = tmp_path / "repo" / "m"
    config = (model / "config.pbtxt").read_text()
    # hand-written from the engine: 4 inputs of widths 4, 3, 2, 2; batch 1..4; buckets 1, 2, 4
    assert "max_batch_size: 4" in config and 'backend: "python"' in config
    assert '{ name: "x" data_type: TYPE_FP32 dims: [ 4 ] }' in config
    assert '{ name: "h" data_type: TYPE_FP16 dims: [ 3 ] }' in config
    assert '{ name: "bb" data_type: TYPE_BOOL dims: [ 2 ] }' in config
    assert "preferred_batch_size: [ 1, 2, 4 ]" in config
    assert "instance_group [ { count: 2 kind: KIND_CPU } ]" in config
    assert (model / "1" / "model.engine").read_bytes() == engine_path.read_bytes()
    assert "class TritonPythonModel" in (model / "1" / "model.py").read_text()
    assert "wrote" in capsys.readouterr().out


def test_export_triton_bad_input_is_one_line_and_writes_nothing(tmp_path, capsys):
    assert main(["export-triton", str(tmp_path / "nope.engine"), "-o", str(tmp_path / "repo")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("tensorforge: error: engine file") and "Traceback" not in err
    assert not (tmp_path / "repo").exists()


def test_export_triton_batch_over_profile_is_refused(engine_path, tmp_path, capsys):
    assert main(["export-triton", str(engine_path), "-o", str(tmp_path / "repo"), "--max-batch-size", "9"]) == 1
    assert "outside the engine's batch range 1..8" in capsys.readouterr().err
    assert not (tmp_path / "repo").exists()


def test_emit_serve_config(engine_path, capsys):
    assert main(["serve", str(engine_path), "--replicas", "2", "--gpus-per-replica", "0.5", "--max-batch-size", "4",
                 "--emit-config", "serve", "--http-port", "8100"]) == 0
    config = yaml.safe_load(capsys.readouterr().out)
    assert config["http_options"]["port"] == 8100
    assert config["grpc_options"]["grpc_servicer_functions"] == ["tensorforge.serve.grpc_service.add_servicer"]
    (app,) = config["applications"]
    assert app["name"] == "multi" and app["route_prefix"] == "/"
    assert app["import_path"] == "tensorforge.serve.app:app_builder"
    assert app["args"]["engine"] == str(engine_path) and app["args"]["replicas"] == 2
    assert app["args"]["gpus_per_replica"] == 0.5 and app["args"]["max_batch_size"] == 4


def test_emit_rayservice(engine_path, capsys):
    assert main(["serve", str(engine_path), str(engine_path), "--name", "a", "--name", "b",
                 "--emit-config", "rayservice"]) == 0
    doc = yaml.safe_load(capsys.readouterr().out)
    assert doc["kind"] == "RayService" and doc["apiVersion"] == "ray.io/v1"
    inner = yaml.safe_load(doc["spec"]["serveConfigV2"])
    assert [(a["name"], a["route_prefix"]) for a in inner["applications"]] == [("a", "/"), ("b", "/v2/models/b")]
    worker = doc["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]
    assert worker["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 1


def test_serve_bad_arguments(engine_path, tmp_path, capsys):
    assert main(["serve", str(tmp_path / "nope.engine"), "--emit-config", "serve"]) == 1
    assert "does not exist" in capsys.readouterr().err
    assert main(["serve", str(engine_path), "--replicas", "zero", "--emit-config", "serve"]) == 2
    assert "--replicas 'zero'" in capsys.readouterr().err
    assert main(["serve", str(engine_path), str(engine_path), "--emit-config", "serve"]) == 2
    assert "share the application name" in capsys.readouterr().err


def test_import_tensorforge_and_export_do_not_load_ray(engine_path, tmp_path):
    code = ("import sys, tensorforge; from tensorforge.serve import triton_export; "
            f"triton_export.export_repository({str(engine_path)!r}, {str(tmp_path)!r}); "
            "assert 'ray' not in sys.modules, 'ray imported'; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "ok", out.stderr[-500:]


def test_emitted_config_is_valid_for_ray_and_builds(engine_path, capsys):
    """Ray's own schema (ServeDeploySchema) accepts the emitted config, and its import_path builds the app."""
    from ray.serve.schema import ServeDeploySchema

    from tensorforge.serve.app import AppSpec, app_builder, deployment_options
    assert main(["serve", str(engine_path), "--replicas", "auto", "--max-replicas", "6",
                 "--emit-config", "serve"]) == 0
    config = yaml.safe_load(capsys.readouterr().out)
    schema = ServeDeploySchema.model_validate(config)
    assert schema.applications[0].import_path == "tensorforge.serve.app:app_builder"
    application = app_builder(config["applications"][0]["args"])
    assert type(application).__name__ == "Application"
    opts = deployment_options(AppSpec(str(engine_path), replicas="auto", max_replicas=6), str(engine_path))
    assert opts["autoscaling_config"]["min_replicas"] == 1 and opts["autoscaling_config"]["max_replicas"] == 6
    assert "num_replicas" not in opts and opts["user_config"]["engine"] == str(engine_path)
