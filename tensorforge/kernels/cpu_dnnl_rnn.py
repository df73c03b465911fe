"""Tactics: ONNX GRU and LSTM on the CPU as one oneDNN RNN primitive call (C API, kernels/onednn_capi.py).

Per direction and step t (x_t: (B, I), h: (B, Hd); ONNX W (G·Hd, I), R (G·Hd, Hd), B = [Wb | Rb]):

    GRU, linear_before_reset = 1 (what torch exports) → oneDNN lbr_gru
        z = σ(x Wzᵀ + h Rzᵀ + Wbz + Rbz)           oneDNN u (gate 0)
        r = σ(x Wrᵀ + h Rrᵀ + Wbr + Rbr)           oneDNN r (gate 1)
        h̃ = tanh(x Whᵀ + Wbh + r ⊙ (h Rhᵀ + Rbh))  oneDNN o (gate 2): bias B_o = Wbh, B_u' = Rbh (bias gate 3)
        h ← z ⊙ h + (1 − z) ⊙ h̃
    GRU, linear_before_reset = 0 → oneDNN gru: h̃ = tanh(x Whᵀ + (r ⊙ h) Rhᵀ + Wbh + Rbh), bias 3 gates of Wb + Rb
    LSTM → oneDNN lstm: ONNX gates [i, o, f, c] → oneDNN [i, f, c̃, o]; bias Wb + Rb in that order; peepholes
        P = [Pi, Po, Pf] → oneDNN [i, f, o] (i, f see c_{t−1}, o sees c_t, as in ONNX)
ONNX's z, r, h order is oneDNN's u, r, o, so GRU weights keep their gate order; both want each direction's W as
(I, G, Hd) and R as (Hd, G, Hd) ("ldigo"): the reorder reads ONNX's (D, G·Hd, I) through strides and writes the
layout the primitive asks for (format `any`), once per weight tensor and layout (onednn_capi.packed_weight: the
contexts of one engine share their CPU weight tensors, so once per engine). Directions: forward = left2right,
reverse = right2left, bidirectional = bidirectional_concat (Y's channels [forward | backward]).

Per call: one primitive execute that runs all steps (x·Wᵀ for all steps as one GEMM, then per step the hidden GEMM
and the fused gate pointwise work, in oneDNN's JIT code), where torch's `_VF.gru` runs ≈ 10 ATen ops a step.
Traffic: X read once, the packed W once, the packed R (G·Hd·Hd floats: 768 KiB at Hd = 256) once per step from
cache, Y written once; Y_h (Y_c) are the primitive's dst_iter. The primitive is created once per (input shape,
initial states given); X (S, B, I) is oneDNN's "tnc" (layout = 0) or "ntc" (layout = 1, described by strides), so
Y is written in place: (S, B, D·Hd) viewed as ONNX's (S, D, B, Hd), or (B, S, D·Hd) as (B, S, D, Hd).

Applies to: float32, default activations, no clip, no sequence_lens, no LSTM input_forget; anything else is refused
with the reason (torch_rnn or the reference runs it).

Threads: torch_rnn's rule (`step_threads`): a layer whose per-step hidden GEMM is small (batch·G·Hd² ≤ 2²⁰) runs
on one intra-op thread, and its primitive is made under that count (oneDNN's RNN fixes its thread team when the
primitive is created; see RnnRunner). A second thread buys little at these sizes and must meet the first every
step (≈ 10 µs): 200 steps at batch 1, 2 cores, medians of 20, ms at 1 / 2 threads, first with the machine's load
average ≈ 2 from other work, then with one core also running a spin loop: GRU 128 0.75 / 0.85, 0.70 / 0.85;
GRU 256 2.25 / 2.0–2.3, 2.2–2.8 / 9–11; LSTM 128 0.96 / 1.0, 1.05 / 1.1; GRU 320 3.1 / 2.9, 3.6 / 13;
GRU 512 21 / 30, 22 / 100–180.
"""

import ctypes

import torch

from . import onednn_capi as dn
from .registry import tactic
from .torch_rnn import _DEFAULTS, _present, step_threads

GATES = {"GRU": 3, "LSTM": 4}
LSTM_GATES = (0, 2, 3, 1)          # oneDNN gate k is ONNX gate LSTM_GATES[k]: [i, f, c, o] from [i, o, f, c]
PEEPHOLES = (0, 2, 1)              # oneDNN [i, f, o] from ONNX P = [i, o, f]


def _reason(layer, device) -> str | None:
    why = dn.tactic_reason(layer, device)
    if why is not None:
        return why
    a = layer.attrs
    if a.get("clip") is not None:
        return "clip bounds the gate pre-activations; oneDNN's RNN cells have no clip"
    if a.get("activation_alpha") or a.get("activation_beta"):
        return "activation alpha/beta given; oneDNN's RNN cells use the default activations"
    direction = a.get("direction", "forward")
    if direction not in dn.RNN_DIRECTION:
        return f"direction {direction!r}"
    dirs = 2 if direction == "bidirectional" else 1
    acts = [s.lower() for s in (a.get("activations") or [])]
    default = _DEFAULTS[layer.op]
    if acts and acts != default * (dirs if len(acts) > len(default) else 1):
        return f"activations {a.get('activations')} differ from the defaults oneDNN's cells implement"
    if _present(layer, 4):
        return "sequence_lens given: oneDNN's RNN primitive runs every batch entry for all steps"
    if layer.op == "LSTM" and a.get("input_forget", 0):
        return "input_forget couples the gates; oneDNN's LSTM does not"
    return None


def _fits(layer, cfg, inputs) -> str | None:
    x, w, r = inputs[0], inputs[1], inputs[2]
    given = [t for t in inputs if isinstance(t, torch.Tensor)]
    if any(t.dtype != torch.float32 for t in given):
        return f"dtypes {sorted({str(t.dtype) for t in given})} (this tactic runs float32)"
    if x.dim() != 3 or w.dim() != 3 or r.dim() != 3:
        return f"X, W, R of ranks {x.dim()}, {w.dim()}, {r.dim()} (want 3)"
    dirs = 2 if layer.attrs.get("direction", "forward") == "bidirectional" else 1
    g, hd = GATES[layer.op], layer.attrs.get("hidden_size") or r.shape[-1]
    batch = x.shape[0] if layer.attrs.get("layout", 0) else x.shape[1]
    want = {1: (dirs, g * hd, x.shape[2]), 2: (dirs, g * hd, hd), 3: (dirs, 2 * g * hd), 7: (dirs, 3 * hd)}
    state = (batch, dirs, hd) if layer.attrs.get("layout", 0) else (dirs, batch, hd)
    want.update({5: state, 6: state})
    for k, shape in want.items():
        t = inputs[k] if len(inputs) > k else None
        if t is not None and tuple(t.shape) != shape:
            return f"input {k} of shape {list(t.shape)} (want {list(shape)})"
    if 0 in x.shape:
        return f"an empty X {list(x.shape)}"
    return None


class RnnPrimitive:
    """One RNN primitive for one X shape and one set of given initial states. Execute operands in order:
    X, [h0], [c0], packed W, packed R, [P], bias, Y, Y_h, [Y_c]."""

    def __init__(self, lib, op: str, lbr: bool, direction: str, batch_first: bool, x_shape, hd: int,
                 has_h0: bool, has_c0: bool, has_p: bool):
        lstm = op == "LSTM"
        t, n = (x_shape[1], x_shape[0]) if batch_first else (x_shape[0], x_shape[1])
        i, dirs, g = x_shape[2], 2 if direction == "bidirectional" else 1, GATES[op]
        self.t, self.n, self.dirs = t, n, dirs

        def seq(c):       # (T, N, C) as tnc (X's own layout) or ntc (batch-major) through strides
            return lib.md([t, n, c], [c, t * c, 1] if batch_first else [n * c, c, 1])

        def plain(dims):
            return lib.md(dims, dn.contiguous_strides(dims))
        state = [1, dirs, n, hd]
        src, dst = seq(i), seq(dirs * hd)
        h0 = plain(state) if has_h0 else None
        c0 = plain(state) if has_c0 else None
        self.w_dims, self.r_dims = [1, dirs, i, g, hd], [1, dirs, hd, g, hd]
        wany, rany = lib.md_any(self.w_dims), lib.md_any(self.r_dims)
        peep = plain([1, dirs, 3, hd]) if has_p else None
        bias = plain([1, dirs, g + int(lbr), hd])
        hn, cn = plain(state), plain(state) if lstm else None
        h = lambda d: d.handle if d is not None else None           # noqa: E731
        pd = ctypes.c_void_p()
        common = (ctypes.byref(pd), lib.engine, dn.FORWARD_INFERENCE, dn.RNN_DIRECTION[direction])
        if lstm:
            status = lib.c.dnnl_lstm_forward_primitive_desc_create(
                *common, src.handle, h(h0), h(c0), wany.handle, rany.handle, h(peep), None, bias.handle,
                dst.handle, hn.handle, cn.handle, 0, None)
        else:
            create = (lib.c.dnnl_lbr_gru_forward_primitive_desc_create if lbr else
                      lib.c.dnnl_gru_forward_primitive_desc_create)
            status = create(*common, src.handle, h(h0), wany.handle, rany.handle, bias.handle, dst.handle,
                            hn.handle, 0, None)
        lib.check(status, f"{'lbr_gru' if lbr else op.lower()} {direction} X {list(x_shape)} hidden {hd}")
        query = lambda arg: lib.c.dnnl_primitive_desc_query_md(pd.value, dn.QUERY_EXEC_ARG_MD, arg)  # noqa: E731
        self.w_md, self.r_md = query(dn.ARG_WEIGHTS), query(dn.ARG_WEIGHTS_ITER)
        args = [(dn.ARG_SRC, src.handle)] + ([(dn.ARG_SRC_ITER, h0.handle)] if h0 else []) \
            + ([(dn.ARG_SRC_ITER_C, c0.handle)] if c0 else []) \
            + [(dn.ARG_WEIGHTS, self.w_md), (dn.ARG_WEIGHTS_ITER, self.r_md)] \
            + ([(dn.ARG_WEIGHTS_PEEPHOLE, peep.handle)] if peep else []) \
            + [(dn.ARG_BIAS, bias.handle), (dn.ARG_DST, dst.handle), (dn.ARG_DST_ITER, hn.handle)] \
            + ([(dn.ARG_DST_ITER_C, cn.handle)] if cn else [])
        self.prim = dn.Primitive(lib, pd, args, [src, dst, h0, c0, wany, rany, peep, bias, hn, cn])
        self.y_shape = (n, t, dirs * hd) if batch_first else (t, n, dirs * hd)


def _gate_major(t: torch.Tensor, dirs: int, g: int, hd: int, order) -> torch.Tensor:
    """(D, G·Hd, C) → (D, G, Hd, C) float32 with oneDNN's gate order, contiguous."""
    t = t.detach().to(torch.float32).reshape(dirs, g, hd, -1)
    return (t[:, list(order)] if order else t).contiguous()


class RnnRunner:
    """run(x, w, r, b, h0, c0, p) -> [Y, Y_h, Y_c] for one layer: a primitive per (X shape, states given, intra-op
    thread count), made on first use under the thread count it runs at and kept (oneDNN's RNN sizes its thread team
    when the primitive is created: a 1 ms LSTM made at 2 threads and run at 1 spent 100–1400 ms of CPU inside the
    primitive's execute on some calls, ONEDNN_VERBOSE); the packed W, R and the combined bias / reordered peepholes
    of the last weights seen."""

    def __init__(self, layer):
        a = layer.attrs
        self.op, self.lbr = layer.op, layer.op == "GRU" and bool(a.get("linear_before_reset", 0))
        self.direction, self.batch_first = a.get("direction", "forward"), bool(a.get("layout", 0))
        self.dirs, self.g = 2 if self.direction == "bidirectional" else 1, GATES[layer.op]
        self.hidden = a.get("hidden_size")
        self.order = LSTM_GATES if layer.op == "LSTM" else None
        self.layer, self.lib = layer, dn.library()
        self.prims = dn.PrimitiveTable()
        self.last: dict = {}                      # "W", "R": (tensor, layout, packed)
        self.bias, self.peepholes = dn.LastDerived(), dn.LastDerived()

    def _primitive(self, x, hd, h0, c0, p) -> RnnPrimitive:
        key = (tuple(x.shape), h0 is not None, c0 is not None, p is not None, torch.get_num_threads())
        return self.prims.get(key, lambda: RnnPrimitive(self.lib, self.op, self.lbr, self.direction,
                                                        self.batch_first, tuple(x.shape), hd, *key[1:4]))

    def _packed(self, kind: str, t: torch.Tensor, prim: RnnPrimitive, hd: int) -> torch.Tensor:
        """W or R in the primitive's layout; the reorder reads (D, G, Hd, C) as (1, D, C, G, Hd) via strides."""
        md, dims = (prim.w_md, prim.w_dims) if kind == "W" else (prim.r_md, prim.r_dims)
        last = self.last.get(kind)
        if last is not None and last[0] is t and last[1] == md:
            return last[2]

        def source():
            src = _gate_major(t, self.dirs, self.g, hd, self.order)
            c = src.shape[-1]
            return src, dims, [src.numel(), self.g * hd * c, 1, hd * c, c]
        packed = dn.packed_weight(self.lib, t, source, prim.prim, md)
        self.last[kind] = (t, md, packed)
        return packed

    def _bias(self, b, hd) -> torch.Tensor:
        """(1, D, G [+1], Hd): Wb + Rb per gate in oneDNN's order; lbr_gru: [z, r, Wbh, Rbh]."""
        def make():
            if b is None:
                return torch.zeros(1, self.dirs, self.g + int(self.lbr), hd)
            wb, rb = b.detach().to(torch.float32).reshape(self.dirs, 2, self.g, hd).unbind(1)
            s = wb + rb
            if self.lbr:
                s = torch.stack([s[:, 0], s[:, 1], wb[:, 2], rb[:, 2]], 1)
            elif self.order:
                s = s[:, list(self.order)]
            return s.unsqueeze(0).contiguous()
        return self.bias.get(b, make)

    def __call__(self, x, w, r, b=None, h0=None, c0=None, p=None):
        why = _fits(self.layer, {}, [x, w, r, b, None, h0, c0, p])
        if why is not None:
            raise ValueError(f"tactic cpu_dnnl got inputs it does not take for layer {self.layer.name!r}: {why} "
                             "(fits() rejects such layers at build; rebuild the engine)")
        hd = self.hidden or r.shape[-1]
        n, dirs = x.shape[0] if self.batch_first else x.shape[1], self.dirs
        with step_threads(x, n, self.g, hd):  # made and run under one thread count: oneDNN sizes its team then
            prim = self._primitive(x, hd, h0, c0, p)
            state = lambda s: (s.transpose(0, 1) if self.batch_first else s).contiguous()    # noqa: E731
            y, hn = torch.empty(prim.y_shape), torch.empty(dirs, n, hd)
            cn = torch.empty(dirs, n, hd) if self.op == "LSTM" else None
            ops = [x.contiguous()] + [state(s) for s in (h0, c0) if s is not None]
            ops += [self._packed("W", w, prim, hd), self._packed("R", r, prim, hd)]
            if p is not None:
                ops.append(self.peepholes.get(p, lambda: p.detach().reshape(dirs, 3, hd)[:, list(PEEPHOLES)]
                                              .unsqueeze(0).contiguous()))
            ops += [self._bias(b, hd), y, hn] + ([cn] if cn is not None else [])
            prim.prim.execute([t.data_ptr() for t in ops])
        if self.batch_first:      # (B, S, D·Hd) → (B, S, D, Hd); states (D, B, Hd) → (B, D, Hd)
            return [y.view(n, prim.t, dirs, hd), hn.transpose(0, 1), None if cn is None else cn.transpose(0, 1)]
        return [y.view(prim.t, n, dirs, hd).permute(0, 2, 1, 3), hn, cn]


def _build(layer, cfg, device):
    run = RnnRunner(layer)
    n_out = len(layer.outputs)

    def kernel(inputs):
        get = lambda k: inputs[k] if len(inputs) > k else None        # noqa: E731
        return run(get(0), get(1), get(2), get(3), get(5), get(6), get(7))[:n_out]
    return kernel


for _op in ("GRU", "LSTM"):
    tactic(_op, name="cpu_dnnl", priority=11)(
        type(f"{_op}Dnnl", (), {"supports": staticmethod(_reason), "fits": staticmethod(_fits),
                                "build": staticmethod(_build)}))
