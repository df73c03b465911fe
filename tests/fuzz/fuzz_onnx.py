"""ONNX mutations at the protobuf level: dims, dtypes, attributes, opsets, dangling names, removed initializers,
cycles and node order, external-data paths, op types, deleted nodes, initializer payloads and values.

    onnx_case(seed, i) → Case        deterministic in (seed, i)
"""

import copy
import random

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from fuzz_base import BOUNDARY_INTS, Case, _seeds


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


