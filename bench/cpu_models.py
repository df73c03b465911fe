"""The realistic-size models of bench/cpu.py, built here with random weights (torchvision is not needed):
ResNet-50 and MobileNetV3-Large as torchvision defines them, BERT-base from a transformers config, a GRU/LSTM
speech-style sequence model, a VAD-like Loop/If model written in ONNX, and a YOLO-style detector at 640×640.

Entry point: `realistic_models()` → name → (onnx bytes, {input name: numpy array}).
"""

import io
import warnings

import numpy as np
import torch
import torch.nn as nn
from onnx import TensorProto, helper


def export(module, args, opset=17, names=None) -> bytes:
    args = args if isinstance(args, tuple) else (args,)
    names = names or [f"input{i}" for i in range(len(args))]
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module.eval(), args, buf, dynamo=False, opset_version=opset, input_names=list(names))
    return buf.getvalue()


# ---- ResNet-50 (torchvision's layout: Bottleneck ×[3, 4, 6, 3]) ----------------------------------------
class Bottleneck(nn.Module):
    def __init__(self, cin, width, stride):
        super().__init__()
        cout = width * 4
        self.body = nn.Sequential(nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
                                  nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
                                  nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.down = None if stride == 1 and cin == cout else nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        return torch.relu(self.body(x) + (x if self.down is None else self.down(x)))


def resnet50():
    layers, cin = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)], 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for b in range(blocks):
            layers.append(Bottleneck(cin, width, stride if b == 0 else 1))
            cin = width * 4
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2048, 1000))


# ---- MobileNetV3-Large (torchvision's inverted-residual table) -----------------------------------------
def _div8(v):
    return max(8, int(v + 4) // 8 * 8)


class SE(nn.Module):
    def __init__(self, c):
        super().__init__()
        s = _div8(c // 4)
        self.fc1, self.fc2 = nn.Conv2d(c, s, 1), nn.Conv2d(s, c, 1)

    def forward(self, x):
        w = nn.functional.adaptive_avg_pool2d(x, 1)
        return x * nn.functional.hardsigmoid(self.fc2(torch.relu(self.fc1(w))))


class InvRes(nn.Module):
    def __init__(self, cin, k, exp, cout, se, hs, stride):
        super().__init__()
        act = nn.Hardswish if hs else nn.ReLU
        layers = [] if exp == cin else [nn.Conv2d(cin, exp, 1, bias=False), nn.BatchNorm2d(exp), act()]
        layers += [nn.Conv2d(exp, exp, k, stride, k // 2, groups=exp, bias=False), nn.BatchNorm2d(exp), act()]
        if se:
            layers.append(SE(exp))
        layers += [nn.Conv2d(exp, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.block, self.res = nn.Sequential(*layers), stride == 1 and cin == cout

    def forward(self, x):
        y = self.block(x)
        return x + y if self.res else y


_V3_LARGE = [(16, 3, 16, 16, 0, 0, 1), (16, 3, 64, 24, 0, 0, 2), (24, 3, 72, 24, 0, 0, 1), (24, 5, 72, 40, 1, 0, 2),
             (40, 5, 120, 40, 1, 0, 1), (40, 5, 120, 40, 1, 0, 1), (40, 3, 240, 80, 0, 1, 2), (80, 3, 200, 80, 0, 1, 1),
             (80, 3, 184, 80, 0, 1, 1), (80, 3, 184, 80, 0, 1, 1), (80, 3, 480, 112, 1, 1, 1),
             (112, 3, 672, 112, 1, 1, 1), (112, 5, 672, 160, 1, 1, 2), (160, 5, 960, 160, 1, 1, 1),
             (160, 5, 960, 160, 1, 1, 1)]


def mobilenet_v3_large():
    layers = [nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.Hardswish()]
    layers += [InvRes(*row) for row in _V3_LARGE]
    layers += [nn.Conv2d(160, 960, 1, bias=False), nn.BatchNorm2d(960), nn.Hardswish(), nn.AdaptiveAvgPool2d(1),
               nn.Flatten(), nn.Linear(960, 1280), nn.Hardswish(), nn.Linear(1280, 1000)]
    return nn.Sequential(*layers)


# ---- a YOLO-style detector (Conv-BN-SiLU, CSP blocks, three heads) -------------------------------------
def _cbs(cin, cout, k=3, s=1):
    return nn.Sequential(nn.Conv2d(cin, cout, k, s, k // 2, bias=False), nn.BatchNorm2d(cout), nn.SiLU())


class CSP(nn.Module):
    def __init__(self, c, n=1):
        super().__init__()
        h = c // 2
        self.a, self.b, self.out = _cbs(c, h, 1), _cbs(c, h, 1), _cbs(2 * h, c, 1)
        self.m = nn.Sequential(*[nn.Sequential(_cbs(h, h, 1), _cbs(h, h, 3)) for _ in range(n)])

    def forward(self, x):
        a = self.a(x)
        return self.out(torch.cat([a + self.m(a), self.b(x)], 1))


class Detector(nn.Module):
    def __init__(self, classes=80):
        super().__init__()
        self.stem = nn.Sequential(_cbs(3, 16, 6, 2), _cbs(16, 32, 3, 2), CSP(32))
        self.p3 = nn.Sequential(_cbs(32, 64, 3, 2), CSP(64, 2))
        self.p4 = nn.Sequential(_cbs(64, 128, 3, 2), CSP(128, 2))
        self.p5 = nn.Sequential(_cbs(128, 256, 3, 2), CSP(256))
        self.heads = nn.ModuleList(nn.Conv2d(c, 3 * (5 + classes), 1) for c in (64, 128, 256))

    def forward(self, x):
        p3 = self.p3(self.stem(x))
        p4 = self.p4(p3)
        p5 = self.p5(p4)
        return torch.cat([h(p).flatten(2) for h, p in zip(self.heads, (p3, p4, p5))], 2).sigmoid()


# ---- recurrent: a speech-enhancement style GRU + LSTM over 200 frames ----------------------------------
class Recurrent(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(161, 256)
        self.gru = nn.GRU(256, 256, num_layers=2, batch_first=True)
        self.lstm = nn.LSTM(256, 128, batch_first=True)
        self.out = nn.Linear(128, 161)

    def forward(self, x):
        h, _ = self.gru(torch.relu(self.inp(x)))
        h, _ = self.lstm(h)
        return torch.sigmoid(self.out(h))


# ---- a VAD-like model: Loop over frames with an If inside, written in ONNX -----------------------------
def _t(name, a):
    a = np.asarray(a)
    return helper.make_tensor(name, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape, a.reshape(-1).tolist())


def loop_if_model(frames=32, hidden=128, seed=0) -> bytes:
    """h ← Loop over `frames` frames of x (frames, 64): z = x_i·Wx + h·Wh + b; h ← tanh(z) if mode > 0 else
    hardswish(z) written out as paddle2onnx does; y = h. `mode` is Shape-derived (constant at build time)."""
    rng = np.random.default_rng(seed)
    f32 = TensorProto.FLOAT
    then_g = helper.make_graph([helper.make_node("Tanh", ["z"], ["t_out"])], "then", [],
                               [helper.make_tensor_value_info("t_out", f32, [1, hidden])])
    else_g = helper.make_graph([
        helper.make_node("Constant", [], ["c3"], value=_t("c3v", np.float32(3))),
        helper.make_node("Constant", [], ["c0"], value=_t("c0v", np.float32(0))),
        helper.make_node("Constant", [], ["c6"], value=_t("c6v", np.float32(6))),
        helper.make_node("Add", ["z", "c3"], ["e_a"]), helper.make_node("Clip", ["e_a", "c0", "c6"], ["e_c"]),
        helper.make_node("Div", ["e_c", "c6"], ["e_d"]), helper.make_node("Mul", ["z", "e_d"], ["e_out"])], "else", [],
        [helper.make_tensor_value_info("e_out", f32, [1, hidden])])
    body = helper.make_graph([
        helper.make_node("Gather", ["x", "i"], ["xi0"], axis=0),
        helper.make_node("Unsqueeze", ["xi0", "ax0"], ["xi"]),
        helper.make_node("MatMul", ["xi", "Wx"], ["zx"]), helper.make_node("MatMul", ["h_in", "Wh"], ["zh"]),
        helper.make_node("Add", ["zx", "zh"], ["zs"]), helper.make_node("Add", ["zs", "b"], ["z"]),
        helper.make_node("Shape", ["h_in"], ["hs"]), helper.make_node("Gather", ["hs", "one"], ["hw"], axis=0),
        helper.make_node("Greater", ["hw", "lim"], ["mode"]),
        helper.make_node("If", ["mode"], ["h_out"], then_branch=then_g, else_branch=else_g),
        helper.make_node("Identity", ["cond_in"], ["cond_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("h_in", f32, [1, hidden])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("h_out", f32, [1, hidden])])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["M", "", "h0"], ["y"], body=body)], "loop_if",
        [helper.make_tensor_value_info("x", f32, [frames, 64]), helper.make_tensor_value_info("h0", f32, [1, hidden])],
        [helper.make_tensor_value_info("y", f32, [1, hidden])],
        [_t("M", np.int64(frames)), _t("Wx", (rng.standard_normal((64, hidden)) * 0.2).astype(np.float32)),
         _t("Wh", (rng.standard_normal((hidden, hidden)) * 0.1).astype(np.float32)),
         _t("b", (rng.standard_normal(hidden) * 0.1).astype(np.float32)), _t("ax0", np.array([0], np.int64)),
         _t("one", np.int64(1)), _t("lim", np.int64(hidden // 2 if seed == 0 else 4 * hidden))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def realistic_models(only: set | None = None) -> dict:
    torch.manual_seed(0)
    out = {}

    def want(name):
        return only is None or name in only
    if want("resnet50_b1") or want("resnet50_b8"):
        net = resnet50()
        for b in (1, 8):
            if want(f"resnet50_b{b}"):
                x = torch.randn(b, 3, 224, 224)
                out[f"resnet50_b{b}"] = (export(net, x, names=["input"]), {"input": x.numpy()})
    if want("mobilenet_v3_b1") or want("mobilenet_v3_b8"):
        net = mobilenet_v3_large()
        for b in (1, 8):
            if want(f"mobilenet_v3_b{b}"):
                x = torch.randn(b, 3, 224, 224)
                out[f"mobilenet_v3_b{b}"] = (export(net, x, names=["input"]), {"input": x.numpy()})
    if want("bert_base_seq128"):
        import transformers

        from zoo import LastHidden
        bert = transformers.BertModel(transformers.BertConfig(), add_pooling_layer=False).eval()
        ids = torch.randint(0, 30522, (1, 128))
        out["bert_base_seq128"] = (export(LastHidden(bert), ids, names=["input_ids"]), {"input_ids": ids.numpy()})
    if want("gru_lstm_200"):
        x = torch.randn(1, 200, 161)
        out["gru_lstm_200"] = (export(Recurrent(), x, names=["input"]), {"input": x.numpy()})
    if want("loop_if_32"):
        rng = np.random.default_rng(1)
        out["loop_if_32"] = (loop_if_model(), {"x": rng.standard_normal((32, 64)).astype(np.float32),
                                               "h0": np.zeros((1, 128), np.float32)})
    if want("detector_640"):
        x = torch.randn(1, 3, 640, 640)
        out["detector_640"] = (export(Detector(), x, names=["input"]), {"input": x.numpy()})
    return out
