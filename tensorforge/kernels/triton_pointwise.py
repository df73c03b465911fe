"""Tactic: a PointwiseChain runs as its generated Triton kernel (codegen/pointwise.py).

Launch: the output shape is the broadcast of the inputs (and literals); every input is viewed with its
broadcast strides (0 on broadcast dims, its own strides otherwise — views are read in place), then dims are
collapsed wherever every input is contiguous across them, so the common cases cost no index arithmetic:
same-shape inputs (FULL: index = offset), a bias over the last dim (one modulo), a per-channel scale
(one division and one modulo). One program per BLOCK output elements; int64 offsets past 2³¹ elements.
Traffic: each input element read once per output element that uses it (cached on chip for broadcasts),
each output written once.

Configs: BLOCK and warps (BLOCK / (32·warps) elements per thread, 8 float16 = one 128-bit access), and the
generated kernel's variant switches (`pointwise_kernel_variant`): lean (a half-type GELU with a degree-5
polynomial, ≤ 1 ulp), persist = k (k·SMs programs, each looping over every (k·SMs)-th tile and loading the
next tile before computing this one), stream (.cs stores), stages (Triton's num_stages). `fits` offers a
variant only where it can change something; the builder times them all like the plain configs.

Selection: CUDA only. Tests run the kernel on CPU through TRITON_INTERPRET=1 by building it directly
(`TritonPointwise.build(layer, cfg, torch.device("cpu"))`); supports() never offers Triton for a CPU build.
"""

import importlib.util
import math

import torch

from ..ir import dtype_from_name
from ..util.device import sm_count
from .generated import has_source, load_module
from .registry import tactic, triton_device_reason
from .torch_fused import dense_order

CONFIGS = [{"BLOCK": 1024, "warps": 4}, {"BLOCK": 2048, "warps": 8}, {"BLOCK": 4096, "warps": 8},
           {"BLOCK": 512, "warps": 4}, {"BLOCK": 8192, "warps": 16},
           # variants (codegen/pointwise.py's constexpr switches): lean = the degree-5 half GELU (chains with one),
           # persist = that many programs per SM looping over the tiles with the next tile's loads issued first
           # (tensors of ≥ 2 tiles per program), stream = evict-first (.cs) stores
           {"BLOCK": 2048, "warps": 4, "lean": 1}, {"BLOCK": 4096, "warps": 4, "lean": 1},
           {"BLOCK": 2048, "warps": 4, "lean": 1, "persist": 8},
           {"BLOCK": 1024, "warps": 4, "lean": 1, "persist": 16},
           {"BLOCK": 2048, "warps": 4, "lean": 1, "persist": 8, "stream": 1},
           {"BLOCK": 2048, "warps": 4, "persist": 8}]


def collapse(shape: list[int], strides: list[list[int]]) -> tuple[list[int], list[list[int]]]:
    """Merge adjacent dims d, d+1 where, for every input, stride[d] == stride[d+1]·size[d+1]; drop size-1 dims.
    Returns (sizes, per-input strides), outermost first; at least one dim."""
    dims = [d for d in range(len(shape)) if shape[d] != 1]
    sizes: list[int] = []
    out: list[list[int]] = [[] for _ in strides]
    for d in dims:
        if sizes and all(st[-1] == s[d] * shape[d] for st, s in zip(out, strides)):
            sizes[-1] *= shape[d]
            for st, s in zip(out, strides):
                st[-1] = s[d]
        else:
            sizes.append(shape[d])
            for st, s in zip(out, strides):
                st.append(s[d])
    if not sizes:
        return [1], [[0] for _ in strides]
    return sizes, out


def launch_plan(inputs: list[torch.Tensor], out_shape, rank: int) -> dict:
    """Kernel arguments that describe the layout: sizes, strides, FULL flags, NDIM, INT64."""
    out_shape = list(out_shape)
    n = math.prod(out_shape)
    contiguous = [t.shape == torch.Size(out_shape) and t.is_contiguous() for t in inputs]
    strides = [list(t.expand(out_shape).stride()) if out_shape else [] for t in inputs]
    sizes, cstrides = collapse(out_shape, strides) if out_shape else ([1], [[0] for _ in inputs])
    ndim = len(sizes)
    if ndim > rank:
        raise ValueError(f"output rank {ndim} exceeds the generated kernel's rank {rank}")
    pad = rank - ndim
    sizes = [1] * pad + sizes
    cstrides = [[0] * pad + st for st in cstrides]
    reach = max([n] + [sum((sz - 1) * st for sz, st in zip(sizes, s)) + 1 for s in cstrides])
    return {"n": n, "sizes": sizes, "strides": cstrides, "full": contiguous, "ndim": ndim,
            "int64": reach >= 2 ** 31}


def _kernel(layer, cfg, device):
    module = load_module(layer.attrs["kernel"])
    rank = module["RANK"]
    consts = layer.attrs.get("consts", [])
    lits = [float(c["value"]) for c in consts
            if dtype_from_name(c["dtype"]).is_floating_point and not math.isfinite(float(c["value"]))]
    lit_shapes = [tuple(c["shape"]) for c in consts]
    out_dtypes = [dtype_from_name(d) for d in layer.attrs["out_dtypes"]]
    block, warps = int(cfg.get("BLOCK", 1024)), int(cfg.get("warps", 4))
    flags = {"LEAN": bool(cfg.get("lean", 0)), "PERSIST": int(cfg.get("persist", 0)) > 0,
             "STREAM": bool(cfg.get("stream", 0))}
    fn = module["pointwise_kernel_variant"] if any(flags.values()) else module["pointwise_kernel"]
    flags = flags if any(flags.values()) else {}
    stages = {"num_stages": int(cfg["stages"])} if "stages" in cfg else {}
    per_sm = int(cfg.get("persist", 0))
    sms = _sm_count(device) if per_sm else 0
    resident = {"per_sm": per_sm}         # lowered after the first real launch to what one SM holds at once

    def run(inputs):
        ins = [t if t.device == device else t.to(device) for t in inputs]
        out_shape = torch.broadcast_shapes(*[t.shape for t in ins], *lit_shapes)
        perm = memory_order(ins, out_shape)
        if perm is not None:        # iterate in the layout's memory order: outputs come out in that layout too
            ins = [t.expand(out_shape).permute(perm) for t in ins]
            out_shape = torch.Size([out_shape[p] for p in perm])
        outs = [torch.empty(out_shape, dtype=d, device=device) for d in out_dtypes]
        plan = launch_plan(ins, out_shape, rank)
        if plan["n"] != 0:
            flat_strides = [s for st in plan["strides"] for s in st]
            full = {f"FULL{i}": bool(f) for i, f in enumerate(plan["full"])}
            tiles = _cdiv(plan["n"], block)
            grid = (min(tiles, resident["per_sm"] * sms) if per_sm else tiles,)
            compiled = fn[grid](*ins, *outs, plan["n"], *plan["sizes"][1:], *flat_strides, *lits, **full, **flags,
                                NDIM=plan["ndim"], INT64=plan["int64"], BLOCK=block, num_warps=warps, **stages)
            if per_sm and "checked" not in resident and getattr(compiled, "n_regs", 0):
                resident["per_sm"] = _resident(compiled.n_regs, device, warps, per_sm)
                resident["checked"] = True
        if perm is not None:
            inverse = sorted(range(len(perm)), key=perm.__getitem__)
            outs = [o.permute(inverse) for o in outs]
        return outs
    return run


def memory_order(inputs: list[torch.Tensor], out_shape) -> list[int] | None:
    """The dim order (outermost first) of the first full-shape input when it is dense in a permuted layout
    (channels-last …), else None. A chain then reads that input in place and writes its outputs in the same
    layout — elementwise work commutes with a permutation of every operand — so a channels-last network stays
    channels-last instead of paying a layout copy at the next convolution."""
    ref = next((t for t in inputs if t.shape == out_shape), None)
    if ref is None or ref.dim() < 2 or ref.is_contiguous():
        return None
    return dense_order(ref)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _sm_count(device: torch.device) -> int:
    """Programs of a persistent config are counted per SM; the interpreter (CPU) stands in for a 2-SM device."""
    return sm_count(device, 2)


def _resident(regs: int, device: torch.device, warps: int, per_sm: int) -> int:
    """Programs of `warps` warps and `regs` registers per thread that one SM runs at once, at most `per_sm`: a
    persistent grid larger than that would run its last programs as a second wave, after the first finished
    all of their tiles (results are the same for any grid; only the time differs)."""
    p = torch.cuda.get_device_properties(device)
    by_threads = getattr(p, "max_threads_per_multi_processor", 2048) // (32 * warps)
    regs_per_warp = -(-regs * 32 // 256) * 256            # allocated per warp in units of 256
    by_regs = getattr(p, "regs_per_multiprocessor", 65536) // (regs_per_warp * warps)
    return max(1, min(per_sm, by_threads, by_regs, 32))


def _fits(layer, cfg, inputs) -> str | None:
    """Variant configs only where they can differ: lean needs a half-type GELU in the chain, persist a tensor
    of at least two tiles per program."""
    if cfg.get("lean") and not load_module(layer.attrs["kernel"]).get("HAS_LEAN"):
        return "lean applies to chains with a float16/bfloat16 GELU (none here)"
    per_sm = int(cfg.get("persist", 0))
    if per_sm:
        ins = [t for t in inputs if isinstance(t, torch.Tensor)]
        n = math.prod(torch.broadcast_shapes(*[t.shape for t in ins])) if ins else 0
        progs = per_sm * _sm_count(ins[0].device if ins else torch.device("cpu"))
        if n < 2 * progs * int(cfg["BLOCK"]):
            return f"persistent: {n} elements are under two tiles for each of its {progs} programs"
    return None


@tactic("PointwiseChain", name="triton_generated", configs=CONFIGS, priority=10)
class TritonPointwise:
    @staticmethod
    def supports(layer, device):
        why = triton_device_reason(device)
        if why is not None:
            return why
        if importlib.util.find_spec("triton") is None:
            return "Triton is not installed (pip install tensorforge[gpu])"
        key = layer.attrs.get("kernel")
        if not key:
            return "the layer has no generated kernel source (the builder generates one per chain)"
        if not has_source(key):
            return f"generated source {key[:12]}… was not generated in this process (regenerated at load)"
        return None

    fits = staticmethod(_fits)

    @staticmethod
    def build(layer, cfg, device):
        return _kernel(layer, cfg, device)
