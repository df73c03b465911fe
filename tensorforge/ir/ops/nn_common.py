"""Shared helpers of the NN op families (conv, pool, norm, linalg, nn_misc, resize); registers no ops.

- `nn_op(name)`: registers a reference whose keyword-only parameters ARE the attribute schema (a default
  makes the attribute optional, no default makes it REQUIRED), and fills defaults at call time, so a layer
  that carries only some attributes (an importer or fusion rule passing the non-default ones) still runs.
- `window_geometry` / `torch_pad_arg` / `per_dim`: ONNX sliding-window arithmetic (pads, auto_pad,
  ceil_mode) for Conv and the pools; `host_values`: the value of a small value input (Resize's scales …).
"""

import functools
import inspect

import torch

from ..dynamic import ValueNeeded
from ..opspec import REQUIRED, op


def nn_op(name: str, infer=None, host_ok: bool = True, value_inputs: tuple[int, ...] = ()):
    """Decorator: `@nn_op("Conv")` on `def conv(x, w, b=None, *, group=1, pads=None, ...)`."""
    def wrap(fn):
        params = inspect.signature(fn).parameters.values()
        attrs = {p.name: (REQUIRED if p.default is inspect.Parameter.empty else p.default)
                 for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY}

        @functools.wraps(fn)
        def reference(*inputs, **given):
            return fn(*inputs, **{k: v for k, v in given.items() if v is not None or attrs.get(k) is None})
        op(name, attrs=attrs, infer=infer, host_ok=host_ok, value_inputs=value_inputs)(reference)
        return fn
    return wrap


def host_values(t: torch.Tensor | None, what: str) -> list | None:
    """The values of a small value input as a Python list; None or an empty tensor → None. A meta tensor's
    value exists only at run time: `ValueNeeded` tells shape inference the output shape is dynamic."""
    if t is None or t.numel() == 0:
        return None
    if t.device.type == "meta":
        raise ValueNeeded(f"{what} is computed from tensor data, so its value is unknown at build time")
    return t.reshape(-1).tolist()


def per_dim(value, n: int, fill: int) -> list[int]:
    """An ONNX per-spatial-dim list attribute, or `fill` repeated when it is absent."""
    return [int(v) for v in value] if value else [fill] * n


def window_geometry(in_sizes, kernel, strides=None, dilations=None, pads=None, auto_pad="NOTSET",
                    ceil_mode=0) -> tuple[list[int], list[int], list[int], list[int]]:
    """ONNX window arithmetic for every spatial dim: returns (out, pad_begin, pad_end, ceil_extra).

    With the effective kernel  k' = (k − 1)·d + 1:
    - NOTSET:  out = ⌊(in + b + e − k') / s⌋ + 1   (⌈…⌉ with ceil_mode; a last window that would start
      inside the end padding is dropped, as onnxruntime and torch do);
    - VALID:   b = e = 0, out = ⌊(in − k') / s⌋ + 1;
    - SAME_UPPER / SAME_LOWER: out = ⌈in / s⌉, total = max(0, (out − 1)·s + k' − in) split so the odd
      element goes to the end (UPPER) or to the beginning (LOWER).
    `ceil_extra` is the padding beyond `e` that the last (ceil_mode) window reads; the average pools never
    count those positions, not even with count_include_pad.
    """
    n = len(in_sizes)
    strides, dilations = per_dim(strides, n, 1), per_dim(dilations, n, 1)
    out, begin, end, extra = [], [], [], []
    for i, size in enumerate(in_sizes):
        k_eff = (int(kernel[i]) - 1) * dilations[i] + 1
        s = strides[i]
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            o = -(-size // s)
            total = max(0, (o - 1) * s + k_eff - size)
            small, big = total // 2, total - total // 2
            b, e = (small, big) if auto_pad == "SAME_UPPER" else (big, small)
        else:
            if auto_pad == "VALID":
                b = e = 0
            else:
                b, e = (int(pads[i]), int(pads[i + n])) if pads else (0, 0)
            span = size + b + e - k_eff
            if ceil_mode:
                o = -(-span // s) + 1
                if (o - 1) * s >= size + b:      # last window would start in the end padding
                    o -= 1
            else:
                o = span // s + 1
        out.append(max(o, 0))
        begin.append(b)
        end.append(e)
        extra.append(max(0, (o - 1) * s + k_eff - (size + b + e)))
    return out, begin, end, extra


def torch_pad_arg(begin, end) -> list[int]:
    """(begin, end) per spatial dim, first dim first → F.pad's last-dim-first flat list."""
    flat = []
    for b, e in zip(reversed(begin), reversed(end)):
        flat += [b, e]
    return flat
