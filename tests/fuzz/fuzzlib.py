"""Seeded mutation fuzzing of engine files and ONNX models: the cases, how one runs, how its outcome is judged.

    case = engine_case(seed, i)  /  onnx_case(seed, i)      # deterministic: (seed, i) → the same mutation
                                                             # (fuzz_engine.py, fuzz_onnx.py; seeds: fuzz_base.py)
    outcome = run_case(case, time_limit_s)                   # "ok" | "clean" | "other" | "hang" | "wrong"

Engine mutations: raw byte flips and truncations (checksum left stale), header fields, raw manifest bytes with the
checksum recomputed, structured manifest JSON edits (values swapped for other kinds, names for other names,
dtypes, dims, deleted or duplicated keys and items, deep nesting), safetensors header edits, and weight *value*
edits. ONNX mutations (protobuf level): dims, dtypes, attributes, opsets, dangling names, removed initializers,
cycles, external-data paths, op types, deleted nodes, and initializer value edits.

Outcomes: a case that loads/builds is run on random inputs. "clean": a TensorforgeError (one line); "other": any
other exception (a finding); "hang": over the time limit (SIGALRM); "wrong" (silent wrong output): a weight-value
edit whose output differs from onnxruntime on the equally edited ONNX model — the oracle: an engine must compute
what its weights say. Crashes are seen by the runner (runner.py), which runs batches in a child process.
"""

import signal
import sys
from pathlib import Path

import numpy as np
import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fuzz_base import BOUNDARY_INTS, Case, pack, profile_of, seed_engine, seed_models, split  # noqa: E402,F401
from fuzz_engine import engine_case  # noqa: E402,F401
from fuzz_onnx import onnx_case  # noqa: E402,F401


# ---- running one case ----------------------------------------------------------------------------------
class Hang(BaseException):
    """Raised by SIGALRM: the case ran past its time limit."""


def _alarm(signum, frame):
    raise Hang()


def _feeds(engine, shapes: dict, rng: np.random.Generator):
    import torch
    feeds = {}
    for info in engine.inputs:
        declared = tuple(info.shape or ())
        shape = tuple(shapes.get(info.name) or ())
        if len(shape) != len(declared):
            shape = tuple(1 for _ in declared)
        shape = tuple(e if isinstance(e, int) and e >= 0 else d for d, e in zip(shape, declared))
        if int(np.prod(shape)) > 1 << 22:
            shape = tuple(min(d, 4) for d in shape)      # a mutated static shape: keep the run small
        dtype = info.dtype or torch.float32
        if dtype.is_floating_point:
            t = torch.from_numpy(rng.standard_normal(shape).astype(np.float32)).to(dtype)
        elif dtype == torch.bool:
            t = torch.from_numpy(rng.integers(0, 2, shape).astype(bool))
        elif dtype.itemsize == 1 and dtype not in (torch.int8, torch.uint8):   # sub-byte/e8m0: one code a byte
            t = torch.from_numpy(rng.integers(0, 3, shape).astype(np.uint8)).view(dtype)
        else:
            t = torch.from_numpy(rng.integers(0, 3, shape)).to(dtype)
        feeds[info.name] = t
    return feeds


def _compare_with_ort(model: bytes, engine_out: dict, feeds: dict) -> str | None:
    import onnxruntime as ort
    try:
        sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
        want = sess.run(None, {k: v.numpy() for k, v in feeds.items()})
    except Exception:  # noqa: BLE001 - onnxruntime refuses it too: no oracle
        return None
    for o, w in zip(sess.get_outputs(), want):
        g = engine_out[o.name].detach().cpu().numpy()
        if g.shape != w.shape or not np.allclose(g, w, rtol=1e-3, atol=1e-4, equal_nan=True):
            return f"{o.name}: max |Δ| {np.nanmax(np.abs(g.astype(np.float64) - w)) if g.shape == w.shape else 'shape'}"
    return None


def run_case(case: Case, time_limit_s: float = 20.0) -> tuple[str, str]:
    """(outcome, detail). Must run in the main thread (SIGALRM)."""
    import tensorforge as tfg
    from tensorforge.api.high_level import Engine
    from tensorforge.runtime import Runtime
    from tensorforge.util.errors import TensorforgeError
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, time_limit_s)
    try:
        if case.kind == "engine":
            engine = Engine(Runtime("cpu").deserialize(case.payload, "fuzzed engine"), "cpu")
        else:
            engine = tfg.build(case.payload, device="cpu", shapes=_profile_for(case))
        feeds = _feeds(engine.data, case.feeds_shapes, np.random.default_rng(case.index))
        out = engine.run(dict(feeds))
        if case.oracle_model is not None:
            bad = _compare_with_ort(case.oracle_model, out, feeds)
            if bad:
                return "wrong", bad
        return "ok", ""
    except Hang:
        return "hang", f"over {time_limit_s:g} s"
    except TensorforgeError as e:
        text = str(e)
        return ("clean", text) if "\n" not in text else ("other", f"multi-line error: {text[:300]!r}")
    except Exception as e:  # noqa: BLE001 - the finding this suite exists for
        return "other", f"{type(e).__name__}: {str(e)[:300]}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _profile_for(case: Case) -> dict | None:
    """The seed's profile for the inputs that are still dynamic graph inputs of the mutated model."""
    m = onnx.ModelProto()
    try:
        m.ParseFromString(case.payload)
    except Exception:  # noqa: BLE001 - the builder reports it
        return None
    keep = {}
    for vi in m.graph.input:
        dims = vi.type.tensor_type.shape.dim
        want = case.feeds_shapes.get(vi.name)
        if want and len(dims) == len(want) and any(not d.HasField("dim_value") for d in dims):
            keep[vi.name] = profile_of({vi.name: want})[vi.name]
    return keep or None
