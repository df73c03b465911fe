"""Helpers for the fusion tests: build with the verbose log captured, count ops, compare numerics.

Every fusion test checks three things (DESIGN.md): the fused-op count after tfg.build, numerics before ≡ after
(onnxruntime and the unfused build at optimization_level=0), and the recorded reason on negative cases.
"""

import io
import warnings

import numpy as np
import onnx

import tensorforge as tfg
from tensorforge.util.log import Severity, get_logger
from oracle import assert_close, export, ort_run  # noqa: F401  (re-exported for the tests)


def build_logged(model: bytes, **kw):
    """(engine, verbose log text) of tfg.build on CPU."""
    log = get_logger()
    old = log.min_severity, log.stream
    stream = io.StringIO()
    log.min_severity, log.stream = Severity.VERBOSE, stream
    try:
        engine = tfg.build(model, device="cpu", **kw)
    finally:
        log.min_severity, log.stream = old
    return engine, stream.getvalue()


def ops(engine) -> list[str]:
    return [layer.op for layer in engine.data.layers]


def feeds_for(model: bytes, *arrays) -> dict:
    names = [i.name for i in onnx.load_from_string(model).graph.input]
    return {n: np.asarray(a) for n, a in zip(names, arrays)}


def check_fused(model: bytes, feeds: dict, rtol=1e-4, atol=1e-5, **kw):
    """Build fused (default level) and unfused (level 0); both must match onnxruntime and each other.
    Returns (fused engine, its verbose log)."""
    engine, text = build_logged(model, **kw)
    want = ort_run(model, feeds)
    got = engine.run(dict(feeds))
    assert_close(got, want, rtol, atol, "fused vs onnxruntime: ")
    plain = tfg.build(model, device="cpu", optimization_level=0, **kw)
    assert_close(got, plain.run(dict(feeds)), rtol, atol, "fused vs unfused: ")
    return engine, text


def export_quiet(module, args, **kw) -> bytes:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return export(module, args, **kw)
