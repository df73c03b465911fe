"""Input data for comparisons: the same feeds for every runner.

`input_specs(model)` lists an ONNX model's real inputs (initializers excluded) with numpy dtypes and shapes;
`make_feeds(specs, seed, val_range, shapes)` draws seeded random arrays — floats uniform in [lo, hi), integers
uniform in [lo, hi] inclusive, bools fair coins — with dynamic dimensions taken from `shapes` or else 1;
`load_feeds(path)` reads feeds saved by `save_feeds` (.npz) or one .npy per input given as `name:file.npy,...`.
"""

import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx

from ..util.errors import FileNotFound, InputError, UsageError
from ..util.fileio import atomic_write

_NP = {onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.FLOAT16: np.float16, onnx.TensorProto.DOUBLE: np.float64,
       onnx.TensorProto.INT8: np.int8, onnx.TensorProto.INT16: np.int16, onnx.TensorProto.INT32: np.int32,
       onnx.TensorProto.INT64: np.int64, onnx.TensorProto.UINT8: np.uint8, onnx.TensorProto.UINT16: np.uint16,
       onnx.TensorProto.UINT32: np.uint32, onnx.TensorProto.UINT64: np.uint64, onnx.TensorProto.BOOL: np.bool_}


@dataclass
class InputSpec:
    name: str
    dtype: np.dtype
    shape: tuple          # ints; -1 or a name for a dynamic dimension


def input_specs(model: onnx.ModelProto) -> list[InputSpec]:
    inits = {t.name for t in model.graph.initializer}
    specs = []
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        t = vi.type.tensor_type
        if t.elem_type not in _NP:
            name = onnx.TensorProto.DataType.Name(t.elem_type) if t.elem_type else "undefined"
            raise InputError(f"input {vi.name!r} has element type {name}, which the comparison cannot generate",
                             "give the inputs with --load-inputs")
        shape = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or -1) for d in t.shape.dim)
        specs.append(InputSpec(vi.name, np.dtype(_NP[t.elem_type]), shape))
    return specs


def parse_shapes(text: str | None) -> dict[str, tuple[int, ...]]:
    """'x:1x3x8x8,mask:1x8' → {'x': (1, 3, 8, 8), 'mask': (1, 8)} ('' or None → {})."""
    out: dict[str, tuple[int, ...]] = {}
    for item in filter(None, (text or "").split(",")):
        name, sep, dims = item.rpartition(":")
        try:
            if not sep or not name:
                raise ValueError
            out[name.strip("'\"")] = tuple(int(d) for d in dims.split("x")) if dims else ()
        except ValueError:
            raise UsageError(f"cannot read input shape {item!r}", "write name:1x3x224x224, comma-separated") from None
    return out


def resolve_shape(spec: InputSpec, shapes: dict[str, tuple[int, ...]]) -> tuple[int, ...]:
    if spec.name in shapes:
        given = shapes[spec.name]
        if len(given) != len(spec.shape):
            raise UsageError(f"input {spec.name!r} has rank {len(spec.shape)}, the shape given has rank {len(given)}",
                             f"give {len(spec.shape)} dimensions")
        for d, g in zip(spec.shape, given):
            if isinstance(d, int) and d >= 0 and d != g:
                raise UsageError(f"input {spec.name!r} has static shape {spec.shape}; cannot run it at {given}",
                                 "keep static dimensions at their value")
        return tuple(given)
    return tuple(d if isinstance(d, int) and d >= 0 else 1 for d in spec.shape)


def make_feeds(specs: list[InputSpec], seed: int = 1, val_range: tuple[float, float] = (0.0, 1.0),
               shapes: dict | None = None) -> dict[str, np.ndarray]:
    unknown = set(shapes or {}) - {s.name for s in specs}
    if unknown:
        raise UsageError(f"a shape is given for {sorted(unknown)[0]!r}, which is not an input of the model",
                         f"inputs are: {', '.join(s.name for s in specs)}")
    rng = np.random.default_rng(seed)
    lo, hi = val_range
    feeds = {}
    for spec in specs:
        shape = resolve_shape(spec, shapes or {})
        if spec.dtype == np.bool_:
            feeds[spec.name] = rng.integers(0, 2, size=shape).astype(np.bool_)
        elif np.issubdtype(spec.dtype, np.integer):
            info = np.iinfo(spec.dtype)
            a, b = max(int(np.floor(lo)), info.min), min(int(np.ceil(hi)), info.max)
            feeds[spec.name] = rng.integers(a, b, size=shape, endpoint=True).astype(spec.dtype)
        else:
            feeds[spec.name] = rng.uniform(lo, hi, size=shape).astype(spec.dtype)
    return feeds


def save_feeds(path, feeds: dict[str, np.ndarray]) -> None:
    """Write the feeds as one .npz, atomically."""
    buf = io.BytesIO()
    np.savez(buf, **feeds)
    atomic_write(path, buf.getvalue())


def load_feeds(source: str) -> dict[str, np.ndarray]:
    """`inputs.npz` (every array, by name) or `name:file.npy[,name2:file2.npy]`."""
    if ":" not in source or Path(source).exists():
        path = Path(source)
        if not path.is_file():
            raise FileNotFound(f"input file not found: {path}", "check the path")
        try:
            with np.load(path, allow_pickle=False) as data:
                return {k: data[k] for k in data.files}
        except (ValueError, OSError) as e:
            raise InputError(f"cannot read inputs from {path}: {e}", "give an .npz written by --save-inputs") from None
    feeds = {}
    for item in source.split(","):
        name, _, file = item.rpartition(":")
        if not Path(file).is_file():
            raise FileNotFound(f"input file for {name!r} not found: {file}", "check the path")
        try:
            feeds[name] = np.load(file, allow_pickle=False)
        except (ValueError, OSError) as e:
            raise InputError(f"cannot read input {name!r} from {file}: {e}", "give a .npy file") from None
    return feeds


def check_feeds(specs: list[InputSpec], feeds: dict[str, np.ndarray]) -> None:
    """Loaded feeds must name every input, with the input's dtype and rank."""
    names = [s.name for s in specs]
    for spec in specs:
        if spec.name not in feeds:
            raise InputError(f"the loaded inputs lack {spec.name!r}", f"the model's inputs are: {', '.join(names)}")
        a = feeds[spec.name]
        if a.dtype != spec.dtype or a.ndim != len(spec.shape):
            raise InputError(f"loaded input {spec.name!r} is {a.dtype}{list(a.shape)}, the model wants "
                             f"{spec.dtype} of rank {len(spec.shape)}", "regenerate the input file")
    extra = set(feeds) - set(names)
    if extra:
        raise InputError(f"the loaded inputs name {sorted(extra)[0]!r}, which is not an input of the model",
                         f"the model's inputs are: {', '.join(names)}")
