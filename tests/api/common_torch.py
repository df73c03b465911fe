"""Stand-in for TensorRT's samples/python/common.py buffer helpers, with torch in place of cuda-python.

The samples allocate a pinned host array and a device buffer per I/O tensor (`allocate_buffers`), copy the
input host→device, run `execute_async_v3` on a stream and copy outputs device→host (`do_inference`). Here the
host side is a numpy view of a torch CPU tensor and the device side a torch tensor on the engine's device (the
same tensor on a CPU engine), with `data_ptr()` as the address — docs/migrating-from-tensorrt.md, "Buffers".
"""

import contextlib

import numpy as np
import torch

import tensorforge as trt


class HostDeviceMem:
    def __init__(self, size: int, dtype, device: torch.device):
        self._host_t = torch.empty(size, dtype=torch.from_numpy(np.empty(0, dtype)).dtype)
        if device.type == "cuda":
            self._host_t = self._host_t.pin_memory()
        self._device_t = self._host_t if device.type == "cpu" else torch.empty_like(self._host_t, device=device)

    @property
    def host(self) -> np.ndarray:
        return self._host_t.numpy()

    @host.setter
    def host(self, data: np.ndarray) -> None:
        np.copyto(self.host[:data.size], data.ravel(), casting="safe")

    @property
    def device(self) -> int:
        return self._device_t.data_ptr()

    @property
    def nbytes(self) -> int:
        return self._host_t.numel() * self._host_t.element_size()


def allocate_buffers(engine, profile_idx: int | None = None):
    """(inputs, outputs, bindings): one HostDeviceMem per I/O tensor, sized for its static shape or the profile's
    max shape, as the samples' allocate_buffers does."""
    inputs, outputs, bindings = [], [], []
    device = engine.device
    for i in range(engine.num_io_tensors):
        name = engine.get_tensor_name(i)
        shape = tuple(engine.get_tensor_shape(name))
        if any(d < 0 for d in shape):
            if profile_idx is None and engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT:
                raise ValueError(f"binding {name} has a dynamic shape, but no profile was given")
            shape = tuple(engine.get_tensor_profile_shape(name, profile_idx or 0)[-1]) \
                if engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT else None
        if shape is None:                                   # dynamic output: size it from the max input shapes
            ctx = engine.create_execution_context()
            ctx.set_optimization_profile_async(profile_idx or 0, 0)
            for k in range(engine.num_io_tensors):
                n = engine.get_tensor_name(k)
                if engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT:
                    ctx.set_input_shape(n, engine.get_tensor_profile_shape(n, profile_idx or 0)[-1])
            shape = tuple(ctx.get_tensor_shape(name))
        mem = HostDeviceMem(int(trt.volume(shape)), trt.nptype(engine.get_tensor_dtype(name)), device)
        bindings.append(mem.device)
        (inputs if engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT else outputs).append(mem)
    return inputs, outputs, bindings


@contextlib.contextmanager
def stream_context(device: torch.device):
    """The samples' CudaStreamContext: a CUDA stream handle on a GPU, 0 (no stream) on the CPU."""
    if device.type == "cuda":
        s = torch.cuda.Stream(device)
        yield s.cuda_stream
        s.synchronize()
    else:
        yield 0


def do_inference(context, engine, bindings, inputs, outputs, stream):
    """Host→device copies, execute_async_v3 on `stream`, device→host copies; returns the outputs' host arrays."""
    for mem in inputs:
        mem._device_t.copy_(mem._host_t, non_blocking=True)
    for i in range(engine.num_io_tensors):
        context.set_tensor_address(engine.get_tensor_name(i), bindings[i])
    context.execute_async_v3(stream_handle=stream)
    for mem in outputs:
        mem._host_t.copy_(mem._device_t)
    if engine.device.type == "cuda":
        torch.cuda.synchronize(engine.device)
    return [mem.host for mem in outputs]
