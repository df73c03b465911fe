"""plugin — custom operators in Python: declare (descriptor), implement (Triton/torch), check (reference).

    import tensorforge.plugin as tfp

    @tfp.register("custom::MyGelu")
    def _(x: tfp.TensorDesc, approximate: str = "none") -> tfp.TensorDesc:
        return x.like()

Entry points: `register`/`impl`/`reference`/`autotune` (registry.py), `load` (loader.py), `torch_op`
(torch_op.py), `resolve` (lookup.py, used by the parser), `engine_records`/`ensure_registered` (records.py,
used by builder and runtime). A plugin is the IR op `plugin:<ns>::<Name>:<version>`. Imports ir and util only.
"""

from .desc import TensorDesc
from .loader import discover, load, load_entry_points
from .lookup import override_for, resolve
from .plugin import Plugin
from .records import engine_records, ensure_registered
from .registry import (add, autotune, by_op, deregister, find, get, impl, is_library, reference, register,
                       registered, remove, scope, subscribe)
from .torch_op import torch_op
from .triton_util import use_triton

__all__ = ["Plugin", "TensorDesc", "add", "autotune", "by_op", "deregister", "discover", "engine_records",
           "ensure_registered", "find", "get", "impl", "is_library", "load", "load_entry_points", "override_for",
           "reference", "register", "registered", "remove", "resolve", "scope", "subscribe", "torch_op", "use_triton"]
