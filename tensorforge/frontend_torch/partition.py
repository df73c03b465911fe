"""Split an aten FX graph into engines and PyTorch calls; build the engines.

    runner, report = lower_graph(gm, constants, options)     # runner(*placeholder values) → flat outputs

With no unsupported node the whole graph is one engine (`EngineCall`, saveable). Otherwise the maximal
supported subgraphs (CapabilityBasedPartitioner over the converter table's OperatorSupport) become one engine
each and the rest stays as the aten calls they are; each break is logged with its op and reason and kept in
`report.breaks`.
"""

from dataclasses import dataclass, field

import torch
import torch.fx
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from ..api import Engine
from ..builder import BuilderConfig, build_engine
from ..util.errors import UsageError
from ..util.log import get_logger
from .converters import unsupported_reason
from .fold import fold_input_free
from .quant_options import QUANT_OPTIONS, bind_calibration, configure_quant, refuse_with_breaks
from .fx_to_ir import fx_to_ir
from .runner import EngineCall

_OPTIONS = {"fp16", "bf16", "tf32", "optimization_level", "device", "timing_cache"} | QUANT_OPTIONS


@dataclass
class Report:
    breaks: list[tuple[str, str, str]] = field(default_factory=list)   # (node, op, reason) left to PyTorch
    engines: int = 0
    converted_nodes: int = 0
    folded: int = 0                                                    # input-free nodes evaluated at conversion
    built: list = field(default_factory=list, repr=False)             # the Engines, in graph order
    calls: list = field(default_factory=list, repr=False)             # the EngineCalls that run them

    def layer_ops(self) -> dict[str, int]:
        """Layer op → count over the built engines (the fused network: what runs)."""
        counts: dict[str, int] = {}
        for engine in self.built:
            for layer in engine.data.layers:
                counts[layer.op] = counts.get(layer.op, 0) + 1
        return dict(sorted(counts.items()))

    def __str__(self) -> str:
        lines = [f"{self.engines} engine(s), {self.converted_nodes} node(s) converted, {len(self.breaks)} break(s)"
                 + (f", {self.folded} input-free node(s) folded" if self.folded else "")]
        lines += [f"  break at {n} ({op}): {why}" for n, op, why in self.breaks]
        return "\n".join(lines)


def build_options(options: dict | None, example_args) -> tuple[BuilderConfig, object]:
    options = dict(options or {})
    unknown = set(options) - _OPTIONS
    if unknown:
        raise UsageError(f"unknown tensorforge option(s): {', '.join(sorted(unknown))}",
                         f"known options: {', '.join(sorted(_OPTIONS))}")
    device = options.get("device")
    if device is None:
        device = next((a.device for a in example_args if isinstance(a, torch.Tensor)), None)
    config = BuilderConfig(fp16=bool(options.get("fp16", False)), bf16=bool(options.get("bf16", False)),
                           tf32=bool(options.get("tf32", True)),
                           optimization_level=int(options.get("optimization_level", 3)),
                           timing_cache_path=options.get("timing_cache"),
                           device=str(device) if device is not None else None)
    configure_quant(config, options)
    return config, device


def symbolic_profile(gm: torch.fx.GraphModule, inputs: list[str], points: dict | None) -> list:
    """One OptimizationProfile for the engine inputs of `gm` whose traced sizes are symbolic: each dim's expression
    evaluated at the min/opt/max values of the symbols (`points`: {"min"|"opt"|"max": {sympy symbol: int}}). Sizes
    are sums and products of the symbols, so they grow with them and the three points stay ordered."""
    if not points:
        return []
    from ..builder import OptimizationProfile
    vals = {n.name: n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"}
    profile = OptimizationProfile()
    for name in inputs:
        dims = list(vals[name].shape)
        if all(isinstance(d, int) for d in dims):
            continue
        at = {k: tuple(int(d) if isinstance(d, int) else int(d.node.expr.xreplace(pt)) for d in dims)
              for k, pt in points.items()}
        profile.set_shape(name, at["min"], at["opt"], at["max"])
    return [profile] if profile.shapes else []


def _engine_call(gm: torch.fx.GraphModule, constants: dict, config, device, name: str,
                 points: dict | None = None) -> tuple[EngineCall, int]:
    conv = fx_to_ir(gm, constants, name=name, copy_transposed=config.fp16 or config.bf16)
    config = bind_calibration(config, conv.inputs)
    config.profiles = symbolic_profile(gm, conv.inputs, points)
    engine = Engine(build_engine(conv.network, config), device)
    placeholders = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    out_node = next(n for n in gm.graph.nodes if n.op == "output")
    as_tuple = isinstance(out_node.args[0], (list, tuple))
    count = sum(n.op == "call_function" for n in gm.graph.nodes)
    return EngineCall(engine, placeholders, conv.inputs, conv.outputs, as_tuple), count


class _Support(OperatorSupportBase):
    def is_node_supported(self, submodules, node) -> bool:
        return node.op == "call_function" and unsupported_reason(node) is None


def lower_graph(gm: torch.fx.GraphModule, constants: dict, options: dict | None, example_args,
                points: dict | None = None) -> tuple:
    """`points`: the min/opt/max values of the graph's size symbols when its shapes are symbolic (dynamic.py)."""
    config, device = build_options(options, example_args)
    log, report = get_logger(), Report()
    report.folded = fold_input_free(gm, constants)
    if report.folded:
        log.info(f"tensorforge: {report.folded} node(s) that do not depend on the inputs evaluated once, at conversion")
    for node in gm.graph.nodes:
        if node.op == "call_function":
            reason = unsupported_reason(node)
            if reason is not None:
                report.breaks.append((node.name, str(node.target), reason))
                log.warning(f"tensorforge: graph break at {node.name} ({node.target}): {reason}; it runs in PyTorch")
    refuse_with_breaks(config, report.breaks)
    if not report.breaks:
        call, report.converted_nodes = _engine_call(gm, constants, config, device, "torch", points)
        report.engines = 1
        report.built.append(call.engine)
        report.calls.append(call)
        return call, report
    partitioner = CapabilityBasedPartitioner(gm, _Support(), allows_single_node_partition=True)
    fused = partitioner.fuse_partitions(partitioner.propose_partitions())
    outer_meta = {n.name: n for n in fused.graph.nodes}
    for node in list(fused.graph.nodes):
        if node.op != "call_module":
            continue
        sub = getattr(fused, node.target)
        phs = [n for n in sub.graph.nodes if n.op == "placeholder"]
        sub_consts = {}
        for ph, arg in zip(phs, node.args):
            if "val" not in ph.meta and isinstance(arg, torch.fx.Node):
                ph.meta["val"] = outer_meta[arg.name].meta.get("val")
            if isinstance(arg, torch.fx.Node) and arg.op == "placeholder" and arg.name in constants:
                sub_consts[ph.name] = constants[arg.name]
            elif isinstance(arg, torch.fx.Node) and arg.op == "get_attr":     # a folded value (fold.py)
                sub_consts[ph.name] = getattr(fused, arg.target)
        call, count = _engine_call(sub, sub_consts, config, device, str(node.target), points)
        setattr(fused, node.target, call)
        report.engines += 1
        report.built.append(call.engine)
        report.calls.append(call)
        report.converted_nodes += count
    fused.recompile()
    return fused, report
