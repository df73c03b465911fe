"""TensorRT's enums under TensorRT's names, and the small helpers scripts use with them (volume, nptype).

Members keep TensorRT 10's names and integer values (LayerType's values are ours), so `trt.DataType.HALF`,
`1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH)` and `trt.Logger.WARNING` read the same. Each
enum that maps to the IR carries the mapping here (DataType ↔ torch dtype, ActivationType ↔ IR op, ...).
"""

from enum import IntEnum

import numpy as np
import torch


class _Enum(IntEnum):
    """IntEnum that prints as TensorRT's enums do: `DataType.FLOAT`."""

    def __str__(self) -> str:
        return f"{type(self).__name__}.{self.name}"

    __repr__ = __str__


class DataType(_Enum):
    FLOAT = 0
    HALF = 1
    INT8 = 2
    INT32 = 3
    BOOL = 4
    UINT8 = 5
    FP8 = 6
    BF16 = 7
    INT64 = 8
    INT4 = 9

    @property
    def itemsize(self) -> float:
        return 0.5 if self is DataType.INT4 else _TORCH[self].itemsize

    def to_torch(self) -> torch.dtype:
        if self not in _TORCH:
            from ...util.errors import UsageError
            raise UsageError(f"DataType.{self.name} is not supported", "use FLOAT, HALF, BF16, INT32, INT64, INT8, UINT8 or BOOL")
        return _TORCH[self]

    @classmethod
    def from_torch(cls, dtype: torch.dtype) -> "DataType":
        for k, v in _TORCH.items():
            if v == dtype:
                return k
        from ...util.errors import UsageError
        raise UsageError(f"torch dtype {dtype} has no TensorRT DataType", "use float32, float16, bfloat16, int32, int64, int8, uint8 or bool")


_TORCH = {DataType.FLOAT: torch.float32, DataType.HALF: torch.float16, DataType.INT8: torch.int8,
          DataType.INT32: torch.int32, DataType.BOOL: torch.bool, DataType.UINT8: torch.uint8,
          DataType.FP8: torch.float8_e4m3fn, DataType.BF16: torch.bfloat16, DataType.INT64: torch.int64}

# TensorRT's module-level aliases (trt.float32, trt.float16, ...)
float32, float16, bfloat16, int8, int32, int64, bool_, uint8, fp8 = (
    DataType.FLOAT, DataType.HALF, DataType.BF16, DataType.INT8, DataType.INT32, DataType.INT64, DataType.BOOL,
    DataType.UINT8, DataType.FP8)

_NUMPY = {DataType.FLOAT: np.float32, DataType.HALF: np.float16, DataType.INT8: np.int8, DataType.INT32: np.int32,
          DataType.BOOL: np.bool_, DataType.UINT8: np.uint8, DataType.INT64: np.int64}


def nptype(dtype: DataType):
    """The numpy type of a DataType (trt.nptype); BF16/FP8/INT4 have none in numpy."""
    try:
        return _NUMPY[DataType(dtype)]
    except KeyError:
        from ...util.errors import UsageError
        raise UsageError(f"DataType.{DataType(dtype).name} has no numpy type", "use torch tensors for this dtype") from None


def volume(shape) -> int:
    """Number of elements of a shape (trt.volume); a -1 dimension makes it negative, as in TensorRT."""
    n = 1
    for d in shape:
        n *= int(d)
    return n


class TensorIOMode(_Enum):
    NONE = 0
    INPUT = 1
    OUTPUT = 2


class NetworkDefinitionCreationFlag(_Enum):
    EXPLICIT_BATCH = 0          # always on here, as in TensorRT 10
    STRONGLY_TYPED = 1


class BuilderFlag(_Enum):
    FP16 = 0
    INT8 = 1
    DEBUG = 2
    GPU_FALLBACK = 3
    REFIT = 4
    DISABLE_TIMING_CACHE = 5
    TF32 = 6
    SPARSE_WEIGHTS = 7
    SAFETY_SCOPE = 8
    OBEY_PRECISION_CONSTRAINTS = 9
    PREFER_PRECISION_CONSTRAINTS = 10
    DIRECT_IO = 11
    REJECT_EMPTY_ALGORITHMS = 12
    VERSION_COMPATIBLE = 13
    EXCLUDE_LEAN_RUNTIME = 14
    FP8 = 15
    ERROR_ON_TIMING_CACHE_MISS = 16
    BF16 = 17
    DISABLE_COMPILATION_CACHE = 18
    STRIP_PLAN = 19
    REFIT_IDENTICAL = 20
    WEIGHT_STREAMING = 21
    INT4 = 22


class MemoryPoolType(_Enum):
    WORKSPACE = 0
    DLA_MANAGED_SRAM = 1
    DLA_LOCAL_DRAM = 2
    DLA_GLOBAL_DRAM = 3
    TACTIC_DRAM = 4
    TACTIC_SHARED_MEMORY = 5


class ProfilingVerbosity(_Enum):
    LAYER_NAMES_ONLY = 0
    NONE = 1
    DETAILED = 2


class ActivationType(_Enum):
    RELU = 0
    SIGMOID = 1
    TANH = 2
    LEAKY_RELU = 3
    ELU = 4
    SELU = 5
    SOFTSIGN = 6
    SOFTPLUS = 7
    CLIP = 8
    HARD_SIGMOID = 9
    SCALED_TANH = 10
    THRESHOLDED_RELU = 11
    GELU_ERF = 12
    GELU_TANH = 13


class ElementWiseOperation(_Enum):
    SUM = 0
    PROD = 1
    MAX = 2
    MIN = 3
    SUB = 4
    DIV = 5
    POW = 6
    FLOOR_DIV = 7
    AND = 8
    OR = 9
    XOR = 10
    EQUAL = 11
    GREATER = 12
    LESS = 13


class PoolingType(_Enum):
    MAX = 0
    AVERAGE = 1
    MAX_AVERAGE_BLEND = 2


class ReduceOperation(_Enum):
    SUM = 0
    PROD = 1
    MAX = 2
    MIN = 3
    AVG = 4


class MatrixOperation(_Enum):
    NONE = 0
    TRANSPOSE = 1
    VECTOR = 2


class PaddingMode(_Enum):
    EXPLICIT_ROUND_DOWN = 0
    EXPLICIT_ROUND_UP = 1
    SAME_UPPER = 2
    SAME_LOWER = 3


class LayerType(_Enum):
    """TensorRT's layer kinds, by name (compare by name: the numbers are this API's own). Every IR op maps to one
    (layer_types.py); ops TensorRT has no layer for are PLUGIN_V3, as its ONNX parser imports them via plugins."""
    CONVOLUTION = 0
    CAST = 1
    ACTIVATION = 2
    POOLING = 3
    LRN = 4
    SCALE = 5
    DECONVOLUTION = 6
    ELEMENTWISE = 7
    PLUGIN = 8
    UNARY = 9
    PADDING = 10
    SOFTMAX = 11
    CONCATENATION = 12
    TOPK = 13
    GATHER = 14
    SHUFFLE = 15
    RAGGED_SOFTMAX = 16
    REDUCE = 17
    CONSTANT = 18
    MATRIX_MULTIPLY = 19
    IDENTITY = 20
    PLUGIN_V2 = 21
    SLICE = 22
    SHAPE = 23
    PARAMETRIC_RELU = 24
    RESIZE = 25
    TRIP_LIMIT = 26
    RECURRENCE = 27
    ITERATOR = 28
    LOOP_OUTPUT = 29
    SELECT = 30
    FILL = 31
    QUANTIZE = 32
    DEQUANTIZE = 33
    CONDITION = 34
    CONDITIONAL_INPUT = 35
    CONDITIONAL_OUTPUT = 36
    SCATTER = 37
    EINSUM = 38
    ASSERTION = 39
    ONE_HOT = 40
    NON_ZERO = 41
    GRID_SAMPLE = 42
    NMS = 43
    REVERSE_SEQUENCE = 44
    NORMALIZATION = 45
    PLUGIN_V3 = 46
    SQUEEZE = 47
    UNSQUEEZE = 48
    CUMULATIVE = 49
    DYNAMIC_QUANTIZE = 50
    ATTENTION = 51
    OTHER = 1000


class LayerInformationFormat(_Enum):
    """IEngineInspector output: one text line per layer, or JSON."""
    ONE_LINE = 0
    JSON = 1


class ErrorCode(_Enum):
    """The ONNX parser's error codes (ParserError.code())."""
    SUCCESS = 0
    INTERNAL_ERROR = 1
    MEM_ALLOC_FAILED = 2
    MODEL_DESERIALIZE_FAILED = 3
    INVALID_VALUE = 4
    INVALID_GRAPH = 5
    INVALID_NODE = 6
    UNSUPPORTED_GRAPH = 7
    UNSUPPORTED_NODE = 8
