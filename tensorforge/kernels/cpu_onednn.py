"""Tactics: MatMulEpilogue and Gemm on the CPU through oneDNN's linear with a pre-packed weight.

    y = act(x · Wᵀ + bias) [+ residual]        one oneDNN primitive: the GEMM with bias and activation as post-ops

The weight is reordered once per context into oneDNN's blocked layout (`_reorder_linear_weight`), so each call
streams it in the order the micro-kernel reads it; torch's addmm (MKL sgemm on the plain layout) plus separate
activation and residual kernels is 2× slower at the sizes of small models on 2 cores (32×256·256×1024: 0.10 ms
against 0.05 ms). Traffic: x, the packed W and the bias once, y once (plus the residual, read in the add).
Cases oneDNN cannot fuse are not this tactic's: `supports()` rejects scale ≠ 1, a residual added before the
activation, a float16 layer and an activation without a oneDNN post-op (Elu, HardSigmoid other than ONNX's 1/6,
½ form), and `fits()` a batched (3-D) weight or mixed dtypes at the opt point — each with its reason — so the
builder picks the next tactic (torch_addmm; Gemm: the reference) and the layer info names what runs. A kernel
that meets such inputs anyway raises; it never falls back silently. CPU builds pick it untimed (priority above
torch_addmm); it applies only to CPU devices whose torch has oneDNN.
Threads: the packed weight is made on a kernel's first call, under a lock, and published as one
(source, packed, N) tuple after packing, so a concurrent call sees either nothing or a complete packing — never
the source without its packed weight (docs/runtime.md, "Threads").
Convolution through oneDNN's packed kernels was measured too (3→16 and 16→32 channels at 64²: 0.033/0.041 ms
against torch's 0.055/0.081 ms) and left out: its per-channel blocking rounds channels differently, which flips
the softmax of ONNX's constant-weight light_squeezenet (logits 6.8e9, fp32 spacing 512) away from the uniform
result onnxruntime and torch's convolution give.
"""

import threading

import torch

from .registry import tactic
from .torch_fused import epilogue_attrs, epilogue_operands

_DTYPES = (torch.float32, torch.bfloat16)


def _post_op(act: str, alpha: float, beta: float) -> tuple[str, list, str] | None:
    """(oneDNN unary attr, scalars, algorithm) of an epilogue activation, or None when it has no post-op."""
    simple = {"none": "none", "Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "HardSwish": "hardswish",
              "Silu": "swish"}
    if act in simple:
        return simple[act], [], ""
    if act == "Gelu":
        return "gelu", [], "tanh" if alpha == 1 else "none"
    if act == "LeakyRelu":
        return "leaky_relu", [alpha], ""
    if act == "Clip":
        return "hardtanh", [alpha, beta], ""
    if act == "HardSigmoid" and abs(alpha - 1 / 6) < 1e-6 and beta == 0.5:
        return "hardsigmoid", [], ""
    return None


def cpu_op_reason(device, what: str, available: bool, namespace, op: str) -> str | None:
    """Why a CPU library tactic (`what`) cannot run here: not a CPU device, or this torch lacks the library or op."""
    if device.type != "cpu":
        return f"{what} is a CPU tactic"
    if not available or not hasattr(namespace, op):
        return f"this torch build has no {what}"
    return None


def onednn_reason(device) -> str | None:
    return cpu_op_reason(device, "oneDNN linear", torch.backends.mkldnn.is_available(), torch.ops.mkldnn,
                         "_linear_pointwise")


def onednn_reorder(w_nk: torch.Tensor, rows: int) -> torch.Tensor:
    """W (N, K) in oneDNN's blocked linear layout (a hint of `rows` rows; any M runs on it)."""
    packed = torch.ops.mkldnn._reorder_linear_weight(w_nk, max(1, rows))
    if not isinstance(packed, torch.Tensor) or packed.numel() != w_nk.numel():
        raise RuntimeError(f"oneDNN weight reorder of a {tuple(w_nk.shape)} weight returned "
                           f"{type(packed).__name__} {getattr(packed, 'shape', '')}")
    return packed


class PackedWeight:
    """A linear tactic's weight, (N, K) and packed by `reorder(w_nk, rows)`, made once per weight tensor seen (a
    context's weights do not change) — and again per row count when `per_rows` (MKL packs for exactly M rows);
    `trans`: the stored weight is already (N, K), else (K, N); `keep_plain`: the (N, K) copy is kept beside the
    packed one (MKL's packed call takes both). Each cache is one tuple, replaced whole under the lock once its
    value exists: readers never see a half-made entry."""

    def __init__(self, trans: bool, reorder=onednn_reorder, per_rows: bool = False, keep_plain: bool = False):
        self.trans, self.reorder, self.per_rows, self.keep_plain = trans, reorder, per_rows, keep_plain
        self._weight: tuple | None = None      # (source tensor, rows or None, packed tensor, (N, K) or None, N)
        self._bias: tuple | None = None        # (source tensor, N-vector)
        self._lock = threading.Lock()

    def bias(self, c: torch.Tensor, make) -> torch.Tensor:
        """make(c) once per bias tensor seen (Gemm's β·C broadcast to N values): not redone every call."""
        entry = self._bias
        if entry is None or entry[0] is not c:
            with self._lock:
                entry = self._bias
                if entry is None or entry[0] is not c:
                    entry = (c, make(c))
                    self._bias = entry
        return entry[1]

    def get(self, w: torch.Tensor, rows: int) -> tuple[torch.Tensor, torch.Tensor | None, int]:
        """(packed weight, the (N, K) weight when kept, N) for `w` multiplied by `rows` rows."""
        key = rows if self.per_rows else None
        entry = self._weight
        if entry is None or entry[0] is not w or entry[1] != key:
            with self._lock:
                entry = self._weight
                if entry is None or entry[0] is not w or entry[1] != key:
                    w_nk = (w if self.trans else w.t()).contiguous()
                    entry = (w, key, self.reorder(w_nk, rows), w_nk if self.keep_plain else None, w_nk.shape[0])
                    self._weight = entry
        return entry[2], entry[3], entry[4]

    def __call__(self, w: torch.Tensor, rows: int) -> tuple[torch.Tensor, int]:
        """(packed weight, N) for `w`."""
        packed, _, n = self.get(w, rows)
        return packed, n


def linear_(x, w, bias, post, residual, pack: PackedWeight):
    """oneDNN linear: post-op activation, then the residual added (fused as a binary post-op when no activation)."""
    attr, scalars, algorithm = post
    x = x.contiguous()
    w, n = pack(w, x.numel() // max(1, x.shape[-1]))
    bias = bias.reshape(-1).to(x.dtype).contiguous() if bias is not None else None
    if residual is not None and attr == "none" and residual.shape == (*x.shape[:-1], n):
        return torch.ops.mkldnn._linear_pointwise.binary(x, residual.to(x.dtype).contiguous(), w, bias, "add")
    y = torch.ops.mkldnn._linear_pointwise(x, w, bias, attr, scalars, algorithm)
    return y.add_(residual) if residual is not None else y


def _precision_reason(layer) -> str | None:
    if layer.precision not in (None, "float32", "bfloat16"):
        return f"a {layer.precision} layer (oneDNN's linear here takes float32 or bfloat16)"
    return None


def operand_reason(a, b, batched_ok: bool = False) -> str | None:
    """Why these operands are not oneDNN linear's: a batched weight, or dtypes it does not take / that differ."""
    if a is None or b is None:
        return None
    if not batched_ok and b.dim() != 2:
        return f"a batched ({b.dim()}-D) weight: oneDNN's linear takes one 2-D weight"
    if a.dtype not in _DTYPES or b.dtype != a.dtype:
        return f"operands {a.dtype} · {b.dtype}: oneDNN's linear takes float32 or bfloat16, both the same"
    return None


def gemm_form_reason(layer) -> str | None:
    """Why a Gemm is not x · Wᵀ + bias (transA = 1 or α ≠ 1), else None."""
    if layer.attrs.get("transA", 0) or float(layer.attrs.get("alpha", 1.0)) != 1.0:
        return "transA = 1 or α ≠ 1 (the linear tactics compute x · Wᵀ + bias)"
    return None


def bias_length_reason(b, trans: bool, c, what: str = "C") -> str | None:
    """Why `c` is not a bias of the linear tactics (one value, or one per output column of x · op(b)), else None."""
    if b is None or c is None:
        return None
    n = b.shape[0] if trans else b.shape[1]
    if c.numel() not in (1, n):
        return f"{what} of {c.numel()} values: the linear tactics add one value per output column ({n})"
    return None


def gemm_c_reason(layer, b, c) -> str | None:
    """Why Gemm's C is not a bias of the linear tactics (one value, or one per output column), else None."""
    return bias_length_reason(b, bool(layer.attrs.get("transB", 0)), c)


def refuse(layer, tactic_name: str, why: str):
    """The run-time error of a linear tactic handed operands its fits() would have rejected at build."""
    raise ValueError(f"tactic {tactic_name} got inputs it does not take for layer {layer.name!r}: {why} "
                     "(fits() rejects such layers at build; rebuild the engine)")


@tactic("MatMulEpilogue", name="onednn_linear", priority=20)
class OneDnnMatMulEpilogue:
    @staticmethod
    def supports(layer, device):
        why = onednn_reason(device) or _precision_reason(layer)
        if why is not None:
            return why
        a_ = layer.attrs
        act, alpha, beta, res_first = epilogue_attrs(a_)
        if float(a_.get("scale", 1.0)) != 1.0:
            return f"scale {a_.get('scale')} ≠ 1 (oneDNN's linear has no output scale here)"
        if _post_op(act, alpha, beta) is None:
            return f"activation {act} (α {alpha}, β {beta}) has no oneDNN post-op"
        if len(layer.inputs) > 3 and layer.inputs[3] and res_first and act != "none":
            return "the residual is added before the activation; oneDNN's post-ops add it after"
        return None

    @staticmethod
    def fits(layer, cfg, inputs):
        return operand_reason(inputs[0], inputs[1] if len(inputs) > 1 else None)

    @staticmethod
    def build(layer, cfg, device):
        a_ = layer.attrs
        act, alpha, beta, _ = epilogue_attrs(a_)
        post = _post_op(act, alpha, beta)
        pack = PackedWeight(trans=bool(int(a_.get("trans_b", 0))))

        def run(inputs):
            a, b, bias, residual = epilogue_operands(inputs)
            why = operand_reason(a, b)
            if why is not None:
                refuse(layer, "onednn_linear", why)
            return [linear_(a, b, bias, post, residual, pack)]
        return run


@tactic("Gemm", name="onednn_linear", priority=20)
class OneDnnGemm:
    """Gemm(A, B, C) with transA = 0, α = 1 and C a bias of N values (β·C folded at the first call)."""

    @staticmethod
    def supports(layer, device):
        why = onednn_reason(device) or _precision_reason(layer)
        return why or gemm_form_reason(layer)

    @staticmethod
    def fits(layer, cfg, inputs):
        a, b = inputs[0], inputs[1]
        return operand_reason(a, b) or gemm_c_reason(layer, b, inputs[2] if len(inputs) > 2 else None)

    @staticmethod
    def build(layer, cfg, device):
        a_ = layer.attrs
        trans_b, beta = int(a_.get("transB", 0)), float(a_.get("beta", 1.0))
        pack = PackedWeight(trans=bool(trans_b))
        none = _post_op("none", 0.0, 0.0)

        def run(inputs):
            why = OneDnnGemm.fits(layer, cfg, inputs)
            if why is not None:
                refuse(layer, "onednn_linear", why)
            a, b = inputs[0], inputs[1]
            c = inputs[2] if len(inputs) > 2 else None
            n = b.shape[0] if trans_b else b.shape[1]
            bias = pack.bias(c, lambda t: (t.reshape(-1).expand(n) * beta).contiguous()) \
                if c is not None and beta != 0 else None
            return [linear_(a, b, bias, none, None, pack)]
        return run
