"""runtime — load and run engines: Runtime.deserialize, ExecutionContext.

Entry points: `Runtime(device).deserialize(data)`, `ExecutionContext(engine, device).run(feed)`.
Never imports builder, passes or parser: an engine runs with none of them loaded.
Imports engine, kernels, codegen, plugin, util.
"""

from .context import ExecutionContext
from .runtime import Runtime, load_engine_file

__all__ = ["ExecutionContext", "Runtime", "load_engine_file"]
