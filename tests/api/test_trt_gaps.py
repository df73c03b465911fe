"""Issue 14.4's TensorRT-script gaps: misspelled attributes refused with a hint, a real LayerType for every IR op,
trt.Dims2(h, w) positional, platform_has_fast_fp16 on the CPU."""

import pytest

import tensorforge as trt
from tensorforge.api.trt.layer_types import layer_type
from tensorforge.ir.opspec import registered_ops

LOGGER = trt.Logger(trt.Logger.ERROR)


def test_misspelled_attributes_are_refused_with_a_hint():
    builder = trt.Builder(LOGGER, device="cpu")
    config = builder.create_builder_config()
    with pytest.raises(AttributeError, match="has no attribute 'typo_flag'"):
        config.typo_flag = 1
    with pytest.raises(AttributeError, match="did you mean 'profiling_verbosity'"):
        config.profiling_verbosty = trt.ProfilingVerbosity.DETAILED
    config.profiling_verbosity = trt.ProfilingVerbosity.DETAILED          # the real ones still work
    config.builder_optimization_level = 2
    assert config.builder_optimization_level == 2
    network = builder.create_network(0)
    x = network.add_input("x", trt.float32, (1, 4))
    relu = network.add_activation(x, trt.ActivationType.RELU)
    with pytest.raises(AttributeError, match="did you mean 'alpha'"):
        relu.alpah = 0.1
    with pytest.raises(AttributeError, match="did you mean 'name'"):
        x.nmae = "y"
    with pytest.raises(AttributeError):
        builder.max_batch_size = 8                                       # gone since TensorRT 10

    class Monitor(trt.IProgressMonitor):      # a subclass may set its own attributes in __init__ (the samples do)
        def __init__(self):
            trt.IProgressMonitor.__init__(self)
            self.count = 0
    m = Monitor()
    m.count = 3
    with pytest.raises(AttributeError, match="did you mean 'count'"):
        m.cuont = 1


def test_every_ir_op_has_a_real_layer_type():
    import tensorforge.ir.ops  # noqa: F401 - registers the ops
    ops = registered_ops()
    assert len(ops) > 100
    assert all(layer_type(op) is not trt.LayerType.OTHER for op in ops)
    expect = {"Conv": "CONVOLUTION", "ConvTranspose": "DECONVOLUTION", "Gemm": "MATRIX_MULTIPLY", "Relu": "ACTIVATION",
              "Exp": "UNARY", "Add": "ELEMENTWISE", "ReduceMean": "REDUCE", "MaxPool": "POOLING", "Reshape": "SHUFFLE",
              "Gather": "GATHER", "Slice": "SLICE", "Resize": "RESIZE", "QuantizeLinear": "QUANTIZE",
              "LayerNormalization": "NORMALIZATION", "Where": "SELECT", "TopK": "TOPK", "If": "CONDITION",
              "NonZero": "NON_ZERO", "Concat": "CONCATENATION", "Cast": "CAST", "Softmax": "SOFTMAX"}
    assert {op: layer_type(op).name for op in expect} == expect


def test_parsed_layers_report_their_type():
    from onnx import TensorProto
    from oracle import single_node_model
    data = single_node_model("Softmax", [("x", TensorProto.FLOAT, [2, 3])], [("y", TensorProto.FLOAT, [2, 3])])
    network = trt.Builder(LOGGER, device="cpu").create_network(0)
    assert trt.OnnxParser(network, LOGGER).parse(data)
    assert network.get_layer(0).type is trt.LayerType.SOFTMAX


def test_dims_positional_and_fixed_rank():
    assert trt.Dims2(2, 3) == (2, 3) and trt.Dims4(1, 3, 8, 8).nbDims == 4 and trt.Dims((1, 2)) == (1, 2)
    assert trt.Dims(5) == (5,)
    with pytest.raises(Exception, match="Dims2 takes 2 dimensions"):
        trt.Dims2(1, 2, 3)


def test_platform_has_fast_fp16_is_false_on_the_cpu():
    assert trt.Builder(LOGGER, device="cpu").platform_has_fast_fp16 is False


def test_error_on_timing_cache_miss_flag_through_the_api():
    """BuilderFlag.ERROR_ON_TIMING_CACHE_MISS fails a CPU build with a cold cache, passes with a warm one."""
    import numpy as np
    from onnx import TensorProto, numpy_helper
    from oracle import single_node_model
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((8, 16)).astype(np.float32), "w")
    data = single_node_model("Gemm", [("x", TensorProto.FLOAT, [2, 16])], [("y", TensorProto.FLOAT, None)],
                             initializers=[w], node_inputs=["x", "w"], transB=1)
    builder = trt.Builder(LOGGER, device="cpu")

    def build(cache, strict):
        network = builder.create_network(0)
        assert trt.OnnxParser(network, LOGGER).parse(data)
        config = builder.create_builder_config()
        config.set_timing_cache(cache, False)
        if strict:
            config.set_flag(trt.BuilderFlag.ERROR_ON_TIMING_CACHE_MISS)
        return builder.build_serialized_network(network, config)

    config = builder.create_builder_config()
    cache = config.create_timing_cache(b"")
    with pytest.raises(Exception, match="not in the timing cache"):
        build(cache, True)
    assert build(cache, False) and len(cache.cache) >= 1          # the CPU build timed the Gemm into the cache
    assert build(cache, True)
