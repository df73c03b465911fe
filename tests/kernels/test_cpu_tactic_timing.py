"""CPU tactic timing at small shapes (issue 18): a CPU build with a timing cache times every candidate of a layer
that has two or more — oneDNN's packed linear against torch's — and keeps the fastest recorded one, so at a tiny
GEMM (1×32·32×10, where oneDNN's per-call set-up is most of the call) the plain torch op is chosen when it measured
faster; convolutions are not timed on the CPU (builder/tactics.py `_layout_bound`: timed alone, torch's NCHW
convolution wins and costs its consumers NHWC copies) and keep the channels-last oneDNN tactic; the timed engine
matches onnxruntime."""

import io
import json

import torch

import tensorforge as tfg
from tensorforge.kernels import onednn_capi
from oracle import assert_close, ort_run


def _small_cnn() -> tuple[bytes, dict]:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
                              torch.nn.Flatten(), torch.nn.Linear(8, 10)).eval()
    x = torch.randn(1, 3, 16, 16)
    buf = io.BytesIO()
    torch.onnx.export(net, (x,), buf, dynamo=False, opset_version=17, input_names=["input"])
    return buf.getvalue(), {"input": x.numpy()}


def test_small_layers_time_onednn_against_torch_and_keep_the_faster(tmp_path):
    model, feeds = _small_cnn()
    cache = tmp_path / "timing.json"
    engine = tfg.build(model, device="cpu", timing_cache=str(cache))
    entries = [e for dev in json.loads(cache.read_text())["devices"].values() for e in dev.values()]
    by_op = {e["op"]: e for e in entries}
    assert {"gemm.onednn_linear", "any.torch_ref"} <= set(by_op["Gemm"]["times_ms"])
    assert not [op for op in by_op if op.startswith("FusedConv") or op == "Conv"]       # not timed on the CPU
    convs = [la.tactic for la in engine.data.layers if la.op.startswith("FusedConv") or la.op == "Conv"]
    first_fit = "cpu_dnnl" if onednn_capi.library() is not None else "cpu_onednn_nhwc"
    assert convs and all(t.endswith(first_fit) for t in convs), convs
    for e in entries:
        times = e["times_ms"]
        assert e["best"] == min(times, key=times.get), e        # the fastest measured candidate is kept
        chosen = [la.tactic for la in engine.data.layers if la.op == e["op"]]
        assert e["best"] in chosen, (e["op"], chosen)
    assert_close(engine.run(dict(feeds)), ort_run(model, feeds))
