"""onnxruntime's quantized contrib ops (com.microsoft) with onnxruntime's CPU rounding: QGemm, DynamicQuantizeLSTM.

    QGemm   acc[m, n] = C[m, n] + Σ_k (A[m, k] − a_zp)(B[k, n] − b_zp[n])       exact integers (int32 C broadcast)
            mult[n]   = float32(float32(alpha · a_scale) · b_scale[n])  ( / y_scale in float32 when y is quantized)
            Y = float32(acc) · mult[n]                     (float output, no y_scale)
            Y = sat(round_half_even(float32(acc) · mult[n]) + y_zp)   (quantized output, as MLAS requantizes)
    DynamicQuantizeLSTM  ONNX LSTM (gates i, o, f, c) whose two GEMMs are integer GEMMs on dynamically quantized
            inputs, as onnxruntime's kernel (uni_directional_lstm.cc) runs them, per direction:
              X (all S·B rows at once) and, every step, H_{t−1} (all B rows) → uint8 with
              scale = (max(v, 0) − min(v, 0)) / 255 (1 when that is 0),
              zp = round_half_even(−min/scale) in [0, 255],
              q = sat(round_half_even(v / scale) + zp)
              G_x = float32(Σ (xq − zx)(W − w_zp)) · float32(sx · w_scale[n]),  the same for H with R
              then the gates of ONNX LSTM on G_x + G_h + (Wb + Rb), peepholes, clip, input_forget, with Sigmoid
              and Tanh as MLAS computes them (Eigen's rational approximations with FMAs: `mlas_logistic`, `mlas_tanh`).
            W (D, I, 4H) and R (D, H, 4H) are int8 (zero point 0) or uint8, scales/zero points (D,) or (D, 4H).
            sequence_lens: X's scale covers its first max(lens) steps (the reverse direction reverses each entry's
            valid steps, the rest stays in place), a finished entry's H row enters the step's quantization as 0
            when Y is an output (y_output = 1) and as its last state otherwise; Y is 0 past each length.
            onnxruntime splits the batch across threads for B ≥ 2 and quantizes H per chunk; this op quantizes the
            whole batch at once (= onnxruntime with one intra-op thread, or B = 1).
Integer sums are exact in float64 (|Σ| < 2^53). Traffic: QGemm reads A, B once and writes Y; the LSTM reads X once,
W and R once per step (R) / once (W), and writes Y, Y_h, Y_c.
"""

import torch

from ..opspec import op
from .rnn import _activations


def _zp(z, like):
    if z is None:
        return torch.zeros((), dtype=torch.float64, device=like.device)
    return z.to(like.device).to(torch.float64).reshape(-1 if z.numel() > 1 else ())


def qgemm_multiplier(a_scale, b_scale, y_scale, alpha: float) -> torch.Tensor:
    """(N,) or () float32: alpha · a_scale · b_scale[n] (left to right in float32), divided by y_scale if given.
    alpha enters as a Python scalar (rounded to float32 by the multiply): no tensor made from host data, so no
    host→device copy in the QGemm kernel's per-call epilogue, which stays capturable in a CUDA graph."""
    dev = b_scale.device
    m = a_scale.float().reshape(()).to(dev) * alpha
    m = m * b_scale.float().reshape(-1 if b_scale.numel() > 1 else ())
    if y_scale is not None:
        m = m / y_scale.float().reshape(()).to(dev)
    return m


def qgemm_epilogue(acc: torch.Tensor, mult: torch.Tensor, y_zero_point) -> torch.Tensor:
    """acc (M, N) exact integers (any dtype) → float32 Y, or quantized Y in y_zero_point's dtype."""
    v = acc.float() * mult.to(acc.device)
    if y_zero_point is None:
        return v
    info = torch.iinfo(y_zero_point.dtype)
    q = torch.round(v) + y_zero_point.to(acc.device).to(torch.float32).reshape(())
    return q.clamp(info.min, info.max).to(y_zero_point.dtype)


def _qgemm_infer(a, a_scale, a_zp, b, b_scale, b_zp, c=None, y_scale=None, y_zp=None, *, alpha=1.0, transA=0,
                 transB=0):
    m = a.shape[1] if transA else a.shape[0]
    n = b.shape[0] if transB else b.shape[1]
    return torch.empty(m, n, dtype=torch.float32 if y_zp is None else y_zp.dtype, device="meta")


@op("QGemm", attrs={"alpha": 1.0, "transA": 0, "transB": 0}, infer=_qgemm_infer)
def qgemm(a, a_scale, a_zero_point, b, b_scale, b_zero_point, c=None, y_scale=None, y_zero_point=None, *,
          alpha=1.0, transA=0, transB=0):
    """com.microsoft QGemm (module doc): A (M, K) (or (K, M) with transA), B (K, N) (or (N, K) with transB)."""
    a2 = a.t() if transA else a
    b2 = b.t() if transB else b
    acc = (a2.to(torch.float64) - _zp(a_zero_point, a2)) @ (b2.to(torch.float64) - _zp(b_zero_point, b2))
    if c is not None:
        acc = acc + c.to(acc.device).to(torch.float64)
    if y_scale is not None and y_zero_point is None:
        raise ValueError("QGemm with y_scale needs y_zero_point (onnxruntime's kernel requires both)")
    return qgemm_epilogue(acc, qgemm_multiplier(a_scale, b_scale, y_scale, alpha), y_zero_point)


def dynamic_quantize_uint8(v: torch.Tensor):
    """onnxruntime's per-tensor uint8 quantization of float32 v (module doc) → (q as float64, scale, zero point)."""
    hi = torch.clamp(v.max(), min=0.0)
    lo = torch.clamp(v.min(), max=0.0)
    scale = torch.where(hi == lo, torch.ones_like(hi), (hi - lo) / 255.0)
    zp = torch.round(torch.clamp(0.0 - lo / scale, 0.0, 255.0))
    q = torch.clamp(torch.round(v / scale) + zp, 0.0, 255.0)
    return q.to(torch.float64), scale, zp.to(torch.float64)


def exact_int_matmul(aq: torch.Tensor, a_zp, w: torch.Tensor, w_zp) -> torch.Tensor:
    """Σ_k (aq − a_zp)(w[k, n] − w_zp[n]) exactly, in float64: aq (M, K) float64 integers, w (K, N) 8-bit."""
    return (aq - a_zp) @ (w.to(torch.float64) - w_zp)


def lstm_quantized_gemm(v, w, w_scale, w_zp, imatmul=exact_int_matmul) -> torch.Tensor:
    """float32 v (M, K) quantized dynamically, times the 8-bit weights (K, N): float32 (M, N) (module doc)."""
    q, s, z = dynamic_quantize_uint8(v)
    return imatmul(q, z, w, w_zp).float() * (s * w_scale)


def _direction(x, lens, w, r, bias, h, c, p, ws, wz, rs, rz, acts, clip, input_forget, zero_done, imatmul):
    """One direction (x in step order, (S, B, I)); batch entry b runs lens[b] steps. Returns Y (S, B, H), H_n, C_n.
    As onnxruntime: X is quantized over its first max(lens) steps; a finished entry's row of H_{t−1} is 0 in the
    per-step quantization when Y is an output (`zero_done`), else its last state."""
    steps, batch, _ = x.shape
    run = int(lens.max()) if lens is not None else steps
    hd = r.shape[0]
    if run == 0:                                 # every entry empty (or S = 0): zero outputs and states
        zeros = torch.zeros(batch, hd, device=x.device)
        return torch.zeros(steps, batch, hd, device=x.device), zeros, zeros.clone()
    f, g, hfn = acts
    gx = lstm_quantized_gemm(x[:run].reshape(run * batch, -1), w, ws, wz, imatmul).reshape(run, batch, -1)
    b = bias[:4 * hd] + bias[4 * hd:] if bias is not None else torch.zeros(4 * hd, device=x.device)
    bi, bo, bf, bc = b.split(hd)
    pi, po, pf = p.split(hd) if p is not None else (None, None, None)
    cl = (lambda t: t.clamp(-clip, clip)) if clip is not None else (lambda t: t)
    zero = torch.zeros((), device=x.device)
    together = p is None and not input_forget       # i, o, f (contiguous in ONNX's gate order) in one call of f
    ys = []
    for t in range(run):
        h_in = h
        if lens is not None and zero_done and t > 0:
            h_in = torch.where((t - 1 < lens).reshape(-1, 1), h, zero)
        pre = gx[t] + lstm_quantized_gemm(h_in, r, rs, rz, imatmul)
        if together:
            i, o, fg = f(cl(pre[:, :3 * hd] + b[:3 * hd])).split(hd, dim=1)
            c_new = fg * c + i * g(cl(pre[:, 3 * hd:] + bc))
        else:
            gi, go, gf, gc = pre.split(hd, dim=1)
            i = f(cl(gi + (pi * c if pi is not None else 0) + bi))
            fg = 1 - i if input_forget else f(cl(gf + (pf * c if pf is not None else 0) + bf))
            c_new = fg * c + i * g(cl(gc + bc))
            o = f(cl(go + (po * c_new if po is not None else 0) + bo))
        h_new = o * hfn(c_new)
        if lens is None:
            h, c = h_new, c_new
            ys.append(h)
        else:
            active = (t < lens).reshape(-1, 1)
            h, c = torch.where(active, h_new, h), torch.where(active, c_new, c)
            ys.append(torch.where(active, h_new, zero))
    y = torch.stack(ys)
    if run < steps:
        y = torch.cat([y, torch.zeros(steps - run, batch, hd, device=x.device)])
    if lens is not None:                         # an entry of length 0 ends with zero states
        h, c = (torch.where((lens > 0).reshape(-1, 1), v, zero) for v in (h, c))
    return y, h, c


def _reverse_within(x, lens):
    """x (S, B, …) with each entry's first lens[b] steps reversed, the rest in place (as onnxruntime's
    ReverseSequence)."""
    if lens is None:
        return x.flip(0)
    t = torch.arange(x.shape[0], device=x.device).reshape(-1, 1)
    src = torch.where(t < lens.reshape(1, -1), lens.reshape(1, -1) - 1 - t, t)                  # (S, B)
    return x.gather(0, src.reshape(*src.shape, *([1] * (x.dim() - 2))).expand(x.shape))


# onnxruntime's LSTM gates use MLAS's logistic and tanh: Eigen's rational approximations p(x)/q(x) on a clamped
# range, evaluated with fused multiply-adds (its FMA3/AVX-512/NEON kernels). Torch's sigmoid/tanh differ from them by
# about an ulp, enough to flip a later H quantization; these reproduce them (an FMA is exact in float64, then one
# rounding to float32).
_LOGISTIC = (-18.0, 18.0, (4.37031012579801e-11, 1.15627324459942e-07, 6.08574864600143e-05, 8.51377133304701e-03,
                           2.48287947061529e-01),
             (6.10247389755681e-13, 5.76102136993427e-09, 6.29106785017040e-06, 1.70198817374094e-03,
              1.16817656904453e-01, 9.93151921023180e-01))
_TANH = (-9.0, 9.0, (-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11, 5.12229709037114e-08,
                     1.48572235717979e-05, 6.37261928875436e-04, 4.89352455891786e-03),
         (1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03, 4.89352518554385e-03))


def _as_f32(values):
    return [float(torch.tensor(c, dtype=torch.float32)) for c in values]      # the constants as MLAS stores them


_LOGISTIC = (*_LOGISTIC[:2], _as_f32(_LOGISTIC[2]), _as_f32(_LOGISTIC[3]))
_TANH = (*_TANH[:2], _as_f32(_TANH[2]), _as_f32(_TANH[3]))


def _horner(v2d, coeffs):
    """Horner's rule with one float32 rounding per step, as a chain of FMAs (float32 operands multiply exactly in
    float64; the sum then rounds once): ((c0·v² + c1)·v² + c2)…"""
    acc = (v2d * coeffs[0] + coeffs[1]).float()
    for c in coeffs[2:]:
        acc = (acc * v2d + c).float()
    return acc


def _rational(x, table):
    lo, hi, alphas, betas = table
    v = x.float().clamp(lo, hi)
    v2d = (v * v).double()
    return (_horner(v2d, alphas) * v) / _horner(v2d, betas)


def mlas_logistic(x):
    return (_rational(x, _LOGISTIC) + 0.5).clamp(0.0, 1.0)


def mlas_tanh(x):
    return _rational(x, _TANH).clamp(-1.0, 1.0)


def _ort_activations(attrs: dict, dirs: int):
    """Per direction (f, g, h) as onnxruntime computes them: MLAS's logistic/tanh for Sigmoid/Tanh."""
    fns = _activations(attrs.get("activations"), attrs.get("activation_alpha"), attrs.get("activation_beta"), 3,
                       dirs, ["Sigmoid", "Tanh", "Tanh"])
    names = [n.lower() for n in (attrs.get("activations") or ["Sigmoid", "Tanh", "Tanh"] * dirs)]
    if len(names) == 3 and dirs == 2:
        names = names * 2
    exact = {"sigmoid": mlas_logistic, "tanh": mlas_tanh}
    return [[exact.get(names[3 * d + i], fn) for i, fn in enumerate(fns[d])] for d in range(dirs)]


def _per_dir(t, d, n):
    """Direction d's scale or zero point: () per tensor, (n,) per channel (from (D,) or (D, n))."""
    return t[d].reshape(-1) if t.dim() == 2 else t[d].reshape(())


_LSTM_ATTRS = {"activation_alpha": None, "activation_beta": None, "activations": None, "clip": None,
               "direction": "forward", "hidden_size": None, "input_forget": 0, "y_output": 1}


def run_dynamic_quantize_lstm(inputs: list, attrs: dict, imatmul=exact_int_matmul):
    """DynamicQuantizeLSTM with the integer GEMM `imatmul` (the reference's float64 one, or a tactic's)."""
    x, w, r, b, seq_lens, h0s, c0s, p, w_scale, w_zp, r_scale, r_zp = (list(inputs) + [None] * 12)[:12]
    direction = attrs.get("direction", "forward")
    dirs = 2 if direction == "bidirectional" else 1
    acts = _ort_activations(attrs, dirs)
    batch, hd = x.shape[1], r.shape[1]
    lens = seq_lens.to(x.device).to(torch.int64).reshape(-1) if seq_lens is not None else None
    xf = x.float()
    outs, hs, cs = [], [], []
    for d in range(dirs):
        reverse = direction == "reverse" or d == 1
        h0 = h0s[d].float() if h0s is not None else torch.zeros(batch, hd, device=x.device)
        c0 = c0s[d].float() if c0s is not None else torch.zeros(batch, hd, device=x.device)
        four = 4 * hd
        y, h, c = _direction(_reverse_within(xf, lens) if reverse else xf, lens, w[d], r[d],
                             b[d].float() if b is not None else None, h0, c0, p[d].float() if p is not None else None,
                             _per_dir(w_scale.float(), d, four), _per_dir(w_zp.to(torch.float64), d, four),
                             _per_dir(r_scale.float(), d, four), _per_dir(r_zp.to(torch.float64), d, four),
                             acts[d], attrs.get("clip"), attrs.get("input_forget", 0), attrs.get("y_output", 1),
                             imatmul)
        outs.append(_reverse_within(y, lens) if reverse else y)
        hs.append(h)
        cs.append(c)
    return torch.stack(outs, dim=1).to(x.dtype), torch.stack(hs).to(x.dtype), torch.stack(cs).to(x.dtype)


def _lstm_infer(x, w, r, *rest, direction="forward", **_):
    dirs, (steps, batch), hd = (2 if direction == "bidirectional" else 1), x.shape[:2], r.shape[1]
    return (torch.empty(steps, dirs, batch, hd, dtype=x.dtype, device="meta"),
            torch.empty(dirs, batch, hd, dtype=x.dtype, device="meta"),
            torch.empty(dirs, batch, hd, dtype=x.dtype, device="meta"))


@op("DynamicQuantizeLSTM", attrs=dict(_LSTM_ATTRS), infer=_lstm_infer)
def dynamic_quantize_lstm(x, w, r, b=None, sequence_lens=None, initial_h=None, initial_c=None, p=None,
                          w_scale=None, w_zero_point=None, r_scale=None, r_zero_point=None, **attrs):
    """com.microsoft DynamicQuantizeLSTM (module doc); X (S, B, I) → Y (S, D, B, H), Y_h, Y_c (D, B, H)."""
    return run_dynamic_quantize_lstm([x, w, r, b, sequence_lens, initial_h, initial_c, p, w_scale, w_zero_point,
                                      r_scale, r_zero_point], attrs)
