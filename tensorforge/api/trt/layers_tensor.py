"""Tensor-shaping layers of the TensorRT-style network API: matrix multiply, shuffle, reduce, softmax,
concatenation, constant and plugin layers (the convolution, pooling, activation and elementwise layers, and
the ILayer base with its re-lowering parameters, are in layers.py).

Each lowers to ONNX-named IR ops — MatMul (+ Transpose/Unsqueeze/Squeeze for MatrixOperation), Transpose/
Reshape, ReduceSum/ReduceMean/..., Softmax, Concat — or to an IR constant (IConstantLayer). Axis bitmasks
are TensorRT's: bit i selects axis i; softmax and concatenation default to axis rank−3 (0 below rank 3).
"""

import math

import torch

from ...util.errors import UsageError
from .enums import LayerType, MatrixOperation, ReduceOperation
from .layers import ILayer, _bits, _param
from .tensors import Dims, Permutation, as_weights


class IMatrixMultiplyLayer(ILayer):
    """MatMul after each operand's MatrixOperation: TRANSPOSE swaps its last two axes, VECTOR treats its last
    axis as a vector (a: (…, K) → (…, 1, K) and the 1 squeezed from the result; b: (…, K) → (…, K, 1))."""
    _layer_type, _kind = LayerType.MATRIX_MULTIPLY, "MatrixMultiply"
    op0 = _param("op0", MatrixOperation)
    op1 = _param("op1", MatrixOperation)

    def _operand(self, em, index: int, op: MatrixOperation) -> str:
        name = self._in(index)
        if op is MatrixOperation.TRANSPOSE:
            rank = len(self._network._info(name).shape)
            perm = list(range(rank - 2)) + [rank - 1, rank - 2]
            return em.add("Transpose", [name], {"perm": perm})[0]
        if op is MatrixOperation.VECTOR:
            return em.add("Unsqueeze", [name, em.const(torch.tensor([-2 if index == 0 else -1]), "axes")])[0]
        return name

    def _lower(self, em):
        op0, op1 = MatrixOperation(self._p["op0"]), MatrixOperation(self._p["op1"])
        a, b = self._operand(em, 0, op0), self._operand(em, 1, op1)
        squeeze = ([-1] if op1 is MatrixOperation.VECTOR else []) + ([-2] if op0 is MatrixOperation.VECTOR else [])
        if not squeeze:
            em.add("MatMul", [a, b], out=self._out())
            return
        prod = em.add("MatMul", [a, b])[0]
        em.add("Squeeze", [prod, em.const(torch.tensor(squeeze), "squeeze_axes")], out=self._out())


class IShuffleLayer(ILayer):
    """Transpose(first_transpose) → Reshape(reshape_dims, or the shape tensor input 1) → Transpose(second_transpose).
    A 0 in reshape_dims copies the input dimension while zero_is_placeholder is True (the default)."""
    _layer_type, _kind = LayerType.SHUFFLE, "Shuffle"
    first_transpose = _param("first_transpose", Permutation)
    reshape_dims = _param("reshape_dims", Dims)
    second_transpose = _param("second_transpose", Permutation)
    zero_is_placeholder = _param("zero_is_placeholder", bool)

    def _lower(self, em):
        p, cur = self._p, self._in(0)
        steps = []
        if p["first_transpose"] is not None and list(p["first_transpose"]) != sorted(p["first_transpose"]):
            steps.append(("Transpose", lambda c: [c], {"perm": list(p["first_transpose"])}))
        if len(self._inputs) > 1 and self._inputs[1] is not None:
            shape_name = self._inputs[1].name
            steps.append(("Reshape", lambda c: [c, shape_name], {"allowzero": int(not p["zero_is_placeholder"])}))
        elif p["reshape_dims"] is not None:
            dims = em.const(torch.tensor(list(p["reshape_dims"]), dtype=torch.int64), "shape")
            steps.append(("Reshape", lambda c: [c, dims], {"allowzero": int(not p["zero_is_placeholder"])}))
        if p["second_transpose"] is not None and list(p["second_transpose"]) != sorted(p["second_transpose"]):
            steps.append(("Transpose", lambda c: [c], {"perm": list(p["second_transpose"])}))
        if not steps:
            steps.append(("Identity", lambda c: [c], {}))
        for i, (op, ins, attrs) in enumerate(steps):
            last = i == len(steps) - 1
            cur = em.add(op, ins(cur), attrs, out=self._out() if last else None)[0]


_REDUCE = {ReduceOperation.SUM: "ReduceSum", ReduceOperation.PROD: "ReduceProd", ReduceOperation.MAX: "ReduceMax",
           ReduceOperation.MIN: "ReduceMin", ReduceOperation.AVG: "ReduceMean"}


class IReduceLayer(ILayer):
    """Reduce over the axes whose bits are set in `axes` (bit i = axis i)."""
    _layer_type, _kind = LayerType.REDUCE, "Reduce"
    op = _param("op", ReduceOperation)
    axes = _param("axes", int)
    keep_dims = _param("keep_dims", bool)

    def _lower(self, em):
        axes = _bits(self._p["axes"])
        if not axes:
            raise UsageError(f"reduce {self._name!r}: the axes bitmask is empty", "set bit i to reduce axis i")
        em.add(_REDUCE[ReduceOperation(self._p["op"])],
               [self._in(0), em.const(torch.tensor(axes, dtype=torch.int64), "axes")],
               {"keepdims": int(self._p["keep_dims"])}, out=self._out())


def _default_axis(rank: int) -> int:
    return rank - 3 if rank >= 3 else 0


class ISoftmaxLayer(ILayer):
    """Softmax along the one axis set in the `axes` bitmask (default: axis rank−3, or 0 below rank 3)."""
    _layer_type, _kind = LayerType.SOFTMAX, "Softmax"
    axes = _param("axes", int)

    def _lower(self, em):
        mask = self._p["axes"]
        if mask is None:
            axis = _default_axis(len(self._network._info(self._in(0)).shape))
        else:
            bits = _bits(mask)
            if len(bits) != 1:
                raise UsageError(f"softmax {self._name!r}: axes bitmask {mask} must set exactly one bit",
                                 "set axes = 1 << axis")
            axis = bits[0]
        em.add("Softmax", [self._in(0)], {"axis": axis}, out=self._out())


class IConcatenationLayer(ILayer):
    """Concatenate along `axis` (default rank−3, or 0 below rank 3)."""
    _layer_type, _kind = LayerType.CONCATENATION, "Concatenation"
    axis = _param("axis", int)

    def _lower(self, em):
        names = [self._in(i) for i in range(len(self._inputs))]
        axis = self._p["axis"]
        if axis is None:
            axis = _default_axis(len(self._network._info(names[0]).shape))
        em.add("Concat", names, {"axis": axis}, out=self._out())


class IConstantLayer(ILayer):
    """A constant tensor of `shape` filled from `weights` (not an IR layer: an IR constant)."""
    _layer_type, _kind = LayerType.CONSTANT, "Constant"
    shape = _param("shape", Dims)
    weights = _param("weights")

    def _lower(self, em):
        w = as_weights(self._p["weights"], f"constant {self._name!r}", required=True)
        shape = list(self._p["shape"])
        if math.prod(shape) != w.numel():
            raise UsageError(f"constant {self._name!r}: {w.numel()} weights do not fill shape {tuple(shape)}",
                             "pass exactly volume(shape) values")
        em.const(w.reshape(shape), exact=self._out()[0])


class IPluginLayer(ILayer):
    """A registered plugin (tensorforge.plugin) applied to the inputs; the IR op is the plugin's op name."""
    _layer_type, _kind = LayerType.PLUGIN, "Plugin"

    def _lower(self, em):
        em.add(self._p["op"], [self._in(i) for i in range(len(self._inputs))], dict(self._p["attrs"]),
               out=self._out())
