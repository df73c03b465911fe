"""tfg.compile / tfg.save / tfg.load_module: an nn.Module that runs tensorforge engines.

    compiled = tfg.compile(model, (x,), fp16=True)      # torch.export → IR → engine(s); breaks stay PyTorch
    tfg.save(compiled, "out/")                          # engine file + manifest.json (data only)
    same = tfg.load_module("out/")                      # no model class needed

Parameters and buffers become engine constants (the module's tensors, shared); only user inputs are fed.
Saving needs a fully converted graph (one engine): a compiled module with graph breaks still holds PyTorch
code, and `save` refuses it with the list of breaks.
"""

import json
from pathlib import Path

import torch
import torch.utils._pytree as pytree

from ..api import load
from ..util.errors import EngineFileError, FileNotFound, UsageError
from ..util.fileio import atomic_write
from .functional import export_functional
from .partition import EngineCall, lower_graph

_FORMAT = "tensorforge-torch-module"
_CONST_KINDS = {"PARAMETER", "BUFFER", "CONSTANT_TENSOR"}


class TensorforgeModule(torch.nn.Module):
    """forward(*inputs) runs `runner` (an EngineCall or a split fx graph) with the constants in their slots."""

    def __init__(self, runner, slots: list, out_spec, report):
        super().__init__()
        self.runner, self.slots, self.out_spec, self.report = runner, slots, out_spec, report

    @property
    def graph_breaks(self) -> list:
        return list(self.report.breaks)

    def forward(self, *inputs):
        feeds = iter(inputs)
        n_user = sum(s is None for s in self.slots)
        if len(inputs) != n_user:
            raise UsageError(f"compiled module takes {n_user} input(s), got {len(inputs)}", "pass them positionally")
        args = [next(feeds) if s is None else s for s in self.slots]
        flat = self.runner(*args)
        flat = list(flat) if isinstance(flat, (tuple, list)) else [flat]
        return pytree.tree_unflatten(flat, self.out_spec)


def compile(module: torch.nn.Module, example_inputs, **options) -> TensorforgeModule:  # noqa: A001 - tfg.compile
    """Export `module` at `example_inputs` (static shapes), convert to IR and build; options as tfg.build's."""
    if not isinstance(module, torch.nn.Module):
        raise UsageError(f"tfg.compile takes an nn.Module, not {type(module).__name__}", "pass the model")
    example_inputs = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
    ep = export_functional(module, example_inputs)
    gm = ep.graph_module
    placeholders = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    constants, slots = {}, []
    for name, spec in zip(placeholders, ep.graph_signature.input_specs):
        if spec.kind.name in _CONST_KINDS:
            value = ep.state_dict[spec.target] if spec.target in ep.state_dict else ep.constants[spec.target]
            constants[name] = value.detach()
            slots.append(value.detach())
        else:
            slots.append(None)
    runner, report = lower_graph(gm, constants, options, example_inputs)
    return TensorforgeModule(runner, slots, ep.call_spec.out_spec, report)


def save(compiled: TensorforgeModule, path) -> None:
    """Write `path`/model.engine and `path`/manifest.json (inputs, outputs, output structure: data only)."""
    if not isinstance(compiled, TensorforgeModule):
        raise UsageError("tfg.save takes the module tfg.compile returned", "compile it first with tfg.compile")
    if not isinstance(compiled.runner, EngineCall):
        breaks = ", ".join(f"{n} ({op})" for n, op, _ in compiled.report.breaks)
        raise UsageError(f"this compiled module has graph breaks ({breaks}) that run as PyTorch code and cannot "
                         "be saved as data", "save only fully converted modules, or use torch.save on the model")
    call = compiled.runner
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    call.engine.save(out / "model.engine")
    user = [n for n, s in zip(call.arg_names, compiled.slots) if s is None]
    manifest = {"format": _FORMAT, "version": 1, "engine": "model.engine", "inputs": user,
                "feeds": call.feeds, "outputs": call.outputs, "as_tuple": call.as_tuple,
                "out_spec": pytree.treespec_dumps(compiled.out_spec)}
    atomic_write(out / "manifest.json", json.dumps(manifest, indent=1).encode())


def load_module(path, device=None) -> TensorforgeModule:
    """Load what tfg.save wrote; nothing in it is executed as code (the engine and a JSON manifest)."""
    folder = Path(path)
    if not (folder / "manifest.json").is_file():
        raise FileNotFound(f"{folder} has no manifest.json", "pass the folder tfg.save wrote")
    try:
        m = json.loads((folder / "manifest.json").read_text())
        ok = m.get("format") == _FORMAT and m.get("version") == 1
    except (ValueError, AttributeError):
        ok = False
    if not ok:
        raise EngineFileError(f"{folder / 'manifest.json'} is not a tensorforge module manifest (version 1)",
                              "save it again with tfg.save")
    engine = load(folder / m["engine"], device)
    call = EngineCall(engine, m["inputs"], m["feeds"], m["outputs"], m["as_tuple"])
    return TensorforgeModule(call, [None] * len(m["inputs"]), pytree.treespec_loads(m["out_spec"]), _Loaded())


class _Loaded:
    breaks: list = []
    engines = 1

    def __str__(self) -> str:
        return "1 engine (loaded)"
