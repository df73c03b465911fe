"""Checks a candidate must pass before it is timed or kept, shared by layer timing (tactics.py) and
network-context timing (context_timing.py): its outputs against the op's torch reference (`reference_outputs`,
`disagreement`), and whether a call can be captured in a CUDA graph (`try_capture`)."""

import torch

from ..ir import Layer
from ..ir.interpret import run_reference
from ..util.log import get_logger
from .layout_walk import FLOAT8


def try_capture(run, stream):
    """A CUDA graph of `run`, or None when `run` synchronises with the host (checked first with torch's sync debug
    mode: a capture that fails half-way would leave torch's CUDA RNG in capture state)."""
    old = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode("error")
    try:
        run()
    except RuntimeError:
        return None
    finally:
        torch.cuda.set_sync_debug_mode(old)
    graph = torch.cuda.CUDAGraph()
    torch.cuda.synchronize()
    graph.capture_begin(capture_error_mode="thread_local")
    try:
        run()
    except Exception:  # noqa: BLE001 - not capturable: timed eagerly instead (a timing method, not a result)
        try:
            graph.capture_end()
        except Exception:  # noqa: BLE001
            pass
        torch.cuda.synchronize()
        return None
    graph.capture_end()
    return graph


def reference_outputs(layer: Layer, inputs: list) -> list | None:
    """The op's torch reference on copies of the timing inputs: the oracle every candidate must agree with
    (a fast kernel that is wrong on this GPU, driver or library version is rejected, never timed).
    None when the reference cannot run on these random inputs (validation is then skipped, and logged)."""
    try:
        with torch.no_grad():
            return run_reference(layer, [t.clone() if isinstance(t, torch.Tensor) else t for t in inputs])
    except Exception as e:  # noqa: BLE001 - e.g. random data that the op rejects; candidates are still timed
        get_logger().verbose(f"layer {layer.name}: reference cannot validate tactics on random inputs: {e}")
        return None


# Integer outputs quantized from a float output of the same layer (LayerNormalizationQuantize's Q(y)): the float
# output agrees with the reference only within its tolerance, so a code may sit one step off where y rounded the
# other way. Allowed: at most one step, on at most CODE_SLACK_FRACTION of the elements.
CODE_SLACK = {"LayerNormalizationQuantize": (1,), "AddLayerNormalizationQuantize": (2,), "AttentionQuantize": (1,),
              "FusedConvQuantize": (1,), "FusedConvPoolQuantize": (2,)}
CODE_SLACK_FRACTION = 0.01
# AttentionQuantize: the flash kernel rounds the probabilities to the value dtype before P·V (as flash attention
# does), so its float output sits a few fp16 ulps from the float32 reference and an element's code flips where
# that gap straddles a rounding boundary: about 2·|code|·1e-3 of the elements (≈ 10 % at code 50). Still at most
# one code anywhere, so a wrong scale (off by ≥ 1 % shows as 2 codes at the top of the range) or a shifted zero
# point (every element off) is rejected. Seen under the 1 % rule: ViT-B/16 INT8 at batch 32 on an H100 ran 1 of its
# 12 attention layers on the reference (300 µs of 3.26 ms), the mark of a kernel the check turned down.
# The conv epilogues likewise: the reference runs bias, activation and residual as separate fp16 ops (a rounding
# each), the Triton epilogue in float32 with one rounding, so y differs by a few ulps (codes: the same argument).
CODE_SLACK_FRACTIONS = {"AttentionQuantize": 0.25, "FusedConvQuantize": 0.25, "FusedConvPoolQuantize": 0.25}


def disagreement(outs: list, expected: list | None, tf32: bool, code_slack: tuple = (),
                 code_fraction: float = CODE_SLACK_FRACTION) -> str | None:
    """None when every output matches the reference: exact for integers and bools (outputs in `code_slack`: within
    one code on ≤ `code_fraction` of the elements, CODE_SLACK / CODE_SLACK_FRACTIONS); for floats, on the positions
    where the reference is finite, max|out − ref| ≤ tol · max|ref| with tol 1e-2 (half types), 5e-3 (fp32 with
    TF32) or 1e-4 (fp32). These bounds accept reordered accumulation, not a wrong kernel."""
    if expected is None:
        return None
    for i, (got, want) in enumerate(zip(outs, expected)):
        if not isinstance(got, torch.Tensor) or not isinstance(want, torch.Tensor):
            continue
        if got.shape != want.shape:
            return f"output {i} has shape {tuple(got.shape)}, the reference {tuple(want.shape)}"
        want = want.to(got.device)
        if not want.is_floating_point():
            if i in code_slack and want.dtype != torch.bool:
                off = (got.to(torch.int64) - want.to(torch.int64)).abs()
                if off.numel() and (int(off.max()) > 1 or float((off > 0).float().mean()) > code_fraction):
                    return (f"output {i} differs from the reference by up to {int(off.max())} codes on "
                            f"{float((off > 0).float().mean()):.2%} of the elements")
                continue
            if not torch.equal(got.to(want.dtype), want):
                return f"output {i} differs from the reference (integer/bool values)"
            continue
        finite = torch.isfinite(want.float())            # float8 types have no isfinite kernel of their own
        g, w = got.float()[finite], want.float()[finite]
        if not torch.isfinite(g).all():
            return f"output {i} has inf/NaN where the reference is finite"
        if w.numel() == 0:
            continue
        tol = (1e-2 if want.dtype in (torch.float16, torch.bfloat16) else
               0.125 if want.dtype in FLOAT8 else (5e-3 if tf32 else 1e-4))   # fp8 (E4M3): one step = 2⁻³ of 2^e
        scale = float(w.abs().max()) + 1e-6
        err = float((g - w).abs().max())
        if err > tol * scale:
            return f"output {i}: max |err| {err:.3g} > {tol:g} · max |ref| {scale:.3g}"
    return None
