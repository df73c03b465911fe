"""Tactics: LayerNormalization (and LayerNormalizationQuantize, its output also quantized) as a hand-written
Triton kernel, one program per row.

x is viewed as M rows of N = Π normalised dims. Rows up to MAX_SINGLE elements stay in registers: one read of
x, statistics in float32 (mean, then Σ(x − mean)² — the two-pass form, no cancellation), one write of y:
traffic 2·M·N·bytes + N·(γ, β). Longer rows loop over the row three times (sum, squared deviations,
normalise): 3 reads + 1 write. float16/bfloat16 in and out, float32 inside (stash_type=1).
Configs: warps per program, and rows per program for short rows (ConvNeXt normalises 96 channels per pixel: one
row per program leaves most lanes idle); the block is the row length rounded up to a power of two.
"""

import torch
import triton
import triton.language as tl

from .registry import tactic, triton_device_reason
from .torch_fused import layernorm_y_only_reason
from .quant_store import coded_output, quant_attrs, store_codes

MAX_SINGLE = 16384
MAX_TILE = 8192          # elements of a multi-row tile (ROWS · BLOCK_N) held in registers


@triton.jit
def _layernorm_kernel(X, W, B, Y, M, N, R1, stride_x0, stride_x, stride_xc, stride_y, eps, HAS_BIAS: tl.constexpr,
                      SINGLE: tl.constexpr, BLOCK_N: tl.constexpr, ROWS: tl.constexpr, Shift=None,
                      HAS_SHIFT: tl.constexpr = False, Q=None, q_scale=1.0, q_r=1.0, q_zp=0.0, q_lo=0.0, q_hi=0.0,
                      Q_KIND: tl.constexpr = 0, STORE_Y: tl.constexpr = True):
    # row r of x starts at (r // R1)·stride_x0 + (r % R1)·stride_x; its columns are stride_xc apart.
    # HAS_SHIFT: the row is x + shift[col] rounded to x's dtype (a convolution's bias moved here, AddLayerNorm)
    # Q_KIND 1 (int8/uint8) / 2 (float8 E4M3): also Q = QuantizeLinear(y as stored), laid out like Y
    # STORE_Y False (only with a Q): y is rounded to Y's dtype for the Q but not written (nothing else reads it)
    row = tl.program_id(0).to(tl.int64)
    xr = X + (row // R1) * stride_x0 + (row % R1) * stride_x
    yr = Y + row * stride_y
    cols = tl.arange(0, BLOCK_N)
    if ROWS > 1:        # short rows (ConvNeXt's 96 channels): ROWS rows per program, a [ROWS, BLOCK_N] tile
        rows = row * ROWS + tl.arange(0, ROWS)
        mask = (rows[:, None] < M) & (cols[None, :] < N)
        start = (rows // R1) * stride_x0 + (rows % R1) * stride_x
        x = tl.load(X + start[:, None] + cols[None, :] * stride_xc, mask=mask, other=0.0)
        if HAS_SHIFT:
            x = (x.to(tl.float32) + tl.load(Shift + cols, mask=cols < N, other=0.0).to(tl.float32)[None, :]
                 ).to(X.dtype.element_ty)
        x = x.to(tl.float32)
        mean = tl.sum(x, axis=1) / N
        d = tl.where(mask, x - mean[:, None], 0.0)
        rstd = tl.rsqrt(tl.sum(d * d, axis=1) / N + eps)
        y = d * rstd[:, None] * tl.load(W + cols, mask=cols < N, other=0.0).to(tl.float32)[None, :]
        if HAS_BIAS:
            y += tl.load(B + cols, mask=cols < N, other=0.0).to(tl.float32)[None, :]
        if STORE_Y:
            tl.store(Y + rows[:, None] * stride_y + cols[None, :], y.to(Y.dtype.element_ty), mask=mask)
        if Q_KIND != 0:
            store_codes(Q + rows[:, None] * stride_y + cols[None, :], y.to(Y.dtype.element_ty), mask, q_scale, q_r,
                     q_zp, q_lo, q_hi, Q_KIND)
    elif SINGLE:
        mask = cols < N
        x = tl.load(xr + cols * stride_xc, mask=mask, other=0.0)
        if HAS_SHIFT:
            x = (x.to(tl.float32) + tl.load(Shift + cols, mask=mask, other=0.0).to(tl.float32)).to(X.dtype.element_ty)
        x = x.to(tl.float32)
        mean = tl.sum(x, axis=0) / N
        d = tl.where(mask, x - mean, 0.0)
        rstd = tl.rsqrt(tl.sum(d * d, axis=0) / N + eps)
        y = d * rstd * tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
        if HAS_BIAS:
            y += tl.load(B + cols, mask=mask, other=0.0).to(tl.float32)
        if STORE_Y:
            tl.store(yr + cols, y.to(Y.dtype.element_ty), mask=mask)
        if Q_KIND != 0:
            store_codes(Q + row * stride_y + cols, y.to(Y.dtype.element_ty), mask, q_scale, q_r, q_zp, q_lo, q_hi,
                        Q_KIND)
    else:
        acc = tl.zeros([BLOCK_N], dtype=tl.float32)
        for start in range(0, N, BLOCK_N):
            c = start + cols
            acc += tl.load(xr + c * stride_xc, mask=c < N, other=0.0).to(tl.float32)
        mean = tl.sum(acc, axis=0) / N
        acc = tl.zeros([BLOCK_N], dtype=tl.float32)
        for start in range(0, N, BLOCK_N):
            c = start + cols
            d = tl.where(c < N, tl.load(xr + c * stride_xc, mask=c < N, other=0.0).to(tl.float32) - mean, 0.0)
            acc += d * d
        rstd = tl.rsqrt(tl.sum(acc, axis=0) / N + eps)
        for start in range(0, N, BLOCK_N):
            c = start + cols
            m = c < N
            y = (tl.load(xr + c * stride_xc, mask=m, other=0.0).to(tl.float32) - mean) * rstd
            y = y * tl.load(W + c, mask=m, other=0.0).to(tl.float32)
            if HAS_BIAS:
                y += tl.load(B + c, mask=m, other=0.0).to(tl.float32)
            tl.store(yr + c, y.to(Y.dtype.element_ty), mask=m)


def _next_pow2(n: int) -> int:
    return 1 << max(4, (n - 1).bit_length())


def _strided_rows(x: torch.Tensor):
    """(R1, outer stride, row stride, column stride) reading x (…, N) in place as M rows of N: the leading dims
    merge into at most two strided dims (outer, R1 rows), or None. ConvNeXt's LayerNorm reads Transpose(NCHW
    conv output) = (B, H, W, C): columns (channels) H·W apart, rows (pixels) adjacent, images B·C·H·W apart;
    read in place it needs no transposing copy first."""
    groups: list[list[int]] = []          # [size, stride] of merged leading dims, outermost first
    for size, stride in zip(x.shape[:-1], x.stride()[:-1]):
        if size == 1:
            continue
        if groups and groups[-1][1] == stride * size:
            groups[-1] = [groups[-1][0] * size, stride]
        else:
            groups.append([size, stride])
    if len(groups) > 2:
        return None
    while len(groups) < 2:
        groups.insert(0, [1, 0])
    (_, outer), (r1, inner) = groups
    return r1, outer, inner, x.stride(-1)


def layernorm(x, scale, bias, axis: int, eps: float, warps: int = 4, block: int | None = None, rows: int = 1,
              strided: bool = False, shift=None, quant: dict | None = None):
    """Y of LayerNormalization(x, scale, bias) along dims axis..r−1 (launcher shared by the tactic and tests).
    `strided`: read a last-axis x through its strides where the rows allow it (else x is made contiguous first).
    `shift`: N values added to every row first, the sum rounded to x's dtype (LayerNorm(x + shift)); rows that
    fit in registers only. `quant` ({scale, zero_point, dtype[, store_y]}): also return Q(Y) per tensor — (Y, Q); rows
    that fit in registers only; with store_y False, (None, Q) and Y is never written."""
    axis = axis % x.dim()
    shape = x.shape[axis:]
    n = 1
    for d in shape:
        n *= d
    if shift is not None and (shift.numel() != n or n > MAX_SINGLE or block is not None):
        raise ValueError(f"a row shift needs one value per column of rows up to {MAX_SINGLE} elements "
                         f"({shift.numel()} values, rows of {n})")
    in_place = strided and axis == x.dim() - 1 and 0 < n <= MAX_SINGLE and block is None and not x.is_contiguous()
    view = _strided_rows(x) if in_place else None
    if view is not None:
        x2, (r1, stride_outer, stride_row, stride_col) = x, view
    else:
        x2 = x.reshape(-1, n) if n else x.reshape(0, 0)
        if not x2.is_contiguous():
            x2 = x2.contiguous()
        r1, stride_outer, stride_row, stride_col = max(1, x2.shape[0]), 0, n, 1
    store_y = quant is None or quant.get("store_y", True)
    y_buf = torch.empty(x.shape if store_y else (1,), dtype=x.dtype, device=x.device)   # (1,): only its dtype is read
    q_args, q = dict(Q=y_buf, q_scale=1.0, q_r=1.0, q_zp=0.0, q_lo=0.0, q_hi=0.0, Q_KIND=0), None   # no Q: unused
    if quant is not None:
        if n > MAX_SINGLE or block is not None:
            raise ValueError(f"a quantized second output needs rows up to {MAX_SINGLE} elements (rows of {n})")
        q, q_args = coded_output(quant, x.shape, x.device)
    m = x.numel() // n if n else 0
    y = y_buf if store_y else None
    if m == 0 or n == 0:
        return y if q is None else (y, q)
    w = scale.to(x.device).expand(shape).reshape(-1).contiguous()
    b = bias.to(x.device).expand(shape).reshape(-1).contiguous() if bias is not None else w
    single = n <= MAX_SINGLE and block is None
    block_n = _next_pow2(n) if single else (block or 4096)
    rows = rows if single and rows > 1 and rows * block_n <= MAX_TILE else 1
    _layernorm_kernel[(triton.cdiv(m, rows),)](x2, w, b, y_buf, m, n, r1, stride_outer, stride_row, stride_col, n,
                                               eps,
                                               HAS_BIAS=bias is not None, SINGLE=single, BLOCK_N=block_n, ROWS=rows,
                                               Shift=shift.to(x.device).reshape(-1).contiguous() if shift is not None
                                               else w, HAS_SHIFT=shift is not None, num_warps=warps, **q_args)
    return y if q is None else (y, q)


LAYERNORM_CONFIGS = [{"warps": 4}, {"warps": 8}, {"warps": 16}, {"warps": 2}, {"warps": 4, "rows": 8},
                     {"warps": 4, "rows": 32}, {"warps": 4, "rows": 32, "strided": 1},
                     {"warps": 8, "rows": 64, "strided": 1}]


def _rowwise_run(layer, cfg, quant: dict | None = None):
    """The row kernel for a LayerNorm layer's axis/epsilon and a tile config; with `quant`, [Y, Q(Y)]."""
    axis, eps = int(layer.attrs.get("axis", -1)), float(layer.attrs.get("epsilon", 1e-5))
    warps = int(cfg.get("warps", 4))
    opts = dict(rows=int(cfg.get("rows", 1)), strided=bool(cfg.get("strided", 0)), quant=quant)

    def run(inputs):
        out = layernorm(inputs[0], inputs[1], inputs[2] if len(inputs) > 2 else None, axis, eps, warps, **opts)
        return [out] if quant is None else list(out)
    return run


@tactic("LayerNormalization", name="triton_rowwise", configs=LAYERNORM_CONFIGS, priority=10)
class TritonLayerNorm:
    @staticmethod
    def supports(layer, device):
        why = triton_device_reason(device)
        if why is not None:
            return why
        return layernorm_y_only_reason(layer)

    @staticmethod
    def build(layer, cfg, device):
        return _rowwise_run(layer, cfg)


@tactic("LayerNormalizationQuantize", name="triton_rowwise", configs=LAYERNORM_CONFIGS, priority=10)
class TritonLayerNormQuantize:
    """LayerNorm with the next GEMM's Q as a second output (ir/ops/quantized.py): the row kernel above with its
    quantized store; rows up to MAX_SINGLE elements."""
    @staticmethod
    def supports(layer, device):
        why = triton_device_reason(device)
        if why is not None:
            return why
        if layer.attrs.get("stash_type", 1) != 1:
            return f"stash_type={layer.attrs.get('stash_type')}"
        return None

    @staticmethod
    def build(layer, cfg, device):
        return _rowwise_run(layer, cfg, quant_attrs(layer))

