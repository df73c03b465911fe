"""Small float models quantized in the test by onnxruntime's quantize_static (QDQ format, per-channel weights),
and the accuracy numbers of the Q/DQ criterion (issue 12): how close an output is to the exact Q/DQ semantics
(onnxruntime with graph optimisations disabled), in units of the output's quantization step."""

import numpy as np
import onnx
import torch


class _Block(torch.nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = torch.nn.Conv2d(cin, cout, 3, stride, 1)
        self.c2 = torch.nn.Conv2d(cout, cout, 3, 1, 1)
        self.down = torch.nn.Conv2d(cin, cout, 1, stride) if stride != 1 or cin != cout else None

    def forward(self, x):
        idn = x if self.down is None else self.down(x)
        return torch.relu(self.c2(torch.relu(self.c1(x))) + idn)


class ResNetish(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 16, 3, 2, 1)
        self.blocks = torch.nn.Sequential(_Block(16, 16, 1), _Block(16, 32, 2), _Block(32, 32, 1))
        self.fc = torch.nn.Linear(32, 10)

    def forward(self, x):
        return self.fc(self.blocks(torch.relu(self.stem(x))).mean((2, 3)))


class BertLayer(torch.nn.Module):
    def __init__(self, h=64, heads=4, ffn=128):
        super().__init__()
        self.heads = heads
        self.qkv, self.out = torch.nn.Linear(h, 3 * h), torch.nn.Linear(h, h)
        self.ln1, self.ln2 = torch.nn.LayerNorm(h), torch.nn.LayerNorm(h)
        self.ff1, self.ff2 = torch.nn.Linear(h, ffn), torch.nn.Linear(ffn, h)

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = self.qkv(x).reshape(b, s, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
        att = torch.softmax(q @ k.transpose(-1, -2) / (h // self.heads) ** 0.5, -1) @ v
        x = self.ln1(x + self.out(att.transpose(1, 2).reshape(b, s, h)))
        return self.ln2(x + self.ff2(torch.nn.functional.gelu(self.ff1(x))))


class BertIsh(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.Sequential(BertLayer(), BertLayer())
        self.head = torch.nn.Linear(64, 8)

    def forward(self, x):
        return self.head(self.layers(x))


def quantized_model(module, example, path, calib_count=32, seed=0):
    """Export `module` to ONNX, quantize_static it (QDQ, per-channel weights) on `calib_count` random inputs
    drawn like `example`; returns the path of the quantized model and the input name."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static
    torch.manual_seed(seed)
    module = module.eval()
    fp = str(path) + ".float.onnx"
    torch.onnx.export(module, (example,), fp, opset_version=17, input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "n"}, "y": {0: "n"}}, dynamo=False)
    rng = np.random.RandomState(seed + 1)
    feeds = [{"x": rng.randn(*example.shape).astype(np.float32)} for _ in range(calib_count)]

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter(feeds)

        def get_next(self):
            return next(self.it, None)

    qp = str(path) + ".qdq.onnx"
    quantize_static(fp, qp, Reader(), quant_format=QuantFormat.QDQ, per_channel=True)
    return qp


def output_step(model_path: str, output: str = "y") -> float:
    """The quantization step of `output`: the scale of the DequantizeLinear that produces it."""
    m = onnx.load(model_path)
    inits = {i.name: onnx.numpy_helper.to_array(i) for i in m.graph.initializer}
    dq = next(n for n in m.graph.node if output in n.output)
    assert dq.op_type == "DequantizeLinear", dq.op_type
    return float(inits[dq.input[1]])


def ort_outputs(model_path, feed, optimized: bool):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimized
                                   else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    return ort.InferenceSession(model_path, so, providers=["CPUExecutionProvider"]).run(None, feed)[0]


def closeness(got, exact, step) -> tuple[float, float]:
    """(fraction of elements within one step of the exact result, max error in steps)."""
    err = np.abs(np.asarray(got, np.float64) - np.asarray(exact, np.float64)) / step
    return float((err <= 1 + 1e-6).mean()), float(err.max())
