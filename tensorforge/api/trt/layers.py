"""The layer classes of the TensorRT-style network API, each lowering itself to IR layers (this file: the ILayer
base, convolution, activation, elementwise and pooling; layers_tensor.py: the shaping layers).

An ILayer keeps TensorRT's parameters (stride_nd, padding_nd, axes bitmasks, ...) as its state. `_lower(em)`
turns that state into IR layers named as ONNX ops (Conv, MaxPool, Relu, MatMul, Reshape, ReduceSum, Softmax,
Concat, ...) through the network's emitter; setting any parameter re-lowers the layer in place, so the
TensorRT idiom `conv = add_convolution_nd(...); conv.stride_nd = (2, 2)` works. Defaults are TensorRT's:
strides/dilations 1, no padding, one group, pooling averages exclude padding, softmax and concatenation on
axis rank−3 (0 for rank < 3). Alpha/beta of activations default to 0.
"""

import math

import torch

from ...util.errors import UsageError
from .enums import ActivationType, DataType, ElementWiseOperation, LayerType, PaddingMode, PoolingType
from .layer_types import layer_type
from .strict import TrtObject
from .tensors import Dims, as_weights


def _param(name: str, convert=None):
    """A layer attribute that re-lowers the layer when set."""
    def get(self):
        return self._p[name]

    def set_(self, value):
        self._p[name] = convert(value) if convert is not None and value is not None else value
        self._network._relower(self)
    return property(get, set_)


_SPEC_TYPE = {"fp32": DataType.FLOAT, "fp16": DataType.HALF, "bf16": DataType.BF16, "int8": DataType.INT8,
              "fp8": DataType.FP8}


def _spec_of(dtype, what: str) -> str:
    for spec, dt in _SPEC_TYPE.items():
        if DataType(dtype) is dt:
            return spec
    raise UsageError(f"{what}: {DataType(dtype)} is not a compute precision", "use trt.float32, float16, bfloat16, int8 or fp8")


def _bits(mask: int) -> list[int]:
    return [i for i in range(32) if int(mask) >> i & 1]


class PrecisionControls:
    """layer.precision / set_output_type: constraints the builder applies (BuilderFlag.*_PRECISION_CONSTRAINTS)."""

    @property
    def precision(self) -> DataType:
        spec = getattr(self, "_precision_spec", None)
        return _SPEC_TYPE[spec] if spec else DataType.FLOAT

    @precision.setter
    def precision(self, dtype) -> None:
        self._precision_spec = _spec_of(dtype, f"layer {self.name!r}: precision")

    def reset_precision(self) -> None:
        self._precision_spec = None

    def set_output_type(self, index: int, dtype) -> None:
        if not 0 <= int(index) < self.num_outputs:
            raise UsageError(f"layer {self.name!r} has no output {index}", f"use 0 … {self.num_outputs - 1}")
        if getattr(self, "_output_specs", None) is None:
            self._output_specs = {}
        self._output_specs[int(index)] = _spec_of(dtype, f"layer {self.name!r}: output type")

    def reset_output_type(self, index: int) -> None:
        getattr(self, "_output_specs", None) and self._output_specs.pop(int(index), None)

    def get_output_type(self, index: int) -> DataType:
        spec = (getattr(self, "_output_specs", None) or {}).get(int(index))
        return _SPEC_TYPE[spec] if spec else self.get_output(index).dtype

    def precision_is_set(self) -> bool:
        return bool(getattr(self, "_precision_spec", None))

    def output_type_is_set(self, index: int) -> bool:
        return int(index) in (getattr(self, "_output_specs", None) or {})


class ILayer(PrecisionControls, TrtObject):
    _layer_type = LayerType.OTHER
    _kind = "Layer"

    def __init__(self, network, inputs, num_outputs: int = 1, **params):
        self._network = network
        self._inputs = list(inputs)
        self._p = params
        self._name = network._fresh_layer_name(self._kind)
        self._outputs = [network._new_tensor(f"{self._name}_output" + (f"_{i}" if num_outputs > 1 else ""))
                         for i in range(num_outputs)]
        self._ir = []
        self._consts = []
        self.metadata = ""

    # ---- TensorRT's ILayer surface ---------------------------------------------------------------
    @property
    def type(self) -> LayerType:
        return self._layer_type

    @property
    def name(self) -> str:
        return self._name

    @name.setter
    def name(self, value: str) -> None:
        self._network._rename_layer(self, str(value))

    @property
    def num_inputs(self) -> int:
        return len(self._inputs)

    @property
    def num_outputs(self) -> int:
        return len(self._outputs)

    def get_input(self, index: int):
        return self._inputs[index]

    def get_output(self, index: int):
        return self._outputs[index]

    def set_input(self, index: int, tensor) -> None:
        while len(self._inputs) <= index:
            self._inputs.append(None)
        self._inputs[index] = tensor
        self._network._relower(self)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._name!r})"

    # ---- lowering --------------------------------------------------------------------------------
    def _in(self, index: int) -> str:
        t = self._inputs[index]
        if t is None:
            raise UsageError(f"layer {self._name!r}: input {index} is not set", "pass a tensor or call set_input")
        return t.name

    def _out(self) -> list[str]:
        return [t.name for t in self._outputs]

    def _lower(self, em) -> None:
        raise NotImplementedError


class IIdentityLayer(ILayer):
    _layer_type, _kind = LayerType.IDENTITY, "Identity"

    def _lower(self, em):
        em.add("Identity", [self._in(0)], out=self._out())


class IConvolutionLayer(ILayer):
    """y = Conv(x, W, b): W reshaped to (num_output_maps, C/num_groups, *kernel_size_nd) from the flat weights."""
    _layer_type, _kind = LayerType.CONVOLUTION, "Convolution"
    num_output_maps = _param("num_output_maps", int)
    kernel_size_nd = _param("kernel_size_nd", Dims)
    kernel = _param("kernel")
    bias = _param("bias")
    stride_nd = _param("stride_nd", Dims)
    pre_padding = _param("pre_padding", Dims)
    post_padding = _param("post_padding", Dims)
    padding_mode = _param("padding_mode", PaddingMode)
    num_groups = _param("num_groups", int)
    dilation_nd = _param("dilation_nd", Dims)

    @property
    def padding_nd(self) -> Dims:
        return self._p["pre_padding"]

    @padding_nd.setter
    def padding_nd(self, value) -> None:
        self._p["pre_padding"] = self._p["post_padding"] = Dims(value)
        self._network._relower(self)

    def _lower(self, em):
        p = self._p
        ks = list(p["kernel_size_nd"])
        nd = len(ks)
        inputs = [self._in(0)]
        if len(self._inputs) > 1 and self._inputs[1] is not None:
            inputs.append(self._inputs[1].name)
        else:
            w = as_weights(p["kernel"], f"convolution {self._name!r} kernel", required=True)
            per_group, rest = divmod(w.numel(), p["num_output_maps"] * math.prod(ks))
            if rest or per_group == 0:
                raise UsageError(f"convolution {self._name!r}: {w.numel()} kernel weights do not split into "
                                 f"{p['num_output_maps']} maps of kernel {tuple(ks)}",
                                 "pass num_output_maps × C/num_groups × kernel-volume weights")
            inputs.append(em.const(w.reshape(p["num_output_maps"], per_group, *ks), "kernel"))
        if len(self._inputs) > 2 and self._inputs[2] is not None:
            inputs.append(self._inputs[2].name)
        else:
            b = as_weights(p["bias"], f"convolution {self._name!r} bias")
            if b is not None:
                if b.numel() != p["num_output_maps"]:
                    raise UsageError(f"convolution {self._name!r}: bias has {b.numel()} values for "
                                     f"{p['num_output_maps']} output maps", "pass one bias value per output map")
                inputs.append(em.const(b.reshape(-1), "bias"))
        attrs = {"kernel_shape": ks, "strides": list(p["stride_nd"] or [1] * nd), "group": p["num_groups"],
                 "dilations": list(p["dilation_nd"] or [1] * nd)}
        attrs.update(_padding_attrs(self, nd, allow_round_up=False))
        em.add("Conv", inputs, attrs, out=self._out())


def _padding_attrs(layer: ILayer, nd: int, allow_round_up: bool) -> dict:
    p = layer._p
    mode = PaddingMode(p["padding_mode"])
    if mode in (PaddingMode.SAME_UPPER, PaddingMode.SAME_LOWER):
        return {"auto_pad": mode.name}
    if mode is PaddingMode.EXPLICIT_ROUND_UP and not allow_round_up:
        raise UsageError(f"layer {layer._name!r}: PaddingMode.EXPLICIT_ROUND_UP is not supported for convolutions",
                         "use EXPLICIT_ROUND_DOWN, SAME_UPPER or SAME_LOWER")
    pre, post = list(p["pre_padding"] or [0] * nd), list(p["post_padding"] or [0] * nd)
    if len(pre) != nd or len(post) != nd:
        raise UsageError(f"layer {layer._name!r}: padding has {len(pre)}/{len(post)} dims, the window has {nd}",
                         "give one padding value per spatial dimension")
    attrs = {"pads": pre + post}
    if allow_round_up:
        attrs["ceil_mode"] = int(mode is PaddingMode.EXPLICIT_ROUND_UP)
    return attrs


class IActivationLayer(ILayer):
    """TensorRT's activations; those with no single IR op (scaled tanh, softplus with α, β) lower to a chain."""
    _layer_type, _kind = LayerType.ACTIVATION, "Activation"
    alpha = _param("alpha", float)
    beta = _param("beta", float)

    @property
    def type(self):  # noqa: F811 - TensorRT reuses `type` for the activation kind
        return self._p["type"]

    @type.setter
    def type(self, value):
        self._p["type"] = ActivationType(value)
        self._network._relower(self)

    def _scalar(self, em, value: float, what: str) -> str:
        return em.const(torch.tensor(value, dtype=self._network._info(self._in(0)).dtype), what)

    def _lower(self, em):
        kind, a, b, x, out = ActivationType(self._p["type"]), self._p["alpha"], self._p["beta"], self._in(0), self._out()
        simple = {ActivationType.RELU: ("Relu", {}), ActivationType.SIGMOID: ("Sigmoid", {}),
                  ActivationType.TANH: ("Tanh", {}), ActivationType.SOFTSIGN: ("Softsign", {}),
                  ActivationType.LEAKY_RELU: ("LeakyRelu", {"alpha": a}), ActivationType.ELU: ("Elu", {"alpha": a}),
                  ActivationType.SELU: ("Selu", {"alpha": a, "gamma": b}),
                  ActivationType.HARD_SIGMOID: ("HardSigmoid", {"alpha": a, "beta": b}),
                  ActivationType.THRESHOLDED_RELU: ("ThresholdedRelu", {"alpha": a}),
                  ActivationType.GELU_ERF: ("Gelu", {"approximate": "none"}),
                  ActivationType.GELU_TANH: ("Gelu", {"approximate": "tanh"})}
        if kind in simple:
            op, attrs = simple[kind]
            em.add(op, [x], attrs, out=out)
        elif kind is ActivationType.CLIP:          # max(α, min(β, x))
            em.add("Clip", [x, self._scalar(em, a, "alpha"), self._scalar(em, b, "beta")], out=out)
        elif kind in (ActivationType.SCALED_TANH, ActivationType.SOFTPLUS):   # α·tanh(β·x), α·log(1+exp(β·x))
            inner = em.add("Mul", [x, self._scalar(em, b, "beta")])[0]
            inner = em.add("Tanh" if kind is ActivationType.SCALED_TANH else "Softplus", [inner])[0]
            em.add("Mul", [inner, self._scalar(em, a, "alpha")], out=out)
        else:
            raise UsageError(f"activation {kind.name} is not supported", "see docs/migrating-from-tensorrt.md")


_ELEMENTWISE = {ElementWiseOperation.SUM: "Add", ElementWiseOperation.PROD: "Mul", ElementWiseOperation.MAX: "Max",
                ElementWiseOperation.MIN: "Min", ElementWiseOperation.SUB: "Sub", ElementWiseOperation.DIV: "Div",
                ElementWiseOperation.POW: "Pow", ElementWiseOperation.AND: "And", ElementWiseOperation.OR: "Or",
                ElementWiseOperation.XOR: "Xor", ElementWiseOperation.EQUAL: "Equal",
                ElementWiseOperation.GREATER: "Greater", ElementWiseOperation.LESS: "Less"}


class IElementWiseLayer(ILayer):
    """Binary op with numpy broadcasting. FLOOR_DIV = floor(a/b) for floats, (a − mod(a, b)) / b for integers."""
    _layer_type, _kind = LayerType.ELEMENTWISE, "ElementWise"
    op = _param("op", ElementWiseOperation)

    def _lower(self, em):
        op, a, b, out = ElementWiseOperation(self._p["op"]), self._in(0), self._in(1), self._out()
        if op in _ELEMENTWISE:
            em.add(_ELEMENTWISE[op], [a, b], out=out)
        elif self._network._info(a).dtype.is_floating_point:
            em.add("Floor", [em.add("Div", [a, b])[0]], out=out)
        else:
            em.add("Div", [em.add("Sub", [a, em.add("Mod", [a, b], {"fmod": 0})[0]])[0], b], out=out)


class IPoolingLayer(ILayer):
    """MaxPool / AveragePool; MAX_AVERAGE_BLEND = blend·max + (1 − blend)·average."""
    _layer_type, _kind = LayerType.POOLING, "Pooling"
    window_size_nd = _param("window_size_nd", Dims)
    stride_nd = _param("stride_nd", Dims)
    pre_padding = _param("pre_padding", Dims)
    post_padding = _param("post_padding", Dims)
    padding_mode = _param("padding_mode", PaddingMode)
    blend_factor = _param("blend_factor", float)
    average_count_excludes_padding = _param("average_count_excludes_padding", bool)

    @property
    def type(self):  # noqa: F811 - TensorRT reuses `type` for the pooling kind
        return self._p["type"]

    @type.setter
    def type(self, value):
        self._p["type"] = PoolingType(value)
        self._network._relower(self)

    padding_nd = IConvolutionLayer.padding_nd

    def _lower(self, em):
        p, x, out = self._p, self._in(0), self._out()
        ks = list(p["window_size_nd"])
        common = {"kernel_shape": ks, "strides": list(p["stride_nd"] or [1] * len(ks))}
        common.update(_padding_attrs(self, len(ks), allow_round_up=True))
        avg = dict(common, count_include_pad=0 if p["average_count_excludes_padding"] else 1)
        kind = PoolingType(p["type"])
        if kind is PoolingType.MAX:
            em.add("MaxPool", [x], common, out=out)
        elif kind is PoolingType.AVERAGE:
            em.add("AveragePool", [x], avg, out=out)
        else:
            dt = self._network._info(x).dtype
            mx = em.add("Mul", [em.add("MaxPool", [x], common)[0], em.const(torch.tensor(p["blend_factor"], dtype=dt), "blend")])[0]
            av = em.add("Mul", [em.add("AveragePool", [x], avg)[0],
                                em.const(torch.tensor(1 - p["blend_factor"], dtype=dt), "one_minus_blend")])[0]
            em.add("Add", [mx, av], out=out)


class LayerHandle:
    """What `network.get_layer(i)` returns for a layer added through the API: the layer seen as an ILayer, so
    `.type` is its LayerType; every other attribute (read or set) is the layer's own."""

    def __init__(self, layer: ILayer):
        object.__setattr__(self, "_layer", layer)

    @property
    def type(self) -> LayerType:
        return type(self._layer)._layer_type

    def __getattr__(self, name):
        return getattr(self._layer, name)

    def __setattr__(self, name, value):
        setattr(self._layer, name, value)

    def __eq__(self, other):
        return self._layer is (other._layer if isinstance(other, LayerHandle) else other)

    def __hash__(self):
        return id(self._layer)

    def __repr__(self) -> str:
        return repr(self._layer)


class ParsedLayer(PrecisionControls, TrtObject):
    """A layer the ONNX parser created: read-only view of one IR layer (its `op` is the IR op name, its `type` the
    TensorRT LayerType of that op, layer_types.py)."""

    @property
    def type(self) -> LayerType:
        return layer_type(self._layer.op)

    def __init__(self, network, layer):
        self._network, self._layer = network, layer

    name = property(lambda self: self._layer.name, lambda self, value: self._network._rename_layer(self, str(value)))
    op = property(lambda self: self._layer.op)
    num_inputs = property(lambda self: len(self._layer.inputs))
    num_outputs = property(lambda self: len(self._layer.outputs))

    def get_input(self, index: int):
        name = self._layer.inputs[index]
        return self._network._tensor(name) if name else None

    def get_output(self, index: int):
        return self._network._tensor(self._layer.outputs[index])

    def __repr__(self) -> str:
        return f"Layer({self._layer.name!r}, {self._layer.op})"
