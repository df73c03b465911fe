"""TensorRT's INT8 calibrator classes, and their adapter to the builder's CalibrationSource.

    class MyCalibrator(trt.IInt8EntropyCalibrator2):
        def __init__(self, batches):
            trt.IInt8EntropyCalibrator2.__init__(self)
            self.batches = iter(batches)
            self.device_input = torch.empty(8, 3, 224, 224, device="cuda")   # the buffer get_batch hands out
        def get_batch_size(self): return 8
        def get_batch(self, names):
            try:
                self.device_input.copy_(torch.from_numpy(next(self.batches)))
            except StopIteration:
                return None                        # no more batches ([] works too)
            return [int(self.device_input.data_ptr())]
        def read_calibration_cache(self): ...      # bytes, or None to calibrate
        def write_calibration_cache(self, cache): open("model.cache", "wb").write(cache)
    config.set_flag(trt.BuilderFlag.INT8); config.int8_calibrator = MyCalibrator(data)

Pointers: TensorRT reads raw device memory; here each integer `get_batch` returns is matched to a buffer the
calibrator holds as an attribute (directly, or in a list/tuple/dict attribute): a torch tensor (CPU or CUDA, by
`data_ptr()`), a numpy array (by `ctypes.data`, for host batches) or an object with `__cuda_array_interface__`
(CuPy, Numba, PyCUDA's GPUArray). A pointer inside such a buffer reads from that offset. Where TensorRT's samples
allocate with cuda-python/PyCUDA (`cuda.mem_alloc`, `memcpy_htod`), keep a torch tensor instead (as above) or a
numpy array (`return [self.host_batch.ctypes.data]`). `get_batch` may also return the tensors/arrays themselves.
The batch shape is the input's shape with a dynamic dimension 0 set to `get_batch_size()`, other dynamic
dimensions from the calibration profile's opt shape (`config.set_calibration_profile`), as TensorRT uses kOPT.
"""

import math

import numpy as np
import torch

from ...builder.calibration import CalibrationSource
from ...util.errors import UsageError
from .enums import _Enum


class CalibrationAlgoType(_Enum):
    LEGACY_CALIBRATION = 0
    ENTROPY_CALIBRATION = 1
    ENTROPY_CALIBRATION_2 = 2
    MINMAX_CALIBRATION = 3


_ALGORITHM = {CalibrationAlgoType.LEGACY_CALIBRATION: "legacy", CalibrationAlgoType.ENTROPY_CALIBRATION: "entropy",
              CalibrationAlgoType.ENTROPY_CALIBRATION_2: "entropy2", CalibrationAlgoType.MINMAX_CALIBRATION: "minmax"}


class IInt8Calibrator:
    """The base of TensorRT's calibrators; subclasses override get_batch_size/get_batch and the cache hooks."""

    _algorithm = CalibrationAlgoType.ENTROPY_CALIBRATION_2

    def __init__(self):
        pass

    def get_batch_size(self) -> int:
        return 1

    def get_batch(self, names):
        return None

    def read_calibration_cache(self):
        return None

    def write_calibration_cache(self, cache) -> None:
        return None

    def get_algorithm(self) -> CalibrationAlgoType:
        return self._algorithm

    @property
    def batch_size(self) -> int:
        return self.get_batch_size()


class IInt8EntropyCalibrator2(IInt8Calibrator):
    _algorithm = CalibrationAlgoType.ENTROPY_CALIBRATION_2


class IInt8EntropyCalibrator(IInt8Calibrator):
    _algorithm = CalibrationAlgoType.ENTROPY_CALIBRATION


class IInt8MinMaxCalibrator(IInt8Calibrator):
    _algorithm = CalibrationAlgoType.MINMAX_CALIBRATION


class IInt8LegacyCalibrator(IInt8Calibrator):
    """TensorRT 2.0's calibrator: the quantile method (amax = the `get_quantile()` quantile of |x|)."""
    _algorithm = CalibrationAlgoType.LEGACY_CALIBRATION

    def get_quantile(self) -> float:
        return 0.9999

    def get_regression_cutoff(self) -> float:
        return 1.0

    def read_histogram_cache(self, length=None):
        return None

    def write_histogram_cache(self, data, length=None) -> None:
        return None


# ---- pointers → tensors -----------------------------------------------------------------------------------
def _buffers(calibrator) -> list[tuple[int, int, object]]:
    """(address, bytes, buffer) of every torch tensor / numpy array / CUDA-array object the calibrator holds."""
    found, seen = [], set()

    def visit(v, depth):
        if id(v) in seen or depth > 2:
            return
        seen.add(id(v))
        if isinstance(v, torch.Tensor):
            found.append((v.data_ptr(), v.numel() * v.element_size(), v))
        elif isinstance(v, np.ndarray):
            found.append((v.ctypes.data, v.nbytes, v))
        elif hasattr(v, "__cuda_array_interface__"):
            found.append((int(v.__cuda_array_interface__["data"][0]), 0, v))
        elif isinstance(v, (list, tuple)):
            for x in v:
                visit(x, depth + 1)
        elif isinstance(v, dict):
            for x in v.values():
                visit(x, depth + 1)
    for value in vars(calibrator).values():
        visit(value, 0)
    return found


def _as_torch(buf) -> torch.Tensor:
    if isinstance(buf, torch.Tensor):
        return buf
    if isinstance(buf, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(buf))
    return torch.as_tensor(buf, device="cuda")         # __cuda_array_interface__ objects


def _read(ptr: int, buffers, name: str, dtype: torch.dtype, shape: tuple) -> torch.Tensor:
    count = math.prod(shape)
    need = count * torch.empty((), dtype=dtype).element_size()
    for addr, nbytes, buf in buffers:
        t = _as_torch(buf)
        if not nbytes:
            nbytes = t.numel() * t.element_size()
        if addr <= ptr and ptr + need <= addr + nbytes:
            flat = t.detach().contiguous().reshape(-1).view(torch.uint8)
            start = ptr - addr
            return flat[start:start + need].clone().view(dtype).reshape(shape)
    raise UsageError(f"get_batch returned pointer {ptr:#x} for input {name!r}, which is inside no buffer the "
                     f"calibrator holds ({need} bytes needed for {dtype} {list(shape)})",
                     "keep the batch in a torch tensor or numpy array attribute of the calibrator (self.x) and "
                     "return int(self.x.data_ptr()), or return the tensor itself")


def _batch_shape(info, batch: int, opt: dict) -> tuple:
    shape = list(info.shape)
    for d, v in enumerate(shape):
        if isinstance(v, int) and v >= 0:
            continue
        if d == 0:
            shape[d] = batch
        elif info.name in opt:
            shape[d] = int(opt[info.name][d])
        else:
            raise UsageError(f"calibration input {info.name!r} has dynamic dimension {d} and no calibration profile",
                             "set one with config.set_calibration_profile(profile)")
    return tuple(shape)


def as_source(calibrator: IInt8Calibrator, net, calib_profile=None) -> CalibrationSource:
    """The builder's view of a TensorRT-style calibrator for the IR network `net`."""
    algorithm = _ALGORITHM.get(CalibrationAlgoType(calibrator.get_algorithm()), "entropy2")
    names = list(net.inputs)
    opt = {n: s[1] for n, s in (calib_profile.shapes.items() if calib_profile is not None else [])}

    def batches():
        shapes = {n: _batch_shape(net.tensors[n], int(calibrator.get_batch_size()), opt) for n in names}
        while True:
            got = calibrator.get_batch(list(names))
            if not got:
                return
            if len(got) != len(names):
                raise UsageError(f"get_batch returned {len(got)} buffer(s) for {len(names)} input(s)",
                                 f"return one per name, in the order of names: {names}")
            buffers = None
            feed = {}
            for name, item in zip(names, got):
                if isinstance(item, (torch.Tensor, np.ndarray)):
                    feed[name] = _as_torch(item).detach().clone()
                    continue
                if buffers is None:
                    buffers = _buffers(calibrator)
                feed[name] = _read(int(item), buffers, name, net.tensors[name].dtype, shapes[name])
            yield feed

    def read():
        data = calibrator.read_calibration_cache()
        if data is None or len(data) == 0:
            return None
        return data.encode() if isinstance(data, str) else bytes(data)

    def write(data: bytes):
        calibrator.write_calibration_cache(data)

    quantile = float(calibrator.get_quantile()) if isinstance(calibrator, IInt8LegacyCalibrator) else 0.9999
    return CalibrationSource(batches, algorithm, read, write, quantile=quantile)
