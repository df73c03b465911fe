"""Tactic: TwoLayerMLP in ONE Triton launch — a squeeze-excite block's two fully connected layers.

    h = act1(scale1·a·W1ᵀ + b1)  (rows × H, rounded to a's dtype as the unfused layer stores it)
    y = act2(scale2·h·W2ᵀ + b2)  (rows × O)

A squeeze-excite MLP is two GEMVs per sample (C → H → C, H = C/4 or less): at batch 1 each is a launch of a few
microseconds that moves ~C·H weights, so the two launches and the gap between them are most of its cost
(EfficientNet-B0 at batch 1 ran 32 such GEMM launches, 82.3 µs of its 388.5 µs of kernels on the H200). Here
program (row, j) computes the whole hidden vector h of its row (C·H multiply-adds over chunks of BC channels:
the W1 tile is BH × BC, H ≤ 256 so BH ≤ 256) and then outputs j·BO … j·BO + BO − 1 of the second layer: W1 is read
by every program of a row (from L2 after the first: ⌈O/BO⌉·C·H elements per row), W2 once, h never leaves
the registers. Products by elementwise multiply and row sums in float32 (one row per program: no tensor-core tile
to fill). Traffic: a, W1 (from L2 per program), W2, b, y — the unfused pair also writes and re-reads h.
Entry points: the tactic `twolayermlp.triton_mlp2`; the launcher `mlp2`.
"""

import torch
import triton
import triton.language as tl

from ..ir.ops.fused import MLP_MAX_HIDDEN as MAX_HIDDEN, MLP_MAX_ROWS as MAX_ROWS, mlp_layer_attrs
from .mlp_pair import hidden_width, mlp_operands
from .registry import tactic, triton_device_reason
from .triton_gemm import ACTIVATIONS, apply_activation, kernel_activation

# 32-output slices were the slowest at both batch-32 squeeze-excite shapes of the H100 conv smoke (26.8 and 34.2 µs
# against 17.6 and 31.2 for 128 with 8 warps; bench/results/conv-smoke-nvidia-h100-80gb-hbm3.txt, whose batch-1
# cases sit at its ~20 µs floor): two configs, one compile fewer per hidden width
CONFIGS = [{"BO": 64, "warps": 4}, {"BO": 128, "warps": 8}]


@triton.jit
def _mlp2_kernel(A, W1, B1, W2, B2, Y, C, H, O, s_am, s_ak, s_w1h, s_w1c, s_w2o, s_w2h, s_ym, s_yo,
                 scale1, alpha1, beta1, scale2, alpha2, beta2, HAS_B1: tl.constexpr, HAS_B2: tl.constexpr,
                 ACT1: tl.constexpr, ACT2: tl.constexpr, BH: tl.constexpr, BC: tl.constexpr, BO: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    rh = tl.arange(0, BH)
    hmask = rh < H
    acc = tl.zeros([BH], dtype=tl.float32)
    for c0 in range(0, C, BC):
        rc = c0 + tl.arange(0, BC)
        cmask = rc < C
        x = tl.load(A + row * s_am + rc * s_ak, mask=cmask, other=0.0).to(tl.float32)
        w = tl.load(W1 + rh[:, None] * s_w1h + rc[None, :] * s_w1c, mask=hmask[:, None] & cmask[None, :],
                    other=0.0).to(tl.float32)
        acc += tl.sum(w * x[None, :], axis=1)
    h = acc * scale1
    if HAS_B1:
        h += tl.load(B1 + rh, mask=hmask, other=0.0).to(tl.float32)
    h = apply_activation(h, ACT1, alpha1, beta1)
    h = tl.where(hmask, h.to(Y.dtype.element_ty).to(tl.float32), 0.0)      # h as the unfused layer stores it
    ro = tl.program_id(1) * BO + tl.arange(0, BO)
    omask = ro < O
    w2 = tl.load(W2 + ro[:, None] * s_w2o + rh[None, :] * s_w2h, mask=omask[:, None] & hmask[None, :],
                 other=0.0).to(tl.float32)
    y = tl.sum(w2 * h[None, :], axis=1) * scale2
    if HAS_B2:
        y += tl.load(B2 + ro, mask=omask, other=0.0).to(tl.float32)
    y = apply_activation(y, ACT2, alpha2, beta2)
    tl.store(Y + row * s_ym + ro * s_yo, y.to(Y.dtype.element_ty), mask=omask)


def _tiles(hidden: int, cfg: dict) -> tuple[int, int, int]:
    """(BH, BC, BO): BH the hidden width's power of two; the W1 tile BH × BC and the W2 tile BO × BH each within
    64 float32 registers a thread (2048·warps elements)."""
    bh = max(16, triton.next_power_of_2(hidden))
    budget = 2048 * cfg["warps"]
    bc = max(16, min(256, budget // bh))
    bo = max(16, min(cfg["BO"], budget // bh))
    return bh, bc, bo


def mlp2(a, w1, b1, w2, b2, trans_b1=0, trans_b2=0, scale1=1.0, scale2=1.0, act1="none", alpha1=0.0, beta1=0.0,
         act2="none", alpha2=0.0, beta2=0.0, cfg=None):
    """TwoLayerMLP through the one-launch kernel: a (…, C); w1 (H, C) when trans_b1 else (C, H); w2 (O, H) when
    trans_b2 else (H, O); returns (…, O) in a's dtype."""
    cfg = {**CONFIGS[0], **(cfg or {})}
    act1, act2 = kernel_activation(act1, alpha1), kernel_activation(act2, alpha2)
    for act in (act1, act2):
        if act not in ACTIVATIONS:
            raise ValueError(f"unknown epilogue activation {act!r}")
    c = a.shape[-1]
    w1_hc = w1 if trans_b1 else w1.t()
    w2_oh = w2 if trans_b2 else w2.t()
    hidden, out = w1_hc.shape[0], w2_oh.shape[0]
    if hidden > MAX_HIDDEN:
        raise ValueError(f"hidden width {hidden} > {MAX_HIDDEN}: the pair of GEMMs runs it")
    a2 = a.reshape(-1, c)
    y = torch.empty((a2.shape[0], out), dtype=a.dtype, device=a.device)
    bh, bc, bo = _tiles(hidden, cfg)
    if a2.shape[0] and out:
        _mlp2_kernel[(a2.shape[0], triton.cdiv(out, bo))](
            a2, w1_hc, y if b1 is None else b1.reshape(-1), w2_oh, y if b2 is None else b2.reshape(-1), y, c, hidden,
            out, *a2.stride(), *w1_hc.stride(), *w2_oh.stride(), *y.stride(), float(scale1), float(alpha1),
            float(beta1), float(scale2), float(alpha2), float(beta2), HAS_B1=b1 is not None, HAS_B2=b2 is not None,
            ACT1=act1, ACT2=act2, BH=bh, BC=bc, BO=bo, num_warps=cfg["warps"])
    return y.reshape(*a.shape[:-1], out)


@tactic("TwoLayerMLP", name="triton_mlp2", configs=CONFIGS, priority=-145)
class TritonMlp2:
    """Below the library tactics (the pair of GEMM launches), so untimed builds keep those; timed builds compare
    by measured time."""

    @staticmethod
    def supports(layer, device):
        why = triton_device_reason(device)
        if why:
            return why
        for k in (1, 2):
            act = kernel_activation(layer.attrs.get(f"activation{k}", "none"), layer.attrs.get(f"alpha{k}", 0.0))
            if act not in ACTIVATIONS:
                return f"activation{k} {act!r} has no Triton epilogue"
        return None

    @staticmethod
    def fits(layer, cfg, inputs):
        a, w1 = inputs[0], inputs[1]
        if not isinstance(a, torch.Tensor) or not isinstance(w1, torch.Tensor) or w1.dim() != 2:
            return "a 2-D constant first weight is needed"
        hidden = hidden_width(w1, layer.attrs.get("trans_b1", 0))
        if hidden > MAX_HIDDEN:
            return f"hidden width {hidden} > {MAX_HIDDEN} (the hidden vector is kept in registers)"
        rows = a.numel() // max(1, a.shape[-1])
        if rows > MAX_ROWS:
            return f"{rows} rows > {MAX_ROWS}: each program re-reads W1, the tensor-core pair wins there"
        return None

    @staticmethod
    def build(layer, cfg, device):
        first, second = mlp_layer_attrs(layer.attrs, 1), mlp_layer_attrs(layer.attrs, 2)
        args = (first["trans_b"], second["trans_b"], first["scale"], second["scale"], first["activation"],
                first["alpha"], first["beta"], second["activation"], second["alpha"], second["beta"], cfg)

        def run(inputs):
            return [mlp2(*mlp_operands(inputs), *args)]
        return run
