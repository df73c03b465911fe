"""Tactic: Softmax (and LogSoftmax) along one axis as a hand-written Triton kernel, one program per row.

Rows up to MAX_SINGLE elements stay in registers: one read, max-subtracted exponentials in float32, one write
(traffic 2·bytes(x)). Longer rows use the online form — one pass keeps a running max m and a running sum
s ← s·e^(m_old − m) + Σ e^(x − m), a second pass writes e^(x − m)/s: 2 reads + 1 write. A softmax over an
axis other than the last is computed on a moved-axis copy (one extra read and write each way).
float16/bfloat16 in and out, float32 inside, so large logits cannot overflow.
"""

import torch
import triton
import triton.language as tl

from .registry import tactic, triton_device_reason

MAX_SINGLE = 16384


@triton.jit
def _softmax_kernel(X, Y, N, stride_x, stride_y, LOG: tl.constexpr, SINGLE: tl.constexpr, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    xr = X + row * stride_x
    yr = Y + row * stride_y
    cols = tl.arange(0, BLOCK_N)
    if SINGLE:
        mask = cols < N
        x = tl.load(xr + cols, mask=mask, other=-float("inf")).to(tl.float32)
        z = x - tl.max(x, axis=0)
        e = tl.exp2(z * 1.4426950408889634)
        s = tl.sum(e, axis=0)
        if LOG:
            y = z - tl.log(s)
        else:
            y = e / s
        tl.store(yr + cols, y.to(Y.dtype.element_ty), mask=mask)
    else:
        m = tl.full([BLOCK_N], -float("inf"), tl.float32)
        s = tl.zeros([BLOCK_N], dtype=tl.float32)
        for start in range(0, N, BLOCK_N):
            c = start + cols
            x = tl.load(xr + c, mask=c < N, other=-float("inf")).to(tl.float32)
            m_new = tl.maximum(m, x)
            s = s * tl.exp2((m - m_new) * 1.4426950408889634) + tl.exp2((x - m_new) * 1.4426950408889634)
            s = tl.where(m_new == -float("inf"), 0.0, s)
            m = m_new
        row_max = tl.max(m, axis=0)
        total = tl.sum(s * tl.exp2((m - row_max) * 1.4426950408889634), axis=0)
        for start in range(0, N, BLOCK_N):
            c = start + cols
            z = tl.load(xr + c, mask=c < N, other=-float("inf")).to(tl.float32) - row_max
            if LOG:
                y = z - tl.log(total)
            else:
                y = tl.exp2(z * 1.4426950408889634) / total
            tl.store(yr + c, y.to(Y.dtype.element_ty), mask=c < N)


def _next_pow2(n: int) -> int:
    return 1 << max(4, (n - 1).bit_length())


def softmax(x: torch.Tensor, axis: int, log: bool = False, warps: int = 4, block: int | None = None) -> torch.Tensor:
    """Softmax (or LogSoftmax) of x along `axis` (launcher shared by the tactic and tests)."""
    axis = axis % max(x.dim(), 1)
    moved = x.dim() > 0 and axis != x.dim() - 1
    xs = x.movedim(axis, -1).contiguous() if moved else x.contiguous()
    n = xs.shape[-1] if xs.dim() else 1
    x2 = xs.reshape(-1, n)
    y2 = torch.empty_like(x2)
    if x2.numel():
        single = n <= MAX_SINGLE and block is None
        _softmax_kernel[(x2.shape[0],)](x2, y2, n, x2.stride(0), y2.stride(0), LOG=log, SINGLE=single,
                                        BLOCK_N=_next_pow2(n) if single else (block or 4096), num_warps=warps)
    y = y2.reshape(xs.shape)
    return y.movedim(-1, axis).contiguous() if moved else y.reshape(x.shape)


def _tactic(op: str, log: bool):
    @tactic(op, name="triton_rowwise", configs=[{"warps": 4}, {"warps": 8}, {"warps": 16}, {"warps": 2}], priority=10)
    class TritonSoftmax:
        @staticmethod
        def supports(layer, device):
            why = triton_device_reason(device)
            if why is not None:
                return why
            return None

        @staticmethod
        def build(layer, cfg, device):
            axis, warps = int(layer.attrs.get("axis", -1)), int(cfg.get("warps", 4))

            def run(inputs):
                x = inputs[0]
                if not x.dtype.is_floating_point:
                    raise TypeError(f"{op} of a {x.dtype} tensor")
                return [softmax(x, axis, log, warps)]
            return run
    return TritonSoftmax


TritonSoftmax = _tactic("Softmax", False)
TritonLogSoftmax = _tactic("LogSoftmax", True)
