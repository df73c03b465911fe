"""Where calibration data comes from: `CalibrationSource` (batches, cache hooks, algorithm) and `load_batches`.

    CalibrationSource(batches=[{"x": array}, ...], algorithm="entropy2", cache_path="model.cache")
    load_batches("calib/")          a folder: every .npz (one feed, keys = input names) and .npy (a batch of
                                    the only input), in sorted name order; also a list of such files, one file,
                                    an iterable of feeds (dicts of arrays/tensors) or of arrays (one input)
The TensorRT-style calibrators (api/trt/calibrator.py) become a CalibrationSource whose batches come from
`get_batch` and whose cache hooks are `read_calibration_cache` / `write_calibration_cache`.
"""

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

import numpy as np
import torch

from ...util.errors import FileNotFound, UsageError


@dataclass
class CalibrationSource:
    batches: Iterable | Callable[[], Iterable] | None = None     # feeds: {input name: array or tensor}
    algorithm: str = "entropy2"
    read_cache: Callable[[], bytes | None] | None = None
    write_cache: Callable[[bytes], None] | None = None
    percentile: float = 99.99
    quantile: float = 0.9999

    def feeds(self, input_names: list[str]) -> list[dict[str, torch.Tensor]]:
        items = self.batches() if callable(self.batches) else self.batches
        return [] if items is None else list(load_batches(items, input_names))


def cache_file_hooks(path) -> tuple[Callable, Callable]:
    """read_cache/write_cache over one file: read when it exists, written (atomically) after calibrating."""
    from ...util.fileio import atomic_write

    def read():
        return Path(path).read_bytes() if path and os.path.exists(path) else None

    def write(data: bytes):
        atomic_write(Path(path), bytes(data))
    return read, write


def _as_tensor(value, what: str) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value.detach()
    if isinstance(value, np.ndarray):
        return torch.from_numpy(np.require(value, requirements="C"))
    raise UsageError(f"{what} is a {type(value).__name__}, not an array", "give numpy arrays or torch tensors")


def _file_feeds(path: Path, names: list[str]):
    if path.suffix == ".npz":
        with np.load(path) as z:
            missing = [n for n in names if n not in z.files]
            if missing:
                raise UsageError(f"calibration file {path} has no array {missing[0]!r}",
                                 f"store one array per input ({', '.join(names)}) in each .npz")
            yield {n: torch.from_numpy(z[n].copy()) for n in names}
    elif path.suffix == ".npy":
        if len(names) != 1:
            raise UsageError(f"calibration file {path} is one array but the network has {len(names)} inputs",
                             "use .npz files with one array per input")
        yield {names[0]: torch.from_numpy(np.load(path))}
    else:
        raise UsageError(f"calibration data {path} is not a .npy or .npz file", "give .npy/.npz files or a folder of them")


def load_batches(data, names: list[str]):
    """Yield feeds {input name: tensor} from any of the forms in the module docstring."""
    if isinstance(data, (str, os.PathLike)):
        path = Path(data)
        if path.is_dir():
            files = sorted(p for p in path.iterdir() if p.suffix in (".npy", ".npz"))
            if not files:
                raise FileNotFound(f"calibration folder {path} holds no .npy or .npz files", "put one batch per file there")
            for f in files:
                yield from _file_feeds(f, names)
            return
        if not path.exists():
            raise FileNotFound(f"calibration data {path} does not exist", "give a folder of .npy/.npz files or such a file")
        yield from _file_feeds(path, names)
        return
    for item in data:
        if isinstance(item, (str, os.PathLike)):
            yield from load_batches(item, names)
        elif isinstance(item, dict):
            missing = [n for n in names if n not in item]
            if missing:
                raise UsageError(f"a calibration feed has no value for input {missing[0]!r}",
                                 f"each feed maps every input ({', '.join(names)}) to an array")
            yield {n: _as_tensor(item[n], f"calibration value for {n!r}") for n in names}
        elif len(names) == 1:
            yield {names[0]: _as_tensor(item, "a calibration batch")}
        else:
            raise UsageError("a calibration batch is a bare array but the network has several inputs",
                             "give feeds as dicts {input name: array}")


def configure(config, int8: bool = False, fp8: bool = False, best: bool = False, data=None, cache=None,
              algorithm: str = "entropy2"):
    """The high-level `tfg.build(..., int8=True, calibration_data=..., calibration_cache=..., calibration_algorithm=...)`
    options onto a BuilderConfig: `cache` is a file read when it exists and written after calibrating."""
    config.int8, config.fp8, config.best = bool(int8), bool(fp8), bool(best)
    if (data is not None or cache is not None) and not (int8 or fp8 or best):
        raise UsageError("calibration_data/calibration_cache need int8=True, fp8=True or best=True",
                         "pass int8=True (or drop the calibration options)")
    if data is not None or cache is not None:
        read, write = cache_file_hooks(cache) if cache is not None else (None, None)
        config.calibration = CalibrationSource(data, algorithm, read, write)
    return config
