"""Recurrent layers: RNN, GRU, LSTM (ONNX semantics: gate order, activations, clip, directions, layouts).

Per direction and time step t (x_t: (B, I), H: (B, Hd), weights W (G·Hd, I), R (G·Hd, Hd), bias Wb + Rb):

    RNN:  H = f(x_t Wᵀ + H Rᵀ + Wb + Rb)
    GRU:  z = f(x Wzᵀ + H Rzᵀ + b_z),  r = f(x Wrᵀ + H Rrᵀ + b_r)       (gates in order z, r, h)
          h̃ = g(x Whᵀ + (r ⊙ H) Rhᵀ + Rbh + Wbh)     or, linear_before_reset: g(x Whᵀ + r ⊙ (H Rhᵀ + Rbh) + Wbh)
          H = (1 − z) ⊙ h̃ + z ⊙ H
    LSTM: i = f(· + Pi ⊙ C),  o = f(· + Po ⊙ C'),  f_ = f(· + Pf ⊙ C),  c̃ = g(·)     (gates in order i, o, f, c)
          C' = f_ ⊙ C + i ⊙ c̃ (f_ = 1 − i with input_forget),  H = o ⊙ h(C')

`clip` bounds every gate pre-activation. With sequence_lens, batch entry b stops after its length
(outputs beyond are 0; the final state is the last valid one; reverse starts at its own last step).
Layout 0: X (S, B, I), Y (S, D, B, Hd), Y_h (D, B, Hd); layout 1: X (B, S, I), Y (B, S, D, Hd), Y_h (B, D, Hd).
Traffic: reads X, W, R once; the recurrence is S sequential small GEMMs per direction.
"""

import torch
import torch.nn.functional as F

from ..opspec import op


def _activation(name: str, alpha, beta):
    n = name.lower()
    table = {
        "relu": torch.relu, "tanh": torch.tanh, "sigmoid": torch.sigmoid, "softsign": F.softsign,
        "softplus": F.softplus,
        "affine": lambda x: alpha * x + beta,
        "leakyrelu": lambda x: F.leaky_relu(x, alpha),
        "thresholdedrelu": lambda x: torch.where(x > alpha, x, torch.zeros_like(x)),
        "scaledtanh": lambda x: alpha * torch.tanh(beta * x),
        "hardsigmoid": lambda x: torch.clamp(alpha * x + beta, 0, 1),
        "elu": lambda x: F.elu(x, alpha),
    }
    if n not in table:
        raise ValueError(f"unknown RNN activation {name!r}")
    return table[n]


_TAKES = {"affine": 2, "leakyrelu": 1, "thresholdedrelu": 1, "scaledtanh": 2, "hardsigmoid": 2, "elu": 1}
_DEFAULT_AB = {"leakyrelu": (0.01, None), "thresholdedrelu": (1.0, None), "scaledtanh": (1.0, 1.0),
               "hardsigmoid": (0.2, 0.5), "elu": (1.0, None), "affine": (1.0, 0.0)}


def _activations(names, alphas, betas, per_dir: int, dirs: int, defaults):
    """Per direction, the list of `per_dir` activation functions (alpha/beta consumed in order)."""
    names = list(names) if names else list(defaults) * dirs
    if len(names) == per_dir and dirs == 2:
        names = names * 2
    alphas, betas = list(alphas or []), list(betas or [])
    fns = []
    for n in names:
        a, b = _DEFAULT_AB.get(n.lower(), (None, None))
        takes = _TAKES.get(n.lower(), 0)
        if takes >= 1 and alphas:
            a = alphas.pop(0)
        if takes >= 2 and betas:
            b = betas.pop(0)
        fns.append(_activation(n, a, b))
    return [fns[d * per_dir:(d + 1) * per_dir] for d in range(dirs)]


def _run(kind, x, w, r, b, seq_lens, h0, c0, p, hidden_size, direction, layout, clip, acts, linear_before_reset,
         input_forget):
    if layout:
        x = x.transpose(0, 1)
    steps, batch, _ = x.shape
    dirs = 2 if direction == "bidirectional" else 1
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[kind]
    hd = hidden_size or r.shape[-1]
    if h0 is not None and layout:
        h0 = h0.transpose(0, 1)
    if c0 is not None and layout:
        c0 = c0.transpose(0, 1)
    lens = (seq_lens.to(x.device).long() if seq_lens is not None
            else torch.full((batch,), steps, dtype=torch.long, device=x.device))
    y = torch.zeros(steps, dirs, batch, hd, dtype=x.dtype, device=x.device)
    hs, cs = [], []
    cl = (lambda v: v.clamp(-clip, clip)) if clip is not None else (lambda v: v)
    for d in range(dirs):
        reverse = direction == "reverse" or d == 1
        wd, rd = w[d], r[d]
        bd = b[d] if b is not None else torch.zeros(2 * gates * hd, dtype=x.dtype, device=x.device)
        wb, rb = bd[:gates * hd], bd[gates * hd:]
        h = h0[d] if h0 is not None else torch.zeros(batch, hd, dtype=x.dtype, device=x.device)
        c = c0[d] if c0 is not None else torch.zeros(batch, hd, dtype=x.dtype, device=x.device)
        pd = p[d] if p is not None else torch.zeros(3 * hd, dtype=x.dtype, device=x.device)
        f, g, hfn = (acts[d] + [None, None])[:3]
        xw = torch.matmul(x, wd.t()) + wb                      # (S, B, G·Hd) for all steps at once
        for step in range(steps):
            t_idx = (lens - 1 - step) if reverse else torch.full_like(lens, step)
            active = (step < lens).unsqueeze(1)
            t_safe = t_idx.clamp(min=0)
            xt = xw[t_safe, torch.arange(batch, device=x.device)]   # (B, G·Hd), each row at its own time
            if kind == "RNN":
                h_new = f(cl(xt + torch.matmul(h, rd.t()) + rb))
            elif kind == "GRU":
                xz, xr, xh = xt.split(hd, dim=1)
                rz, rr, rh = rd.split(hd, dim=0)
                bz, br, bh = rb.split(hd)
                z = f(cl(xz + torch.matmul(h, rz.t()) + bz))
                rg = f(cl(xr + torch.matmul(h, rr.t()) + br))
                if linear_before_reset:
                    ht = g(cl(xh + rg * (torch.matmul(h, rh.t()) + bh)))
                else:
                    ht = g(cl(xh + torch.matmul(rg * h, rh.t()) + bh))
                h_new = (1 - z) * ht + z * h
            else:
                pre = xt + torch.matmul(h, rd.t()) + rb
                pi_, po_, pf_, pc_ = pre.split(hd, dim=1)
                peep_i, peep_o, peep_f = pd.split(hd)
                i = f(cl(pi_ + peep_i * c))
                fg = 1 - i if input_forget else f(cl(pf_ + peep_f * c))
                c_new = fg * c + i * g(cl(pc_))
                o = f(cl(po_ + peep_o * c_new))
                h_new = o * hfn(c_new)
                c = torch.where(active, c_new, c)
            h = torch.where(active, h_new, h)
            at = (torch.arange(steps, device=x.device).unsqueeze(1) == t_safe.unsqueeze(0)) & active.t()  # (S, B)
            y[:, d] = torch.where(at.unsqueeze(-1), h_new.unsqueeze(0), y[:, d])
        hs.append(h)
        cs.append(c)
    y_h, y_c = torch.stack(hs), torch.stack(cs)
    if layout:
        return y.permute(2, 0, 1, 3), y_h.transpose(0, 1), y_c.transpose(0, 1)
    return y, y_h, y_c


_COMMON = {"activation_alpha": None, "activation_beta": None, "activations": None, "clip": None,
           "direction": "forward", "hidden_size": None, "layout": 0}


@op("RNN", attrs=dict(_COMMON))
def rnn(x, w, r, b=None, sequence_lens=None, initial_h=None, *, activation_alpha=None, activation_beta=None,
        activations=None, clip=None, direction="forward", hidden_size=None, layout=0):
    dirs = 2 if direction == "bidirectional" else 1
    acts = _activations(activations, activation_alpha, activation_beta, 1, dirs, ["Tanh"])
    y, y_h, _ = _run("RNN", x, w, r, b, sequence_lens, initial_h, None, None, hidden_size, direction, layout, clip,
                     acts, 0, 0)
    return y, y_h


@op("GRU", attrs={**_COMMON, "linear_before_reset": 0})
def gru(x, w, r, b=None, sequence_lens=None, initial_h=None, *, activation_alpha=None, activation_beta=None,
        activations=None, clip=None, direction="forward", hidden_size=None, layout=0, linear_before_reset=0):
    dirs = 2 if direction == "bidirectional" else 1
    acts = _activations(activations, activation_alpha, activation_beta, 2, dirs, ["Sigmoid", "Tanh"])
    y, y_h, _ = _run("GRU", x, w, r, b, sequence_lens, initial_h, None, None, hidden_size, direction, layout, clip,
                     acts, linear_before_reset, 0)
    return y, y_h


@op("LSTM", attrs={**_COMMON, "input_forget": 0})
def lstm(x, w, r, b=None, sequence_lens=None, initial_h=None, initial_c=None, p=None, *, activation_alpha=None,
         activation_beta=None, activations=None, clip=None, direction="forward", hidden_size=None, layout=0,
         input_forget=0):
    dirs = 2 if direction == "bidirectional" else 1
    acts = _activations(activations, activation_alpha, activation_beta, 3, dirs, ["Sigmoid", "Tanh", "Tanh"])
    return _run("LSTM", x, w, r, b, sequence_lens, initial_h, initial_c, p, hidden_size, direction, layout, clip,
                acts, 0, input_forget)
