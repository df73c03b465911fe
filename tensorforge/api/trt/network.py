"""NetworkDefinition: TensorRT's layer-by-layer network API over one `ir.Network`.

    network = builder.create_network()
    x = network.add_input("x", trt.float32, (-1, 3, 32, 32))
    conv = network.add_convolution_nd(x, 16, (3, 3), kernel=w, bias=b); conv.padding_nd = (1, 1)
    relu = network.add_activation(conv.get_output(0), trt.ActivationType.RELU)
    network.mark_output(relu.get_output(0))

Each add_* creates an ILayer (layers.py) that lowers itself at once to IR layers spliced into the network
in order; changing a parameter re-lowers just that layer in place, and `to_ir()` re-lowers every layer
again so parameters that depend on input ranks (default softmax axis, ...) are final. Tensor shapes are
inferred by running the IR references on meta tensors at two probe sizes for the dynamic input dimensions
(shapes.py): a dimension that differs between them reads -1. The OnnxParser fills the same object
(`_adopt`), after which layers can still be added or outputs marked.
"""

import numpy as np
import torch

from ...ir import Layer, Network, TensorInfo
from ...util.errors import UsageError
from . import layers as L
from . import layers_tensor as LT
from .enums import (ActivationType, DataType, ElementWiseOperation, MatrixOperation, NetworkDefinitionCreationFlag,
                    PaddingMode, PoolingType, ReduceOperation)
from .shapes import infer_infos
from .strict import TrtObject
from .tensors import Dims, ITensor


def as_torch_dtype(dtype) -> torch.dtype:
    if isinstance(dtype, DataType):
        return dtype.to_torch()
    if isinstance(dtype, torch.dtype):
        return dtype
    try:
        return torch.from_numpy(np.empty(0, dtype=np.dtype(dtype))).dtype
    except TypeError:
        raise UsageError(f"unknown dtype {dtype!r}", "use trt.float32, trt.float16, trt.int32, ...") from None


class _Emitter:
    """Collects the IR layers and constants that one API layer lowers to."""

    def __init__(self, network: "NetworkDefinition", layer):
        self.net, self.prefix = network._net, layer._name
        self.layers: list[Layer] = []
        self.consts: list[str] = []

    def const(self, value: torch.Tensor, what: str = "const", exact: str | None = None) -> str:
        name = exact or self.net.unique_name(f"{self.prefix}/{what}")
        self.net.add_constant(name, value)
        self.consts.append(name)
        return name

    def add(self, op: str, inputs: list[str], attrs: dict | None = None, out: list[str] | None = None) -> list[str]:
        name = self.prefix if not self.layers else self.net.unique_name(f"{self.prefix}/{op}")
        outputs = list(out) if out else [self.net.unique_name(f"{name}:0")]
        for o in outputs:
            self.net.tensors.setdefault(o, TensorInfo(o))
        self.layers.append(Layer(name, op, list(inputs), outputs, dict(attrs or {}), [self.prefix]))
        return outputs


class NetworkDefinition(TrtObject):
    def __init__(self, flags: int = 0, name: str = "network"):
        self._net = Network(name)
        self._flags = int(flags)
        self._tensors: dict[str, ITensor] = {}
        self._layers: list = []
        self._cache: dict[str, TensorInfo] | None = None
        self._lowering_at: int | None = None
        self._ranges: dict[str, tuple[float, float]] = {}        # ITensor.set_dynamic_range: name → (min, max)

    # ---- properties TensorRT scripts read ------------------------------------------------------
    @property
    def name(self) -> str:
        return self._net.name

    @name.setter
    def name(self, value: str) -> None:
        self._net.name = str(value)

    num_layers = property(lambda self: len(self._layers))
    num_inputs = property(lambda self: len(self._net.inputs))
    num_outputs = property(lambda self: len(self._net.outputs))
    has_implicit_batch_dimension = property(lambda self: False)

    def get_flag(self, flag: NetworkDefinitionCreationFlag) -> bool:
        flag = NetworkDefinitionCreationFlag(flag)
        return bool(self._flags >> int(flag) & 1) or flag is NetworkDefinitionCreationFlag.EXPLICIT_BATCH

    def get_layer(self, index: int):
        """The layer as TensorRT's get_layer gives it, an ILayer: `.type` is its LayerType even for pooling and
        activation layers (whose own `.type` is the pooling/activation kind, as in TensorRT)."""
        layer = self._layers[index]
        return layer if isinstance(layer, L.ParsedLayer) else L.LayerHandle(layer)

    def get_input(self, index: int) -> ITensor:
        return self._tensor(self._net.inputs[index])

    def get_output(self, index: int) -> ITensor:
        return self._tensor(self._net.outputs[index])

    def __iter__(self):
        return iter(self._layers)

    def __getitem__(self, index: int):
        return self._layers[index]

    def __len__(self) -> int:
        return len(self._layers)

    # ---- inputs and outputs --------------------------------------------------------------------
    def add_input(self, name: str, dtype, shape) -> ITensor:
        name = str(name)
        if name in self._net.tensors or name in self._net._names:
            raise UsageError(f"tensor name {name!r} is already used in this network", "choose another input name")
        dims = tuple(int(d) for d in shape)
        if any(d < -1 for d in dims):
            raise UsageError(f"input {name!r}: shape {dims} has a dimension below -1", "use -1 for dynamic dimensions")
        self._net._names.add(name)
        self._net.add_input(name, as_torch_dtype(dtype), dims)
        self._cache = None
        return self._tensor(name)

    def mark_output(self, tensor: ITensor) -> None:
        self._own(tensor)
        if tensor.name in self._net.inputs or tensor.name in self._net.constants:
            raise UsageError(f"tensor {tensor.name!r} is a network input or a constant and cannot be an output itself",
                             "mark the output of network.add_identity(tensor) instead")
        self._net.mark_output(tensor.name)

    def unmark_output(self, tensor: ITensor) -> None:
        self._own(tensor)
        if tensor.name in self._net.outputs:
            self._net.outputs.remove(tensor.name)

    # ---- layers --------------------------------------------------------------------------------
    def add_identity(self, input: ITensor) -> L.IIdentityLayer:  # noqa: A002 - TensorRT's parameter name
        return self._add(L.IIdentityLayer(self, [self._own(input)]))

    def add_convolution_nd(self, input: ITensor, num_output_maps: int, kernel_shape, kernel=None,  # noqa: A002
                           bias=None) -> L.IConvolutionLayer:
        nd = len(tuple(kernel_shape))
        return self._add(L.IConvolutionLayer(
            self, [self._own(input)], num_output_maps=int(num_output_maps), kernel_size_nd=Dims(kernel_shape),
            kernel=kernel, bias=bias, stride_nd=Dims([1] * nd), pre_padding=Dims([0] * nd),
            post_padding=Dims([0] * nd), padding_mode=PaddingMode.EXPLICIT_ROUND_DOWN, num_groups=1,
            dilation_nd=Dims([1] * nd)))

    def add_activation(self, input: ITensor, type: ActivationType) -> L.IActivationLayer:  # noqa: A002
        return self._add(L.IActivationLayer(self, [self._own(input)], type=ActivationType(type), alpha=0.0, beta=0.0))

    def add_elementwise(self, input1: ITensor, input2: ITensor, op: ElementWiseOperation) -> L.IElementWiseLayer:
        return self._add(L.IElementWiseLayer(self, [self._own(input1), self._own(input2)],
                                             op=ElementWiseOperation(op)))

    def add_matrix_multiply(self, input0: ITensor, op0: MatrixOperation, input1: ITensor,
                            op1: MatrixOperation) -> LT.IMatrixMultiplyLayer:
        return self._add(LT.IMatrixMultiplyLayer(self, [self._own(input0), self._own(input1)],
                                                op0=MatrixOperation(op0), op1=MatrixOperation(op1)))

    def add_pooling_nd(self, input: ITensor, type: PoolingType, window_size) -> L.IPoolingLayer:  # noqa: A002
        nd = len(tuple(window_size))
        return self._add(L.IPoolingLayer(
            self, [self._own(input)], type=PoolingType(type), window_size_nd=Dims(window_size),
            stride_nd=Dims([1] * nd), pre_padding=Dims([0] * nd), post_padding=Dims([0] * nd),
            padding_mode=PaddingMode.EXPLICIT_ROUND_DOWN, blend_factor=0.0, average_count_excludes_padding=True))

    def add_shuffle(self, input: ITensor) -> LT.IShuffleLayer:  # noqa: A002
        return self._add(LT.IShuffleLayer(self, [self._own(input)], first_transpose=None, reshape_dims=None,
                                         second_transpose=None, zero_is_placeholder=True))

    def add_reduce(self, input: ITensor, op: ReduceOperation, axes: int, keep_dims: bool) -> LT.IReduceLayer:  # noqa: A002
        return self._add(LT.IReduceLayer(self, [self._own(input)], op=ReduceOperation(op), axes=int(axes),
                                        keep_dims=bool(keep_dims)))

    def add_softmax(self, input: ITensor) -> LT.ISoftmaxLayer:  # noqa: A002
        return self._add(LT.ISoftmaxLayer(self, [self._own(input)], axes=None))

    def add_concatenation(self, inputs) -> LT.IConcatenationLayer:
        inputs = [self._own(t) for t in inputs]
        if not inputs:
            raise UsageError("add_concatenation needs at least one input", "pass a list of tensors")
        return self._add(LT.IConcatenationLayer(self, inputs, axis=None))

    def add_constant(self, shape, weights) -> LT.IConstantLayer:
        return self._add(LT.IConstantLayer(self, [], shape=Dims(shape), weights=weights))

    def add_plugin(self, inputs, plugin, attrs: dict | None = None, version: str | None = None) -> LT.IPluginLayer:
        """Apply a registered plugin: `plugin` is a tensorforge.plugin.Plugin or its id ("ns::Name"); `attrs`
        are typed by the plugin's descriptor (a wrong type is a one-line PluginError naming the attribute)."""
        from ... import plugin as tfp

        p = plugin if isinstance(plugin, tfp.Plugin) else tfp.get(str(plugin), version) if isinstance(plugin, str) else None
        if p is None:
            raise UsageError(f"add_plugin takes a plugin or a plugin id, not {type(plugin).__name__}",
                             "pass tensorforge.plugin.get('ns::Name') or 'ns::Name'")
        typed = p.typed_attrs(dict(attrs or {}), f"network {self.name!r}: ")
        return self._add(LT.IPluginLayer(self, [self._own(t) for t in inputs], num_outputs=p.num_outputs,
                                        op=p.op_name, attrs=typed))

    # ---- the IR --------------------------------------------------------------------------------
    def to_ir(self) -> Network:
        """A copy of the network as IR, every API layer lowered afresh."""
        for layer in self._layers:
            if isinstance(layer, L.ILayer):
                self._relower(layer)
        if not self._net.outputs:
            raise UsageError(f"network {self.name!r} has no outputs", "call network.mark_output(tensor)")
        return self._net.copy()

    # ---- precision settings the builder reads (layer.precision, set_output_type, set_dynamic_range) -------
    @property
    def _dynamic_ranges(self) -> dict[str, float]:
        return {n: max(abs(lo), abs(hi)) for n, (lo, hi) in self._ranges.items()}

    def _precision_entries(self) -> list[tuple[str, str]]:
        return [(la.name, la._precision_spec) for la in self._layers if getattr(la, "_precision_spec", None)]

    def _output_type_entries(self) -> list[tuple[str, list]]:
        out = []
        for la in self._layers:
            types = getattr(la, "_output_specs", None)
            if types:
                out.append((la.name, [types.get(i) for i in range(max(types) + 1)]))
        return out

    # ---- internals used by layers, tensors and the parser ----------------------------------------
    def _own(self, tensor) -> str:
        if not isinstance(tensor, ITensor) or tensor._network is not self:
            raise UsageError(f"{tensor!r} is not a tensor of network {self.name!r}",
                             "pass tensors returned by this network's add_input / get_output")
        return tensor

    def _tensor(self, name: str) -> ITensor:
        if name not in self._tensors:
            self._tensors[name] = ITensor(self, name)
        return self._tensors[name]

    def _new_tensor(self, base: str) -> ITensor:
        return self._tensor(self._net.unique_name(base))

    def _fresh_layer_name(self, kind: str) -> str:
        return self._net.unique_name(f"{kind}_{len(self._layers)}")

    def _add(self, layer):
        self._relower(layer)
        self._layers.append(layer)
        return layer

    def _relower(self, layer) -> None:
        """(Re-)emit `layer`'s IR layers at its position; on failure the network is left exactly as it was."""
        net = self._net
        old = layer._ir
        index = next((i for i, x in enumerate(net.layers) if x is old[0]), len(net.layers)) if old else len(net.layers)
        keep = {t.name for t in layer._outputs}
        snapshot = (list(net.layers), dict(net.tensors), dict(net.constants), set(net._names))
        net.layers = [x for x in net.layers if not any(x is o for o in old)]
        dropped = {x.name for x in old[1:]} | {n for x in old for n in x.outputs if n not in keep}
        for n in dropped | set(layer._consts):
            net.constants.pop(n, None)
            if n not in keep:
                net.tensors.pop(n, None)
                net._names.discard(n)
        em = _Emitter(self, layer)
        self._lowering_at = index
        try:
            layer._lower(em)
        except Exception:
            net.layers, net.tensors, net.constants, net._names = snapshot
            raise
        finally:
            self._lowering_at = None
        net.layers[index:index] = em.layers
        layer._ir, layer._consts = em.layers, em.consts
        self._cache = None

    def _rename_layer(self, layer, new: str) -> None:
        net = self._net
        if new == layer.name:
            return
        if new in net._names or new in net.tensors:
            raise UsageError(f"name {new!r} is already used in network {self.name!r}", "choose a unique layer name")
        if isinstance(layer, L.ParsedLayer):
            net._names.discard(layer._layer.name)
            layer._layer.name = new
            net._names.add(new)
            return
        net._names.discard(layer._name)
        net._names.add(new)
        layer._name = new
        self._relower(layer)

    def _rename_tensor(self, tensor: ITensor, new: str) -> None:
        net, old = self._net, tensor.name
        if new == old:
            return
        if new in net.tensors or new in net._names:
            raise UsageError(f"tensor name {new!r} is already used in network {self.name!r}", "choose a unique name")
        sub = (lambda n: new if n == old else n)  # noqa: E731
        net.inputs, net.outputs = [sub(n) for n in net.inputs], [sub(n) for n in net.outputs]
        for layer in net.layers:
            layer.inputs, layer.outputs = [sub(n) for n in layer.inputs], [sub(n) for n in layer.outputs]
        if old in net.constants:
            net.constants[new] = net.constants.pop(old)
        for api_layer in self._layers:
            if isinstance(api_layer, L.ILayer):
                api_layer._consts = [sub(n) for n in api_layer._consts]
        info = net.tensors.pop(old)
        info.name = new
        net.tensors[new] = info
        net._names.discard(old)
        net._names.add(new)
        self._tensors[new] = self._tensors.pop(old)
        tensor._name = new
        self._cache = None

    def _adopt(self, parsed: Network) -> None:
        """Take over a network made by the ONNX parser."""
        if self._net.layers or self._net.inputs:
            raise UsageError("the ONNX parser needs an empty network", "create a new network with builder.create_network()")
        self._net = parsed
        self._tensors.clear()
        self._layers = [L.ParsedLayer(self, layer) for layer in parsed.layers]
        self._cache = None

    def _info(self, name: str) -> TensorInfo:
        if self._lowering_at is not None:
            infos = infer_infos(self._net, self._net.layers[:self._lowering_at])
        else:
            if self._cache is None:
                self._cache = infer_infos(self._net, self._net.layers)
            infos = self._cache
        if name not in infos:
            raise UsageError(f"tensor {name!r} is not defined in network {self.name!r}", "check the layer that makes it")
        return infos[name]
