"""Fold what does not depend on the inputs: nodes computed from literals and small constants run once, at
conversion, in PyTorch, and become constants of the graph (get_attr).

    count = fold_input_free(gm, constants)        # before partitioning: the partitioner never sees them

Exported transformers build their masks and positions from sizes alone — `arange`, `new_ones`, `cumsum`, `diff`,
`ne`, `index`, `&`, `to` — (GPT-2 of transformers 5: 20 such nodes, each a graph break before this step, for ops no
engine needs at run time), and read small buffers (BERT's `token_type_ids`, gathered by position). With static
shapes their values are fixed: TensorRT folds such subgraphs when it builds; here they are evaluated before
conversion, so no converter is needed for them and nothing of them runs per call.

A node folds when it is a call of an aten overload or `operator.getitem`, its schema writes nothing, it is not
random (`nondeterministic_seeded`), it has no symbolic size among its arguments, every tensor it reads is folded
already, a get_attr, or a module-state constant of at most `SMALL` elements (weights stay the shared parameters
the converters see, not folded copies), and its value is a tensor (or a tuple of tensors, for getitem) of at most
`LARGEST` elements. `new_ones`, `zeros_like` and their kin read only their first argument's traced shape, dtype and
device, so they fold whatever that argument is (static shapes). Cost: one eager evaluation per folded node at build time; memory: the folded values.
"""

import operator

import torch
import torch.utils._pytree as pytree

from .functional import writes_an_argument

SMALL = 1 << 16            # a module-state constant read by a folded node: at most this many elements
LARGEST = 1 << 24          # a folded value: at most this many elements (a causal mask at 4k × 4k is 16 M)


def _tensors(value):
    return [v for v in pytree.tree_leaves(value) if isinstance(v, torch.Tensor)]


def _foldable_target(node) -> bool:
    if node.op != "call_function":
        return False
    if node.target is operator.getitem:
        return True
    target = node.target
    if not isinstance(target, torch._ops.OpOverload) or writes_an_argument(target):
        return False
    return torch.Tag.nondeterministic_seeded not in target.tags


aten = torch.ops.aten
# ops that read only the shape, dtype and device of their first argument: with static shapes they fold whatever
# that argument's values are (x.new_ones((b, t)) of an input x)
METADATA_ONLY = {aten.new_ones.default, aten.new_zeros.default, aten.new_full.default, aten.ones_like.default,
                 aten.zeros_like.default, aten.full_like.default}


def _stand_in(arg):
    """A tensor with `arg`'s traced shape, dtype and device (for METADATA_ONLY ops), or raise KeyError."""
    val = arg.meta.get("val") if isinstance(arg, torch.fx.Node) else None
    if not isinstance(val, torch.Tensor) or not all(isinstance(d, int) for d in val.shape):
        raise KeyError("no static traced value")
    return torch.zeros(tuple(val.shape), dtype=val.dtype, device=val.device)


def _value_of(arg, gm, known: dict, constants: dict):
    """The value of an argument when it is known at conversion (folded, get_attr, small state), else raise KeyError."""
    if not isinstance(arg, torch.fx.Node):
        if isinstance(arg, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            raise KeyError("symbolic")
        return arg
    if arg.name in known:
        return known[arg.name]
    if arg.op == "get_attr":
        return getattr(gm, arg.target)
    if arg.op == "placeholder" and arg.name in constants and constants[arg.name].numel() <= SMALL:
        return constants[arg.name]
    raise KeyError(arg.name)


def fold_input_free(gm: torch.fx.GraphModule, constants: dict) -> int:
    """Replace every foldable node (module docstring) whose value is used by a node that is not folded itself
    with a get_attr of that value; the folded nodes are removed. Returns the number of nodes folded."""
    known: dict = {}
    for node in gm.graph.nodes:
        if not _foldable_target(node):
            continue
        try:
            if node.target in METADATA_ONLY and node.args:
                first = node.args[0]
                try:
                    first = _value_of(first, gm, known, constants)
                except KeyError:
                    first = _stand_in(first)
                args = (first,) + tuple(pytree.tree_map(lambda a: _value_of(a, gm, known, constants), node.args[1:]))
            else:
                args = pytree.tree_map(lambda a: _value_of(a, gm, known, constants), node.args)
            kwargs = pytree.tree_map(lambda a: _value_of(a, gm, known, constants), node.kwargs)
        except KeyError:
            continue
        try:
            with torch.no_grad():
                value = node.target(*args, **kwargs)
        except Exception:  # noqa: BLE001 - a node that cannot run here is converted (or broken) as before
            continue
        tensors = _tensors(value)
        if not tensors or len(tensors) != len(pytree.tree_leaves(value)) or sum(t.numel() for t in tensors) > LARGEST:
            continue
        known[node.name] = value
    if not known:
        return 0
    folded = 0
    for node in list(gm.graph.nodes):
        if node.name not in known or not isinstance(known[node.name], torch.Tensor):
            continue
        if all(user.name in known for user in node.users):
            continue                                # only read by other folded nodes: removed with them below
        attr = f"_tf_folded_{node.name}"
        gm.register_buffer(attr, known[node.name].contiguous(), persistent=False)
        with gm.graph.inserting_before(node):
            new = gm.graph.get_attr(attr)
        new.meta = dict(node.meta)
        node.replace_all_uses_with(new)
    for node in reversed(list(gm.graph.nodes)):    # users before producers
        if node.name in known and not node.users:
            gm.graph.erase_node(node)
            folded += 1
    gm.recompile()
    return folded
