"""Importers for If, Loop, Scan and SequenceMap: ONNX subgraphs become ir.Network attributes.

A subgraph may read tensors of the enclosing graph by name. `subnetwork` finds those free names
(recursively, through nested subgraphs), declares them as extra inputs of the subgraph, parses it with
the same parser (`import_graph`), and the importer passes the outer tensors as the layer's trailing
inputs (ir/ops/control.py describes the calling convention).
"""

import onnx
from onnx import helper

from ..registry import importer
from ..tensors import TORCH_TO_ONNX


def _graphs_of(node: onnx.NodeProto):
    for a in node.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            yield a.g
        elif a.type == onnx.AttributeProto.GRAPHS:
            yield from a.graphs


def free_names(graph: onnx.GraphProto) -> list[str]:
    """Names `graph` (or a subgraph inside it) reads but does not define, in order of first use."""
    defined = {vi.name for vi in graph.input} | {t.name for t in graph.initializer}
    defined |= {t.values.name for t in graph.sparse_initializer}
    free: list[str] = []

    def use(name):
        if name and name not in defined and name not in free:
            free.append(name)

    for node in graph.node:
        for name in node.input:
            use(name)
        for sub in _graphs_of(node):
            for name in free_names(sub):
                use(name)
        defined.update(o for o in node.output if o)
    for vi in graph.output:
        use(vi.name)
    return free


def subnetwork(ctx, graph: onnx.GraphProto, captured: list[str], name: str):
    """Parse `graph` as an ir.Network whose inputs are its own inputs followed by `captured` (outer names)."""
    if ctx.import_graph is None:
        raise TypeError("ImportContext has no import_graph: subgraphs are parsed by the parser that made the context")
    g = onnx.GraphProto()
    g.CopyFrom(graph)
    for outer in captured:          # typed when the outer dtype is known at parse time, else untyped
        info = ctx.info(ctx.resolve(outer))
        elem = TORCH_TO_ONNX.get(info.dtype) if info is not None and info.dtype is not None else None
        g.input.append(helper.make_tensor_value_info(outer, elem, None) if elem else onnx.ValueInfoProto(name=outer))
    return ctx.import_graph(g, ctx.opsets, ctx.base_dir, name)


def _outer(ctx, names):
    return [ctx.resolve(n) for n in names]


def _name(node, what):
    return f"{node.name or node.op_type}/{what}"


@importer("If", versions=(1, 11, 13, 16, 19, 21, 23, 24, 25))
def import_if(ctx, node, inputs):
    then_g, else_g = node.attrs["then_branch"], node.attrs["else_branch"]
    captured = free_names(then_g)
    captured += [n for n in free_names(else_g) if n not in captured]
    attrs = {"then_branch": subnetwork(ctx, then_g, captured, _name(node, "then")),
             "else_branch": subnetwork(ctx, else_g, captured, _name(node, "else"))}
    return ctx.add("If", [inputs[0]] + _outer(ctx, captured), attrs, num_outputs=len(node.outputs))


@importer("Loop", versions=(1, 11, 13, 16, 19, 21, 23, 24, 25))   # 11 only reworded the doc of 1
def import_loop(ctx, node, inputs):
    body = node.attrs["body"]
    captured = free_names(body)
    net = subnetwork(ctx, body, captured, _name(node, "body"))
    ins = (inputs + ["", ""])[:2] + inputs[2:]
    return ctx.add("Loop", ins + _outer(ctx, captured), {"body": net, "num_captured": len(captured)},
                   num_outputs=len(node.outputs))


def _scan_attrs(node, n_captured, body_net, batch_axis=0):
    attrs = {"body": body_net, "num_scan_inputs": node.attrs["num_scan_inputs"], "num_captured": n_captured,
             "batch_axis": batch_axis}
    for k in ("scan_input_axes", "scan_input_directions", "scan_output_axes", "scan_output_directions"):
        if k in node.attrs:
            attrs[k] = list(node.attrs[k])
    return attrs


@importer("Scan", versions=(9, 11, 16, 19, 21, 23, 24, 25))
def import_scan(ctx, node, inputs):
    body = node.attrs["body"]
    captured = free_names(body)
    attrs = _scan_attrs(node, len(captured), subnetwork(ctx, body, captured, _name(node, "body")))
    return ctx.add("Scan", inputs + _outer(ctx, captured), attrs, num_outputs=len(node.outputs))


@importer("Scan", versions=(8,))
def import_scan_8(ctx, node, inputs):
    """Scan-8: a leading batch axis on every input, scanned over axis 1; `directions` per scan input;
    an explicit sequence_lens (first input) shorter than the scan axis is not supported."""
    if inputs and inputs[0]:
        raise ValueError("Scan-8 with sequence_lens is not supported; re-export with opset >= 9")
    body = node.attrs["body"]
    captured = free_names(body)
    attrs = _scan_attrs(node, len(captured), subnetwork(ctx, body, captured, _name(node, "body")), batch_axis=1)
    if "directions" in node.attrs:
        attrs["scan_input_directions"] = list(node.attrs["directions"])
    return ctx.add("Scan", inputs[1:] + _outer(ctx, captured), attrs, num_outputs=len(node.outputs))


@importer("SequenceMap", versions=(17,))
def import_sequence_map(ctx, node, inputs):
    body = node.attrs["body"]
    captured = free_names(body)
    net = subnetwork(ctx, body, captured, _name(node, "body"))
    return ctx.add("SequenceMap", inputs + _outer(ctx, captured), {"body": net, "num_captured": len(captured)},
                   num_outputs=len(node.outputs))
