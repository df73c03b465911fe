"""Device helpers: pick CUDA when present, else CPU; a fingerprint string recorded in engines; SM counts."""

import functools
import platform

import torch

from .errors import UsageError


def resolve_device(device=None) -> torch.device:
    """`None`/"auto" → cuda if available else cpu; an int N or "N" → cuda:N (trtexec's --device=N)."""
    if device is None or device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if isinstance(device, int) or (isinstance(device, str) and device.isdigit()):
        device = f"cuda:{int(device)}"
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise UsageError(f"unknown device {device!r}", "use 'cpu', 'cuda' or a GPU index such as 0") from e
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise UsageError(f"device {device!r} asked for, but no CUDA GPU is visible",
                         "use --device=cpu, or run on a machine with an NVIDIA GPU")
    if dev.type not in ("cpu", "cuda"):
        raise UsageError(f"device type {dev.type!r} is not supported", "use 'cpu' or 'cuda'")
    return dev


def fingerprint(device: torch.device) -> str:
    """Human-readable identity of the build device, e.g. 'cuda:NVIDIA H200:sm_90' or 'cpu:x86_64'."""
    if device.type == "cuda":
        idx = device.index if device.index is not None else torch.cuda.current_device()
        p = torch.cuda.get_device_properties(idx)
        return f"cuda:{p.name}:sm_{p.major}{p.minor}"
    return f"cpu:{platform.machine()}"


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@functools.cache
def _cuda_sms(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def sm_count(device: torch.device, stand_in: int) -> int:
    """Streaming multiprocessors of a CUDA device (read once per device: launchers size grids per call), else
    `stand_in` — the count a kernel's grid planning assumes under TRITON_INTERPRET=1 on the CPU."""
    if device.type != "cuda":
        return stand_in
    return _cuda_sms(device.index if device.index is not None else torch.cuda.current_device())
