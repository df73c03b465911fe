"""Tactic: a depthwise convolution (group = C, one filter per channel) and its epilogue as ONE Triton kernel.

    y[n, c, p] = act(b[c] + Σ_{kh, kw} x[n, c, p·s + (kh, kw)·d − pad] · w[c, 0, kh, kw] [+ r[n, c, p]]) [+ r]

The cuDNN tactics run a depthwise convolution as two kernels: cuDNN's convolution without bias, then the Triton
epilogue over y (triton_conv_epilogue.py: read y, write y again). Here each program computes a tile of BLOCK_P
output positions × BLOCK_C channels of one sample in float32 registers, tap by tap (KH·KW masked loads of x; the
padding reads 0), adds the bias, the residual and the activation, and stores y once. Traffic: x once per tap
(neighbouring taps of a tile hit in L1/L2, so about once from DRAM), w (C·KH·KW), b and r once, y written once —
against cuDNN + epilogue's y written, read and written again, and one launch less. Memory-bound, as depthwise
convolutions are: MobileNetV3-Large has 15, EfficientNet-B0 16.
The same kernel serves NCHW and channels-last (config "layout": x is made dense in that layout, y is allocated in
it; addresses come from strides, so the residual is read in whatever layout it has). Float32 accumulation, one
rounding to y's dtype, like cuDNN's. Channel multiplier 1 only (C_out = C_in = group); 2-D; any pads, strides,
dilations and auto_pad (nn_common.window_geometry, as the Conv reference).
FusedConvPool (squeeze-excite's depthwise convolution and its global average pool): the same kernel also writes
one float32 sum per position block and channel of y as stored, and a second launch adds them up in order; y is
written only where another layer reads it.
FusedConvQuantize (INT8/FP8 engines: the float depthwise conv writing the next quantized conv's codes): the codes of
y as stored from the same epilogue; FusedConvPoolQuantize: the codes of P from the reduction.
Entry points: tactics `fusedconv.triton_depthwise`, `conv.triton_depthwise`, `fusedconvpool.triton_depthwise` and
`fusedconv(pool)quantize.triton_depthwise`;
the launcher `depthwise_conv` (tests run it on CPU tensors under TRITON_INTERPRET=1).
"""

import torch
import triton
import triton.language as tl

from ..ir.ops.nn_common import per_dim, window_geometry
from .quant_store import coded_output, quant_attrs, store_codes
from .registry import tactic
from .torch_fused import epilogue_attrs, epilogue_operands
from .triton_conv_epilogue import _CudnnTritonEpilogue
from .triton_depthwise_rows import _depthwise_rows_kernel, rows_grid
from .triton_gemm import ACTIVATIONS, kernel_activation, residual_activation

# channels-last: channels are contiguous, so wide channel tiles make full 128-byte loads; NCHW: positions are.
# "rows" (triton_depthwise_rows.py): channels-last, BH output rows × BW columns per program. Chosen from the sm_90
# code (cuobjdump -res-usage, PTX load counts; not yet timed on a GPU): 1×64×32 on 2 warps holds 4 positions × 8
# channels per thread, so one weight load serves 4 positions (7.9 loads per output for 7×7, 202 registers, no
# spill); 1×32×32 on 4 warps, 96 registers (12.3 loads per output, more programs resident). Each config is one
# more Triton compile per depthwise shape in a cold build, so few of them. BC 32 suits channel counts that are odd
# multiples of 32 (ConvNeXt-T's 96: a 64-channel tile masks a quarter).
CONFIGS = ([{"layout": "rows", "BH": 1, "BW": bw, "BC": 32, "warps": wp} for bw, wp in ((64, 2), (32, 4))]
           + [{"layout": "nhwc", "BLOCK_P": 32, "BLOCK_C": 64, "warps": 4},
              {"layout": "nchw", "BLOCK_P": 64, "BLOCK_C": 16, "warps": 4}])
CHANNELS_LAST = ("nhwc", "rows")


@triton.jit
def _depthwise_kernel(X, Wt, Bias, R, Y, C, H, W, OW, P, s_xn, s_xc, s_xh, s_xw, s_yn, s_yc, s_yh, s_yw,
                      s_rn, s_rc, s_rh, s_rw, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, alpha, beta,
                      KH: tl.constexpr, KW: tl.constexpr, HAS_BIAS: tl.constexpr, HAS_RES: tl.constexpr,
                      RES_FIRST: tl.constexpr, ACT: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr,
                      Part=None, STORE_Y: tl.constexpr = True, POOL: tl.constexpr = False, Q=None, q_scale=1.0,
                      q_r=1.0, q_zp=0.0, q_lo=0.0, q_hi=0.0, Q_KIND: tl.constexpr = 0):
    """Program (position block, channel block, sample). Wt is the weight as (KH·KW, C): tap-major, so a tap's
    BLOCK_C weights are one contiguous load. POOL: also Part[n, position block, c] = Σ of the tile's stored values
    over its positions (float32), for _pool_parts_kernel; Q_KIND 1 (int8/uint8) / 2 (float8 E4M3): also
    Q = QuantizeLinear(y as stored), laid out like y (FusedConvQuantize: the next quantized convolution's Q);
    STORE_Y False: y itself is not written."""
    n = tl.program_id(2).to(tl.int64)
    p = tl.program_id(0) * BLOCK_P + tl.arange(0, BLOCK_P)
    c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    p_in, c_in = p < P, c < C
    oh, ow = p // OW, p % OW
    x_base = X + n * s_xn + c[None, :].to(tl.int64) * s_xc
    acc = tl.zeros((BLOCK_P, BLOCK_C), dtype=tl.float32)
    for kh in range(KH):          # a run-time loop over rows: unrolling all KH·KW taps spilled (sm_90, 7×7)
        ih = oh * stride_h - pad_h + kh * dil_h
        row_ok = p_in & (ih >= 0) & (ih < H)
        for kw in tl.static_range(KW):
            iw = ow * stride_w - pad_w + kw * dil_w
            ok = row_ok & (iw >= 0) & (iw < W)
            offs = ih.to(tl.int64) * s_xh + iw.to(tl.int64) * s_xw
            xv = tl.load(x_base + offs[:, None], mask=ok[:, None] & c_in[None, :], other=0.0)
            wv = tl.load(Wt + (kh * KW + kw) * C + c, mask=c_in, other=0.0)
            acc += xv.to(tl.float32) * wv.to(tl.float32)[None, :]
    if HAS_BIAS:
        acc += tl.load(Bias + c, mask=c_in, other=0.0).to(tl.float32)[None, :]
    mask = p_in[:, None] & c_in[None, :]
    r = 0.0
    if HAS_RES:
        r_offs = n * s_rn + c[None, :].to(tl.int64) * s_rc + (oh.to(tl.int64) * s_rh + ow.to(tl.int64) * s_rw)[:, None]
        r = tl.load(R + r_offs, mask=mask, other=0.0).to(tl.float32)
    acc = residual_activation(acc, r, ACT, alpha, beta, HAS_RES, RES_FIRST)
    stored = acc.to(Y.dtype.element_ty)
    y_offs = n * s_yn + c[None, :].to(tl.int64) * s_yc + (oh.to(tl.int64) * s_yh + ow.to(tl.int64) * s_yw)[:, None]
    if STORE_Y:
        tl.store(Y + y_offs, stored, mask=mask)
    if Q_KIND != 0:
        store_codes(Q + y_offs, stored, mask, q_scale, q_r, q_zp, q_lo, q_hi, Q_KIND)
    if POOL:
        part = tl.sum(tl.where(mask, stored.to(tl.float32), 0.0), axis=0)
        tl.store(Part + (n * tl.num_programs(0) + tl.program_id(0)) * C + c, part, mask=c_in)


@triton.jit
def _pool_parts_kernel(Part, Pooled, C, PB, inv_s, BLOCK_C: tl.constexpr, Q=None, q_scale=1.0, q_r=1.0, q_zp=0.0,
                       q_lo=0.0, q_hi=0.0, Q_KIND: tl.constexpr = 0, STORE_P: tl.constexpr = True):
    """Pooled[n, c] = (Σ_b Part[n, b, c]) / S, the position blocks summed in order (deterministic). Q_KIND 1 / 2:
    also Q = QuantizeLinear(P as stored) (FusedConvPoolQuantize: squeeze-excite's first 1×1 conv reads P through
    a Q); STORE_P False: P is rounded for the Q but not written."""
    n = tl.program_id(1).to(tl.int64)
    c = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    c_in = c < C
    acc = tl.zeros((BLOCK_C,), dtype=tl.float32)
    for b in range(0, PB):
        acc += tl.load(Part + (n * PB + b) * C + c, mask=c_in, other=0.0)
    mean = (acc * inv_s).to(Pooled.dtype.element_ty)
    if STORE_P:
        tl.store(Pooled + n * C + c, mean, mask=c_in)
    if Q_KIND != 0:
        store_codes(Q + n * C + c, mean, c_in, q_scale, q_r, q_zp, q_lo, q_hi, Q_KIND)


MAX_GRID_Z = 65535       # CUDA's limit on the grid's third dimension: the samples


def depthwise_reason(x_shape, w_shape, group) -> str | None:
    """Why (x, w, group) is not a depthwise 2-D convolution with channel multiplier 1 (None when it is)."""
    if len(x_shape) != 4 or len(w_shape) != 4:
        return f"a {len(x_shape) - 2}-D convolution (this kernel is 2-D)"
    if group == 1 or group != x_shape[1]:
        return f"group {group} for {x_shape[1]} input channels: not depthwise"
    if w_shape[0] != group or w_shape[1] != 1:
        return f"weight {tuple(w_shape)}: a channel multiplier of {w_shape[0] // max(group, 1)} (this kernel: 1)"
    if x_shape[0] > MAX_GRID_Z:
        return f"batch {x_shape[0]} > {MAX_GRID_Z} (one grid z-index per sample)"
    return None


def tap_major(w: torch.Tensor) -> torch.Tensor:
    """w (C, 1, KH, KW) as (KH·KW, C), contiguous: the kernel's layout."""
    return w.reshape(w.shape[0], -1).t().contiguous()


def depthwise_conv(x, w, bias=None, residual=None, attrs=None, activation="none", alpha=0.0, beta=0.0,
                   residual_first=0, channels_last=False, cfg=None, wt=None, pool=False, store_y=True,
                   quant: dict | None = None):
    """act(conv(x, w, group=C) + bias [+ residual]) [+ residual] through the Triton kernel. attrs: the Conv
    attributes (pads, strides, dilations, auto_pad); wt: tap_major(w) when the caller keeps it (else made here).
    Returns y (N, C, OH, OW), dense in the layout asked (channels_last or NCHW). pool: returns (y or None when not
    store_y, P) with P (N, C, 1, 1) the mean of y as stored (FusedConvPool): the kernel writes one float32 partial
    sum per position block and channel, and one more launch sums them in order (deterministic). quant ({scale,
    zero_point, dtype, store_y}): returns (y or None when not quant["store_y"], Q(y)), the codes laid out like y;
    with pool, the Q is P's: (y or None, P or None when not quant["store_y"], Q(P)) (FusedConvPoolQuantize)."""
    attrs = attrs or {}
    cfg = {"layout": "nhwc" if channels_last else "nchw", **(cfg or CONFIGS[0])}   # no layout given: the flag's
    channels_last = channels_last or cfg["layout"] == "rows"      # the rows kernel reads channels-last only
    activation = kernel_activation(activation, alpha)
    if activation not in ACTIVATIONS:
        raise ValueError(f"unknown epilogue activation {activation!r}")
    why = depthwise_reason(tuple(x.shape), tuple(w.shape), attrs.get("group", 1))
    if why:
        raise ValueError(f"triton_depthwise: {why}")
    kh, kw = w.shape[2], w.shape[3]
    strides, dilations = per_dim(attrs.get("strides"), 2, 1), per_dim(attrs.get("dilations"), 2, 1)
    out, begin, _, _ = window_geometry(list(x.shape[2:]), [kh, kw], strides, dilations, attrs.get("pads"),
                                       attrs.get("auto_pad", "NOTSET"))
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    x = x.contiguous(memory_format=fmt)
    n, c, h, wd = x.shape
    y = torch.empty((n, c, out[0], out[1]), dtype=x.dtype, device=x.device, memory_format=fmt)
    positions = out[0] * out[1]
    q_args, codes = {}, None
    if quant is not None and not pool:
        codes, q_args = coded_output(quant, y.shape, y.device, y.stride())
        store_y = q_args.pop("STORE_Y")
    if y.numel() == 0 or (pool and positions == 0):
        if pool and quant is not None:
            raise ValueError("a quantized pool of an empty feature map (its mean is NaN) runs on the reference")
        if codes is not None:
            return (y if store_y else None), codes
        if not pool:
            return y
        pooled = torch.full((n, c, 1, 1), float("nan") if positions == 0 else 0.0, dtype=y.dtype, device=y.device)
        return (y if store_y else None), pooled
    wt = tap_major(w) if wt is None else wt
    if bias is not None:
        bias = bias.reshape(-1).expand(c).contiguous()
    if residual is not None and tuple(residual.shape) != tuple(y.shape):
        residual = residual.expand(y.shape)
    r = residual if residual is not None else y
    common = dict(HAS_BIAS=bias is not None, HAS_RES=residual is not None, RES_FIRST=bool(residual_first),
                  ACT=activation, STORE_Y=bool(store_y or not (pool or quant)), POOL=bool(pool), **q_args)
    b_arg = bias if bias is not None else wt
    if cfg["layout"] == "rows":
        dims = (c, x.stride(0), x.stride(2), x.stride(3), y.stride(0), y.stride(2), y.stride(3))
        # multiples of 8 but not all of 16: passed ÷ 8 (C8), so the kernel knows them as multiples of 8
        c8 = all(v % 8 == 0 for v in dims) and not all(v % 16 == 0 for v in dims)
        dims = tuple(v // 8 for v in dims) if c8 else dims
        grid = rows_grid(out, c, n, cfg)
        part = torch.empty((n, grid[0], c), dtype=torch.float32, device=x.device) if pool else None
        _depthwise_rows_kernel[grid](x, wt, b_arg, r, y, dims[0], h, wd, out[0], out[1], *dims[1:], *r.stride(),
                                     begin[0], begin[1], float(alpha), float(beta), KH=kh, KW=kw, SH=strides[0],
                                     SW=strides[1], DH=dilations[0], DW=dilations[1], BH=cfg["BH"], BW=cfg["BW"],
                                     BC=cfg["BC"], C8=c8,
                                     num_warps=cfg["warps"], Part=part, **common)
    else:
        grid = (triton.cdiv(positions, cfg["BLOCK_P"]), triton.cdiv(c, cfg["BLOCK_C"]), n)
        part = torch.empty((n, grid[0], c), dtype=torch.float32, device=x.device) if pool else None
        _depthwise_kernel[grid](x, wt, b_arg, r, y, c, h, wd, out[1], positions, *x.stride(), *y.stride(),
                                *r.stride(), strides[0], strides[1], begin[0], begin[1], dilations[0],
                                dilations[1], float(alpha), float(beta), KH=kh, KW=kw, BLOCK_P=cfg["BLOCK_P"],
                                BLOCK_C=cfg["BLOCK_C"], num_warps=cfg["warps"], Part=part, **common)
    if codes is not None:
        return (y if store_y else None), codes
    if not pool:
        return y
    pooled = torch.empty((n, c, 1, 1), dtype=y.dtype, device=y.device)
    p_args, p_codes = {}, None
    if quant is not None:
        p_codes, p_args = coded_output(quant, (n, c, 1, 1), y.device, store_flag="STORE_P")
    _pool_parts_kernel[(triton.cdiv(c, 128), n)](part, pooled, c, grid[0], 1.0 / positions, BLOCK_C=128, **p_args)
    if p_codes is None:
        return (y if store_y else None), pooled
    return (y if store_y else None), (pooled if quant.get("store_y", True) else None), p_codes


class _TritonDepthwise:
    @staticmethod
    def supports(layer, device):
        if int(layer.attrs.get("group", 1)) == 1:
            return "group 1: a dense convolution (this kernel is depthwise)"
        return _CudnnTritonEpilogue.supports(layer, device)     # a Triton device, 2-D, an activation it knows

    @staticmethod
    def fits(layer, cfg, inputs):
        x, w = inputs[0], inputs[1]
        if not isinstance(x, torch.Tensor) or not isinstance(w, torch.Tensor):
            return None
        return depthwise_reason(tuple(x.shape), tuple(w.shape), int(layer.attrs.get("group", 1)))

    @staticmethod
    def build(layer, cfg, device):
        act, alpha, beta, res_first = epilogue_attrs(layer.attrs)
        attrs = dict(layer.attrs)
        pool = layer.op in ("FusedConvPool", "FusedConvPoolQuantize")
        quant = quant_attrs(layer) if layer.op.endswith("Quantize") else None
        if layer.op == "FusedConvPoolQuantize":       # the Q reads P: its store_y says whether P is written
            quant["store_y"] = bool(layer.outputs[1])
        store_y = bool(layer.outputs and layer.outputs[0])
        kept: list = [None, None]            # (weight tensor seen, its tap-major copy)

        def run(inputs):
            x, w, bias, residual = epilogue_operands(inputs)
            if kept[0] is not w:
                kept[0], kept[1] = w, tap_major(w)
            out = depthwise_conv(x, w, bias, residual, attrs, act, alpha, beta, res_first,
                                 cfg.get("layout") in CHANNELS_LAST, cfg, kept[1], pool, store_y, quant)
            return list(out) if isinstance(out, tuple) else [out]
        return run


@tactic("FusedConv", name="triton_depthwise", configs=CONFIGS, priority=-145)
class FusedConvDepthwise(_TritonDepthwise):
    """FusedConv(x, w[, bias[, residual]]) with group = C: below the library tactics, so untimed builds keep
    theirs; timed builds compare it with cuDNN + epilogue by measured time."""


@tactic("Conv", name="triton_depthwise", configs=CONFIGS, priority=-145)
class ConvDepthwise(_TritonDepthwise):
    """Conv(x, w[, b]) with group = C (a depthwise convolution with no activation, e.g. before a squeeze-excite
    block's pool or a projection)."""


@tactic("FusedConvPool", name="triton_depthwise", configs=CONFIGS, priority=-145)
class FusedConvPoolDepthwise(_TritonDepthwise):
    """FusedConvPool (Y, mean of Y) with group = C: squeeze-excite's depthwise convolution (every MBConv block of
    EfficientNet-B0, 9 of MobileNetV3-Large's). Against cuDNN + the fused epilogue-pool pass it saves a read and a
    write of y; the pool's partial sums are one float32 per position block and channel."""


@tactic("FusedConvQuantize", name="triton_depthwise", configs=CONFIGS, priority=-145)
class FusedConvQuantizeDepthwise(_TritonDepthwise):
    """FusedConvQuantize with group = C: under INT8/FP8 a depthwise convolution stays float (calibration keeps it:
    quantized it would run the exact float fallback) and writes the codes of the next quantized convolution's input
    from its epilogue (MobileNetV3-Large INT8: 7 of them); y itself only where another layer reads it."""


@tactic("FusedConvPoolQuantize", name="triton_depthwise", configs=CONFIGS, priority=-145)
class FusedConvPoolQuantizeDepthwise(_TritonDepthwise):
    """FusedConvPool with squeeze-excite's Q of the pooled vector (MobileNetV3-Large INT8: 8 of them): the partial
    sums' reduction also writes P's codes, and P itself only where another layer reads it."""
