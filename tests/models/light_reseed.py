"""The 9 'light' models of onnx (onnx/backend/test/data/light) with deterministic, input-sensitive weights.

onnx ships them with every weight generated in-graph by ConstantOfShape(0.02): the outputs are a constant
0.001 whatever the input, so comparing with them checks nothing. `reseeded(name)` keeps each architecture
(every node, attribute and shape tensor) and replaces every float parameter — the ConstantOfShape outputs and
the float initializers — by an initializer drawn from a generator seeded by (model, tensor name):

    Conv / Gemm weight   N(0, 2/fan_in)           (He: ReLU stacks keep a second moment of O(1))
    biases, BN mean/bias N(0, 0.05²)
    BN scale, BN var,    U(0.8, 1.2)
    the Mul after BN     U(0.8, 1.2)  (densenet121, inception_v2: BN then Mul(Unsqueeze(scale)), Add(bias))
then one calibration (`_calibrate`): the last weighted layer before the Softmax (or the output) is centred and
scaled so the logits have a standard deviation of LOGIT_STD across fixed inputs (ReLU, pooling and Reshape
between them are homogeneous, so the scaling is exact). Models are cached under $TENSORFORGE_TEST_CACHE (default: the temp folder), keyed by this
file's hash; nothing is committed. `light_input(name, seed)` gives the model's input.
"""

import hashlib
import os
import tempfile
import zlib
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
MODELS = ["bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50", "shufflenet", "squeezenet",
          "vgg19", "zfnet512"]
LOGIT_STD = 2.0
CALIBRATION_SEED, CALIBRATION_INPUTS = 12345, 4
_VERSION = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]


def cache_dir() -> Path:
    return Path(os.environ.get("TENSORFORGE_TEST_CACHE", tempfile.gettempdir())) / f"tensorforge-light-{_VERSION}"


def data_input(model: onnx.ModelProto) -> tuple[str, list[int]]:
    inits = {t.name for t in model.graph.initializer}
    (data,) = [i for i in model.graph.input if i.name not in inits]
    return data.name, [d.dim_value for d in data.type.tensor_type.shape.dim]


def light_input(model: onnx.ModelProto, seed: int) -> dict:
    """A random image with structure: a 4×4 grid of random per-channel levels plus N(0, 0.5²) noise (white noise
    alone averages out in the global pooling, and every input would give nearly the same logits)."""
    name, (n, c, h, w) = data_input(model)
    rng = np.random.default_rng(seed)
    levels = np.kron(rng.standard_normal((n, c, 4, 4)), np.ones((h // 4, w // 4)))
    return {name: (levels + 0.5 * rng.standard_normal((n, c, h, w))).astype(np.float32)}


def _roles(graph) -> tuple[dict[str, str], dict]:
    """tensor name → role of every float parameter, read from its consumers (through Unsqueeze and Reshape);
    and weight name → the Conv/Gemm that reads it."""
    consumers: dict[str, list] = {}
    for node in graph.node:
        for j, name in enumerate(node.input):
            consumers.setdefault(name, []).append((node, j))
    roles, owners = {}, {}

    def role_of(name, seen=0):
        for node, j in consumers.get(name, []):
            if node.op_type in ("Unsqueeze", "Reshape") and j == 0 and seen < 4:
                return role_of(node.output[0], seen + 1)
            if node.op_type in ("Conv", "Gemm"):
                return {1: "weight", 2: "bias"}.get(j), node
            if node.op_type == "BatchNormalization":
                return {1: "unit", 2: "small", 3: "small", 4: "unit"}.get(j), node
            if node.op_type == "Mul":
                return "unit", node
            if node.op_type in ("Add", "Sum"):
                return "small", node
        return None, None

    params = [n.output[0] for n in graph.node if n.op_type == "ConstantOfShape"]
    params += [t.name for t in graph.initializer if t.data_type == onnx.TensorProto.FLOAT]
    for name in params:
        if name in consumers:         # resnet50 and zfnet512 carry an unused [1, 1] initializer: left as it is
            roles[name], owners[name] = role_of(name)
    return roles, owners


def _fan_in(node, shape) -> int:
    if node.op_type == "Conv":
        return int(np.prod(shape[1:]))
    trans_b = next((a.i for a in node.attribute if a.name == "transB"), 0)
    return int(np.prod(shape) // shape[0] if trans_b else shape[0])     # (N, K…) or (K, N)


def _draw(model_name, tensor, shape, role, fan_in) -> np.ndarray:
    rng = np.random.default_rng(zlib.crc32(f"{model_name}/{tensor}".encode()))
    if role == "weight":
        return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)
    if role == "unit":
        return rng.uniform(0.8, 1.2, shape).astype(np.float32)
    return (rng.standard_normal(shape) * 0.05).astype(np.float32)


def _reseed(name: str) -> tuple[onnx.ModelProto, list[str]]:
    """The re-seeded model and the names of the last weighted layer's parameters (to calibrate)."""
    model = onnx.load(str(LIGHT / f"light_{name}.onnx"))
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    roles, owner = _roles(graph)
    shapes = {n.output[0]: [int(v) for v in numpy_helper.to_array(inits[n.input[0]])]
              for n in graph.node if n.op_type == "ConstantOfShape"}
    shapes.update({t.name: list(t.dims) for t in graph.initializer if t.name in roles})
    unknown = [t for t, r in roles.items() if r is None]
    if unknown:
        raise ValueError(f"light_{name}: no role for parameters {unknown[:5]} (the re-seeder needs a rule)")
    new = {t: _draw(name, t, shapes[t], r, _fan_in(owner[t], shapes[t]) if r == "weight" else 0)
           for t, r in roles.items()}
    shape_inputs = {n.input[0] for n in graph.node if n.op_type == "ConstantOfShape"}
    nodes = [n for n in graph.node if n.op_type != "ConstantOfShape"]
    del graph.node[:]
    graph.node.extend(nodes)
    kept = [t for t in graph.initializer if t.name not in roles and t.name not in shape_inputs]
    del graph.initializer[:]
    graph.initializer.extend(kept + [numpy_helper.from_array(v, t) for t, v in new.items()])
    inputs = [i for i in graph.input if i.name not in shape_inputs and i.name not in roles]
    del graph.input[:]
    graph.input.extend(inputs)
    return model, _last_weighted(graph)


def _last_weighted(graph) -> tuple[list[str], bool]:
    """Parameters (weight, bias) of the Conv/Gemm that produces the logits, walking back from the output through
    Softmax, Relu, pooling, Reshape, Dropout; and whether that path is affine (no Relu on it)."""
    producer = {o: n for n in graph.node for o in n.output}
    name, affine = graph.output[0].name, True
    while True:
        node = producer[name]
        if node.op_type in ("Conv", "Gemm"):      # its parameters, read through a Reshape where there is one
            return [producer[p].input[0] if p in producer and producer[p].op_type == "Reshape" else p
                    for p in node.input[1:3]], affine
        if node.op_type not in ("Softmax", "Relu", "GlobalAveragePool", "AveragePool", "Reshape", "Dropout",
                                "Flatten"):
            raise ValueError(f"cannot calibrate through {node.op_type}")
        affine = affine and node.op_type != "Relu"
        name = node.input[0]


def _logits_name(graph) -> str:
    producer = {o: n for n in graph.node for o in n.output}
    out = graph.output[0].name
    return producer[out].input[0] if producer[out].op_type == "Softmax" else out


def _calibrate(name, model, params, affine) -> onnx.ModelProto:
    """Scale (and, on an affine path, centre) the last layer so the logits vary with the input: on an affine path
    the bias becomes b − mean(logits) over CALIBRATION_INPUTS inputs (the part every input shares: deep random
    ReLU features are strongly correlated), then weight and bias are scaled so the centred logits' std is
    LOGIT_STD."""
    import onnxruntime as ort
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    logits = _logits_name(probe.graph)
    if logits != probe.graph.output[0].name:
        probe.graph.output.append(helper.make_tensor_value_info(logits, onnx.TensorProto.FLOAT, None))
    sess = ort.InferenceSession(probe.SerializeToString(), providers=["CPUExecutionProvider"])
    values = np.stack([sess.run([logits], light_input(model, CALIBRATION_SEED + k))[0]
                       for k in range(CALIBRATION_INPUTS)])
    inits = {t.name: t for t in model.graph.initializer}
    weight, bias = params
    w, b = numpy_helper.to_array(inits[weight]), numpy_helper.to_array(inits[bias])
    if affine:
        shared = values.mean(axis=0).reshape(-1)
        b = b - shared
        values = values - values.mean(axis=0)
    std = float(np.std(values))
    if not np.isfinite(std) or std == 0:
        raise ValueError(f"light_{name}: logits std {std} at calibration")
    factor = np.float32(LOGIT_STD / std)
    inits[weight].CopyFrom(numpy_helper.from_array((w * factor).astype(np.float32), weight))
    inits[bias].CopyFrom(numpy_helper.from_array((b * factor).astype(np.float32), bias))
    return model


def reseeded_path(name: str) -> Path:
    """The re-seeded model's file (built and cached on first use; the write is atomic)."""
    path = cache_dir() / f"light_{name}.onnx"
    if not path.exists():
        model, (params, affine) = _reseed(name)
        model = _calibrate(name, model, params, affine)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(model.SerializeToString())
        os.replace(tmp, path)
    return path


def reseeded(name: str) -> bytes:
    return reseeded_path(name).read_bytes()
