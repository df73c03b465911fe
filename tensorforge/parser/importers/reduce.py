"""Importers for reductions: Reduce* and ArgMax/ArgMin.

Before ReduceSum-13 and the other Reduce*-18 (ReduceMax/Min-20 and ReduceLogSum*-28 keep the input form),
`axes` was an attribute; it becomes an int64 constant input and noop_with_empty_axes is 0, so the IR op
has the latest form (ir/ops/reduce.py).
"""

from ..registry import importer
from .shape import attr_input

# op → (versions with an axes attribute, versions with an axes input)
_REDUCE = {
    "ReduceSum": ((1, 11), (13,)),
    "ReduceMean": ((1, 11, 13), (18,)),
    "ReduceMax": ((1, 11, 12, 13), (18, 20)),
    "ReduceMin": ((1, 11, 12, 13), (18, 20)),
    "ReduceProd": ((1, 11, 13), (18,)),
    "ReduceL1": ((1, 11, 13), (18,)),
    "ReduceL2": ((1, 11, 13), (18,)),
    "ReduceLogSum": ((1, 11, 13), (18, 28)),
    "ReduceLogSumExp": ((1, 11, 13), (18, 28)),
    "ReduceSumSquare": ((1, 11, 13), (18,)),
}


def _attr_form(op_type):
    def fn(ctx, node, inputs):
        axes = attr_input(ctx, node, "axes")
        return [ctx.add1(op_type, [inputs[0], axes] if axes else [inputs[0]],
                         {"keepdims": int(node.attrs.get("keepdims", 1)), "noop_with_empty_axes": 0})]
    return fn


def _input_form(op_type):
    def fn(ctx, node, inputs):
        args = inputs[:2] if len(inputs) > 1 and inputs[1] else inputs[:1]
        return [ctx.add1(op_type, args, {"keepdims": int(node.attrs.get("keepdims", 1)),
                                         "noop_with_empty_axes": int(node.attrs.get("noop_with_empty_axes", 0))})]
    return fn


for _op, (_attr_versions, _input_versions) in _REDUCE.items():
    importer(_op, versions=_attr_versions)(_attr_form(_op))
    importer(_op, versions=_input_versions)(_input_form(_op))


def _arg(op_type):
    def fn(ctx, node, inputs):
        return [ctx.add1(op_type, inputs, {"axis": int(node.attrs.get("axis", 0)),
                                           "keepdims": int(node.attrs.get("keepdims", 1)),
                                           "select_last_index": int(node.attrs.get("select_last_index", 0))})]
    return fn


importer("ArgMax", versions=(1, 11, 12, 13))(_arg("ArgMax"))
importer("ArgMin", versions=(1, 11, 12, 13))(_arg("ArgMin"))
