"""Export an engine as a Triton Inference Server model repository (Python backend).

    <repo>/<name>/config.pbtxt        inputs/outputs from the engine's bindings, max_batch_size from its profile,
                                      dynamic batching (preferred sizes = the CUDA-graph buckets), instance groups
    <repo>/<name>/1/model.py          triton_model.py, verbatim (loads the engine per instance)
    <repo>/<name>/1/model.engine      the engine file, copied (data; never executed)
Everything is written to a temporary folder first and renamed into place: a failure leaves no half repository.
"""

import os
import shutil
import tempfile
from pathlib import Path

from ..util.errors import FileNotFound, UsageError
from .datatypes import TRITON_TYPE
from .model import EngineModel


def _dims(shape, batched: bool) -> str:
    dims = list(shape[1:] if batched else shape) or [1]
    return "[ " + ", ".join(str(d) for d in dims) + " ]"


def config_pbtxt(model: EngineModel, kind: str, instances: int, queue_delay_us: int = 2000) -> str:
    batched = bool(model.max_batch_size)
    lines = [f'name: "{model.name}"', 'backend: "python"', f"max_batch_size: {model.max_batch_size}"]
    for section, specs in (("input", model.inputs), ("output", model.outputs)):
        entries = [f'  {{ name: "{t.name}" data_type: {TRITON_TYPE[t.datatype]} dims: {_dims(t.shape, batched)} }}'
                   for t in specs]
        lines.append(f"{section} [\n" + ",\n".join(entries) + "\n]")
    if batched:
        sizes = ", ".join(str(b) for b in model.buckets)
        lines.append(f"dynamic_batching {{\n  preferred_batch_size: [ {sizes} ]\n"
                     f"  max_queue_delay_microseconds: {queue_delay_us}\n}}")
    lines.append(f"instance_group [ {{ count: {instances} kind: KIND_{kind.upper()} }} ]")
    if kind == "gpu":   # let inputs stay on the GPU (DLPack) instead of being copied to the host first
        lines.append('parameters: { key: "FORCE_CPU_ONLY_INPUT_TENSORS" value: { string_value: "no" } }')
    return "\n".join(lines) + "\n"


def export_repository(engine_path, out_dir, name: str | None = None, max_batch_size: int | None = None,
                      instances: int = 1, kind: str = "auto") -> Path:
    """Write (or replace) `<out_dir>/<name>/`; returns that folder. `kind`: "gpu", "cpu" or "auto" (the
    engine's build device)."""
    engine_path = Path(engine_path)
    if not engine_path.is_file():
        raise FileNotFound(f"engine file {engine_path} does not exist", "give the path of a built engine")
    if instances < 1:
        raise UsageError(f"--instances-per-gpu {instances} is not a positive count", "use 1 or more")
    model = EngineModel(engine_path, name=name or engine_path.stem, device="cpu", max_batch_size=max_batch_size)
    if kind == "auto":
        kind = "gpu" if str(model.engine.build_info.get("device", "")).startswith("cuda") else "cpu"
    if kind not in ("gpu", "cpu"):
        raise UsageError(f"instance kind {kind!r} is not gpu, cpu or auto", "use --kind gpu or --kind cpu")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / model.name
    tmp = Path(tempfile.mkdtemp(prefix=f".{model.name}.", dir=out_dir))
    try:
        (tmp / "1").mkdir()
        (tmp / "config.pbtxt").write_text(config_pbtxt(model, kind, instances))
        shutil.copyfile(Path(__file__).with_name("triton_model.py"), tmp / "1" / "model.py")
        shutil.copyfile(engine_path, tmp / "1" / "model.engine")
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target
