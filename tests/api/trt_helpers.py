"""Shared by the TensorRT-style API tests: build a NetworkDefinition and run it through host pointers."""

import numpy as np

import tensorforge as trt

LOGGER = trt.Logger(trt.Logger.ERROR)


def run_network(network, feeds: dict, profile: dict | None = None, fp16: bool = False) -> dict:
    """Build `network`, run it once on `feeds` (numpy) through pointers, return {output name: ndarray}."""
    builder = trt.Builder(LOGGER, device="cpu")
    config = builder.create_builder_config()
    if fp16:
        config.set_flag(trt.BuilderFlag.FP16)
    if profile:
        p = builder.create_optimization_profile()
        for name, (mn, opt, mx) in profile.items():
            p.set_shape(name, mn, opt, mx)
        config.add_optimization_profile(p)
    plan = builder.build_serialized_network(network, config)
    engine = trt.Runtime(LOGGER, device="cpu").deserialize_cuda_engine(plan)
    context = engine.create_execution_context()
    outputs = {}
    for i in range(engine.num_io_tensors):
        name = engine.get_tensor_name(i)
        if engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT:
            context.set_input_shape(name, feeds[name].shape)
            context.set_tensor_address(name, feeds[name].ctypes.data)
    for i in range(engine.num_io_tensors):
        name = engine.get_tensor_name(i)
        if engine.get_tensor_mode(name) == trt.TensorIOMode.OUTPUT:
            shape = tuple(context.get_tensor_shape(name))
            outputs[name] = np.empty(shape, dtype=trt.nptype(engine.get_tensor_dtype(name)))
            context.set_tensor_address(name, outputs[name].ctypes.data)
    assert context.execute_async_v3(0)
    return outputs


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
