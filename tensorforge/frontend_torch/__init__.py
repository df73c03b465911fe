"""frontend_torch — PyTorch models straight to the IR: torch.compile backend and tfg.compile.

    compiled = tfg.compile(model, (x,), fp16=True); tfg.save(compiled, "dir"); tfg.load_module("dir")
    torch.compile(model, backend="tensorforge", options={"fp16": True})   # graph breaks stay in PyTorch

fx_to_ir.py converts aten FX graphs (converters.py and converters_more.py hold the table), partition.py splits and builds,
runner.py runs an engine per call (CUDA-graph replay), module.py is the nn.Module face, backend.py the dynamo backend
(registered when this room is imported, or found through the torch_dynamo_backends entry point), dynamic.py its
profiled engines for graphs dynamo made dynamic.
May import ir, builder, api, engine, runtime, util; nothing imports it but cli (and tensorforge's lazy names).
"""

from . import converters, converters_more  # noqa: F401  (the aten → IR table)
from .backend import last_report, register, reports, tensorforge_backend
from .fx_to_ir import Conversion, fx_to_ir
from .module import TensorforgeModule, compile, load_module, save  # noqa: A004 - tfg.compile

register()

__all__ = ["Conversion", "TensorforgeModule", "compile", "fx_to_ir", "last_report", "load_module", "register",
           "reports", "save", "tensorforge_backend"]
