"""PointwiseChain layer → readable Triton source: one kernel, one pass over the output.

Entry point: `generate(layer, in_dtypes, rank) -> str`, a self-contained module (imports, fast-math helpers,
a broadcast-index helper, `pointwise_kernel`, and `RANK`). Each program instance handles BLOCK consecutive
output elements: it loads every input element it needs once (widening float16/bfloat16 to float32), runs the
steps in registers, and stores each chain output once (rounding to its dtype). Traffic:
Σ bytes(inputs read) + Σ bytes(outputs) — the minimum for the chain.

Kernel ABI (kernels/triton_pointwise.py launches it):

    pointwise_kernel(in0…, out0…, n, sz1…sz{R-1}, st{i}_0…st{i}_{R-1} per input, lit{k} per non-finite
                     literal, FULL{i}: constexpr per input, NDIM: constexpr, INT64: constexpr, BLOCK: constexpr)

    pointwise_kernel_variant(…the same…, LEAN: constexpr, PERSIST: constexpr, STREAM: constexpr)

The launcher collapses the output shape (and every input's broadcast strides, 0 on broadcast dims) to at
most R = RANK dims, right-aligned; sz are the collapsed sizes, NDIM how many are live. FULL{i}: input i is
laid out exactly like the output (index = offset, no div/mod); otherwise its index is Σ coord_d·st_d.
Both kernels call `chain_tiles` (chain_load → chain_store per tile); the variant's switches, tactic configs:
LEAN the degree-5 float16 GELU (HAS_LEAN says whether the chain has one), PERSIST a grid-stride loop that
loads tile t + grid before computing tile t (same traffic, the loads overlap the arithmetic), STREAM .cs
stores. The plain kernel is the variant with all three off.
"""

import math

import torch

from ..ir import Layer, dtype_from_name, dtype_name, get_spec
from .chain_check import chain_problem
from .fastmath import helpers_source
from .pointwise_ops import TL, compute_dtype, expression

KERNEL_NAME = "pointwise_kernel"
VARIANT_NAME = "pointwise_kernel_variant"       # the same with the variant switches as constexpr arguments
VARIANT_FLAGS = ("LEAN", "PERSIST", "STREAM")
_HALF = (torch.float16, torch.bfloat16)


def step_dtypes(layer: Layer, in_dtypes: list[torch.dtype]) -> list[torch.dtype]:
    """The compute dtype of every step: the chain reference run on one-element CPU tensors of ones (not meta
    tensors: torch's meta GELU imports torch._dynamo, seconds at engine load; a one-element op costs microseconds)."""
    env = {f"in{i}": torch.ones(1, dtype=compute_dtype(d)) for i, d in enumerate(in_dtypes)}
    for i, c in enumerate(layer.attrs.get("consts", [])):
        env[f"c{i}"] = torch.ones(1, dtype=compute_dtype(dtype_from_name(c["dtype"])))
    out = []
    for k, step in enumerate(layer.attrs["steps"]):
        args = [env[a] if a else None for a in step["args"]]
        r = get_spec(step["op"]).reference(*args, **step["attrs"])
        r = r if isinstance(r, torch.Tensor) else r[0]
        env[f"s{k}"] = torch.ones(1, dtype=compute_dtype(r.dtype))
        out.append(compute_dtype(r.dtype))
    return out


def literal_text(const: dict, index: int) -> str:
    """A literal as Triton source; non-finite floats become the kernel argument lit{index}."""
    dtype = dtype_from_name(const["dtype"])
    v = const["value"]
    if dtype == torch.bool:
        return "True" if v else "False"
    if dtype.is_floating_point:
        v = float(v)
        return repr(v) if math.isfinite(v) else f"lit{index}"
    return str(int(v))


def nonfinite_literals(layer: Layer) -> list[int]:
    return [k for k, c in enumerate(layer.attrs.get("consts", []))
            if dtype_from_name(c["dtype"]).is_floating_point and not math.isfinite(float(c["value"]))]


def _index_helper(rank: int) -> str:
    sizes = [f"sz{d}" for d in range(1, rank)]
    strides = [f"st{d}" for d in range(rank)]
    lines = [
        "@triton.jit",
        f"def bcast_index(offs, NDIM: tl.constexpr, {', '.join(sizes + strides)}):",
        '    """Σ coord_d·st_d over the NDIM live (right-aligned) dims of the collapsed output shape."""',
    ]
    last = rank - 1
    if rank == 1:
        lines.append("    return offs * st0")
        return "\n".join(lines) + "\n"
    lines += ["    rem = offs", f"    idx = (rem % sz{last}) * st{last}"]
    for k in range(1, rank):
        d = last - k
        lines.append(f"    if NDIM > {k}:")
        lines.append(f"        rem = rem // sz{d + 1}")
        lines.append(f"        idx += (rem % sz{d}) * st{d}" if d > 0 else f"        idx += rem * st{d}")
    lines.append("    return idx")
    return "\n".join(lines) + "\n"


def _load_helper(in_dtypes, ins, sizes, strides, fulls, rank: int) -> list[str]:
    """`chain_load`: every input's elements of one tile (offsets `offs`), widened to float32 for half types;
    a FULL input reads `offs` itself (evict-first: streamed once), a broadcast one its strided index."""
    lines = ["@triton.jit",
             f"def chain_load({', '.join(ins + ['offs', 'mask'] + sizes + strides)}, "
             f"{', '.join(f + ': tl.constexpr' for f in fulls)}, NDIM: tl.constexpr):",
             '    """The elements of one tile of every input, widened to float32 for half types."""']
    for i, d in enumerate(in_dtypes):
        st = ", ".join(f"st{i}_{k}" for k in range(rank))
        size_args = ", ".join(sizes)
        idx_args = f"offs, NDIM, {size_args + ', ' if size_args else ''}{st}"
        widen = ".to(tl.float32)" if d in _HALF else ""
        lines += [f"    if FULL{i}:",
                  f"        x{i} = tl.load(in{i} + offs, mask=mask, other=0, eviction_policy='evict_first'){widen}",
                  "    else:",
                  f"        x{i} = tl.load(in{i} + bcast_index({idx_args}), mask=mask, other=0){widen}"]
    lines += [f"    return {', '.join(f'x{i}' for i in range(len(in_dtypes)))}", "", ""]
    return lines


def generate(layer: Layer, in_dtypes: list[torch.dtype], rank: int) -> str:
    """Triton module source for PointwiseChain `layer` with inputs of `in_dtypes` and output rank `rank`.
    The program is checked first (chain_check.py): only well-formed data ever becomes text."""
    why = chain_problem(layer.attrs, len(in_dtypes))
    if why is not None:
        raise ValueError(f"PointwiseChain {layer.name!r}: {why}")
    steps, consts = layer.attrs["steps"], layer.attrs.get("consts", [])
    outputs, out_dtypes = layer.attrs["outputs"], [dtype_from_name(d) for d in layer.attrs["out_dtypes"]]
    rank = max(int(rank), 1)
    n_in, n_out = len(in_dtypes), len(outputs)
    grade = ("lo16" if all(d == torch.float16 for d in out_dtypes) else "lo") if all(d in _HALF for d in out_dtypes) \
        else "f32"
    sdt = step_dtypes(layer, in_dtypes)
    names = {f"in{i}": f"x{i}" for i in range(n_in)}
    names.update({f"c{k}": literal_text(c, k) for k, c in enumerate(consts)})
    need: set[str] = set()
    body = []
    for k, step in enumerate(steps):
        args = [names[a] if a else "" for a in step["args"]]
        dts = [(compute_dtype(in_dtypes[int(a[2:])]) if a.startswith("in") else
                sdt[int(a[1:])] if a.startswith("s") else
                compute_dtype(dtype_from_name(consts[int(a[1:])]["dtype"]))) if a else None for a in step["args"]]
        body.append(f"    s{k} = {expression(step['op'], args, step['attrs'], dts, need, grade)}")
        names[f"s{k}"] = f"s{k}"

    sizes = [f"sz{d}" for d in range(1, rank)]
    ins, outs = [f"in{i}" for i in range(n_in)], [f"out{j}" for j in range(n_out)]
    xs = [f"x{i}" for i in range(n_in)]
    strides = [f"st{i}_{d}" for i in range(n_in) for d in range(rank)]
    lits = [f"lit{k}" for k in nonfinite_literals(layer)]
    fulls = [f"FULL{i}" for i in range(n_in)]
    args = ins + outs + ["n"] + sizes + strides + lits
    consts_ = fulls + ["NDIM", "INT64", "BLOCK"]
    params = args + [f"{c}: tl.constexpr" for c in consts_]
    flags = [f"{k}: tl.constexpr" for k in VARIANT_FLAGS]
    program = [f"#   s{k} = {s['op']}({', '.join(s['args'])})" for k, s in enumerate(steps)]
    program += [f"#   out{j} = {r} as {layer.attrs['out_dtypes'][j]}" for j, r in enumerate(outputs)]
    src = [
        "# generated by tensorforge.codegen.pointwise (the layer's name stays out: identical chains share one text)",
        "# inputs: " + ", ".join(f"in{i}: {dtype_name(d)}" for i, d in enumerate(in_dtypes)),
        "# program:", *program, "import triton", "import triton.language as tl", "", f"RANK = {rank}",
        f"HAS_LEAN = {'gelu_erf_lo' in need and grade == 'lo16'}", "",
        helpers_source(need).strip() if need else "", "", _index_helper(rank), "",
    ]
    if n_in:
        src += _load_helper(in_dtypes, ins, sizes, strides, fulls, rank)
    src += ["@triton.jit",
            f"def chain_store({', '.join(outs + ['offs', 'mask'] + xs + lits)}, LEAN: tl.constexpr, "
            "STREAM: tl.constexpr):",
            '    """The chain on one tile of loaded inputs, in registers; each output stored once."""']
    src += body
    for j, (ref, dt) in enumerate(zip(outputs, out_dtypes)):
        value = f"{names[ref]}.to({TL[dt]})"
        src += ["    if STREAM:",
                f"        tl.store(out{j} + offs, {value}, mask=mask, cache_modifier='.cs')",
                "    else:",
                f"        tl.store(out{j} + offs, {value}, mask=mask)"]
    ys = [f"y{i}" for i in range(n_in)]

    def load(targets, o, m, indent):
        call = f"chain_load({', '.join(ins + [o, m] + sizes + strides + fulls)}, NDIM)"
        return [f"{indent}{', '.join(targets)} = {call}"] if n_in else []
    store = f"chain_store({', '.join(outs + ['offs', 'mask'] + xs + lits)}, LEAN, STREAM)"
    src += ["", "", "@triton.jit", f"def chain_tiles({', '.join(params + flags)}):",
            '    """One tile per program, or with PERSIST a grid-stride loop over the tiles in which the next',
            '    tile is loaded before the math of the current one (the loads overlap the arithmetic)."""',
            "    pid = tl.program_id(0)",
            "    if INT64:",
            "        offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)",
            "    else:",
            "        offs = pid * BLOCK + tl.arange(0, BLOCK)",
            "    mask = offs < n",
            *load(xs, "offs", "mask", "    "),
            "    if PERSIST:",
            "        step = tl.num_programs(0)",
            "        for t in range(pid + step, tl.cdiv(n, BLOCK) + step, step):",
            "            if INT64:",
            "                nxt = t.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)",
            "            else:",
            "                nxt = t * BLOCK + tl.arange(0, BLOCK)",
            "            nmask = nxt < n",
            *load(ys, "nxt", "nmask", "            "),
            f"            {store}",
            *[f"            {x} = {y}" for x, y in zip(xs, ys)],
            "            offs = nxt",
            "            mask = nmask",
            "    else:",
            f"        {store}"]
    call = f"chain_tiles({', '.join(args + consts_)}"
    src += ["", "", "@triton.jit", f"def {KERNEL_NAME}({', '.join(params)}):",
            f"    {call}, False, False, False)",
            "", "", "@triton.jit", f"def {VARIANT_NAME}({', '.join(params + flags)}):",
            f"    {call}, {', '.join(VARIANT_FLAGS)})"]
    return "\n".join(src) + "\n"
