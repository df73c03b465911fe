"""Input and output files of `tensorforge exec`: --loadInputs, --dumpOutput, --exportOutput, --exportTimes.

Entry points: `read_input(name, path, info, shape)`, `random_input(info, shape, gen)`, `output_records(outputs)`,
`dump_lines(outputs)`, `write_json_records(path, records, what)`, `check_writable(path, what)`.
An input file is either raw little-endian data in the input's dtype (trtexec's format: exactly
prod(shape) · itemsize bytes, no header) or a .npy array (dtype must match; its shape is used when --shapes
does not give one). Output JSON is trtexec's: [{"name": …, "dimensions": "2x3", "values": [...]}].
"""

import io
import json
import math
import os
import secrets
from pathlib import Path

import numpy as np
import torch

from ..ir import dtype_name
from ..util.errors import FileNotFound, InputError
from ..util.fileio import atomic_write, read_bytes
from .shapes_arg import format_shape


def read_input(name: str, path: str, dtype: torch.dtype, shape: tuple | None) -> torch.Tensor:
    """Load input `name` from `path`; `shape` is the inference shape if already known (None: take the .npy's)."""
    data = read_bytes(path, f"input file for {name!r}")
    if str(path).endswith(".npy"):
        return _from_npy(name, path, data, dtype, shape)
    if shape is None:
        raise InputError(f"input {name!r}: the raw file {path} carries no shape and the engine's shape is dynamic",
                         f"give one with --shapes={name}:1x3x224x224, or use a .npy file")
    itemsize = torch.empty((), dtype=dtype).element_size()
    want = math.prod(shape) * itemsize
    if len(data) != want:
        raise InputError(f"input {name!r}: file {path} has {len(data)} bytes, expected {want} "
                         f"({format_shape(shape)} {dtype_name(dtype)} = {want} bytes)",
                         f"write the raw little-endian {dtype_name(dtype)} values, or pass a .npy file")
    if want == 0:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(bytearray(data), dtype=dtype).reshape(shape).clone()


def _from_npy(name, path, data, dtype, shape) -> torch.Tensor:
    try:
        arr = np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, EOFError) as e:
        raise InputError(f"input {name!r}: {path} is not a readable .npy file ({e})", "save it with numpy.save") from None
    if not isinstance(arr, np.ndarray):
        raise InputError(f"input {name!r}: {path} holds no single array", "save one array with numpy.save")
    try:
        t = torch.from_numpy(np.ascontiguousarray(arr))
    except TypeError:
        raise InputError(f"input {name!r}: {path} holds dtype {arr.dtype}, which torch cannot read",
                         f"save it as {dtype_name(dtype)}") from None
    if t.dtype != dtype:
        raise InputError(f"input {name!r}: {path} holds {dtype_name(t.dtype)}, the engine expects {dtype_name(dtype)}",
                         f"convert it, e.g. numpy.save(path, array.astype('{dtype_name(dtype)}'))")
    if shape is not None and tuple(t.shape) != tuple(shape):
        raise InputError(f"input {name!r}: {path} has shape {format_shape(t.shape)}, but the inference shape is "
                         f"{format_shape(shape)}", "make --shapes and the file agree")
    return t


def random_input(dtype: torch.dtype, shape: tuple, gen: torch.Generator) -> torch.Tensor:
    """trtexec-style random data: floats uniform in [-1, 1), integers in {0, 1}, booleans fair coins."""
    if dtype.is_floating_point:
        return (torch.rand(shape, generator=gen, dtype=torch.float32) * 2 - 1).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=gen).bool()
    return torch.randint(0, 2, shape, generator=gen).to(dtype)


def _values(t: torch.Tensor) -> list:
    t = t.detach().cpu()
    if t.dtype == torch.bool:
        t = t.to(torch.uint8)
    elif t.dtype.is_floating_point and t.dtype != torch.float64:
        t = t.float()
    return t.flatten().tolist()


def output_records(outputs: dict[str, torch.Tensor]) -> list[dict]:
    """--exportOutput records, in the engine's output order."""
    return [{"name": n, "dimensions": format_shape(t.shape), "values": _values(t)} for n, t in outputs.items()]


def dump_lines(outputs: dict[str, torch.Tensor]) -> list[str]:
    """--dumpOutput: `name: (2x3)` then the values, one line per innermost row."""
    lines = ["Output Tensors:"]
    for n, t in outputs.items():
        lines.append(f"{n}: ({format_shape(t.shape)})")
        values = _values(t)
        row = t.shape[-1] if t.dim() and t.shape[-1] else max(len(values), 1)
        for i in range(0, len(values), row):
            lines.append(" ".join(f"{v:.6g}" if isinstance(v, float) else str(v) for v in values[i:i + row]))
    return lines


def check_writable(path: str, what: str) -> None:
    """Fail before any work if `path` cannot be written (missing folder, a folder, no permission)."""
    p = Path(path)
    folder = p.parent if str(p.parent) else Path(".")
    if not folder.is_dir():
        raise FileNotFound(f"cannot write {what} {p}: folder {folder} does not exist", "create it first")
    if p.is_dir():
        raise FileNotFound(f"cannot write {what} {p}: it is a folder", "name a file")
    if not os.access(folder, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise FileNotFound(f"cannot write {what} {p}: permission denied", "choose a writable path")
    probe = folder / f".{p.name}.tfg-{os.getpid()}-{secrets.token_hex(4)}.tmp"
    try:                          # a read-only mount or a full quota shows only when we try
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        os.unlink(probe)
    except FileExistsError:
        pass
    except OSError as e:
        raise FileNotFound(f"cannot write {what} {p}: {e.strerror or e}", "choose a writable path") from None


def write_bytes(path: str, data: bytes | str, what: str) -> None:
    """Atomic write (a failure leaves any existing file untouched), OS errors as one-line errors."""
    try:
        atomic_write(path, data)
    except OSError as e:
        raise FileNotFound(f"cannot write {what} {path}: {e.strerror or e}", "choose a writable path") from e


def write_json_records(path: str, records: list[dict], what: str) -> None:
    """A JSON list with one record per line, as trtexec writes its exports."""
    body = ",\n".join("  " + json.dumps(r) for r in records)
    write_bytes(path, "[\n" + body + ("\n" if records else "") + "]\n", what)
