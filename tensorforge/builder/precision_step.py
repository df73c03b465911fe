"""The builder's precision steps: what each layer computes in, from the flags and the per-layer constraints.

    before the graph passes   quantize(net, config, device, points)    --int8/--fp8/--best: calibrated Q/DQ layers
    after the graph passes    convert(net, config, points, state)       --fp16/--bf16/--best and --layerPrecisions /
                                                                         --layerOutputTypes: casts (precision.py)
    at the end                finish(state) -> build_info entries       constraints not met: `obey` fails the
                                                                         build naming the layer, `prefer` logs
--stronglyTyped skips both: the network's own types (its Cast nodes included) are what runs. Layer names in the
specs are resolved by precision_spec.select on the network of each step.
"""

from dataclasses import dataclass, field, replace

import torch

from ..ir import Network
from ..util.errors import BuildError, UsageError
from ..util.log import get_logger
from .calibration import quantize_network
from .calibration.qdq_insert import QUANTIZED_OPS, insert_qdq
from .precision import PrecisionPlan, apply_precision
from .best import choose_precisions
from .precision_spec import TYPES, select
from .sparsity import apply_sparsity

_FLOAT = {"fp32", "fp16", "bf16"}


@dataclass
class PrecisionState:
    known: set[str] = field(default_factory=set)          # names of the original network (layers and origins)
    unmet: list[tuple[str, str]] = field(default_factory=list)
    quant: object | None = None                           # calibration.QuantizationResult
    sparsity: object | None = None                        # sparsity.SparsityReport
    best: object | None = None                            # best.BestChoice


def _check_flags(config) -> None:
    if config.precision_constraints not in ("none", "prefer", "obey"):
        raise UsageError(f"precision constraints {config.precision_constraints!r} are not none, prefer or obey",
                         "write --precisionConstraints=none|prefer|obey")
    if config.strongly_typed and (config.fp16 or config.bf16 or config.int8 or config.fp8 or config.best):
        raise UsageError("a strongly typed network takes its types from the network; --fp16/--bf16/--int8/--fp8/"
                         "--best conflict with it", "drop the precision flags or --stronglyTyped")
    if config.strongly_typed and (config.layer_precisions or config.layer_output_types):
        raise UsageError("--layerPrecisions/--layerOutputTypes do not apply to a strongly typed network",
                         "change the types in the model, or drop --stronglyTyped")


def begin(network: Network, config) -> PrecisionState:
    _check_flags(config)
    state = PrecisionState()
    for layer in network.layers:
        state.known.add(layer.name)
        state.known.update(layer.origin)
    if (config.layer_precisions or config.layer_output_types) and config.precision_constraints == "none":
        get_logger().info("--layerPrecisions/--layerOutputTypes given without --precisionConstraints: using prefer "
                          "(as trtexec does)")
        config.precision_constraints = "prefer"
    return state


def _engine_names(net: Network, config, points: list[dict]) -> dict[str, list[str]]:
    """Layer name → ONNX origins of the layers the graph passes make, with and without Q/DQ (dry runs on copies):
    how a fused name from --dumpLayerInfo (`relu1/fused_conv`) is resolved before the passes have run."""
    from ..passes import optimize
    names: dict[str, list[str]] = {}
    copies = [net.copy()]
    if config.int8 or config.fp8 or config.best:
        q = net.copy()
        insert_qdq(q, {n: 1.0 for n in q.tensors}, "int8" if (config.int8 or config.best) else "fp8")
        copies.append(q)
    for c in copies:
        optimize(c, points, config.optimization_level, max_fold_elements=config.max_fold_elements)
        names.update({la.name: list(la.origin) for la in c.layers})
    return names


def _expand(net: Network, entries: list, config, points: list[dict]) -> list:
    """Entries naming an engine layer that exists only after the passes → one entry per ONNX node of it."""
    direct = {la.name for la in net.layers} | {o for la in net.layers for o in la.origin}
    engine = None
    out = []
    for name, value in entries:
        probe = name[:-len("/chain")] if name.endswith("/chain") else name
        if name == "*" or name in direct or probe in direct:
            out.append((name, value))
            continue
        engine = _engine_names(net, config, points) if engine is None else engine
        origins = engine.get(name) or engine.get(probe)
        out.extend([(o, value) for o in origins if o in direct] if origins else [(name, value)])
    return out


def quantize(net: Network, config, device, points: list[dict], state: PrecisionState, build_engine) -> None:
    """Calibrated Q/DQ layers for --int8/--fp8/--best; --best's trial builds run through `build_engine` (the
    builder's entry point, handed down by the builder)."""
    if config.layer_precisions:
        config.layer_precisions = _expand(net, config.layer_precisions, config, points)
    wanted = select(net, config.layer_precisions, "--layerPrecisions", state.known, get_logger())
    choice = None
    if config.best and config.best_by_timing:         # INT8 vs FP16 per layer, by timing two trial builds
        choice = choose_precisions(net, config, device, build_engine)
    if config.sparsity not in ("disable", "enable", "force"):
        raise UsageError(f"sparsity {config.sparsity!r} is not disable, enable or force", "write --sparsity=enable")
    state.sparsity = apply_sparsity(net, config.sparsity, device)
    quantizing = config.int8 or config.fp8 or config.best
    kind = "int8" if (config.int8 or config.best) else "fp8"
    for name, p in wanted.items():
        if p in ("int8", "fp8") and not quantizing:
            state.unmet.append((name, f"{p} is asked for but neither --int8 nor --fp8 is enabled"))
        elif p in ("int8", "fp8") and p != kind:
            state.unmet.append((name, f"{p} is asked for but this build quantizes to {kind}"))
    if not quantizing:
        return
    skip = {name for name, p in wanted.items() if p in _FLOAT}
    qconfig = config
    if choice is not None:
        skip |= {n for n in choice.keep_fp16 if wanted.get(n) not in ("int8", "fp8")}
        qconfig = replace(config, calibration=None, dynamic_ranges={**choice.amax, **config.dynamic_ranges})
        state.best = choice
    state.quant = quantize_network(net, qconfig, device, points, skip)
    if state.quant is None:
        return
    ops = {la.name: la.op for la in net.layers}
    for name, p in wanted.items():
        if p != kind or name not in ops:
            continue
        if ops[name] not in QUANTIZED_OPS:
            state.unmet.append((name, f"{ops[name]} layers have no {p} implementation (only "
                                      f"{', '.join(QUANTIZED_OPS)} are quantized)"))
        elif name in state.quant.report.skipped:
            state.unmet.append((name, f"it cannot run in {p}: {state.quant.report.skipped[name]}"))


def convert(net: Network, config, points: list[dict], output_dtypes: dict, state: PrecisionState) -> None:
    if config.strongly_typed:
        return
    default = torch.float16 if (config.fp16 or config.best) else torch.bfloat16 if config.bf16 else torch.float32
    log = get_logger()
    wanted = select(net, config.layer_precisions, "--layerPrecisions", state.known, log)
    outs = select(net, config.layer_output_types, "--layerOutputTypes", state.known, log)
    plan = PrecisionPlan(default, {n: TYPES[p] for n, p in wanted.items() if p in _FLOAT},
                         {n: [TYPES[t] if t in _FLOAT else None for t in ts] for n, ts in outs.items()})
    for name, ts in outs.items():
        for t in ts:
            if t is not None and t not in _FLOAT:
                state.unmet.append((name, f"output type {t} is not produced by tensorforge layers (float types only)"))
    if default == torch.float32 and not plan.layers and not plan.outputs:
        return
    report = apply_precision(net, plan, output_dtypes, points[0], config.max_fold_elements)
    state.unmet.extend(report.unmet)
    by_name = {la.name: la for la in net.layers}
    named = {n for n, _ in config.layer_precisions}        # layers matched only through an origin may be int-only
    for name, p in plan.layers.items():
        layer = by_name.get(name)
        if layer is not None and layer.precision is None and name in named:
            state.unmet.append((name, f"{layer.op} computes no float values, it cannot run in "
                                      f"{[k for k, v in TYPES.items() if v == p][0]}"))
    log.verbose(f"precision: {report.constants_converted} constant(s) converted, {report.casts_inserted} cast(s)")


def finish(config, state: PrecisionState, net: Network | None = None) -> dict:
    log = get_logger()
    for name, why in state.unmet:
        if config.precision_constraints == "obey":
            raise BuildError(f"precision constraint on layer {name!r} cannot be met: {why}",
                             "change --layerPrecisions/--layerOutputTypes for it, or use --precisionConstraints=prefer")
        if config.precision_constraints == "prefer":
            log.warning(f"precision constraint on layer {name!r} is not met ({why}); building on (prefer)")
    info = {}
    if state.quant is not None:
        info["quantization"] = {"kind": state.quant.kind, "ranges": state.quant.origin,
                                "layers": list(state.quant.report.layers),
                                "tensor_scales": state.quant.scales()}
    if state.best is not None:
        info["best"] = {**state.best.verdict, "fp16_layers": state.best.keep_fp16, "costs_ms": state.best.costs_ms()}
    if state.sparsity is not None and state.sparsity.mode != "disable":
        used = [la.name for la in (net.layers if net is not None else []) if la.op == "SparseGemm"
                and la.tactic and "semi_structured" in la.tactic]
        log.info(f"sparsity: {len(used)} layer(s) run the 2:4 sparse tactic" + (f": {', '.join(used)}" if used else ""))
        info["sparsity"] = {"mode": state.sparsity.mode, "pruned": state.sparsity.pruned,
                            "sparse_candidates": state.sparsity.sparse, "sparse_tactic": used,
                            "dense": state.sparsity.skipped}
    return info
