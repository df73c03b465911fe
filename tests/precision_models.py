"""Small ONNX models and data for the precision tests (INT8 calibration, per-layer precision, debug precision).

    small_cnn()          Conv-Relu-Conv-Relu-GlobalAveragePool-Flatten-Gemm on 1x3x8x8 (node names conv1, relu1, …)
    outlier_cnn()        conv1 reads an input with rare ±200 outliers, then Tanh bounds everything after it: plain
                         INT8 misses (conv1's input range is either clipped or too coarse), conv1 in fp32 passes
    fp16_island()        a float16 model whose Cast→float32 island holds a sum that overflows float16
"""

import numpy as np
from onnx import TensorProto, helper, numpy_helper


def _model(nodes, inputs, outputs, inits, opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8).SerializeToString()


def _cnn(act: str, seed: int, batch):
    rng = np.random.default_rng(seed)
    inits = {"W1": (rng.standard_normal((8, 3, 3, 3)) * 0.3).astype(np.float32),
             "B1": (rng.standard_normal(8) * 0.1).astype(np.float32),
             "W2": (rng.standard_normal((8, 8, 3, 3)) * 0.2).astype(np.float32),
             "B2": (rng.standard_normal(8) * 0.1).astype(np.float32),
             "W3": (rng.standard_normal((10, 8)) * 0.5).astype(np.float32),
             "B3": (rng.standard_normal(10) * 0.1).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "W1", "B1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
             helper.make_node(act, ["c1"], ["a1"], name="act1"),
             helper.make_node("Conv", ["a1", "W2", "B2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c2"], ["a2"], name="relu2"),
             helper.make_node("GlobalAveragePool", ["a2"], ["p"], name="pool"),
             helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
             helper.make_node("Gemm", ["f", "W3", "B3"], ["y"], name="fc", transB=1)]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, 8, 8])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 10])], inits)


def depthwise_cnn(seed: int = 0) -> bytes:
    """conv1 (dense 3×3) → Relu → dw (depthwise 3×3, group 8, no kernel_shape attribute) → Relu → pw (1×1) → pool → fc:
    the MobileNet block, for implicit quantization's choice of which layers get Q/DQ."""
    rng = np.random.default_rng(seed)
    inits = {"W1": (rng.standard_normal((8, 3, 3, 3)) * 0.3).astype(np.float32),
             "Wd": (rng.standard_normal((8, 1, 3, 3)) * 0.5).astype(np.float32),
             "Wp": (rng.standard_normal((16, 8, 1, 1)) * 0.3).astype(np.float32),
             "W3": (rng.standard_normal((10, 16)) * 0.5).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "W1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["a1"], name="relu1"),
             helper.make_node("Conv", ["a1", "Wd"], ["cd"], name="dw", pads=[1, 1, 1, 1], group=8),
             helper.make_node("Relu", ["cd"], ["ad"], name="relud"),
             helper.make_node("Conv", ["ad", "Wp"], ["cp"], name="pw"),
             helper.make_node("GlobalAveragePool", ["cp"], ["p"], name="pool"),
             helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
             helper.make_node("Gemm", ["f", "W3"], ["y"], name="fc", transB=1)]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)


def small_cnn(seed: int = 0, batch=1) -> bytes:
    return _cnn("Relu", seed, batch)


def outlier_cnn(seed: int = 0) -> bytes:
    return _cnn("Tanh", seed, 1)


def images(n: int, seed: int, outliers: bool = False, batch: int = 1) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        x = rng.standard_normal((batch, 3, 8, 8)).astype(np.float32)
        if outliers:
            mask = rng.random(x.shape) < 0.02
            x[mask] = rng.choice([-200.0, 200.0], size=int(mask.sum())).astype(np.float32)
        out.append(x)
    return out


def fp16_island() -> bytes:
    """y = Cast16(ReduceSum(Cast32(x)) · 1e-3): the sum of 128 values near 1000 (≈1.3e5) overflows float16."""
    nodes = [helper.make_node("Cast", ["x"], ["x32"], name="up", to=TensorProto.FLOAT),
             helper.make_node("ReduceSum", ["x32", "axes"], ["s"], name="sum", keepdims=1),
             helper.make_node("Mul", ["s", "k"], ["m"], name="scale"),
             helper.make_node("Cast", ["m"], ["y"], name="down", to=TensorProto.FLOAT16)]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [2, 128])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [2, 1])],
                  {"axes": np.array([1], np.int64), "k": np.array(1e-3, np.float32)})


def cosine(a, b) -> float:
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-30))
