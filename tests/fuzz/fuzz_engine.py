"""Engine-file mutations: raw bytes, header fields, manifest bytes and JSON edits, safetensors headers, weights.

    engine_case(seed, i) → Case      deterministic in (seed, i); checksums recomputed unless the mutation is raw
Weight-value edits carry the equally edited ONNX model as their oracle (fuzzlib.run_case compares with onnxruntime).
"""

import copy
import hashlib
import json
import random

import numpy as np
from onnx import numpy_helper

from fuzz_base import BOUNDARY_INTS, HEADER, Case, _seeds, pack, seed_engine, split


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


