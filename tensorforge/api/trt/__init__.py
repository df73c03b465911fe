"""TensorRT's Python API as thin wrappers over tensorforge, so a TensorRT script ports by its import line.

    import tensorforge as trt          # was: import tensorrt as trt
    builder = trt.Builder(trt.Logger(trt.Logger.WARNING))
    network = builder.create_network(0); parser = trt.OnnxParser(network, logger); parser.parse(onnx_bytes)
    plan = builder.build_serialized_network(network, config)
    engine = trt.Runtime(logger).deserialize_cuda_engine(plan); context = engine.create_execution_context()

Modules: enums.py (TensorRT's enums), tensors.py (Weights, Dims, ITensor), layers.py + layers_tensor.py + network.py (the
layer-by-layer NetworkDefinition), parser.py (OnnxParser) and capability.py (what cannot be imported, why),
builder.py (Builder, IBuilderConfig, IOptimizationProfile, ITimingCache), calibrator.py (the IInt8*Calibrator
classes), runtime.py (Runtime, ICudaEngine,
IExecutionContext). docs/migrating-from-tensorrt.md lists what maps one to one and what differs.
"""

from ...util.log import Logger
from .builder import Builder, IBuilderConfig, IHostMemory, IOptimizationProfile, ITimingCache
from .calibrator import (CalibrationAlgoType, IInt8Calibrator, IInt8EntropyCalibrator, IInt8EntropyCalibrator2,
                         IInt8LegacyCalibrator, IInt8MinMaxCalibrator)
from .capability import CapabilityReport, NodeReport, capability_report
from .enums import (ActivationType, BuilderFlag, DataType, ElementWiseOperation, ErrorCode, LayerInformationFormat,
                    LayerType, MatrixOperation,
                    MemoryPoolType, NetworkDefinitionCreationFlag, PaddingMode, PoolingType, ProfilingVerbosity,
                    ReduceOperation, TensorIOMode, bfloat16, bool_, float16, float32, fp8, int8, int32, int64, nptype,
                    uint8, volume)
from .layers import IActivationLayer, IConvolutionLayer, IElementWiseLayer, IIdentityLayer, ILayer, IPoolingLayer
from .layers_tensor import (IConcatenationLayer, IConstantLayer, IMatrixMultiplyLayer, IPluginLayer, IReduceLayer,
                            IShuffleLayer, ISoftmaxLayer)
from .inspector import IEngineInspector
from .network import NetworkDefinition
from .progress import IProgressMonitor
from .parser import OnnxParser, ParserError
from .runtime import ICudaEngine, IExecutionContext, Runtime
from .tensors import Dims, Dims2, Dims3, Dims4, DimsHW, ITensor, Permutation, Weights

ILogger = Logger
INetworkDefinition = NetworkDefinition
IBuilder = Builder
IRuntime = Runtime


def init_libnvinfer_plugins(logger=None, namespace: str = "") -> bool:
    """TensorRT registers its standard plugins here; this registers every plugin of tensorforge's in-tree library
    (plugin/library/), so `network.add_plugin(inputs, "ns::Name")` finds them by id. (Parsing and engine loading
    find library plugins by themselves.) Your own plugins: tensorforge.plugin.load("my_plugins.py")."""
    from ...plugin.library import LIBRARY
    from ...plugin.loader import load_library

    first_name = {}
    for op_type, folder in LIBRARY.items():
        first_name.setdefault(folder, op_type)
    for op_type in first_name.values():
        load_library(op_type)
    return True


__all__ = [
    "IEngineInspector", "IProgressMonitor", "LayerInformationFormat",
    "ActivationType", "Builder", "BuilderFlag", "CalibrationAlgoType", "IInt8Calibrator", "IInt8EntropyCalibrator",
    "IInt8EntropyCalibrator2", "IInt8LegacyCalibrator", "IInt8MinMaxCalibrator", "DataType", "Dims", "Dims2",
    "Dims3", "Dims4", "DimsHW", "ElementWiseOperation", "ErrorCode", "IActivationLayer", "IBuilder", "IBuilderConfig",
    "IConcatenationLayer", "IConstantLayer", "IConvolutionLayer", "ICudaEngine", "IElementWiseLayer",
    "IExecutionContext", "IHostMemory", "IIdentityLayer", "ILayer", "ILogger", "IMatrixMultiplyLayer",
    "INetworkDefinition", "IOptimizationProfile", "IPluginLayer", "IPoolingLayer", "IReduceLayer", "IRuntime",
    "IShuffleLayer", "ISoftmaxLayer", "ITensor", "ITimingCache", "LayerType", "Logger", "MatrixOperation",
    "MemoryPoolType", "NetworkDefinition", "NetworkDefinitionCreationFlag", "OnnxParser",
    "PaddingMode", "ParserError", "Permutation", "PoolingType", "ProfilingVerbosity",
    "ReduceOperation", "Runtime", "TensorIOMode", "Weights", "bfloat16", "bool_", "float16", "float32", "fp8", "init_libnvinfer_plugins", "int8", "int32", "int64", "nptype", "uint8", "volume",
]
