"""RNN, GRU and LSTM through torch's fused recurrent kernels (oneDNN/ATen on CPU, cuDNN on CUDA).

The reference (`ir/ops/rnn.py`) steps in Python and rewrites the whole output every step; torch's
`_VF.lstm/gru/rnn_tanh/rnn_relu` run the same recurrence in one call: per step one (B, Hd)×(Hd, G·Hd) GEMM
plus the gate pointwise work, with x·Wᵀ for all steps done up front. Traffic: X, W, R read once, Y written once.

ONNX and torch order the gates differently, so weights are reordered once per weight tensor (cached by the
tensors' identity and version):
    LSTM  ONNX [i, o, f, c]  → torch [i, f, c(g), o]
    GRU   ONNX [z, r, h]     → torch [r, z, n]       (torch's GRU is ONNX's linear_before_reset = 1)
ONNX B = [Wb | Rb] per direction → torch (b_ih, b_hh).
Applies to the semantics torch implements: default activations, no clip, no peepholes, no input_forget,
GRU with linear_before_reset = 1, and no sequence_lens; anything else keeps the reference, with the reason.
Threads: on the CPU a layer whose per-step GEMM is small (batch·G·Hd·Hd ≤ SMALL_STEP) runs on one intra-op thread:
each step is a few µs-sized ops (torch's CPU GRU is an ATen loop of unfused ops per step, its LSTM oneDNN's), and
waking the other thread for every one costs more than it saves (2 cores, OMP_WAIT_POLICY=PASSIVE, 200 steps at
batch 1: GRU 256→256 12.6 ms at 1 thread against 19.6 ms at 2, LSTM 256→128 2.1 against 4.1 ms, medians of 12).
"""

import threading
from contextlib import nullcontext

import torch

from ..util.cpu_threads import cpu_threads
from .registry import tactic

SMALL_STEP = 1 << 20      # multiply-adds of one step's hidden GEMM up to which a CPU layer runs on one thread


def step_threads(x, batch: int, gates: int, hd: int):
    """The thread scope of one call: 1 intra-op thread on the CPU when a step's hidden GEMM is small."""
    if x.device.type != "cpu" or batch * gates * hd * hd > SMALL_STEP:
        return nullcontext()
    return cpu_threads(1)

_DEFAULTS = {"LSTM": ["sigmoid", "tanh", "tanh"], "GRU": ["sigmoid", "tanh"]}
_GATE_ORDER = {"LSTM": (0, 2, 3, 1), "GRU": (1, 0, 2)}


def _present(layer, i: int) -> bool:
    return len(layer.inputs) > i and bool(layer.inputs[i])


def _unsupported(layer, device) -> str | None:
    a = layer.attrs
    if a.get("clip") is not None:
        return "clip bounds the gate pre-activations; torch's fused cells have no clip"
    if a.get("activation_alpha") or a.get("activation_beta"):
        return "activation alpha/beta given; torch's fused cells use the default activations"
    dirs = 2 if a.get("direction", "forward") == "bidirectional" else 1
    acts = [s.lower() for s in (a.get("activations") or [])]
    if layer.op == "RNN":
        if acts and set(acts) - {"tanh", "relu"} or len(set(acts)) > 1:
            return f"RNN activations {a.get('activations')} are not one of tanh/relu for every direction"
    elif acts and acts != _DEFAULTS[layer.op] * (dirs if len(acts) > len(_DEFAULTS[layer.op]) else 1):
        return f"activations {a.get('activations')} differ from the defaults torch implements"
    if a.get("direction", "forward") == "reverse":
        return "direction=reverse (torch runs forward or bidirectional)"
    if _present(layer, 4):
        return "sequence_lens given: torch's fused cells run every batch entry for all steps"
    if layer.op == "LSTM":
        if a.get("input_forget", 0):
            return "input_forget couples the gates; torch's LSTM does not"
        if _present(layer, 7):
            return "peephole weights P given; torch's LSTM has no peepholes"
    if layer.op == "GRU" and not a.get("linear_before_reset", 0):
        return "linear_before_reset = 0; torch's GRU applies the reset gate after the hidden GEMM (= 1)"
    return None


class _Weights:
    """Reordered flat weights per direction, rebuilt only when the ONNX weight tensors change."""

    def __init__(self, op: str, gates: int):
        self.op, self.gates = op, gates
        self._cached = None                   # (key, weights): one tuple, assigned at once (thread-safe reads)
        self._lock = threading.Lock()

    def get(self, w, r, b, dirs: int, hd: int):
        key = tuple((t.data_ptr(), t._version, t.dtype, t.device) if t is not None else None for t in (w, r, b))
        cached = self._cached
        if cached is not None and cached[0] == key:
            return cached[1]
        with self._lock:
            flat = []
            for d in range(dirs):
                flat += [self._reorder(w[d], hd), self._reorder(r[d], hd)]
                if b is not None:
                    g = self.gates * hd
                    flat += [self._reorder(b[d, :g], hd), self._reorder(b[d, g:], hd)]
            self._cached = (key, flat)
        return flat

    def _reorder(self, t, hd):
        if self.op == "RNN":
            return t.contiguous()
        parts = t.split(hd, dim=0)
        return torch.cat([parts[i] for i in _GATE_ORDER[self.op]], dim=0).contiguous()


def _build(layer, cfg, device):
    a, op = layer.attrs, layer.op
    dirs = 2 if a.get("direction", "forward") == "bidirectional" else 1
    batch_first = bool(a.get("layout", 0))
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[op]
    weights = _Weights(op, gates)
    n_out = len(layer.outputs)
    relu = op == "RNN" and [s.lower() for s in (a.get("activations") or ["tanh"])][0] == "relu"

    def run(inputs):
        x, w, r = inputs[0], inputs[1], inputs[2]
        b = inputs[3] if len(inputs) > 3 else None
        h0 = inputs[5] if len(inputs) > 5 else None
        c0 = inputs[6] if len(inputs) > 6 else None
        hd = a.get("hidden_size") or r.shape[-1]
        batch = x.shape[0] if batch_first else x.shape[1]
        zeros = lambda: torch.zeros(dirs, batch, hd, dtype=x.dtype, device=x.device)     # noqa: E731
        h0 = zeros() if h0 is None else (h0.transpose(0, 1).contiguous() if batch_first else h0)
        flat = weights.get(w, r, b, dirs, hd)
        args = (flat, b is not None, 1, 0.0, False, dirs == 2, batch_first)
        with step_threads(x, batch, gates, hd):
            if op == "LSTM":
                c0 = zeros() if c0 is None else (c0.transpose(0, 1).contiguous() if batch_first else c0)
                y, h_n, c_n = torch._VF.lstm(x, (h0, c0), *args)
            else:
                fn = torch._VF.gru if op == "GRU" else (torch._VF.rnn_relu if relu else torch._VF.rnn_tanh)
                y, h_n = fn(x, h0, *args)
                c_n = None
        if batch_first:           # (B, S, D·Hd) → (B, S, D, Hd); states (D, B, Hd) → (B, D, Hd)
            y = y.view(y.shape[0], y.shape[1], dirs, hd)
            states = [h_n.transpose(0, 1), None if c_n is None else c_n.transpose(0, 1)]
        else:                     # (S, B, D·Hd) → (S, D, B, Hd)
            y = y.view(y.shape[0], y.shape[1], dirs, hd).permute(0, 2, 1, 3)
            states = [h_n, c_n]
        return [y, *states][:n_out]
    return run


for _op in ("RNN", "GRU", "LSTM"):
    tactic(_op, name="torch_fused", priority=10)(
        type(f"Torch{_op}", (), {"supports": staticmethod(_unsupported), "build": staticmethod(_build)}))
