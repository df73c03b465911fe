"""Signal processing: DFT, STFT, Hann/Hamming/Blackman windows, MelWeightMatrix.

Complex tensors use ONNX's real layout: a trailing dimension of 2 (real, imaginary), or 1 for a real signal.
    DFT:  X[k] = Σₙ x[n]·e^{∓2πi·kn/N} along `axis` (inverse: ·1/N; onesided keeps bins 0..N/2)
    STFT: frames of frame_length every frame_step samples, × window, then a DFT of each frame
    windows (N = size, or size−1 when not periodic):  hann sin²(πn/N), hamming 25/46 − 21/46·cos(2πn/N),
    blackman 0.42 − 0.5·cos(2πn/N) + 0.08·cos(4πn/N)
The FFTs run in float64/complex128 and round once to the input dtype. Traffic: read x once, write X once.
"""

import math

import torch

from ..dtypes import dtype_from_name
from ..opspec import op


def _complex(x: torch.Tensor) -> torch.Tensor:
    """(…, 1 | 2) real layout → complex128 (…)."""
    xd = x.double()
    if x.shape[-1] == 1:
        return torch.complex(xd[..., 0], torch.zeros_like(xd[..., 0]))
    return torch.complex(xd[..., 0], xd[..., 1])


def _real_layout(z: torch.Tensor, dtype) -> torch.Tensor:
    return torch.stack([z.real, z.imag], dim=-1).to(dtype)


def _scalar(t, default=None):
    return default if t is None else int(t.reshape(-1)[0].item())


@op("DFT", attrs={"inverse": 0, "onesided": 0}, value_inputs=(1, 2))
def dft(x, dft_length=None, axis=None, *, inverse=0, onesided=0):
    """axis counts dimensions of x (whose last is the real/imaginary pair); default -2."""
    ax = _scalar(axis, -2) % x.dim()
    size = x.shape[ax]
    n = _scalar(dft_length, 2 * (size - 1) if inverse and onesided else size)
    z = _complex(x)
    if inverse:
        if onesided:
            return torch.fft.irfft(z, n=n, dim=ax).unsqueeze(-1).to(x.dtype)
        return _real_layout(torch.fft.ifft(z, n=n, dim=ax), x.dtype)
    out = torch.fft.fft(z, n=n, dim=ax)
    if onesided:
        out = out.narrow(ax, 0, n // 2 + 1)
    return _real_layout(out, x.dtype)


@op("STFT", attrs={"onesided": 1}, value_inputs=(1, 3))
def stft(signal, frame_step, window=None, frame_length=None, *, onesided=1):
    """signal (B, L, 1|2) → (B, frames, bins, 2), frames = 1 + (L − frame_length) // frame_step."""
    step = _scalar(frame_step)
    length = _scalar(frame_length, window.shape[0] if window is not None else signal.shape[-2])
    w = (window.to(signal.device).double() if window is not None
         else torch.ones(length, dtype=torch.float64, device=signal.device))
    z = _complex(signal)                                     # (B, L)
    frames = 1 + (signal.shape[-2] - length) // step
    chunks = z.unfold(-1, length, step)[..., :frames, :] * w[:length]   # (B, frames, length)
    out = torch.fft.fft(chunks, n=length, dim=-1)
    if onesided:
        out = out[..., :length // 2 + 1]
    return _real_layout(out, signal.dtype)


def _window(size, periodic, dtype_name, fn):
    n = _scalar(size)
    denom = n if periodic else n - 1
    k = torch.arange(n, dtype=torch.float64, device=size.device)
    return fn(k, denom).to(dtype_from_name(dtype_name))


_WINDOW_ATTRS = {"output_datatype": "float32", "periodic": 1}


@op("HannWindow", attrs=dict(_WINDOW_ATTRS), value_inputs=(0,))
def hann_window(size, *, output_datatype="float32", periodic=1):
    return _window(size, periodic, output_datatype, lambda k, d: torch.sin(k * math.pi / d) ** 2)


@op("HammingWindow", attrs=dict(_WINDOW_ATTRS), value_inputs=(0,))
def hamming_window(size, *, output_datatype="float32", periodic=1):
    a = 25.0 / 46.0
    return _window(size, periodic, output_datatype, lambda k, d: a - torch.cos(k * 2 * math.pi / d) * (1 - a))


@op("BlackmanWindow", attrs=dict(_WINDOW_ATTRS), value_inputs=(0,))
def blackman_window(size, *, output_datatype="float32", periodic=1):
    return _window(size, periodic, output_datatype,
                   lambda k, d: 0.42 - 0.5 * torch.cos(k * 2 * math.pi / d) + 0.08 * torch.cos(k * 4 * math.pi / d))


@op("MelWeightMatrix", attrs={"output_datatype": "float32"}, value_inputs=(0, 1, 2, 3, 4))
def mel_weight_matrix(num_mel_bins, dft_length, sample_rate, lower_edge_hertz, upper_edge_hertz, *,
                      output_datatype="float32"):
    """(dft_length//2 + 1, num_mel_bins) triangular filters on the mel scale mel(f) = 2595·log10(1 + f/700);
    the num_mel_bins + 2 band edges are spaced by (mel(hi) − mel(lo)) / (num_mel_bins + 2), as ONNX's
    reference implementation (the generator of its test data) does, and floored to DFT bins."""
    bins, n_fft, rate = _scalar(num_mel_bins), _scalar(dft_length), _scalar(sample_rate)
    lo, hi = float(lower_edge_hertz.reshape(-1)[0]), float(upper_edge_hertz.reshape(-1)[0])
    mel = lambda f: 2595.0 * math.log1p(f / 700.0) / math.log(10.0)   # noqa: E731
    step = (mel(hi) - mel(lo)) / (bins + 2)
    edges = [int(((n_fft + 1) * (700.0 * math.expm1((i * step + mel(lo)) / 2595.0 * math.log(10.0)))) // rate)
             for i in range(bins + 2)]
    out = torch.zeros(n_fft // 2 + 1, bins, dtype=torch.float64)
    for i in range(bins):
        left, center, right = edges[i], edges[i + 1], edges[i + 2]
        if center == left:
            out[center, i] = 1.0
        else:
            for j in range(left, center + 1):
                out[j, i] = (j - left) / (center - left)
        for j in range(center, right):
            out[j, i] = (right - j) / (right - center)
    return out.to(dtype_from_name(output_datatype))
