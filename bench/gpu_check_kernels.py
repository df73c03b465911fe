"""gpu_check section 2: the hand-written Triton tactics (kernels/triton_*.py) and the generated PointwiseChain
kernels (codegen/ → kernels/triton_pointwise.py) at real model sizes, against each IR op's torch reference.

Every kernel is reached the way an engine reaches it: a Layer, the registered tactic of that name, its config
list, `tactic.build(layer, cfg, device)(inputs)` — so the launch glue is checked with the kernel. On CUDA the
tactic must also accept the layer (`supports() is None`). Generated kernels go through codegen: source text,
`register_source`, then the `triton_generated` tactic. fp16 results are held against the reference run on the
same values widened to fp32. A missing module or tactic (work in progress elsewhere) is a failing row.
"""

import importlib

import torch

from gpu_check_common import check_against_reference, guard, shape_text

F32 = dict(rtol=1e-5, atol=1e-6)
ROWS32 = dict(rtol=1e-4, atol=1e-5, scale=1e-5)
HALF = dict(rtol=2e-3, atol=1e-3, scale=2e-3)
SUMS16 = dict(rtol=1e-2, atol=1e-3, scale=5e-3)
DTYPES = {"fp32": torch.float32, "fp16": torch.float16}


def _gen(dev, seed):
    return None if dev.type == "meta" else torch.Generator(device=dev).manual_seed(seed)


def _layer(op, n_in, attrs):
    from tensorforge.ir import Layer, get_spec
    return Layer(op.lower(), op, [f"in{k}" for k in range(n_in)], ["out"], get_spec(op).resolve_attrs(attrs))


def layernorm(dev, smoke, dt, cols):
    rows, cols = ((4, 40) if cols == 768 else (2, 16500)) if smoke else (8192 if cols == 768 else 256, cols)
    g = _gen(dev, 10)
    x = torch.randn(rows, cols, generator=g, device=dev) * 3 + 1
    w, b = torch.randn(cols, generator=g, device=dev), torch.randn(cols, generator=g, device=dev)
    return "LayerNormalization", [x.to(dt), w.to(dt), b.to(dt)], {"axis": -1, "epsilon": 1e-5}


def softmax(dev, smoke, dt, op, shape):
    small = (3, 37) if shape[1] <= 16384 else (2, 16500)               # keep the multi-pass path in smoke runs
    x = torch.randn(*(small if smoke else shape), generator=_gen(dev, 11), device=dev) * 4
    return op, [x.to(dt)], {"axis": -1}


def attention(dev, smoke, dt, masked):
    """BERT-base self-attention: batch 8 × 12 heads × 512 tokens × 64; with the (B, 1, 1, S) padding mask."""
    B, H, S, D = (2, 2, 17, 16) if smoke else (8, 12, 512, 64)
    g = _gen(dev, 12)
    q, k, v = (torch.randn(B, H, S, D, generator=g, device=dev).to(dt) for _ in range(3))
    ins = [q, k, v]
    if masked:
        mask = torch.zeros(B, 1, 1, S, device=dev, dtype=dt)
        mask[:, ..., S - S // 4:] = -1e4                       # the last quarter of every sequence is padding
        ins.append(mask)
    return "Attention", ins, {}


def gemm(dev, smoke, dt, kind):
    """BERT-base FFN up-projection with GELU (8×512 tokens, 768 → 3072), or the attention output projection
    with a transposed weight and the residual added after the bias (4096 tokens, 768 → 768)."""
    g = _gen(dev, 13)
    if kind == "ffn":
        (B, S, K, N) = (2, 9, 20, 24) if smoke else (8, 512, 768, 3072)
        a, w = torch.randn(B, S, K, generator=g, device=dev), torch.randn(K, N, generator=g, device=dev) / K ** 0.5
        bias = torch.randn(N, generator=g, device=dev)
        return "MatMulEpilogue", [a.to(dt), w.to(dt), bias.to(dt)], {"activation": "Gelu"}
    M, K = (7, 33) if smoke else (4096, 768)
    a, w = torch.randn(M, K, generator=g, device=dev), torch.randn(K, K, generator=g, device=dev) / K ** 0.5
    bias, res = torch.randn(K, generator=g, device=dev), torch.randn(M, K, generator=g, device=dev)
    return "MatMulEpilogue", [t.to(dt) for t in (a, w, bias, res)], {"trans_b": 1, "residual_first": 1}


def chain(dev, smoke, dt, kind):
    """The seed's gelu(gelu(x)) on 64 M elements, and bias + GELU + scale with a broadcast bias (FFN epilogue)."""
    from tensorforge.ir import dtype_name, get_spec
    rows, cols = (8, 33) if smoke else (65536, 1024)
    g = _gen(dev, 14)
    x = torch.randn(rows, cols, generator=g, device=dev).to(dt)
    name = dtype_name(dt)
    if kind == "gelu2":
        steps, ins, consts = [("Gelu", ["in0"]), ("Gelu", ["s0"])], [x], []
    else:
        steps = [("Add", ["in0", "in1"]), ("Gelu", ["s0"]), ("Mul", ["s1", "c0"])]
        ins = [x, torch.randn(cols, generator=g, device=dev).to(dt)]
        consts = [{"value": 0.5, "dtype": name, "shape": []}]
    steps = [{"op": op, "args": args, "attrs": get_spec(op).resolve_attrs({})} for op, args in steps]
    attrs = {"steps": steps, "consts": consts, "outputs": [f"s{len(steps) - 1}"], "out_dtypes": [name]}
    return "PointwiseChain", ins, attrs


# (label, tactic name, make(dev, smoke, dt), dtypes, tolerance per dtype)
CASES = [
    ("LayerNorm rows≤16k", "triton_rowwise", lambda d, s, t: layernorm(d, s, t, 768), ("fp32", "fp16"),
     {"fp32": ROWS32, "fp16": HALF}),
    ("LayerNorm rows>16k", "triton_rowwise", lambda d, s, t: layernorm(d, s, t, 32768), ("fp32",), {"fp32": ROWS32}),
    ("Softmax", "triton_rowwise", lambda d, s, t: softmax(d, s, t, "Softmax", (4096, 4096)), ("fp32", "fp16"),
     {"fp32": dict(rtol=1e-4, atol=1e-7), "fp16": dict(rtol=2e-3, atol=1e-5)}),
    ("LogSoftmax vocab", "triton_rowwise", lambda d, s, t: softmax(d, s, t, "LogSoftmax", (1024, 32000)),
     ("fp32",), {"fp32": ROWS32}),
    ("Attention", "triton_flash", lambda d, s, t: attention(d, s, t, False), ("fp32", "fp16"),
     {"fp32": ROWS32, "fp16": SUMS16}),
    ("Attention masked", "triton_flash", lambda d, s, t: attention(d, s, t, True), ("fp16",), {"fp16": SUMS16}),
    ("GEMM+bias+Gelu", "triton_gemm", lambda d, s, t: gemm(d, s, t, "ffn"), ("fp32", "fp16"),
     {"fp32": ROWS32, "fp16": SUMS16}),
    ("GEMMᵀ+bias+residual", "triton_gemm", lambda d, s, t: gemm(d, s, t, "proj"), ("fp16",), {"fp16": SUMS16}),
    ("chain gelu(gelu(x))", "triton_generated", lambda d, s, t: chain(d, s, t, "gelu2"), ("fp32", "fp16"),
     {"fp32": F32, "fp16": HALF}),
    ("chain (x+b)·gelu·½", "triton_generated", lambda d, s, t: chain(d, s, t, "bias_gelu"), ("fp32", "fp16"),
     {"fp32": F32, "fp16": HALF}),
]
MODULES = ["tensorforge.kernels.triton_layernorm", "tensorforge.kernels.triton_softmax",
           "tensorforge.kernels.triton_attention", "tensorforge.kernels.triton_gemm",
           "tensorforge.kernels.triton_pointwise", "tensorforge.codegen.pointwise"]


def find_tactic(op: str, name: str):
    from tensorforge.kernels import registry
    registry._load_optional()                          # Triton tactic modules load on first need
    for t in registry._TACTICS.get(op, []):           # every registered tactic, CPU-only builds included
        if t.name == name:
            return t
    known = [t.name for t in registry._TACTICS.get(op, [])]
    raise LookupError(f"no tactic {op}.{name} registered (registered for {op}: {known or 'none'})")


def _prepare_chain(layer, inputs):
    """Codegen: the chain's source, registered by hash as the builder does; the layer names it."""
    from tensorforge.codegen import generate_pointwise
    from tensorforge.kernels.generated import register_source
    src = generate_pointwise(layer, [t.dtype for t in inputs], inputs[0].dim())
    layer.attrs["kernel"] = register_source(src)      # text generated here, in this process (engines hold none)


def _body(ctx, name, make, dname, tol):
    def body(row):
        from tensorforge.ir import get_spec
        op, inputs, attrs = make(ctx.device, ctx.smoke, DTYPES[dname])
        row.shape = shape_text(*[t.shape for t in inputs[:2]])
        layer = _layer(op, len(inputs), attrs)
        if op == "PointwiseChain":
            _prepare_chain(layer, inputs)
        t = find_tactic(op, name)
        if ctx.device.type == "cuda":
            why = t.supports(layer, ctx.device)
            if why is not None:
                raise RuntimeError(f"tactic {op}.{name} refuses the layer on CUDA: {why}")
        spec = get_spec(op)

        def reference(ins):
            out = spec.reference(*ins, **layer.attrs)
            return out[0] if isinstance(out, tuple) else out
        widened = [x.float() if x.dtype == torch.float16 else x for x in inputs]
        built = {}

        def run_cfg(cfg):
            key = tuple(sorted(cfg.items()))
            if key not in built:
                built[key] = t.build(layer, cfg, ctx.device)
            return built[key](list(inputs))
        check_against_reference(
            ctx, row, t.configs, run_cfg, lambda: reference(inputs),
            (lambda: reference(widened)) if dname != "fp32" else None, **tol[dname])
        row.check = f"{row.check} [{t.id({})}]"
    return body


def run(ctx, only: set | None = None) -> None:
    for module in MODULES:                      # a module that does not import is one failing row, not a crash
        try:
            importlib.import_module(module)
        except Exception as e:  # noqa: BLE001 - recorded by guard below
            guard(ctx, "kernels", f"import {module}", "", "", lambda row, e=e: _reraise(e))
    for label, name, make, dtypes, tol in CASES:
        if only is not None and not any(o.lower() in label.lower() for o in only):
            continue
        for dname in dtypes:
            guard(ctx, "kernels", label, "", dname, _body(ctx, name, make, dname, tol))


def _reraise(e):
    raise e


def names() -> list[str]:
    return [c[0] for c in CASES]
