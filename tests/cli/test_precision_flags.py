"""The precision flags of `tensorforge exec` end to end on the CPU: --int8 with --calibData/--calib (the cache
round trip), --best, --stronglyTyped, --layerPrecisions/--layerOutputTypes, --precisionConstraints=obey failures,
--sparsity; outputs against onnxruntime through --exportOutput."""

import json
import re

import numpy as np
import pytest

from oracle import ort_run
from precision_models import cosine, images, small_cnn
from tensorforge.builder.calibration import read_cache
from tensorforge.cli.main import main
from tensorforge.cli.trtexec_flags import FLAGS, parse_argv
from tensorforge.util.errors import UsageError

FAST = ["--warmUp=0", "--duration=0", "--iterations=1", "--device=cpu"]


@pytest.fixture
def setup(tmp_path):
    model = tmp_path / "cnn.onnx"
    model.write_bytes(small_cnn())
    calib = tmp_path / "calib"
    calib.mkdir()
    for i, x in enumerate(images(12, seed=5)):
        np.savez(calib / f"b{i:02d}.npz", x=x)
    x = images(1, seed=77)[0]
    np.save(tmp_path / "x.npy", x)
    return tmp_path, model, calib, x


def _exec(args, capsys):
    code = main(["exec", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def _output(path):
    rec = json.loads(path.read_text())[0]
    return np.array(rec["values"], np.float32)


def test_every_precision_flag_is_a_supported_row():
    for name in ("--int8", "--fp8", "--best", "--calib", "--calibData", "--calibAlgo", "--minShapesCalib",
                 "--optShapesCalib", "--maxShapesCalib", "--stronglyTyped", "--precisionConstraints",
                 "--layerPrecisions", "--layerOutputTypes", "--sparsity"):
        assert FLAGS[name].refused is None, name
    o = parse_argv(["--onnx=m", "--int8", "--layerPrecisions=*:fp16,conv1:fp32,/a/b:c/Conv:int8",
                    "--layerOutputTypes=*:fp16,fc:fp32+fp16", "--precisionConstraints=obey", "--sparsity=enable",
                    "--calibAlgo=minmax", "--optShapesCalib=x:1x3x8x8"])
    assert o.layer_precisions == [("*", "fp16"), ("conv1", "fp32"), ("/a/b:c/Conv", "int8")]
    assert o.layer_output_types == [("*", ["fp16"]), ("fc", ["fp32", "fp16"])]
    assert (o.precision_constraints, o.sparsity, o.calib_algo) == ("obey", "enable", "minmax")
    for bad, what in (("--layerPrecisions=conv1", "name:type"), ("--layerPrecisions=conv1:fp64", "unknown type"),
                      ("--precisionConstraints=maybe", "one of"), ("--sparsity=on", "one of"),
                      ("--layerPrecisions=a:int32", "not a compute precision")):
        with pytest.raises(UsageError, match=what):
            parse_argv(["--onnx=m", bad])


def test_int8_calibrates_writes_the_cache_then_builds_from_it(setup, capsys):
    tmp, model, calib, x = setup
    cache, out1, out2 = tmp / "cnn.cache", tmp / "o1.json", tmp / "o2.json"
    code, log, _ = _exec([f"--onnx={model}", "--int8", f"--calibData={calib}", f"--calib={cache}",
                          f"--loadInputs=x:{tmp / 'x.npy'}", f"--exportOutput={out1}", *FAST], capsys)
    assert code == 0 and "Precision: FP32+INT8" in log and "Q/DQ inserted at 3 layer(s)" in log
    text = cache.read_bytes()
    assert text.startswith(b"TRT-8601-EntropyCalibration2\n") and read_cache(text).entries[0][0] == "x"
    want = ort_run(small_cnn(), {"x": x})["y"].ravel()
    assert cosine(_output(out1), want) > 0.99
    code, log, _ = _exec([f"--onnx={model}", "--int8", f"--calib={cache}", f"--loadInputs=x:{tmp / 'x.npy'}",
                          f"--exportOutput={out2}", *FAST], capsys)
    assert code == 0 and "calibration cache read" in log
    np.testing.assert_array_equal(_output(out2), _output(out1))
    assert cache.read_bytes() == text                                       # read, not rewritten


def test_calibration_flag_errors_are_one_line(setup, capsys):
    tmp, model, calib, _ = setup
    for args, what in (([f"--calib={tmp / 'none.cache'}", "--int8"], "does not exist"),
                       ([f"--calibData={calib}"], "needs --int8"),
                       (["--stronglyTyped", "--fp16"], "conflict"),
                       (["--int8", f"--calibData={calib}", "--optShapesCalib=x:2x3x8x8", "--minShapesCalib=x:2x3x8x8",
                         "--maxShapesCalib=x:2x3x8x8"], "outside the calibration profile")):
        code, _, err = _exec([f"--onnx={model}", *args, "--skipInference", "--device=cpu"], capsys)
        assert code != 0 and what in err and err.count("\n") == 1, err


def test_obey_fails_naming_the_layer_prefer_builds_on(setup, capsys):
    tmp, model, calib, _ = setup
    base = [f"--onnx={model}", "--int8", f"--calibData={calib}", "--layerPrecisions=pool:int8", "--skipInference",
            "--device=cpu"]
    code, _, err = _exec([*base, "--precisionConstraints=obey"], capsys)
    assert code != 0 and "'pool'" in err and "cannot be met" in err
    code, log, _ = _exec([*base, "--precisionConstraints=prefer"], capsys)
    assert code == 0 and "constraint on layer 'pool' is not met" in log
    code, _, err = _exec([f"--onnx={model}", "--fp16", "--layerPrecisions=nosuchnode:fp32", "--skipInference",
                          "--device=cpu"], capsys)
    assert code == 2 and "'nosuchnode'" in err


def test_layer_precisions_and_output_types_show_in_layer_info(setup, capsys):
    tmp, model, _, x = setup
    info, out = tmp / "layers.json", tmp / "o.json"
    code, _, _ = _exec([f"--onnx={model}", "--fp16", "--layerPrecisions=*:fp16,conv1:fp32",
                        "--layerOutputTypes=fc:fp32", f"--exportLayerInfo={info}", f"--exportOutput={out}",
                        f"--loadInputs=x:{tmp / 'x.npy'}", *FAST], capsys)
    assert code == 0
    layers = json.loads(info.read_text())["Layers"]
    conv1 = [la for la in layers if "conv1" in la["Origin"] and la["LayerType"] != "Cast"]
    assert conv1 and all(la["Precision"] == "float32" for la in conv1)
    conv2 = [la for la in layers if "conv2" in la["Origin"] and la["LayerType"] != "Cast"]
    assert conv2 and all(la["Precision"] == "float16" for la in conv2)
    fc_cast = [la for la in layers if la["LayerType"] == "Cast" and la["Name"].startswith("y/")]
    assert fc_cast, "fc's output type float32: its fp16 result is cast"
    want = ort_run(small_cnn(), {"x": x})["y"].ravel()
    np.testing.assert_allclose(_output(out), want, rtol=2e-2, atol=2e-2)


def test_best_and_strongly_typed_build_and_match(setup, capsys):
    tmp, model, calib, x = setup
    want = ort_run(small_cnn(), {"x": x})["y"].ravel()
    for flags, close in ((["--best", f"--calibData={calib}"], 0.99), (["--stronglyTyped"], 0.999999)):
        out = tmp / "o.json"
        code, log, _ = _exec([f"--onnx={model}", *flags, f"--exportOutput={out}", f"--loadInputs=x:{tmp / 'x.npy'}",
                              *FAST], capsys)
        assert code == 0, log
        assert cosine(_output(out), want) > close


def test_layer_info_inspect_and_convert_show_precision_and_scales(setup, capsys):
    tmp, model, calib, _ = setup
    engine, info = tmp / "m.engine", tmp / "layers.json"
    code, log, _ = _exec([f"--onnx={model}", "--int8", f"--calibData={calib}", "--calibAlgo=minmax",
                          f"--saveEngine={engine}", "--dumpLayerInfo", f"--exportLayerInfo={info}", "--skipInference",
                          "--device=cpu"], capsys)
    assert code == 0
    amax = max(np.abs(np.load(f)["x"]).max() for f in sorted(calib.iterdir()))
    scale = amax / 127                                                      # minmax: max |x| / 127
    layers = json.loads(info.read_text())["Layers"]
    q = next(la for la in layers if la["LayerType"] == "QuantizeLinear" and la["Inputs"][0]["Name"] == "x")
    assert q["Inputs"][0]["Scale"] == pytest.approx(scale, rel=1e-6) and q["Precision"] == "int8"
    assert re.search(r"QuantizeLinear .*precision=int8 .*scales in x=", log)
    main(["inspect", str(engine)])
    text = capsys.readouterr().out
    assert f"scales in x={scale:.6g}" in text
    main(["inspect", str(engine), "--json"])
    d = json.loads(capsys.readouterr().out)
    assert d["build"]["quantization"]["tensor_scales"]["x"] == pytest.approx(scale, rel=1e-6)
    main(["convert", str(model), "-l", "--device=cpu"])
    assert "[float32]" in capsys.readouterr().out


def test_compare_accepts_int8_runners(setup, capsys):
    tmp, model, _, _ = setup
    code = main(["compare", str(model), "--runners=onnxruntime,tensorforge-int8", "--atol=0.5", "--rtol=0.5",
                 "--device=cpu"])
    out = capsys.readouterr().out
    assert "tensorforge-int8" in out and code == 0, out


def test_int8_without_ranges_uses_placeholders_with_a_warning(setup, capsys):
    _, model, _, _ = setup
    code, log, _ = _exec([f"--onnx={model}", "--int8", "--skipInference", "--device=cpu"], capsys)
    assert code == 0 and "placeholder" in log and "accuracy is not kept" in log


def test_layer_names_from_dump_layer_info_are_accepted(setup, capsys):
    tmp, model, calib, _ = setup
    info = tmp / "int8.json"
    code, _, _ = _exec([f"--onnx={model}", "--int8", f"--calibData={calib}", f"--exportLayerInfo={info}",
                        "--skipInference", "--device=cpu"], capsys)
    fused = next(la["Name"] for la in json.loads(info.read_text())["Layers"] if "conv1" in la["Origin"]
                 and la["LayerType"] not in ("QuantizeLinear", "DequantizeLinear"))
    assert fused != "conv1"                                                    # a fused engine layer name
    info2 = tmp / "kept.json"
    code, _, err = _exec([f"--onnx={model}", "--int8", f"--calibData={calib}", f"--layerPrecisions={fused}:fp32",
                          "--precisionConstraints=obey", f"--exportLayerInfo={info2}", "--skipInference",
                          "--device=cpu"], capsys)
    assert code == 0, err
    layers = json.loads(info2.read_text())["Layers"]
    conv1 = [la for la in layers if "conv1" in la["Origin"] and la["LayerType"] not in ("Cast",)]
    # conv1 computes in float32 (no Quantized* op); its epilogue may write the next layer's int8 input
    # (FusedConvQuantize: conv2's Q fused into conv1, passes/rules/qdq_producer.py), as TensorRT fuses a reformat
    assert conv1 and all(la["Precision"] == "float32" and not la["LayerType"].startswith("Quantized")
                         and la["LayerType"] not in ("QuantizeLinear", "DequantizeLinear") for la in conv1)
    assert any("conv2" in la["Origin"] and la["LayerType"].startswith("Quantized") for la in layers)
