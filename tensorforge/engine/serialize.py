"""Engine ⇄ bytes.

Layout (little-endian):

    offset  size  field
    0       8     magic b"TFGENGIN"
    8       4     format version (uint32)
    12      8     manifest length M (uint64)
    20      8     weights length W (uint64)
    28      32    SHA-256 of manifest ‖ weights
    60      M     manifest: UTF-8 JSON (names, shapes, dtypes, layers, tactics, profiles, versions)
    60+M    W     weights: a safetensors blob (constants and tensor-valued attributes)

Reading checks, in order: magic (foreign file), format version (rebuild needed), lengths (truncated),
checksum (tampered or corrupted), then the manifest: JSON without duplicate keys or deep nesting, its schema
(schema.py), its cross-references and the weights' safetensors header (consistency.py), and each layer's declared
outputs against its op's inference. Every failure is one EngineFileError naming the file and the field.
"""

import hashlib
import json
import struct

import torch
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from ..ir import Layer, Network, TensorInfo, dtype_from_name, dtype_name
from ..util.errors import EngineFileError
from ..version import ENGINE_FORMAT_VERSION, __version__
from .consistency import check_inference, check_references
from .engine import Engine
from .schema import SchemaViolation, check_manifest, parse_manifest

MAGIC = b"TFGENGIN"
_HEADER = struct.Struct("<8sIQQ32s")
_ATTR_PREFIX = "__attr__/"
_BYTE_STORED = (torch.int4, torch.uint4, torch.int2, torch.uint2, torch.float4_e2m1fn_x2, torch.float8_e8m0fnu)
_BYTE_STORED_NAMES = {dtype_name(t) for t in _BYTE_STORED}


# ---- encoding ----------------------------------------------------------------------------------
def _info_to_json(t: TensorInfo) -> dict:
    return {"name": t.name, "dtype": dtype_name(t.dtype) if t.dtype is not None else None,
            "shape": list(t.shape) if t.shape is not None else None}


def _info_from_json(d: dict) -> TensorInfo:
    return TensorInfo(d["name"], dtype_from_name(d["dtype"]) if d["dtype"] else None,
                      tuple(d["shape"]) if d["shape"] is not None else None)


def _encode_attr(value, key: str, blobs: dict):
    if isinstance(value, Network):      # a control-flow body (If/Loop/Scan): stored as data, like the engine
        return {"$network": _network_to_json(value, key, blobs)}
    if isinstance(value, torch.Tensor):
        blobs[key] = value.detach().cpu().contiguous()
        return {"$tensor": key}
    if isinstance(value, (list, tuple)):
        return [_encode_attr(v, f"{key}/{i}", blobs) for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {"$dict": {k: _encode_attr(v, f"{key}/{k}", blobs) for k, v in value.items()}}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"attribute value of type {type(value).__name__} cannot be stored in an engine")


def _network_to_json(net: Network, key: str, blobs: dict) -> dict:
    consts = {}
    for name, t in net.constants.items():
        consts[name] = f"{key}/const/{name}"
        blobs[consts[name]] = t.detach().cpu().clone()
    layers = [{"name": la.name, "op": la.op, "inputs": la.inputs, "outputs": la.outputs, "origin": la.origin,
               "attrs": {k: _encode_attr(v, f"{key}/{la.name}/{k}", blobs) for k, v in la.attrs.items()}}
              for la in net.layers]
    return {"name": net.name, "inputs": net.inputs, "outputs": net.outputs, "constants": consts, "layers": layers,
            "tensors": [_info_to_json(t) for t in net.tensors.values()]}


def _network_from_json(d: dict, blobs: dict) -> Network:
    net = Network(d["name"])
    net.inputs, net.outputs = list(d["inputs"]), list(d["outputs"])
    net.tensors = {t["name"]: _info_from_json(t) for t in d["tensors"]}
    net.constants = {name: blobs[k] for name, k in d["constants"].items()}
    net.layers = [Layer(la["name"], la["op"], la["inputs"], la["outputs"],
                        {k: _decode_attr(v, blobs) for k, v in la["attrs"].items()}, la["origin"]) for la in d["layers"]]
    net._names = set(net.tensors) | {la.name for la in net.layers}
    return net


def _decode_attr(value, blobs: dict):
    if isinstance(value, dict):
        if "$network" in value:
            return _network_from_json(value["$network"], blobs)
        if "$tensor" in value:
            return blobs[value["$tensor"]]
        if "$dict" in value:
            return {k: _decode_attr(v, blobs) for k, v in value["$dict"].items()}
    if isinstance(value, list):
        return [_decode_attr(v, blobs) for v in value]
    return value


def _unaliased(tensors: dict) -> dict:
    """safetensors refuses tensors that share memory (folded Identity of a shared initializer): copy repeats."""
    seen, out = set(), {}
    for name, t in tensors.items():
        key = (t.untyped_storage().data_ptr(), t.untyped_storage().nbytes()) if t.numel() else None
        out[name] = t.clone() if key in seen else t
        if key is not None:
            seen.add(key)
    return out


def to_bytes(engine: Engine) -> bytes:
    blobs = _unaliased({name: t.detach().cpu().contiguous() for name, t in engine.constants.items()})
    layers = []
    for layer in engine.layers:
        attrs = {k: _encode_attr(v, f"{_ATTR_PREFIX}{layer.name}/{k}", blobs) for k, v in layer.attrs.items()}
        layers.append({"name": layer.name, "op": layer.op, "inputs": layer.inputs, "outputs": layer.outputs,
                       "attrs": attrs, "origin": layer.origin, "tactic": layer.tactic,
                       "placement": layer.placement, "precision": layer.precision,
                       **({"point_tactics": dict(layer.point_tactics)} if layer.point_tactics else {})})
    manifest = {
        "tensorforge_version": __version__,
        "format_version": ENGINE_FORMAT_VERSION,
        "name": engine.name,
        "inputs": [_info_to_json(t) for t in engine.inputs],
        "outputs": [_info_to_json(t) for t in engine.outputs],
        "profiles": [{k: [list(s) for s in v] for k, v in p.items()} for p in engine.profiles],
        "tensors": [_info_to_json(t) for t in engine.tensors.values()],
        "constants": sorted(engine.constants),
        "layers": layers,
        "plugins": engine.plugins,
        "build_info": engine.build_info,
    }
    byte_only = {k: dtype_name(t.dtype) for k, t in blobs.items() if t.dtype in _BYTE_STORED}
    if byte_only:   # sub-byte / e8m0 types safetensors lacks: stored as their bytes, retyped on load
        manifest["byte_stored"] = byte_only
        blobs = {k: t.view(torch.uint8) if k in byte_only else t for k, t in blobs.items()}
    mbytes = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
    wbytes = st_save(blobs) if blobs else b""
    digest = hashlib.sha256(mbytes + wbytes).digest()
    return _HEADER.pack(MAGIC, ENGINE_FORMAT_VERSION, len(mbytes), len(wbytes), digest) + mbytes + wbytes


# ---- decoding ----------------------------------------------------------------------------------
def read_header(data: bytes, what: str = "engine") -> tuple[int, int, int, bytes]:
    if len(data) < len(MAGIC) or data[:len(MAGIC)] != MAGIC:
        raise EngineFileError(f"{what} is not a tensorforge engine (wrong magic bytes)",
                              "build one with `tensorforge exec --onnx=model.onnx --saveEngine=model.engine`")
    if len(data) < _HEADER.size:
        raise EngineFileError(f"{what} is truncated (header incomplete)", "rebuild the engine")
    _, version, mlen, wlen, digest = _HEADER.unpack_from(data)
    if version != ENGINE_FORMAT_VERSION:
        raise EngineFileError(f"{what} has engine format version {version}; this tensorforge ({__version__}) reads "
                              f"version {ENGINE_FORMAT_VERSION}", "rebuild the engine with this tensorforge")
    return version, mlen, wlen, digest


def from_bytes(data: bytes, what: str = "engine") -> Engine:
    _, mlen, wlen, digest = read_header(data, what)
    body = data[_HEADER.size:]
    if len(body) < mlen + wlen:
        raise EngineFileError(f"{what} is truncated ({len(data)} bytes, header promises {_HEADER.size + mlen + wlen})",
                              "copy or rebuild it again")
    if len(body) > mlen + wlen:
        raise EngineFileError(f"{what} has {len(body) - mlen - wlen} unexpected trailing bytes", "rebuild the engine")
    if hashlib.sha256(body).digest() != digest:
        raise EngineFileError(f"{what} is corrupted or was modified (checksum mismatch)", "rebuild the engine")
    try:
        manifest = parse_manifest(bytes(body[:mlen]))
        check_manifest(manifest)
        blobs = _weights(bytes(body[mlen:]), manifest, what) if wlen else {}
        check_references(manifest, blobs)
        engine = _engine_from_manifest(manifest, blobs)
        if not any(la.op.startswith("plugin:") for la in engine.layers):
            check_inference(engine)
        else:                    # after its plugins are found and matched to the records (runtime/plugins_check.py)
            engine._needs_semantic_check = True
        return engine
    except SchemaViolation as e:
        raise EngineFileError(f"{what} has a malformed manifest: field {e.where}: {e.message}",
                              "rebuild the engine; a file that fails here was damaged or edited") from None
    except EngineFileError:
        raise
    except Exception as e:  # noqa: BLE001 - a check above missed this: still one clean error, cause kept for --verbose
        raise EngineFileError(f"{what} has an unreadable manifest ({type(e).__name__}: {str(e)[:200]})",
                              "rebuild the engine") from e


def check_semantics(engine: Engine, what: str = "engine") -> Engine:
    """The inference cross-check for an engine whose plugin ops were not registered when it was read."""
    try:
        check_inference(engine)
    except SchemaViolation as e:
        raise EngineFileError(f"{what} has a malformed manifest: field {e.where}: {e.message}",
                              "rebuild the engine; a file that fails here was damaged or edited") from None
    return engine


def _weights(raw: bytes, manifest: dict, what: str) -> dict:
    """The safetensors blob → name → tensor; every failure of the safetensors reader is an EngineFileError."""
    try:
        blobs = st_load(raw)
    except Exception as e:  # noqa: BLE001 - SafetensorError and friends: the weights section is malformed
        raise EngineFileError(f"{what} has unreadable weights (safetensors: {str(e)[:200]})", "rebuild the engine") from None
    for k, name in manifest.get("byte_stored", {}).items():
        if k not in blobs:
            raise SchemaViolation(f"byte_stored.{k}", "names a weight the file does not hold")
        dt = dtype_from_name(name) if name in _BYTE_STORED_NAMES else None
        if dt is None or blobs[k].dtype != torch.uint8:
            raise SchemaViolation(f"byte_stored.{k}", f"{name!r} is not a byte-stored dtype over uint8 weights")
        blobs[k] = blobs[k].view(dt)
    return blobs


def _engine_from_manifest(m: dict, blobs: dict) -> Engine:
    if "kernel_sources" in m:   # format 1 stored generated kernel text; now the runtime regenerates it (codegen/)
        raise EngineFileError("the engine stores generated kernel source text (an older engine format); engines "
                              "hold no code any more", "rebuild the engine with this tensorforge")
    layers = [Layer(d["name"], d["op"], d["inputs"], d["outputs"], {k: _decode_attr(v, blobs) for k, v in d["attrs"].items()},
                    d["origin"], d["tactic"], d["placement"], d["precision"], d.get("point_tactics"))
              for d in m["layers"]]
    tensors = {d["name"]: _info_from_json(d) for d in m["tensors"]}
    profiles = [{k: tuple(tuple(s) for s in v) for k, v in p.items()} for p in m["profiles"]]
    return Engine(m["name"], [_info_from_json(d) for d in m["inputs"]], [_info_from_json(d) for d in m["outputs"]],
                  profiles, layers, tensors, {k: blobs[k] for k in m["constants"]}, m["plugins"],
                  m["build_info"])
