"""Runtime, ICudaEngine, IExecutionContext: TensorRT's run side over the engine/runtime rooms.

    runtime = trt.Runtime(logger)
    engine = runtime.deserialize_cuda_engine(plan)
    context = engine.create_execution_context()
    context.set_input_shape("x", (4, 3, 32, 32))
    context.set_tensor_address("x", x.data_ptr()); context.set_tensor_address("y", y.data_ptr())
    context.execute_async_v3(stream_handle)

Addresses are device pointers when the engine runs on CUDA and host pointers when it runs on the CPU (ints,
as `tensor.data_ptr()` or `array.ctypes.data` give), or tensors/arrays themselves. A pointer is viewed as a
tensor of the tensor's current shape and dtype (CUDA through `__cuda_array_interface__`, host memory through
numpy), so outputs are written in place: one copy from the engine's result into the caller's buffer.
Output shapes for given input shapes come from running the IR references on meta tensors (no compute).
"""

import ctypes

import numpy as np
import torch

from ...engine import Engine as EngineData
from ...engine import from_bytes, to_bytes
from ...ir import Network
from ...ir.dynamic import placeholder_info
from ...ir.interpret import propagate
from ...runtime import ExecutionContext
from ...util.device import resolve_device
from ...util.errors import InputError, ShapeError, UsageError
from ...util.log import Logger
from .builder import IHostMemory
from .enums import DataType, TensorIOMode
from .inspector import IEngineInspector
from .strict import TrtObject
from .tensors import Dims

_TYPESTR = {torch.float32: "<f4", torch.float16: "<f2", torch.float64: "<f8", torch.int8: "|i1", torch.int16: "<i2",
            torch.int32: "<i4", torch.int64: "<i8", torch.uint8: "|u1", torch.bool: "|b1"}
_BITS = {2: (torch.int16, "<i2"), 1: (torch.uint8, "|u1")}    # for dtypes numpy/CUDA-array-interface lack


class _CudaArray:
    def __init__(self, ptr: int, shape: tuple, typestr: str):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": typestr, "data": (ptr, False), "version": 3}


def _inside(bounds, shape) -> bool:
    mn, _, mx = bounds
    return len(shape) == len(mn) and all(a <= d <= b for d, a, b in zip(shape, mn, mx))


def view_pointer(ptr: int, shape: tuple, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A tensor over `ptr` (no copy): `shape` elements of `dtype` on `device`."""
    carrier, typestr = (dtype, _TYPESTR[dtype]) if dtype in _TYPESTR else _BITS[dtype.itemsize]
    if ptr == 0:
        raise InputError("tensor address is 0 (a null pointer)", "pass the address of an allocated buffer")
    if device.type == "cuda":
        t = torch.as_tensor(_CudaArray(ptr, shape, typestr), device=device)
    else:
        nbytes = int(np.prod(shape, dtype=np.int64)) * carrier.itemsize
        raw = np.frombuffer((ctypes.c_byte * nbytes).from_address(ptr), dtype=np.uint8) if nbytes else np.empty(0, np.uint8)
        t = torch.from_numpy(raw).view(carrier).reshape(shape)
    return t if carrier == dtype else t.view(dtype)


class Runtime(TrtObject):
    """trt.Runtime(logger [, device]): engine bytes → ICudaEngine on the device (CUDA when present, else CPU)."""

    def __init__(self, logger: Logger | None = None, device=None):
        self.logger = logger or Logger()
        self.device = resolve_device(device)

    def deserialize_cuda_engine(self, serialized_engine) -> "ICudaEngine":
        data = serialized_engine.read() if hasattr(serialized_engine, "read") else serialized_engine
        return ICudaEngine(from_bytes(bytes(data)), self.device)


class ICudaEngine(TrtObject):
    def __init__(self, data: EngineData, device):
        self.data, self.device = data, resolve_device(device)
        self._io = self.data.inputs + self.data.outputs

    # ---- I/O queries -----------------------------------------------------------------------------
    name = property(lambda self: self.data.name)
    num_io_tensors = property(lambda self: len(self._io))
    num_layers = property(lambda self: len(self.data.layers))
    num_optimization_profiles = property(lambda self: len(self.data.profiles))

    @property
    def device_memory_size(self) -> int:
        return int(self.data.build_info.get("memory", {}).get("peak_bytes", 0))

    def _io_info(self, name: str):
        for info in self._io:
            if info.name == name:
                return info
        raise UsageError(f"engine has no I/O tensor {name!r}",
                         f"its I/O tensors are: {', '.join(i.name for i in self._io)}")

    def get_tensor_name(self, index: int) -> str:
        if not 0 <= index < len(self._io):
            raise UsageError(f"I/O tensor index {index} is out of range", f"the engine has {len(self._io)} I/O tensors")
        return self._io[index].name

    def get_tensor_shape(self, name: str) -> Dims:
        info = self._io_info(name)
        return Dims(d if isinstance(d, int) else -1 for d in info.shape)

    def get_tensor_dtype(self, name: str) -> DataType:
        return DataType.from_torch(self._io_info(name).dtype)

    def get_tensor_mode(self, name: str) -> TensorIOMode:
        self._io_info(name)
        return TensorIOMode.INPUT if name in self.data.input_names else TensorIOMode.OUTPUT

    def is_shape_inference_io(self, name: str) -> bool:
        self._io_info(name)
        return False

    def get_tensor_profile_shape(self, name: str, profile_index: int) -> list:
        if self.get_tensor_mode(name) is not TensorIOMode.INPUT:
            raise UsageError(f"{name!r} is an output; profiles give shapes of inputs", "ask for an input tensor")
        if not 0 <= profile_index < len(self.data.profiles):
            raise UsageError(f"profile {profile_index} does not exist", f"the engine has {len(self.data.profiles)}")
        return [Dims(s) for s in self.data.profiles[profile_index][name]]

    # ---- the rest --------------------------------------------------------------------------------
    def serialize(self) -> IHostMemory:
        return IHostMemory(to_bytes(self.data))

    def create_execution_context(self) -> "IExecutionContext":
        return IExecutionContext(self)

    def create_engine_inspector(self) -> IEngineInspector:
        return IEngineInspector(self)

    def __repr__(self) -> str:
        return f"ICudaEngine({self.name!r}, {self.num_io_tensors} I/O tensors, {self.num_layers} layers)"


class IExecutionContext(TrtObject):
    def __init__(self, engine: ICudaEngine):
        self.engine = engine
        self._ctx = ExecutionContext(engine.data, engine.device)
        self._shapes: dict[str, tuple[int, ...]] = {}
        self._addresses: dict[str, object] = {}
        self._profile = 0
        self._profile_set = False       # set_optimization_profile_async called: shapes must fit that profile
        self._out_shapes: dict[tuple, dict[str, tuple]] = {}
        self.name = ""

    # ---- profiles and shapes ---------------------------------------------------------------------
    @property
    def active_optimization_profile(self) -> int:
        return self._profile

    def set_optimization_profile_async(self, profile_index: int, stream_handle=0) -> bool:
        if not 0 <= profile_index < self.engine.num_optimization_profiles:
            raise UsageError(f"profile {profile_index} does not exist",
                             f"the engine has {self.engine.num_optimization_profiles} profile(s)")
        self._profile = int(profile_index)
        self._profile_set = True
        return True

    def set_input_shape(self, name: str, shape) -> bool:
        if self.engine.get_tensor_mode(name) is not TensorIOMode.INPUT:
            raise UsageError(f"{name!r} is an output of the engine", "set shapes of inputs only")
        dims = tuple(int(d) for d in shape)
        profiles = self.engine.data.profiles

        def fits(k):
            mn, _, mx = profiles[k][name]
            return len(dims) == len(mn) and all(a <= d <= b for d, a, b in zip(dims, mn, mx))
        if not self._profile_set and not fits(self._profile):
            # no profile chosen explicitly: the first one that takes this shape (and the shapes set so far)
            for k in range(len(profiles)):
                if fits(k) and all(_inside(profiles[k][n], s) for n, s in self._shapes.items() if n != name):
                    self._profile = k
                    break
        mn, _, mx = profiles[self._profile][name]
        if not fits(self._profile):
            raise ShapeError(f"input {name!r} shape {dims} is outside optimization profile {self._profile} "
                             f"(min {tuple(mn)}, max {tuple(mx)})", "give a shape inside the profile")
        self._shapes[name] = dims
        return True

    def _input_shape(self, name: str) -> tuple[int, ...] | None:
        if name in self._shapes:
            return self._shapes[name]
        static = self.engine.get_tensor_shape(name)
        return tuple(static) if all(d >= 0 for d in static) else None

    @property
    def all_input_dimensions_specified(self) -> bool:
        return all(self._input_shape(n) is not None for n in self.engine.data.input_names)

    def infer_shapes(self) -> list[str]:
        """Names of inputs whose shapes are still unknown (TensorRT's contract: empty when all is well)."""
        return [n for n in self.engine.data.input_names if self._input_shape(n) is None]

    def _output_shapes(self) -> dict[str, tuple]:
        shapes = {n: self._input_shape(n) for n in self.engine.data.input_names}
        key = tuple(sorted(shapes.items()))
        if key not in self._out_shapes:
            data = self.engine.data
            net = Network(data.name)
            net.inputs, net.tensors, net.constants, net.layers = data.input_names, data.tensors, data.constants, data.layers
            env = propagate(net, shapes)
            self._out_shapes[key] = {n: (None if placeholder_info(env[n]) is not None else tuple(env[n].shape))
                                     for n in data.output_names}
        return self._out_shapes[key]

    def get_tensor_shape(self, name: str) -> Dims:
        if self.engine.get_tensor_mode(name) is TensorIOMode.INPUT:
            s = self._input_shape(name)
            return Dims(s) if s is not None else self.engine.get_tensor_shape(name)
        if not self.all_input_dimensions_specified:
            return self.engine.get_tensor_shape(name)
        s = self._output_shapes()[name]
        return Dims(s) if s is not None else self.engine.get_tensor_shape(name)

    # ---- addresses and execution -----------------------------------------------------------------
    def set_tensor_address(self, name: str, memory) -> bool:
        self.engine._io_info(name)
        if not isinstance(memory, (int, torch.Tensor, np.ndarray)):
            raise UsageError(f"address of {name!r} must be an int pointer, a torch tensor or a numpy array, "
                             f"not {type(memory).__name__}", "pass tensor.data_ptr() or the tensor itself")
        self._addresses[name] = memory
        return True

    def get_tensor_address(self, name: str) -> int:
        mem = self._addresses.get(name, 0)
        if isinstance(mem, torch.Tensor):
            return mem.data_ptr()
        if isinstance(mem, np.ndarray):
            return mem.ctypes.data
        return int(mem)

    def _buffer(self, name: str, shape: tuple, dtype: torch.dtype) -> torch.Tensor:
        mem = self._addresses.get(name)
        if mem is None:
            raise InputError(f"no address is set for {name!r}", "call context.set_tensor_address(name, pointer)")
        if isinstance(mem, np.ndarray):
            mem = torch.from_numpy(mem)
        if isinstance(mem, torch.Tensor):
            if mem.numel() != int(np.prod(shape, dtype=np.int64)) or mem.dtype != dtype:
                raise InputError(f"buffer for {name!r} is {mem.dtype}{list(mem.shape)}, the engine needs "
                                 f"{dtype}{list(shape)}", "allocate it with the shape from context.get_tensor_shape")
            return mem.reshape(shape) if mem.is_contiguous() else mem
        return view_pointer(int(mem), shape, dtype, self.engine.device)

    def _execute(self) -> None:
        data = self.engine.data
        missing = self.infer_shapes()
        if missing:
            raise ShapeError(f"input {missing[0]!r} has dynamic dimensions and no shape was set",
                             "call context.set_input_shape(name, shape) first")
        feed = {i.name: self._buffer(i.name, self._input_shape(i.name), i.dtype) for i in data.inputs}
        out_shapes = self._output_shapes()
        outs = {}
        for info in data.outputs:
            if out_shapes[info.name] is None:
                raise UsageError(f"output {info.name!r} has a data-dependent shape, so no buffer can be sized for it",
                                 "run this engine with tensorforge.load(path).run(feed), which returns new tensors")
            outs[info.name] = self._buffer(info.name, out_shapes[info.name], info.dtype)
        results = self._ctx.run(feed)
        for name, buf in outs.items():
            got = results[name]
            if tuple(got.shape) != tuple(buf.shape):
                raise ShapeError(f"output {name!r} came out {tuple(got.shape)}, its buffer is {tuple(buf.shape)}",
                                 "report this: the inferred output shape was wrong")
            buf.copy_(got)

    def execute_async_v3(self, stream_handle=0) -> bool:
        """Run on `stream_handle` (a CUDA stream pointer, a torch.cuda.Stream, or 0); on the CPU it runs now."""
        device = self.engine.device
        handle = getattr(stream_handle, "cuda_stream", stream_handle)
        if device.type == "cuda" and handle:
            with torch.cuda.stream(torch.cuda.ExternalStream(int(handle), device=device)):
                self._execute()
        else:
            self._execute()
        return True

    def execute_v2(self, bindings) -> bool:
        """Synchronous run; `bindings[i]` is the address of I/O tensor i (the order of get_tensor_name)."""
        if len(bindings) != self.engine.num_io_tensors:
            raise UsageError(f"execute_v2 got {len(bindings)} bindings for {self.engine.num_io_tensors} I/O tensors",
                             "pass one address per I/O tensor, in get_tensor_name order")
        for i, mem in enumerate(bindings):
            self.set_tensor_address(self.engine.get_tensor_name(i), mem)
        self._execute()
        if self.engine.device.type == "cuda":
            torch.cuda.synchronize(self.engine.device)
        return True
