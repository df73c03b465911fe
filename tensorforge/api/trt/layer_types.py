"""IR op → TensorRT LayerType, so `network.get_layer(i).type` is a real kind for every parsed layer.

Entry point: `layer_type(op)`. Explicit names first, then families (unary math, activations, binary element-wise,
reductions, pools, normalizations). Ops TensorRT has no layer for (classic ML, losses, sequences, training ops,
tensorforge's own fused ops) report PLUGIN_V3: TensorRT's ONNX parser imports such nodes through plugins.
Fused IR layers report the kind of the computation they end in a TensorRT engine inspector would show.
"""

from .enums import LayerType as T

_EXPLICIT = {
    "Conv": T.CONVOLUTION, "FusedConv": T.CONVOLUTION, "GatedConv": T.CONVOLUTION, "ConvInteger": T.CONVOLUTION, "QLinearConv": T.CONVOLUTION,
    "QuantizedConv": T.CONVOLUTION, "DeformConv": T.CONVOLUTION, "FusedConvPool": T.CONVOLUTION,
    "CausalConvWithState": T.CONVOLUTION,
    "ConvTranspose": T.DECONVOLUTION, "QuantizedConvTranspose": T.DECONVOLUTION,
    "MatMul": T.MATRIX_MULTIPLY, "Gemm": T.MATRIX_MULTIPLY, "MatMulEpilogue": T.MATRIX_MULTIPLY, "TwoLayerMLP": T.MATRIX_MULTIPLY,
    "MatMulInteger": T.MATRIX_MULTIPLY, "QLinearMatMul": T.MATRIX_MULTIPLY, "QuantizedMatMul": T.MATRIX_MULTIPLY,
    "SparseGemm": T.MATRIX_MULTIPLY, "BlockQuantizedMatMul": T.MATRIX_MULTIPLY,
    "Cast": T.CAST, "CastLike": T.CAST, "BitCast": T.CAST,
    "LRN": T.LRN, "Softmax": T.SOFTMAX, "LogSoftmax": T.SOFTMAX, "Hardmax": T.SOFTMAX,
    "Concat": T.CONCATENATION, "ConcatFromSequence": T.CONCATENATION,
    "TopK": T.TOPK, "ArgMax": T.TOPK, "ArgMin": T.TOPK,
    "Gather": T.GATHER, "GatherElements": T.GATHER, "GatherND": T.GATHER, "Compress": T.GATHER,
    "Reshape": T.SHUFFLE, "Transpose": T.SHUFFLE, "Flatten": T.SHUFFLE, "DepthToSpace": T.SHUFFLE,
    "SpaceToDepth": T.SHUFFLE,
    "Squeeze": T.SQUEEZE, "Unsqueeze": T.UNSQUEEZE,
    "Identity": T.IDENTITY, "Dropout": T.IDENTITY, "Optional": T.IDENTITY, "OptionalGetElement": T.IDENTITY,
    "Slice": T.SLICE, "Split": T.SLICE, "Tile": T.SLICE, "Expand": T.SLICE, "CenterCropPad": T.SLICE,
    "Shape": T.SHAPE, "Size": T.SHAPE, "OptionalHasElement": T.SHAPE,
    "PRelu": T.PARAMETRIC_RELU, "Resize": T.RESIZE, "Pad": T.PADDING,
    "Loop": T.LOOP_OUTPUT, "Scan": T.LOOP_OUTPUT, "If": T.CONDITION,
    "Where": T.SELECT, "ConstantOfShape": T.FILL, "Range": T.FILL, "EyeLike": T.FILL, "RandomNormal": T.FILL,
    "RandomUniform": T.FILL, "RandomNormalLike": T.FILL, "RandomUniformLike": T.FILL, "Trilu": T.SELECT,
    "QuantizeLinear": T.QUANTIZE, "DequantizeLinear": T.DEQUANTIZE, "DynamicQuantizeLinear": T.DYNAMIC_QUANTIZE,
    "ScatterElements": T.SCATTER, "ScatterND": T.SCATTER, "TensorScatter": T.SCATTER,
    "Einsum": T.EINSUM, "OneHot": T.ONE_HOT, "NonZero": T.NON_ZERO, "GridSample": T.GRID_SAMPLE,
    "NonMaxSuppression": T.NMS, "ReverseSequence": T.REVERSE_SEQUENCE, "CumSum": T.CUMULATIVE,
    "CumProd": T.CUMULATIVE, "RNN": T.RECURRENCE, "GRU": T.RECURRENCE, "LSTM": T.RECURRENCE,
    "Attention": T.ATTENTION, "OnnxAttention": T.ATTENTION, "FlexAttention": T.ATTENTION,
    "MultiHeadAttention": T.ATTENTION, "GroupQueryAttention": T.ATTENTION, "DynamicQuantizeLSTM": T.RECURRENCE,
    "QGemm": T.MATRIX_MULTIPLY,
    "LinearAttention": T.ATTENTION,
    "BatchNormalization": T.SCALE, "Plugin": T.PLUGIN_V3,
    "MaxPoolWithIndices": T.POOLING, "MaxRoiPool": T.POOLING, "RoiAlign": T.POOLING, "MaxUnpool": T.RESIZE,
    "PointwiseChain": T.ELEMENTWISE,
}
_UNARY = {"Abs", "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "Ceil", "Cos", "Cosh", "Erf", "Exp", "Floor",
          "Log", "Neg", "Not", "Reciprocal", "Round", "Sign", "Sin", "Sinh", "Sqrt", "Tan", "IsInf", "IsNaN",
          "BitwiseNot", "Det"}
_ACTIVATION = {"Relu", "Sigmoid", "Tanh", "LeakyRelu", "Elu", "Selu", "Softsign", "Softplus", "Clip", "HardSigmoid",
               "ThresholdedRelu", "Gelu", "HardSwish", "Mish", "Celu", "Swish", "Shrink", "SwiGLU"}
_ELEMENTWISE = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Mean", "Sum", "Mod", "Equal", "Greater",
                "GreaterOrEqual", "Less", "LessOrEqual", "And", "Or", "Xor", "BitShift", "BitwiseAnd", "BitwiseOr",
                "BitwiseXor"}
_POOL = {"AveragePool", "MaxPool", "GlobalAveragePool", "GlobalMaxPool", "LpPool", "GlobalLpPool"}
_NORM = {"LayerNormalization", "AddLayerNormalization", "GroupNormalization", "InstanceNormalization",
         "RMSNormalization", "LpNormalization", "MeanVarianceNormalization"}


def layer_type(op: str) -> T:
    if op in _EXPLICIT:
        return _EXPLICIT[op]
    if op in _UNARY:
        return T.UNARY
    if op in _ACTIVATION:
        return T.ACTIVATION
    if op in _ELEMENTWISE:
        return T.ELEMENTWISE
    if op.startswith("Reduce"):
        return T.REDUCE
    if op in _POOL:
        return T.POOLING
    if op in _NORM:
        return T.NORMALIZATION
    return T.PLUGIN_V3          # no TensorRT layer: its parser would need a plugin (ML ops, losses, sequences, ...)
