"""Seeded mutation fuzzing of engine files and ONNX models: the cases, how one runs, how its outcome is judged.

    case = engine_case(seed, i)  /  onnx_case(seed, i)      # deterministic: (seed, i) → the same mutation
    outcome = run_case(case, time_limit_s)                   # "ok" | "clean" | "other" | "hang" | "wrong"

Engine mutations: raw byte flips and truncations (checksum left stale), header fields, raw manifest bytes with the
checksum recomputed, structured manifest JSON edits (values swapped for other kinds, names for other names,
dtypes, dims, deleted or duplicated keys and items, deep nesting), safetensors header edits, and weight *value*
edits. ONNX mutations (protobuf level): dims, dtypes, attributes, opsets, dangling names, removed initializers,
cycles, external-data paths, op types, deleted nodes, and initializer value edits.

Outcomes: a case that loads/builds is run on random inputs. "clean": a TensorforgeError (one line); "other": any
other exception (a finding); "hang": over the time limit (SIGALRM); "wrong" (silent wrong output): a weight-value
edit whose output differs from onnxruntime on the equally edited ONNX model — the oracle: an engine must compute
what its weights say. Crashes are seen by the runner (runner.py), which runs batches in a child process.
"""

import copy
import hashlib
import json
import random
import signal
import struct
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HEADER = struct.Struct("<8sIQQ32s")
BOUNDARY_INTS = [0, 1, -1, 2, 3, 7, 64, 2**31 - 1, 2**31, -2**31, 2**62, -2**62, 2**63 - 1, 10**30]


# ---- seed models ------------------------------------------------------------------------------------------
def _model(nodes, inputs, outputs, inits, name, opset=17):
    g = helper.make_graph(nodes, name, inputs, outputs, initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _vi(name, t, shape):
    return helper.make_tensor_value_info(name, t, shape)


def seed_models() -> dict[str, tuple[onnx.ModelProto, dict]]:
    """name → (model, input shapes). Small: a build takes tens of milliseconds."""
    rng = np.random.default_rng(0)
    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    init = numpy_helper.from_array
    cnn = _model([helper.make_node("Conv", ["x", "W", "B"], ["c"], name="conv", pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", ["c"], ["r"], name="relu"),
                  helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
                  helper.make_node("GlobalAveragePool", ["p"], ["g"], name="gap"),
                  helper.make_node("Flatten", ["g"], ["f"], name="flat"),
                  helper.make_node("Gemm", ["f", "F", "FB"], ["y"], name="fc", transB=1)],
                 [_vi("x", TensorProto.FLOAT, ["N", 3, 8, 8])], [_vi("y", TensorProto.FLOAT, None)],
                 [init(f32(4, 3, 3, 3), "W"), init(f32(4), "B"), init(f32(5, 4), "F"), init(f32(5), "FB")], "cnn")
    mlp = _model([helper.make_node("MatMul", ["x", "W1"], ["h"], name="mm1"),
                  helper.make_node("Add", ["h", "b1"], ["hb"], name="add1"),
                  helper.make_node("Gelu", ["hb"], ["a"], name="gelu", domain=""),
                  helper.make_node("LayerNormalization", ["a", "g", "b"], ["n"], name="ln", axis=-1, epsilon=1e-5),
                  helper.make_node("MatMul", ["n", "W2"], ["o"], name="mm2"),
                  helper.make_node("Softmax", ["o"], ["y"], name="sm", axis=-1)],
                 [_vi("x", TensorProto.FLOAT, ["B", 6])], [_vi("y", TensorProto.FLOAT, None)],
                 [init(f32(6, 8), "W1"), init(f32(8), "b1"), init(np.ones(8, np.float32), "g"),
                  init(np.zeros(8, np.float32), "b"), init(f32(8, 3), "W2")], "mlp", opset=20)
    shape = _model([helper.make_node("Shape", ["x"], ["s"], name="shape"),
                    helper.make_node("Gather", ["s", "i0"], ["n"], name="gather", axis=0),
                    helper.make_node("Concat", ["n", "m1"], ["ns"], name="concat", axis=0),
                    helper.make_node("Reshape", ["x", "ns"], ["r"], name="reshape"),
                    helper.make_node("Transpose", ["r"], ["t"], name="transpose", perm=[1, 0]),
                    helper.make_node("ReduceSum", ["t", "ax"], ["y"], name="reduce", keepdims=0),
                    helper.make_node("ConstantOfShape", ["n"], ["z"], name="cos",
                                     value=numpy_helper.from_array(np.array([2.0], np.float32))),
                    helper.make_node("Mul", ["y", "z"], ["y2"], name="mul")],
                   [_vi("x", TensorProto.FLOAT, ["N", 2, 3])], [_vi("y2", TensorProto.FLOAT, None)],
                   [init(np.array([0], np.int64), "i0"), init(np.array([-1], np.int64), "m1"),
                    init(np.array([0], np.int64), "ax")], "shape")
    mixed = _model([helper.make_node("Cast", ["x"], ["xf"], name="cast", to=TensorProto.FLOAT),
                    helper.make_node("Greater", ["xf", "th"], ["m"], name="gt"),
                    helper.make_node("Where", ["m", "xf", "zero"], ["w"], name="where"),
                    helper.make_node("Slice", ["w", "st", "en", "axs"], ["sl"], name="slice"),
                    helper.make_node("Pad", ["sl", "pads"], ["pd"], name="pad", mode="constant"),
                    helper.make_node("Sqrt", ["pd"], ["y"], name="sqrt")],
                   [_vi("x", TensorProto.INT32, [2, 5])], [_vi("y", TensorProto.FLOAT, None)],
                   [init(np.array(1.0, np.float32), "th"), init(np.array(0.0, np.float32), "zero"),
                    init(np.array([1], np.int64), "st"), init(np.array([4], np.int64), "en"),
                    init(np.array([1], np.int64), "axs"), init(np.array([0, 1, 0, 1], np.int64), "pads")], "mixed")
    return {"cnn": (cnn, {"x": (2, 3, 8, 8)}), "mlp": (mlp, {"x": (3, 6)}), "shape": (shape, {"x": (4, 2, 3)}),
            "mixed": (mixed, {"x": (2, 5)})}


def profile_of(shapes: dict) -> dict:
    """A profile around each seed's shape: batch 1..2×."""
    out = {}
    for k, s in shapes.items():
        lo = (1,) + tuple(s[1:])
        hi = (2 * s[0],) + tuple(s[1:])
        out[k] = (lo, tuple(s), hi)
    return out


# ---- cases ----------------------------------------------------------------------------------------------
@dataclass
class Case:
    kind: str                  # "engine" | "onnx"
    seed_model: str
    mutation: str
    payload: bytes             # the engine file, or the ONNX model
    oracle_model: bytes | None = None     # weight-value edits: the equally edited ONNX model
    feeds_shapes: dict = field(default_factory=dict)
    index: int = 0


_SEEDS_CACHE: dict = {}


def _seeds():
    if not _SEEDS_CACHE:
        _SEEDS_CACHE.update(seed_models())
    return _SEEDS_CACHE


_ENGINES: dict = {}


def seed_engine(name: str) -> bytes:
    if name not in _ENGINES:
        import tensorforge as tfg
        model, shapes = _seeds()[name]
        dynamic = any(not d.HasField("dim_value") for vi in model.graph.input for d in vi.type.tensor_type.shape.dim)
        data = tfg.build(model.SerializeToString(), device="cpu",
                         shapes=profile_of(shapes) if dynamic else None).serialize()
        version, manifest, weights = split(data)          # build times vary: zero them, so cases are reproducible
        m = json.loads(manifest)
        m["build_info"] = _zero_floats(m["build_info"])
        _ENGINES[name] = pack(version, json.dumps(m, sort_keys=True, separators=(",", ":")).encode(), weights)
    return _ENGINES[name]


def _zero_floats(v):
    if isinstance(v, float):
        return 0.0
    if isinstance(v, dict):
        return {k: _zero_floats(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_zero_floats(x) for x in v]
    return v


def split(data: bytes):
    _, version, mlen, wlen, _ = HEADER.unpack_from(data)
    body = data[HEADER.size:]
    return version, body[:mlen], body[mlen:mlen + wlen]


def pack(version: int, manifest: bytes, weights: bytes, magic=b"TFGENGIN") -> bytes:
    body = manifest + weights
    return HEADER.pack(magic, version, len(manifest), len(weights), hashlib.sha256(body).digest()) + body


def _random_json(rng: random.Random, names: list[str], depth: int = 0):
    r = rng.random()
    if r < 0.15:
        return rng.choice(BOUNDARY_INTS)
    if r < 0.25:
        return rng.choice([0.0, -1.5, 1e308, float("inf"), float("nan"), 3.5])
    if r < 0.45:
        return rng.choice(names) if names else "x"
    if r < 0.55:
        return rng.choice(["", "abc", "float32", "int64", "bool", "plugin:evil::X:1", "any.torch_ref",
                           "$tensor", "host", "device", "__import__('os')"])
    if r < 0.62:
        return None
    if r < 0.7:
        return rng.choice([True, False])
    if r < 0.85 and depth < 3:
        return [_random_json(rng, names, depth + 1) for _ in range(rng.randint(0, 4))]
    if depth < 3:
        return {rng.choice(["$tensor", "$dict", "$network", "name", "x"]): _random_json(rng, names, depth + 1)}
    return 1


def _paths(obj, prefix=()):
    """Every (container, key) path of a JSON value."""
    out = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.append(prefix + (k,))
            out.extend(_paths(v, prefix + (k,)))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out.append(prefix + (i,))
            out.extend(_paths(v, prefix + (i,)))
    return out


def _get(obj, path):
    for p in path:
        obj = obj[p]
    return obj


def _names(m) -> list[str]:
    names = set()
    for key in ("inputs", "outputs", "tensors", "layers"):
        items = m.get(key) if isinstance(m.get(key), list) else []
        for t in items:
            if not isinstance(t, dict):
                continue
            names.add(t.get("name") if isinstance(t.get("name"), str) else "")
            for k in ("inputs", "outputs"):
                if isinstance(t.get(k), list):
                    names.update(x for x in t[k] if isinstance(x, str))
    return sorted(n for n in names if n)


def _json_edit(m: dict, rng: random.Random) -> str:
    paths = _paths(m)
    path = rng.choice(paths)
    parent, key = _get(m, path[:-1]), path[-1]
    op = rng.random()
    old = parent[key]
    if op < 0.35:
        parent[key] = _random_json(rng, _names(m))
        return f"set {'/'.join(map(str, path))}"
    if op < 0.5 and isinstance(old, str):
        parent[key] = rng.choice(_names(m) + ["float16", "int64", "bool", "uint4", "nonsense"])
        return f"rename {'/'.join(map(str, path))}"
    if op < 0.62 and isinstance(old, int) and not isinstance(old, bool):
        parent[key] = rng.choice(BOUNDARY_INTS + [old + 1, old - 1, -old])
        return f"int {'/'.join(map(str, path))}"
    if op < 0.74:
        if isinstance(parent, dict):
            del parent[key]
        else:
            parent.pop(key)
        return f"delete {'/'.join(map(str, path))}"
    if op < 0.84 and isinstance(parent, list):
        parent.insert(key, copy.deepcopy(old))
        return f"duplicate {'/'.join(map(str, path))}"
    if op < 0.92 and isinstance(parent, list) and len(parent) > 1:
        j = rng.randrange(len(parent))
        parent[key], parent[j] = parent[j], parent[key]
        return f"swap {'/'.join(map(str, path))}"
    parent[key] = [old] if rng.random() < 0.5 else {"$dict": {"v": old}}
    return f"wrap {'/'.join(map(str, path))}"


def _safetensors_edit(weights: bytes, rng: random.Random) -> bytes:
    n = int.from_bytes(weights[:8], "little")
    header = json.loads(weights[8:8 + n])
    keys = [k for k in header if k != "__metadata__"]
    if not keys:
        return weights
    k = rng.choice(keys)
    r = rng.random()
    if r < 0.3:
        header[k]["dtype"] = rng.choice(["F16", "I64", "BOOL", "U8", "F64", "XX", "BF16"])
    elif r < 0.6:
        header[k]["shape"] = [rng.choice(BOUNDARY_INTS[:8]) for _ in range(rng.randint(0, 4))]
    elif r < 0.85:
        a, b = header[k]["data_offsets"]
        header[k]["data_offsets"] = [a + rng.choice([0, 1, -1, 4]), b + rng.choice([0, 1, 4, 2**40])]
    else:
        header[rng.choice(["__metadata__", "extra"])] = rng.choice([{"a": 1}, "x", [1]])
    hb = json.dumps(header).encode()
    return len(hb).to_bytes(8, "little") + hb + weights[8 + n:]


def _weight_value_edit(name: str, rng: random.Random):
    """Edit one ONNX initializer that the engine stores under the same name, shape and dtype (else None)."""
    from tensorforge.engine import from_bytes
    model, shapes = _seeds()[name]
    data = seed_engine(name)
    eng = from_bytes(data)
    inits = {t.name: t for t in model.graph.initializer}
    same = [k for k, t in eng.constants.items() if k in inits and t.dtype.is_floating_point
            and tuple(t.shape) == tuple(inits[k].dims) and t.numel() > 0]
    if not same:
        return None
    k = rng.choice(same)
    arr = numpy_helper.to_array(inits[k]).copy()
    flat = arr.reshape(-1)
    for _ in range(rng.randint(1, max(1, flat.size // 3))):
        flat[rng.randrange(flat.size)] = rng.choice([0.0, -2.0, 0.5, 3.0, rng.gauss(0, 2)])
    edited = copy.deepcopy(model)
    for t in edited.graph.initializer:
        if t.name == k:
            t.CopyFrom(numpy_helper.from_array(arr.astype(np.float32), k))
    from safetensors.torch import load as st_load
    from safetensors.torch import save as st_save
    import torch
    version, manifest, weights = split(data)
    blobs = st_load(weights)
    blobs[k] = torch.from_numpy(arr.astype(np.float32))
    return k, pack(version, manifest, st_save(blobs)), edited.SerializeToString()


def engine_case(seed: int, i: int) -> Case:
    rng = random.Random(f"engine-{seed}-{i}")
    name = rng.choice(sorted(_seeds()))
    data = seed_engine(name)
    version, manifest, weights = split(data)
    shapes = _seeds()[name][1]
    kind = rng.random()
    if kind < 0.1:          # raw bytes, checksum left as it is
        b = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        return Case("engine", name, "raw byte flips", bytes(b), feeds_shapes=shapes, index=i)
    if kind < 0.15:
        cut = rng.randrange(len(data))
        return Case("engine", name, f"truncated at {cut}", data[:cut], feeds_shapes=shapes, index=i)
    if kind < 0.22:         # header fields
        field_ = rng.choice(["magic", "version", "mlen", "wlen"])
        magic, mlen, wlen = b"TFGENGIN", len(manifest), len(weights)
        body = manifest + weights
        if field_ == "magic":
            magic = bytes(rng.randrange(256) for _ in range(8))
        elif field_ == "version":
            version = rng.choice([0, 1, 3, 2**32 - 1, version])
        elif field_ == "mlen":
            mlen = rng.choice([0, 1, mlen - 1, mlen + 1, 2**63])
        else:
            wlen = rng.choice([0, wlen - 1, wlen + 1, 2**63])
        head = HEADER.pack(magic, version, mlen % 2**64, wlen % 2**64, hashlib.sha256(body).digest())
        return Case("engine", name, f"header {field_}", head + body, feeds_shapes=shapes, index=i)
    if kind < 0.32:         # raw manifest bytes, checksum recomputed
        b = bytearray(manifest)
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(len(b))] = rng.choice(b'{}[]",:0123456789-eE.tfn \\') if rng.random() < 0.7 \
                else rng.randrange(256)
        return Case("engine", name, "manifest bytes", pack(version, bytes(b), weights), feeds_shapes=shapes, index=i)
    if kind < 0.36:         # textual attacks: duplicate keys, deep nesting
        if rng.random() < 0.5:
            crafted = b'{"name":"dup",' + manifest[1:]
            what = "duplicate key"
        else:
            depth = rng.choice([50, 200, 5000, 100000])
            crafted = manifest[:-1] + b',"zz":' + b"[" * depth + b"]" * depth + b"}"
            what = f"nesting {depth}"
        return Case("engine", name, what, pack(version, crafted, weights), feeds_shapes=shapes, index=i)
    if kind < 0.8:          # structured JSON edits
        m = json.loads(manifest)
        what = "; ".join(_json_edit(m, rng) for _ in range(rng.choice([1, 1, 1, 2, 3])))
        raw = json.dumps(m, sort_keys=True).encode()
        return Case("engine", name, f"json: {what}", pack(version, raw, weights), feeds_shapes=shapes, index=i)
    if kind < 0.9 and weights:
        return Case("engine", name, "safetensors header", pack(version, manifest, _safetensors_edit(weights, rng)),
                    feeds_shapes=shapes, index=i)
    edit = _weight_value_edit(name, rng)
    if edit is None:
        return Case("engine", name, "unchanged", data, feeds_shapes=shapes, index=i)
    k, crafted, oracle = edit
    return Case("engine", name, f"weight values of {k}", crafted, oracle_model=oracle, feeds_shapes=shapes, index=i)


# ---- ONNX mutations -------------------------------------------------------------------------------------
def _all_names(g) -> list[str]:
    names = {vi.name for vi in list(g.input) + list(g.output)} | {t.name for t in g.initializer}
    for n in g.node:
        names.update(list(n.input) + list(n.output))
    return sorted(x for x in names if x)


def _mutate_onnx(m: onnx.ModelProto, rng: random.Random) -> str:
    g = m.graph
    r = rng.random()
    if r < 0.12 and g.input:                                     # dims
        vi = rng.choice(list(g.input))
        dims = vi.type.tensor_type.shape.dim
        if dims and rng.random() < 0.8:
            d = rng.choice(list(dims))
            d.dim_value = rng.choice([0, 1, 2, 5, 2**31, 2**62, -1, -5])
            return f"dim of {vi.name}"
        vi.type.tensor_type.shape.dim.add().dim_value = rng.choice([1, 3])
        return f"rank of {vi.name}"
    if r < 0.22:                                                 # dtypes
        target = rng.choice(["input", "init", "output"])
        t = rng.choice([TensorProto.FLOAT16, TensorProto.INT64, TensorProto.BOOL, TensorProto.STRING,
                        TensorProto.DOUBLE, TensorProto.UINT8, 0, 99, TensorProto.COMPLEX64, TensorProto.INT4])
        if target == "init" and g.initializer:
            init = rng.choice(list(g.initializer))
            init.data_type = t
            return f"dtype of initializer {init.name}"
        vis = list(g.input if target == "input" else g.output)
        if vis:
            vis[0].type.tensor_type.elem_type = t
            return f"dtype of {target} {vis[0].name}"
    if r < 0.42 and g.node:                                      # attributes
        n = rng.choice(list(g.node))
        if n.attribute and rng.random() < 0.8:
            a = rng.choice(list(n.attribute))
            sub = rng.random()
            if sub < 0.15:
                n.attribute.remove(a)
                return f"remove attribute {n.name}.{a.name}"
            if a.type == onnx.AttributeProto.INT:
                a.i = rng.choice(BOUNDARY_INTS[:13])
            elif a.type == onnx.AttributeProto.INTS:
                vals = [rng.choice(BOUNDARY_INTS[:13]) for _ in range(rng.choice([len(a.ints), len(a.ints), 1, 5]))]
                del a.ints[:]
                a.ints.extend(vals)
            elif a.type == onnx.AttributeProto.FLOAT:
                a.f = rng.choice([0.0, -1.0, 1e30, float("nan"), float("inf")])
            elif a.type == onnx.AttributeProto.STRING:
                a.s = rng.choice([b"", b"bogus", b"tanh", b"reflect", b"\xff\xfe"])
            else:
                a.type = rng.choice([onnx.AttributeProto.INT, onnx.AttributeProto.STRING])
            return f"attribute {n.name}.{a.name}"
        n.attribute.append(helper.make_attribute(rng.choice(["axis", "bogus", "perm", "to", "kernel_shape"]),
                                                 rng.choice([0, 5, -9, [1, 2], "x", 1.5])))
        return f"add attribute to {n.name}"
    if r < 0.5:                                                  # opsets
        o = m.opset_import[0]
        o.version = rng.choice([0, 1, 6, 9, 11, 13, 18, 21, 22, 23, 2**31, 2**62, -1])
        if rng.random() < 0.2:
            m.opset_import.add().CopyFrom(helper.make_opsetid(rng.choice(["com.evil", "ai.onnx.ml"]), 2**40))
        return f"opset {o.version}"
    if r < 0.6 and g.node:                                       # dangling names
        n = rng.choice(list(g.node))
        if n.input and rng.random() < 0.7:
            n.input[rng.randrange(len(n.input))] = rng.choice(["ghost", ""] + _all_names(g))
            return f"input of {n.name}"
        if n.output:
            n.output[0] = rng.choice(["ghost"] + _all_names(g))
            return f"output of {n.name}"
    if r < 0.67 and g.initializer:                               # removed initializer
        init = rng.choice(list(g.initializer))
        g.initializer.remove(init)
        if rng.random() < 0.5:                                   # left as a graph input: a run-time tensor
            g.input.append(helper.make_tensor_value_info(init.name, init.data_type, list(init.dims)))
        return f"removed initializer {init.name}"
    if r < 0.73 and len(g.node) > 1:                             # cycles / order
        i, j = sorted(rng.sample(range(len(g.node)), 2))
        if rng.random() < 0.5 and g.node[j].output:
            g.node[i].input.append(g.node[j].output[0]) if not g.node[i].input else \
                g.node[i].input.__setitem__(0, g.node[j].output[0])
            return f"cycle {i}<-{j}"
        nodes = list(g.node)
        nodes[i], nodes[j] = nodes[j], nodes[i]
        del g.node[:]
        g.node.extend(nodes)
        return f"swap nodes {i},{j}"
    if r < 0.8 and g.initializer:                                # external-data paths
        init = rng.choice(list(g.initializer))
        init.ClearField("raw_data")
        del init.float_data[:]
        del init.int64_data[:]
        init.data_location = TensorProto.EXTERNAL
        loc = rng.choice(["../../etc/passwd", "/etc/passwd", "missing.bin", "", "a/../../b", "\x00", "."])
        for k, v in (("location", loc), ("offset", rng.choice(["0", "-1", "99999999999"])),
                     ("length", rng.choice(["4", "0", "-4", "2**62"]))):
            e = init.external_data.add()
            e.key, e.value = k, v
        return f"external data {loc!r}"
    if r < 0.87 and g.node:                                      # op types, deleted nodes
        n = rng.choice(list(g.node))
        if rng.random() < 0.5:
            n.op_type = rng.choice(["Relu", "Identity", "Loop", "If", "Nonexistent", "Reshape", "Conv", "Split",
                                    "TopK", "Resize", "Einsum"])
            return f"op_type of {n.name} → {n.op_type}"
        g.node.remove(n)
        return f"removed node {n.name}"
    if g.initializer:                                            # initializer payloads
        init = rng.choice(list(g.initializer))
        if rng.random() < 0.5 and init.dims:
            init.dims[rng.randrange(len(init.dims))] = rng.choice([0, 1, 1000, 2**40, -3])
            return f"initializer dims of {init.name}"
        init.raw_data = init.raw_data[:rng.randrange(max(len(init.raw_data), 1))]
        return f"initializer data of {init.name}"
    return "unchanged"


def onnx_case(seed: int, i: int) -> Case:
    rng = random.Random(f"onnx-{seed}-{i}")
    name = rng.choice(sorted(_seeds()))
    model, shapes = _seeds()[name]
    if rng.random() < 0.08:                                       # weight values: the oracle case
        edited = copy.deepcopy(model)
        inits = [t for t in edited.graph.initializer if t.data_type == TensorProto.FLOAT and np.prod(t.dims) > 1]
        if inits:
            t = rng.choice(inits)
            arr = numpy_helper.to_array(t).copy().reshape(-1)
            arr[rng.randrange(arr.size)] = rng.gauss(0, 3)
            t.CopyFrom(numpy_helper.from_array(arr.reshape(tuple(t.dims)), t.name))
            data = edited.SerializeToString()
            return Case("onnx", name, f"weight values of {t.name}", data, oracle_model=data, feeds_shapes=shapes,
                        index=i)
    m = copy.deepcopy(model)
    what = "; ".join(_mutate_onnx(m, rng) for _ in range(rng.choice([1, 1, 2, 3])))
    try:
        data = m.SerializeToString()
    except Exception:  # noqa: BLE001 - protobuf refused the mutation itself (e.g. invalid UTF-8): not a case
        data = model.SerializeToString()
        what = "unchanged (protobuf refused the edit)"
    return Case("onnx", name, what, data, feeds_shapes=shapes, index=i)


# ---- running one case ----------------------------------------------------------------------------------
class Hang(BaseException):
    """Raised by SIGALRM: the case ran past its time limit."""


def _alarm(signum, frame):
    raise Hang()


def _feeds(engine, shapes: dict, rng: np.random.Generator):
    import torch
    feeds = {}
    for info in engine.inputs:
        declared = tuple(info.shape or ())
        shape = tuple(shapes.get(info.name) or ())
        if len(shape) != len(declared):
            shape = tuple(1 for _ in declared)
        shape = tuple(e if isinstance(e, int) and e >= 0 else d for d, e in zip(shape, declared))
        if int(np.prod(shape)) > 1 << 22:
            shape = tuple(min(d, 4) for d in shape)      # a mutated static shape: keep the run small
        dtype = info.dtype or torch.float32
        if dtype.is_floating_point:
            t = torch.from_numpy(rng.standard_normal(shape).astype(np.float32)).to(dtype)
        elif dtype == torch.bool:
            t = torch.from_numpy(rng.integers(0, 2, shape).astype(bool))
        elif dtype.itemsize == 1 and dtype not in (torch.int8, torch.uint8):   # sub-byte/e8m0: one code a byte
            t = torch.from_numpy(rng.integers(0, 3, shape).astype(np.uint8)).view(dtype)
        else:
            t = torch.from_numpy(rng.integers(0, 3, shape)).to(dtype)
        feeds[info.name] = t
    return feeds


def _compare_with_ort(model: bytes, engine_out: dict, feeds: dict) -> str | None:
    import onnxruntime as ort
    try:
        sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
        want = sess.run(None, {k: v.numpy() for k, v in feeds.items()})
    except Exception:  # noqa: BLE001 - onnxruntime refuses it too: no oracle
        return None
    for o, w in zip(sess.get_outputs(), want):
        g = engine_out[o.name].detach().cpu().numpy()
        if g.shape != w.shape or not np.allclose(g, w, rtol=1e-3, atol=1e-4, equal_nan=True):
            return f"{o.name}: max |Δ| {np.nanmax(np.abs(g.astype(np.float64) - w)) if g.shape == w.shape else 'shape'}"
    return None


def run_case(case: Case, time_limit_s: float = 20.0) -> tuple[str, str]:
    """(outcome, detail). Must run in the main thread (SIGALRM)."""
    import tensorforge as tfg
    from tensorforge.api.high_level import Engine
    from tensorforge.runtime import Runtime
    from tensorforge.util.errors import TensorforgeError
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, time_limit_s)
    try:
        if case.kind == "engine":
            engine = Engine(Runtime("cpu").deserialize(case.payload, "fuzzed engine"), "cpu")
        else:
            engine = tfg.build(case.payload, device="cpu", shapes=_profile_for(case))
        feeds = _feeds(engine.data, case.feeds_shapes, np.random.default_rng(case.index))
        out = engine.run(dict(feeds))
        if case.oracle_model is not None:
            bad = _compare_with_ort(case.oracle_model, out, feeds)
            if bad:
                return "wrong", bad
        return "ok", ""
    except Hang:
        return "hang", f"over {time_limit_s:g} s"
    except TensorforgeError as e:
        text = str(e)
        return ("clean", text) if "\n" not in text else ("other", f"multi-line error: {text[:300]!r}")
    except Exception as e:  # noqa: BLE001 - the finding this suite exists for
        return "other", f"{type(e).__name__}: {str(e)[:300]}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _profile_for(case: Case) -> dict | None:
    """The seed's profile for the inputs that are still dynamic graph inputs of the mutated model."""
    m = onnx.ModelProto()
    try:
        m.ParseFromString(case.payload)
    except Exception:  # noqa: BLE001 - the builder reports it
        return None
    keep = {}
    for vi in m.graph.input:
        dims = vi.type.tensor_type.shape.dim
        want = case.feeds_shapes.get(vi.name)
        if want and len(dims) == len(want) and any(not d.HasField("dim_value") for d in dims):
            keep[vi.name] = profile_of({vi.name: want})[vi.name]
    return keep or None
