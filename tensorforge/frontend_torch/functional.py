"""torch.export, then functional: in-place aten ops (relu_, add_, hardswish_, dropout_ …) rewritten out of place.

    ep = export_functional(module_or_graph, args, dynamic_shapes=...)

torch.export's default IR keeps a module's in-place ops (torchvision's `ReLU(inplace=True)`, `out += identity`).
An in-place op has no layer of its own, so before this step each one was a graph break and a resnet ran as 65
PyTorch islands between engines. `ExportedProgram.run_decompositions({})` functionalises the graph (every
mutation of an intermediate becomes a new value that later readers use; eval-mode dropout disappears) and
decomposes nothing else that the converter table knows, except `batch_norm`, which comes back as
`_native_batch_norm_legit_no_training` (converters.py takes it).

Only graphs that mutate something are rewritten (`mutates`), so a graph that converted before converts the same
way. A graph that mutates a user input or a buffer is kept as exported: the mutation is an effect the caller
sees, not a value an engine returns, and its in-place op stays a reported break that PyTorch runs.
"""

import torch


def writes_an_argument(target) -> bool:
    """An aten overload whose schema writes one of its arguments (relu_, add_, copy_ …)."""
    return isinstance(target, torch._ops.OpOverload) and target._schema.is_mutable


def mutates(graph: torch.fx.Graph) -> bool:
    """True when some call in `graph` writes one of its arguments."""
    return any(n.op == "call_function" and writes_an_argument(n.target) for n in graph.nodes)


def functional(ep):
    """`ep` with its in-place ops made functional (see the module docstring), or `ep` itself when nothing mutates
    or when the mutation reaches a user input or a buffer."""
    if not mutates(ep.graph_module.graph):
        return ep
    out = ep.run_decompositions({})
    signature = out.graph_signature
    if signature.user_inputs_to_mutate or signature.buffers_to_mutate:
        return ep
    return out


def export_functional(fn, args, **kwargs):
    """torch.export.export(fn, args, **kwargs), then `functional`."""
    return functional(torch.export.export(fn, args, **kwargs))
