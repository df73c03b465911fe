"""Random ops: RandomNormal/Uniform(Like), Bernoulli, Multinomial — fresh samples on every run.

With a `seed` attribute every run of the layer draws the same samples (a generator seeded per call:
engines are data and keep no generator state); without one, torch's global generator is used. The values differ from other runtimes' (the bit generators differ),
which is why the ONNX backend suite excludes these ops. Every op has an `infer=`, so the builder never
evaluates (and so never constant-folds) a random layer. Traffic: one write per sample.
"""

import torch

from ..dtypes import dtype_from_name
from ..opspec import op

def _generator(seed, device) -> torch.Generator | None:
    """A fresh generator per call when seeded: a seeded layer yields the same samples on every run (engines
    hold no state); unseeded layers draw from torch's global generator."""
    if seed is None:
        return None
    return torch.Generator(device=device).manual_seed(int(float(seed) * 1e6) & 0x7FFFFFFFFFFF)


def _meta(shape, dtype_name):
    return torch.empty(tuple(shape), dtype=dtype_from_name(dtype_name), device="meta")


def _like_dtype(x, dtype):
    return dtype_from_name(dtype) if dtype else x.dtype


@op("RandomNormal", attrs={"dtype": "float32", "mean": 0.0, "scale": 1.0, "seed": None}, value_inputs=(0,),
    infer=lambda shape, *, dtype="float32", **_: _meta(shape.tolist(), dtype))
def random_normal(shape, *, dtype="float32", mean=0.0, scale=1.0, seed=None):
    """`shape` is a constant int64 input (the ONNX attribute): its device is where the samples go."""
    dev = shape.device
    out = torch.randn(tuple(shape.tolist()), generator=_generator(seed, dev), device=dev, dtype=torch.float32)
    return (out * scale + mean).to(dtype_from_name(dtype))


@op("RandomUniform", attrs={"dtype": "float32", "low": 0.0, "high": 1.0, "seed": None}, value_inputs=(0,),
    infer=lambda shape, *, dtype="float32", **_: _meta(shape.tolist(), dtype))
def random_uniform(shape, *, dtype="float32", low=0.0, high=1.0, seed=None):
    dev = shape.device
    out = torch.rand(tuple(shape.tolist()), generator=_generator(seed, dev), device=dev, dtype=torch.float32)
    return (out * (high - low) + low).to(dtype_from_name(dtype))


@op("RandomNormalLike", attrs={"dtype": None, "mean": 0.0, "scale": 1.0, "seed": None},
    infer=lambda x, *, dtype=None, **_: torch.empty(x.shape, dtype=_like_dtype(x, dtype), device="meta"))
def random_normal_like(x, *, dtype=None, mean=0.0, scale=1.0, seed=None):
    out = torch.randn(x.shape, generator=_generator(seed, x.device), device=x.device, dtype=torch.float32)
    return (out * scale + mean).to(_like_dtype(x, dtype))


@op("RandomUniformLike", attrs={"dtype": None, "low": 0.0, "high": 1.0, "seed": None},
    infer=lambda x, *, dtype=None, **_: torch.empty(x.shape, dtype=_like_dtype(x, dtype), device="meta"))
def random_uniform_like(x, *, dtype=None, low=0.0, high=1.0, seed=None):
    out = torch.rand(x.shape, generator=_generator(seed, x.device), device=x.device, dtype=torch.float32)
    return (out * (high - low) + low).to(_like_dtype(x, dtype))


@op("Bernoulli", attrs={"dtype": None, "seed": None},
    infer=lambda x, *, dtype=None, **_: torch.empty(x.shape, dtype=_like_dtype(x, dtype), device="meta"))
def bernoulli(x, *, dtype=None, seed=None):
    """y ~ Bernoulli(p = x) elementwise."""
    return torch.bernoulli(x.double(), generator=_generator(seed, x.device)).to(_like_dtype(x, dtype))


@op("Multinomial", attrs={"dtype": "int32", "sample_size": 1, "seed": None},
    infer=lambda x, *, dtype="int32", sample_size=1, **_: _meta((x.shape[0], sample_size), dtype))
def multinomial(x, *, dtype="int32", sample_size=1, seed=None):
    """x (batch, classes) unnormalised log-probabilities → (batch, sample_size) class indices, with replacement."""
    probs = torch.softmax(x.double(), dim=-1)
    out = torch.multinomial(probs, sample_size, replacement=True, generator=_generator(seed, x.device))
    return out.to(dtype_from_name(dtype))
